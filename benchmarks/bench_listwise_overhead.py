"""Benchmark: what the listwise (S-NDCG) term costs per training step — at the study's size and at the
papers' (claim N5, Listwise Table VIII; issue 14 item 7).

Table VIII of the listwise paper reports +5.4% training time per epoch for VSE∞ + Listwise on a GPU.
The study trains a small VSE++ (``reproduce.spec.profiles`` "default": GRU-64 over 64-d words, 128-d joint
space) on one CPU thread, where the encoders are cheap and the S-NDCG term (a B×B×B tensor of sigmoids
per direction) weighs far more. This script measures, on one torch thread, for both sizes:

* ``step_triplet_ms`` — a VSE++ training step with Triplet (mean) (the listwise paper's pairwise term):
  encoders forward, loss, backward, gradient clipping 2.0, Adam;
* ``step_listwise_ms`` — the same step with Triplet + S-NDCG (``listwise``, τ = 1e-2);
* ``sndcg_ms`` — the S-NDCG term alone, forward + backward on the B×B similarity matrix.

Sizes: ``study`` = the default profile's model (feature dim 256 of the synthetic world), ``papers`` =
VSE++ GRU-1024 over 300-d words into a 1024-d joint space (feature dim 2048), both at batch 128, vocab
3,000, captions of 8–20 tokens (synthetic tokens: a step's cost does not depend on their values),
relevance (1 + cos)/2 of clustered caption vectors. The three closures are timed round-robin (one
round = one of each), ``--rounds`` rounds after ``--warmup``, so load drift hits them alike. Times are
the CPU time of the timing thread (``time.thread_time``; with one torch thread all the work runs on
it), not wall clock: on a machine shared with other jobs the wall clock of a 2 s step varied by ±30%
between rounds (first attempt, 2026-11-23), which hid a 60 ms difference.

Writes ``results/benchmarks/listwise_overhead.csv`` (one row per size and round) and ``.md`` (medians,
absolute overhead per step and its share of the listwise step), atomically; read by
``reproduce.present.analyses.listwise.overhead_benchmark`` in ``notebooks/04_listwise.ipynb``.

    nice -n 10 .venv/bin/python benchmarks/bench_listwise_overhead.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import io
import os
import platform
import statistics
import time
from pathlib import Path

import pandas as pd
import torch

from coherent_itr import losses
from coherent_itr.io import atomic_write_text
from coherent_itr.models import VSEModel

ROOT = Path(__file__).resolve().parents[1]


def sizes() -> dict[str, dict]:
    """Model sizes: the study's default profile and the papers' VSE++ (``reproduce.spec.profiles``)."""
    from reproduce.spec.profiles import get_profile

    out = {}
    for name, prof, feat in (("study", "default", 256), ("papers", "paper", 2048)):
        m = get_profile(prof).model
        out[name] = dict(
            feature_dim=feat,
            embed_dim=m["embed_dim"],
            word_dim=m["word_dim"],
            text_hidden=m["text_hidden"],
            batch_size=m["batch_size"],
        )
    return out


def closures(size: dict, vocab: int = 3000, seed: int = 0) -> dict:
    """The three timed closures at one size (one model, optimiser and batch shared by both steps)."""
    b = size["batch_size"]
    torch.manual_seed(seed)
    model = VSEModel(size["feature_dim"], vocab, size["embed_dim"], size["word_dim"], size["text_hidden"])
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)
    g = torch.Generator().manual_seed(seed + 1)
    feats = torch.randn(b, size["feature_dim"], generator=g)
    lengths = torch.randint(8, 21, (b,), generator=g)
    tokens = torch.randint(1, vocab, (b, int(lengths.max())), generator=g)
    tokens[torch.arange(tokens.shape[1])[None, :] >= lengths[:, None]] = 0
    topics = torch.nn.functional.normalize(torch.randn(12, 64, generator=g), dim=1)
    caps = torch.nn.functional.normalize(
        topics[torch.randint(0, 12, (b,), generator=g)] + 0.11 * torch.randn(b, 64, generator=g), dim=1
    )
    rel = ((1 + caps @ caps.T) / 2).clamp(0, 1)
    rel.fill_diagonal_(1.0)
    triplet = losses.build("triplet", reduction="mean")
    listwise = losses.build("listwise", sndcg_params={"tau": 1e-2})
    sndcg = losses.build("sndcg", tau=1e-2)
    with torch.no_grad():
        v, t = model(feats, tokens, lengths)
    sim0 = (v @ t.T).detach()

    def step(crit):
        def run():
            v, t = model(feats, tokens, lengths)
            loss = crit(v @ t.T, rel) if getattr(crit, "requires_relevance", False) else crit(v @ t.T)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
            opt.step()

        return run

    def loss_only():
        s = sim0.clone().requires_grad_(True)
        sndcg(s, rel).backward()

    return {"step_triplet_ms": step(triplet), "step_listwise_ms": step(listwise), "sndcg_ms": loss_only}


def measure(rounds: int, warmup: int) -> pd.DataFrame:
    rows = []
    for name, size in sizes().items():
        fns = closures(size)
        for fn in fns.values():
            for _ in range(warmup):
                fn()
        for r in range(rounds):
            row = {"size": name, "round": r, **size}
            for key, fn in fns.items():
                t0 = time.thread_time()
                fn()
                row[key] = 1e3 * (time.thread_time() - t0)
            rows.append(row)
        print(
            f"{name}: step Triplet {statistics.median(r['step_triplet_ms'] for r in rows if r['size'] == name):.1f} "
            f"ms, + S-NDCG {statistics.median(r['step_listwise_ms'] for r in rows if r['size'] == name):.1f} ms",
            flush=True,
        )
    return pd.DataFrame(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "benchmarks")
    args = ap.parse_args(argv)
    torch.set_num_threads(1)
    load = os.getloadavg()
    raw = measure(args.rounds, args.warmup)
    load_end = os.getloadavg()
    atomic_write_text(args.out_dir / "listwise_overhead.csv", raw.to_csv(index=False, float_format="%.4f"))

    from reproduce.present.analyses.listwise import overhead_benchmark

    s = overhead_benchmark(args.out_dir / "listwise_overhead.csv")
    cpu = platform.processor() or platform.machine()
    try:
        cpu = next(
            ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines() if "model name" in ln
        )
    except (OSError, StopIteration):
        pass
    buf = io.StringIO()
    buf.write(
        "# Listwise overhead: the S-NDCG term per training step, study size vs the papers' GRU-1024\n\n"
        f"{dt.datetime.now().isoformat(timespec='seconds')} · torch {torch.__version__} · {cpu} · one torch "
        f"thread, CPU time of that thread (`time.thread_time`) · median of {args.rounds} round-robin rounds "
        f"after {args.warmup} warm-up · 1-min load average "
        f"{load[0]:.2f} at start, {load_end[0]:.2f} at end · `benchmarks/bench_listwise_overhead.py`\n\n"
        "| size | GRU hidden | batch | Triplet (mean) step ms | Triplet + S-NDCG step ms | S-NDCG term ms "
        "| overhead ms per step | overhead share of the step (%) | S-NDCG term share (%) |\n"
        "|---|---|---|---|---|---|---|---|---|\n"
    )
    for r in s.to_dict("records"):
        buf.write(
            f"| {r['size']} | {r['text_hidden']} | {r['batch_size']} | {r['step_triplet_ms']:.1f} | "
            f"{r['step_listwise_ms']:.1f} | {r['sndcg_ms']:.1f} | {r['overhead_ms']:.1f} | "
            f"{r['overhead_share_pct']:.1f} | {r['sndcg_share_pct']:.1f} |\n"
        )
    buf.write(
        "\nOverhead = listwise step − Triplet (mean) step; shares are of the listwise step. The paper reports "
        "+5.4% per epoch (VSE∞, GPU, Table VIII).\n"
    )
    atomic_write_text(args.out_dir / "listwise_overhead.md", buf.getvalue())
    print(buf.getvalue())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
