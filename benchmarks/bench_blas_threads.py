"""Benchmark: a training epoch with and without one BLAS thread inside the training loop.

``coherent_itr.train.train`` runs its epochs under ``threadpool_limits(1, "blas")``: the relevance
providers and validation metrics call numpy (OpenBLAS) between torch ops, and a multi-threaded
OpenBLAS pool left spinning after each call competes with torch's threads for the cores. This
script measures the effect: one epoch of the ``default``-profile synthetic configuration for each
loss, once as the library runs it (``limited``) and once with the limit replaced by a no-op
(``unlimited``, the library before the change), for each torch thread count.

Writes ``results/benchmarks/blas_threads.csv`` and ``.md`` (atomically).

    .venv/bin/python benchmarks/bench_blas_threads.py --losses triplet_sn bcls --threads 2 1
"""

from __future__ import annotations

import argparse
import contextlib
import io
import csv
import datetime as dt
import os
import platform
from pathlib import Path

import torch

import coherent_itr.train as train_mod
from coherent_itr.config import Config
from coherent_itr.data import load_splits
from coherent_itr.io import atomic_write_text

ROOT = Path(__file__).resolve().parents[1]
RELEVANCE = {
    "triplet_sn": None,
    "triplet": None,
    "bcls": "sbert",
    "listwise": "sbert",
    "ladder": "sbert",
    "adaptive_ladder": "sbert",
    "sam": "cider",
}
RELEVANCE_PARAMS = {"listwise": {"scale": "unit"}}  # S-NDCG takes relevance in [0, 1] (Listwise Eq. 8)


def epoch_seconds(loss: str, threads: int, limited: bool) -> float:
    torch.set_num_threads(threads)
    cfg = Config(
        data="synthetic",
        data_scale="default",
        loss=loss,
        relevance=RELEVANCE[loss],
        relevance_params=RELEVANCE_PARAMS.get(loss, {}),
        epochs=1,
        embed_dim=128,
        word_dim=128,
        text_hidden=128,
        seed=0,
    )
    splits = load_splits("synthetic", scale="default", seed=0)
    patch = contextlib.nullcontext() if limited else _no_limit()
    with patch:
        res = train_mod.train(cfg, splits, progress=False)
    return res.record["timing"]["train_s"]


@contextlib.contextmanager
def _no_limit():
    orig = train_mod.threadpool_limits
    train_mod.threadpool_limits = lambda *a, **k: contextlib.nullcontext()
    try:
        yield
    finally:
        train_mod.threadpool_limits = orig


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--losses",
        nargs="+",
        default=["triplet_sn", "bcls", "listwise", "adaptive_ladder", "sam"],
        choices=sorted(RELEVANCE),
    )
    ap.add_argument("--threads", type=int, nargs="+", default=[2, 1], help="torch intra-op threads")
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "benchmarks")
    args = ap.parse_args(argv)
    rows = []
    for threads in args.threads:
        for loss in args.losses:
            t = {arm: epoch_seconds(loss, threads, arm == "limited") for arm in ("unlimited", "limited")}
            rows.append(
                {
                    "loss": loss,
                    "torch_threads": threads,
                    "epoch_s_unlimited_blas": round(t["unlimited"], 2),
                    "epoch_s_one_blas_thread": round(t["limited"], 2),
                    "speedup": round(t["unlimited"] / t["limited"], 2),
                }
            )
            print(rows[-1], flush=True)
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(rows[0]))
    w.writeheader()
    w.writerows(rows)
    atomic_write_text(args.out_dir / "blas_threads.csv", buf.getvalue())
    head = (
        f"One training epoch (synthetic world, default profile: GRU-128, batch 128, 117 steps), seconds; "
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, one process, torch "
        f"{torch.__version__}, {dt.date.today()}.\n\n"
    )
    md = "| " + " | ".join(rows[0]) + " |\n|" + "---|" * len(rows[0]) + "\n"
    md += "".join("| " + " | ".join(str(v) for v in r.values()) + " |\n" for r in rows)
    atomic_write_text(args.out_dir / "blas_threads.md", head + md)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
