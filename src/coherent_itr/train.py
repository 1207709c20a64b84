"""``train(config)``: one seeded VSE++ training run with any loss, evaluated on the test split.

The loop follows VSE++ (Faghri et al.): Adam, lr × ``lr_decay`` every ``lr_decay_epoch``
epochs, gradient-norm clipping, and the checkpoint with the best validation RSUM is the one
evaluated on the test split. Per epoch it logs the training loss, validation R@K / RSUM, the
validation mean positive and mean hardest-negative similarity, and the tangent gradient norms
of :mod:`coherent_itr.gradients` averaged over the epoch's batches (claims U2, U3, B1, N7).

The result is a :class:`RunResult`: JSON-able record (config, history, test metrics, timing)
plus the best model's test embeddings (float16), so any metric can be recomputed later without
retraining.
"""
from __future__ import annotations

import copy
import platform
import time
from dataclasses import dataclass, field

import numpy as np
import torch
from threadpoolctl import threadpool_limits
from tqdm.auto import tqdm

from . import data as data_mod
from . import losses, metrics
from .config import Config
from .determinism import resolve_device, seed_everything, use_deterministic_kernels
from .gradients import tangent_gradient_stats
from .models import VSEModel, Vocabulary


@dataclass
class RunResult:
    record: dict                                   # JSON-able: config, history, test metrics, timing
    arrays: dict = field(default_factory=dict)     # test embeddings etc. (numpy)

    @property
    def history(self) -> list[dict]:
        return self.record["history"]

    @property
    def test(self) -> dict:
        return self.record["test"]


@torch.no_grad()
def encode_split(model: VSEModel, split: data_mod.CaptionedImages, vocab: Vocabulary, device,
                 batch_size: int = 512) -> tuple[np.ndarray, np.ndarray]:
    """L2-normalised embeddings (float32 numpy) of every image and every caption of ``split``."""
    model.eval()
    feats = torch.from_numpy(np.ascontiguousarray(split.features, dtype=np.float32))
    img = torch.cat([model.image(feats[s:s + batch_size].to(device)).cpu()
                     for s in range(0, len(feats), batch_size)])
    caps = []
    for s in range(0, split.n_captions, batch_size):
        tok, lens = vocab.encode_batch(split.captions[s:s + batch_size])
        caps.append(model.text(tok.to(device), lens).cpu())
    return img.numpy(), torch.cat(caps).numpy()


def _validation_stats(img: np.ndarray, cap: np.ndarray, split) -> dict[str, float]:
    sim = img @ cap.T
    out = metrics.retrieval_metrics(sim, split.image_of_caption)
    own = split.image_of_caption
    pos = sim[own, np.arange(sim.shape[1])]
    neg = sim.copy()
    neg[own, np.arange(sim.shape[1])] = -np.inf
    out["val_pos_sim"] = float(pos.mean())
    out["val_hardneg_sim"] = float(neg.max(axis=1).mean())
    return out


def _train_subset(train: data_mod.CaptionedImages, fraction: float, seed: int) -> data_mod.CaptionedImages:
    """A random subset of ``fraction`` of the training images (seeded; the SAM authors took the first P%)."""
    if fraction >= 1.0:
        return train
    n = max(2, int(round(fraction * train.n_images)))
    idx = np.sort(np.random.default_rng([seed, 0x5AB]).choice(train.n_images, size=n, replace=False))
    return train.subset_images(idx, name=f"{train.name}[{fraction:g}]")


def _batches(n_images: int, cpi: int, config: Config, g: torch.Generator):
    """Yield (image_idx, caption_idx) LongTensors of one epoch."""
    if config.sampling == "captions":
        order = torch.randperm(n_images * cpi, generator=g)
        for s in range(0, len(order), config.batch_size):
            cap = order[s:s + config.batch_size]
            if len(cap) >= 2:
                yield cap // cpi, cap
    else:
        order = torch.randperm(n_images, generator=g)
        pick = torch.randint(0, cpi, (n_images,), generator=g)
        for s in range(0, n_images, config.batch_size):
            img = order[s:s + config.batch_size]
            if len(img) >= 2:
                yield img, img * cpi + pick[img]


def train(config: Config, splits: data_mod.DataSplits | None = None, progress: bool = True,
          cache_dir: str | None = None) -> RunResult:
    """Train a VSE++ model with ``config.loss`` and evaluate its best-validation checkpoint on test."""
    t_start = time.perf_counter()
    g = seed_everything(config.seed)
    use_deterministic_kernels()
    device = resolve_device(config.device)
    if splits is None:
        splits = data_mod.load_splits(config.data, data_dir=config.data_dir, scale=config.data_scale,
                                      seed=config.data_seed, cache_dir=cache_dir)
    tr = _train_subset(splits.train, config.train_fraction, config.seed)
    dev = splits.dev
    if config.max_eval_captions and dev.n_captions > config.max_eval_captions:
        dev = dev.subset_images(np.arange(config.max_eval_captions // dev.captions_per_image))
    vocab = Vocabulary.build(tr.captions, config.vocab_min_count)
    provider = (data_mod.relevance_provider(config.relevance, tr, cache_dir=cache_dir, **config.relevance_params)
                if config.relevance else None)
    tokens, lengths = vocab.encode_batch(tr.captions)
    feats = torch.from_numpy(np.ascontiguousarray(tr.features, dtype=np.float32))

    model = VSEModel(tr.features.shape[1], len(vocab), config.embed_dim, config.word_dim, config.text_hidden).to(device)
    crit = losses.build(config.loss, **config.loss_params).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=config.lr)
    history: list[dict] = []
    best = (-np.inf, None, -1)
    t_train = 0.0
    bar = tqdm(range(config.epochs), desc=f"{config.loss} seed={config.seed}", disable=not progress, leave=False)
    # numpy work inside the loop (relevance providers, validation metrics) is small per call; a multi-threaded
    # OpenBLAS pool spinning between those calls fights torch's threads for the cores and made a BCLS epoch
    # 3.5x slower on 2 CPUs (14.2 s vs 4.1 s, results/benchmarks/blas_threads.md) — one BLAS thread here.
    with threadpool_limits(limits=1, user_api="blas"):
        for epoch in bar:
            for group in opt.param_groups:  # VSE++: lr · decay^(epoch // lr_decay_epoch)
                group["lr"] = config.lr * config.lr_decay ** (epoch // max(1, config.lr_decay_epoch))
            model.train()
            t0 = time.perf_counter()
            sums: dict[str, float] = {}
            n_batches = 0
            for img_idx, cap_idx in _batches(tr.n_images, tr.captions_per_image, config, g):
                len_b = lengths[cap_idx]
                tok_b = tokens[cap_idx][:, :int(len_b.max())]
                v, t = model(feats[img_idx].to(device), tok_b.to(device), len_b)
                v.retain_grad()
                sim = v @ t.T
                sim.retain_grad()
                rel = None
                if provider is not None:
                    rel = torch.as_tensor(provider.batch(img_idx.numpy(), cap_idx.numpy()), dtype=sim.dtype,
                                          device=device)
                loss = crit(sim, rel)
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"non-finite loss {loss.item()} at epoch {epoch}, batch {n_batches} "
                                             f"(loss={config.loss}, params={config.loss_params})")
                opt.zero_grad(set_to_none=True)
                loss.backward()
                if config.grad_clip > 0:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), config.grad_clip)
                opt.step()
                stats = {"train_loss": float(loss.detach())}
                stats.update({f"loss_{k}": float(x) for k, x in crit.diagnostics.items()
                              if isinstance(x, (int, float)) and not isinstance(x, bool)})
                if config.grad_diagnostics:
                    stats.update(tangent_gradient_stats(v.detach(), t.detach(), sim.detach(), sim.grad, v.grad))
                for k, val in stats.items():
                    sums[k] = sums.get(k, 0.0) + val
                n_batches += 1
            epoch_time = time.perf_counter() - t0
            t_train += epoch_time
            img_e, cap_e = encode_split(model, dev, vocab, device)
            val = _validation_stats(img_e, cap_e, dev)
            rec = {"epoch": epoch + 1, "epoch_time_s": epoch_time, "lr": opt.param_groups[0]["lr"],
                   **{k: v / max(n_batches, 1) for k, v in sums.items()},
                   **{f"val_{k}" if not k.startswith("val_") else k: v for k, v in val.items()}}
            history.append(rec)
            bar.set_postfix(loss=f"{rec['train_loss']:.3f}", rsum=f"{val['rsum']:.1f}")
            if val["rsum"] > best[0]:
                best = (val["rsum"], copy.deepcopy(model.state_dict()), epoch + 1)

    model.load_state_dict(best[1])
    t0 = time.perf_counter()
    img_e, cap_e = encode_split(model, splits.test, vocab, device)
    test_encode_s = time.perf_counter() - t0
    # test metrics are not computed here: coherent_itr.evaluation.evaluate_run (the run cache's evaluation entry)
    record = {
        "config": config.to_dict(),
        "history": history,
        "best_epoch": best[2],
        "timing": {"total_s": time.perf_counter() - t_start, "train_s": t_train,
                   "train_s_per_epoch": t_train / max(1, config.epochs), "test_encode_s": test_encode_s},
        "data": {"train": tr.name, "n_train_images": tr.n_images, "test": splits.test.name,
                 "n_test_images": splits.test.n_images, "vocab_size": len(vocab)},
        "machine": {"device": str(device), "torch": torch.__version__, "python": platform.python_version(),
                    "threads": torch.get_num_threads()},
    }
    arrays = {"test_img": img_e.astype(np.float32), "test_cap": cap_e.astype(np.float32)}
    return RunResult(record, arrays)
