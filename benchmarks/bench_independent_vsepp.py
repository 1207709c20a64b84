"""VSE++ on Flickr8k by ``coherent_itr.train`` and by an independent implementation, side by side.

Issue "every arm at its plateau" reports an independent implementation of the same architecture and schedule
(words/GRU/joint 128/128/128, 3 epochs, lr 2e-3 × 0.1 in the 3rd, gradient clip 2) at 198 / 195 test RSUM for
seeds 0 / 1, where ``train()`` reached 166 / 176. This script writes a second, independent VSE++ from the paper
(Faghri et al., BMVC 2018, Sec. 3–4: a linear map of the CNN feature and a GRU over word embeddings into a joint
space, cosine similarity, the max-of-hinges loss, Eq. 5, summed over the batch, margin 0.2, Adam, gradient
clipping at 2), shares nothing with the library but the data loader (the same image features and captions), and
then changes one of its choices at a time toward what ``train()`` does, to find which choice moves the result:

* ``warmup``: the first epoch on the sum of hinges over all negatives (Eq. 3), then the max of hinges: ``train()``'s
  ``warmup_epochs=1`` (VSE∞'s warm-up; the issue's train() runs used it). The paper has no warm-up.
* ``prenorm``: L2-normalise the image feature before the linear map (``coherent_itr.models.vse.ImageEncoder``);
  the paper maps the raw feature.
* ``punct``: tokens as ``coherent_itr.models.text`` makes them (punctuation kept, ``<start>``/``<end>``); the
  independent tokenizer keeps words only. ``punctonly`` and ``startend`` split it in its two parts.

Test RSUM is read at the epoch of best validation RSUM (both implementations select so). Every run: one thread.

    FLICKR8K_DIR=... python benchmarks/bench_independent_vsepp.py [--seeds 0 1] [--variants ...]

Writes ``results/benchmarks/independent_vsepp.{md,csv}`` (rows are appended per finished run, so an interrupted
benchmark resumes).
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch import nn  # noqa: E402

OUT = ROOT / "results" / "benchmarks" / "independent_vsepp"
SIZE = 128
EPOCHS = 3
LR = 2e-3
DECAY_EPOCH = 2  # 0-based: lr × 0.1 in the 3rd epoch
CLIP = 2.0
MARGIN = 0.2
BATCH = 128
MIN_COUNT = 4
VARIANTS = {
    "independent": (),
    "+warmup": ("warmup",),
    "+prenorm": ("prenorm",),
    "+punct": ("punct",),
    "+warmup+prenorm+punct": ("warmup", "prenorm", "punct"),
    "+warmup+punct": ("warmup", "punct"),
    "+warmup+prenorm": ("warmup", "prenorm"),
    "+warmup+startend": ("warmup", "startend"),
    "+warmup+punctonly": ("warmup", "punctonly"),
}

_WORDS = re.compile(r"[a-z0-9]+")
_LIB_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[^\sa-z0-9]")  # the library's tokenizer, for "punct" only


# --------------------------------------------------------------------------------------------------
# The independent implementation
# --------------------------------------------------------------------------------------------------
def tokens_of(caption: str, flags: tuple[str, ...]) -> list[str]:
    """Words only (the independent default); ``punct``: the library's tokens (punctuation marks kept) between
    ``<start>`` and ``<end>``; ``punctonly`` / ``startend``: one of those two changes alone."""
    c = caption.lower()
    toks = _LIB_TOKEN.findall(c) if ("punct" in flags or "punctonly" in flags) else _WORDS.findall(c)
    if "punct" in flags or "startend" in flags:
        toks = ["<start>", *toks, "<end>"]
    return toks


class Encoder(nn.Module):
    def __init__(self, feat_dim: int, vocab: int, prenorm: bool) -> None:
        super().__init__()
        self.prenorm = prenorm
        self.fc = nn.Linear(feat_dim, SIZE)
        nn.init.xavier_uniform_(self.fc.weight)
        nn.init.zeros_(self.fc.bias)
        self.emb = nn.Embedding(vocab, SIZE, padding_idx=0)
        nn.init.uniform_(self.emb.weight, -0.1, 0.1)
        self.gru = nn.GRU(SIZE, SIZE, batch_first=True)

    def images(self, x):
        return F.normalize(self.fc(F.normalize(x, dim=1) if self.prenorm else x), dim=1)

    def texts(self, ids, lens):
        packed = nn.utils.rnn.pack_padded_sequence(self.emb(ids), lens, batch_first=True, enforce_sorted=False)
        _, h = self.gru(packed)
        return F.normalize(h[-1], dim=1)


def hinge_loss(sim: torch.Tensor, hardest: bool) -> torch.Tensor:
    """VSE++ Eq. 5 (``hardest``) or Eq. 3: hinges of both directions around the diagonal, summed."""
    pos = sim.diag()
    mask = torch.eye(len(sim), dtype=torch.bool)
    c_i2t = (MARGIN + sim - pos[:, None]).clamp(min=0).masked_fill(mask, 0)  # image anchor, caption negatives
    c_t2i = (MARGIN + sim - pos[None, :]).clamp(min=0).masked_fill(mask, 0)  # caption anchor, image negatives
    if hardest:
        return c_i2t.max(1).values.sum() + c_t2i.max(0).values.sum()
    return c_i2t.sum() + c_t2i.sum()


def rsum(img: np.ndarray, cap: np.ndarray, cpi: int) -> float:
    """R@1 + R@5 + R@10 of both directions, from explicit ranks."""
    sim = img @ cap.T
    n_img = len(img)
    owner = np.arange(cap.shape[0]) // cpi
    order = np.argsort(-sim, axis=1)
    first = np.array([np.flatnonzero(owner[order[i]] == i)[0] for i in range(n_img)])
    t_rank = (sim.T > sim.T[np.arange(len(owner)), owner][:, None]).sum(1)
    return float(sum(100 * (first < k).mean() + 100 * (t_rank < k).mean() for k in (1, 5, 10)))


def run_independent(
    splits, seed: int, flags: tuple[str, ...], epochs: int = EPOCHS, decay_epoch: int = DECAY_EPOCH
) -> dict:
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    tr, dev, te = splits.train, splits.dev, splits.test
    counts = Counter(t for c in tr.captions for t in tokens_of(c, flags))
    itos = ["<pad>", "<unk>", *sorted(w for w, n in counts.items() if n >= MIN_COUNT)]
    stoi = {w: i for i, w in enumerate(itos)}

    def encode(caps):
        ids = [[stoi.get(t, 1) for t in tokens_of(c, flags)] or [1] for c in caps]
        lens = torch.tensor([len(x) for x in ids])
        out = torch.zeros(len(ids), int(lens.max()), dtype=torch.long)
        for i, x in enumerate(ids):
            out[i, : len(x)] = torch.tensor(x)
        return out, lens

    model = Encoder(tr.features.shape[1], len(itos), "prenorm" in flags)
    opt = torch.optim.Adam(model.parameters(), lr=LR)
    feats = torch.from_numpy(np.asarray(tr.features, dtype=np.float32))
    ids, lens = encode(tr.captions)
    cpi = tr.captions_per_image

    @torch.no_grad()
    def embed(split):
        model.eval()
        i_, l_ = encode(split.captions)
        img = model.images(torch.from_numpy(np.asarray(split.features, dtype=np.float32)))
        cap = torch.cat([model.texts(i_[s : s + 1000], l_[s : s + 1000]) for s in range(0, len(l_), 1000)])
        model.train()
        return img.numpy(), cap.numpy()

    best = (-1.0, None, 0)
    curve = []
    for epoch in range(epochs):
        for g in opt.param_groups:
            g["lr"] = LR * (0.1 if epoch >= decay_epoch else 1.0)
        hardest = not ("warmup" in flags and epoch == 0)
        perm = rng.permutation(len(ids))
        for s in range(0, len(perm), BATCH):
            b = torch.from_numpy(perm[s : s + BATCH])
            if len(b) < 2:
                continue
            v = model.images(feats[b // cpi])
            bl = lens[b]
            t = model.texts(ids[b][:, : int(bl.max())], bl)
            loss = hinge_loss(v @ t.T, hardest)
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), CLIP)
            opt.step()
        val = rsum(*embed(dev), dev.captions_per_image)
        curve.append(round(val, 1))
        first_selectable = 1 if "warmup" in flags else 0
        if epoch >= first_selectable and val > best[0]:
            best = (val, rsum(*embed(te), te.captions_per_image), epoch + 1)
    return {"val_rsum": best[0], "test_rsum": best[1], "best_epoch": best[2], "val_curve": curve}


# --------------------------------------------------------------------------------------------------
# The library's train() at the same setting
# --------------------------------------------------------------------------------------------------
def run_library(seed: int, warmup: int, cache_dir: str, epochs: int = EPOCHS, decay_epoch: int = DECAY_EPOCH) -> dict:
    from coherent_itr.config import Config
    from coherent_itr.train import train

    cfg = Config(
        data="flickr8k",
        embed_dim=SIZE,
        word_dim=SIZE,
        text_hidden=SIZE,
        loss="triplet",
        epochs=epochs,
        batch_size=BATCH,
        lr=LR,
        lr_decay_epoch=decay_epoch,
        grad_clip=CLIP,
        seed=seed,
        warmup_epochs=warmup,
        device="cpu",
    )
    res = train(cfg, cache_dir=cache_dir, progress=False)
    hist = res.history
    best = int(res.record["best_epoch"])
    return {
        "val_rsum": float(hist[best - 1]["val_rsum"]),
        "test_rsum": rsum(res.arrays["test_img"], res.arrays["test_cap"], 5),  # the same RSUM code as above
        "best_epoch": best,
        "val_curve": [round(float(h["val_rsum"]), 1) for h in hist],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--variants", nargs="+", default=[*VARIANTS, "train() warm-up 1", "train() warm-up 0"])
    ap.add_argument("--epochs", type=int, default=EPOCHS, help=f"epochs per run (default {EPOCHS})")
    ap.add_argument(
        "--decay-epoch", type=int, default=None, help="lr × 0.1 from this 0-based epoch (default: the last)"
    )
    ap.add_argument("--cache-dir", default=os.environ.get("COHERENT_ITR_CACHE", str(ROOT / ".cache")))
    args = ap.parse_args()
    torch.set_num_threads(1)
    OUT.mkdir(parents=True, exist_ok=True)
    csv = OUT / "runs.csv"
    decay = args.epochs - 1 if args.decay_epoch is None else args.decay_epoch
    done = pd.read_csv(csv) if csv.exists() else pd.DataFrame(columns=["variant", "seed", "epochs"])
    if "epochs" not in done.columns:
        done["epochs"] = EPOCHS
        done["decay_epoch"] = DECAY_EPOCH
    from coherent_itr.data import load_splits

    splits = None
    for variant in args.variants:
        for seed in args.seeds:
            if ((done.variant == variant) & (done.seed == seed) & (done.epochs == args.epochs)).any():
                continue
            t0 = time.time()
            if variant.startswith("train()"):
                r = run_library(seed, int(variant.split()[-1]), args.cache_dir, args.epochs, decay)
            else:
                if splits is None:
                    splits = load_splits("flickr8k", cache_dir=args.cache_dir, train_images="cached")
                r = run_independent(splits, seed, VARIANTS[variant], args.epochs, decay)
            row = {"variant": variant, "seed": seed, "epochs": args.epochs, "decay_epoch": decay, **r}
            row["val_curve"] = " ".join(map(str, r["val_curve"]))
            row.update(seconds=round(time.time() - t0, 1), load=round(os.getloadavg()[0], 2))
            print(row, flush=True)
            done = pd.concat([done, pd.DataFrame([row])], ignore_index=True)
            tmp = csv.with_suffix(".tmp")
            done.to_csv(tmp, index=False)
            tmp.replace(csv)
    report(done)


def report(runs: pd.DataFrame) -> None:
    g = runs.groupby(["epochs", "decay_epoch", "variant"], sort=False)
    lines = [
        "# VSE++ on Flickr8k: train() and an independent implementation, one choice at a time",
        "",
        f"128/128/128, lr {LR:g} (× 0.1 from the epoch in the schedule column), clip {CLIP:g}, batch {BATCH} "
        "captions, test RSUM at the best validation epoch. `benchmarks/bench_independent_vsepp.py`; "
        f"{platform.processor() or platform.machine()}, one thread per run.",
        "",
        "| schedule | variant | seeds | test RSUM per seed | mean | val RSUM per epoch (first seed) |",
        "|---|---|---|---|---|---|",
    ]
    for (epochs, decay, name), d in g:
        curve = d[d.seed == d.seed.min()].val_curve.iloc[0]
        per = " / ".join(f"{x:.1f}" for x in d.test_rsum)
        sched = f"{epochs} epochs, × 0.1 from {int(decay) + 1}"
        lines.append(f"| {sched} | {name} | {len(d)} | {per} | {d.test_rsum.mean():.1f} | {curve} |")
    lines.append("")
    lines.append(f"Load average while running: {runs.load.min():.2f}–{runs.load.max():.2f} (two training workers).")
    (OUT / "runs.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
