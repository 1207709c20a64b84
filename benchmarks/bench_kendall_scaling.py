"""Benchmark: cost of the Kendall loss vs batch size, full O(N³) vs SW-HS (claim B7, BCLS Sec. III-D).

Forward + backward of ``kendall`` (Eq. 17, every (anchor, j, k) triple) and ``kendall_sw_hs``
(Eqs. 18–20; α = 0.2, β = 0.1, plus β = 0.05 and 0.4) on a random N×N similarity matrix with
S-BERT-like clustered relevance in [−1, 1], for N ∈ {32, 64, 128, 256}, one CPU thread. Each
repetition times every (loss, N) once in round-robin order (the median of 3 calls; 1 call when the
first takes more than 0.2 s). The notebook ``01_bcls`` reads the timings and fits, per repetition and
loss, the log–log slope of time vs N (``reproduce.present.analyses.bcls.loglog_slopes``); B7's effect is
slope(full) − slope(SW-HS, β = 0.1) per repetition (the paper predicts ≈ 3 vs ≈ 2, so > 0).

Writes ``results/benchmarks/kendall_scaling.csv`` (one row per repetition, loss and N: ``rep, loss,
N, ms``) and ``kendall_scaling.md`` (median times, slopes, machine and load), atomically.

    PYTHONPATH=$PWD/src:$PWD .venv/bin/python benchmarks/bench_kendall_scaling.py
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from coherent_itr.io import atomic_write_text
from coherent_itr.losses import build
from reproduce.present.analyses import bcls

ROOT = Path(__file__).resolve().parents[1]


def bench_inputs(n: int, seed: int = 0, dim: int = 64):
    """(similarity, relevance) of N pairs: matched pairs more similar; relevance = cosine of caption
    vectors drawn around 12 topics (r_ii = 1), as Sentence-BERT relevance in [−1, 1]."""
    g = torch.Generator().manual_seed(seed)
    img = torch.nn.functional.normalize(torch.randn(n, dim, generator=g), dim=1)
    txt = torch.nn.functional.normalize(img + 1.2 * torch.randn(n, dim, generator=g) / dim**0.5, dim=1)
    topics = torch.nn.functional.normalize(torch.randn(12, 32, generator=g), dim=1)
    cap = torch.nn.functional.normalize(
        topics[torch.randint(0, 12, (n,), generator=g)] + 0.9 * torch.randn(n, 32, generator=g) / 6, dim=1
    )
    rel = (cap @ cap.T).clamp(-1, 1)
    rel.fill_diagonal_(1.0)
    return img @ txt.T, rel


def losses() -> dict:
    return {
        bcls.BENCH_FULL: build("kendall", alpha=0.2),
        bcls.BENCH_SWHS: build("kendall_sw_hs", alpha=0.2, beta=0.1),
        "SW-HS β=0.05": build("kendall_sw_hs", alpha=0.2, beta=0.05),
        "SW-HS β=0.4": build("kendall_sw_hs", alpha=0.2, beta=0.4),
    }


def once(loss, inputs) -> float:
    """ms of one forward + backward: median of 3 calls (1 call when the first takes > 0.2 s)."""
    times = []
    for _ in range(3):
        sim = inputs[0].clone().requires_grad_(True)
        t0 = time.perf_counter()
        loss(sim, inputs[1]).backward()
        times.append(time.perf_counter() - t0)
        if times[0] > 0.2:
            break
    return float(np.median(times)) * 1e3


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out-dir", type=Path, default=ROOT / "results" / "benchmarks")
    args = ap.parse_args(argv)
    load_start = os.getloadavg()[0]
    torch.set_num_threads(1)
    inputs = {n: bench_inputs(n) for n in args.sizes}
    fns = losses()
    for loss in fns.values():  # warm-up
        once(loss, inputs[args.sizes[0]])
    t0 = time.perf_counter()
    rows = []
    for rep in range(args.reps):
        for n in args.sizes:
            for name, loss in fns.items():
                rows.append({"rep": rep, "loss": name, "N": n, "ms": once(loss, inputs[n])})
        print(f"repetition {rep + 1}/{args.reps} done", flush=True)
    wall = time.perf_counter() - t0
    bench = pd.DataFrame(rows)
    out_csv = atomic_write_text(args.out_dir / "kendall_scaling.csv", bench.to_csv(index=False, float_format="%.6g"))

    table = bcls.b7_table(bench, bcls.loglog_slopes(bench))
    cpu = platform.processor() or platform.machine()
    for line in Path("/proc/cpuinfo").read_text().splitlines() if Path("/proc/cpuinfo").exists() else []:
        if line.startswith("model name"):
            cpu = line.split(":", 1)[1].strip()
            break
    command = " ".join(["benchmarks/bench_kendall_scaling.py"] + (argv or sys.argv[1:]))
    md = [
        "# Kendall loss cost vs batch size: full O(N³) vs SW-HS (claim B7)",
        "",
        f"{dt.date.today().isoformat()} · torch {torch.__version__} · {cpu} · 1 torch thread · "
        f"{args.reps} repetitions, each (loss, N) once per repetition in round-robin order (median of 3 calls, "
        f"1 call above 0.2 s) · {wall:.0f} s · 1-min load average {load_start:.2f} at start, "
        f"{os.getloadavg()[0]:.2f} at end · `{command}`",
        "",
        "Median forward + backward time over repetitions (ms) and the log–log slope of time vs N per "
        "repetition (mean, std over repetitions); random inputs, seed 0.",
        "",
        table.round(3).to_markdown(),
        "",
    ]
    out_md = atomic_write_text(args.out_dir / "kendall_scaling.md", "\n".join(md))
    print(f"wrote {out_csv} and {out_md}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
