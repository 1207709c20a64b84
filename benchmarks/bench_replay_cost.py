"""Benchmark: what a cold ``make reproduce`` would cost, replayed from the runs already in the cache.

For each data set, every run of the current plan (the tuning runs and the final runs at the chosen
settings, deduplicated) is looked up in the run cache, and its recorded seconds are summed: the
training entry's ``timing.total_s`` (set-up, training, validation, test encoding) plus, for final
runs, the evaluation entry's ``eval_s``. Divided by the worker count, that is the wall time of training
and evaluation with perfect packing. Data preparation and notebooks are not in the cache; the
driver's phase times in ``results/manifest.json`` give them.

The records were timed when each run was trained: on this machine, with two workers side by side,
under whatever code was current then. A run trained before a speed-up keeps its old time, so the
replay is an upper bound for code that is faster now.

    .venv/bin/python benchmarks/bench_replay_cost.py [--workers 2]

Needs the cache of a complete ``make reproduce`` (``COHERENT_ITR_CACHE``; Flickr8k also
``FLICKR8K_DIR``). Writes ``results/benchmarks/replay_cost.md``.
"""

from __future__ import annotations

import argparse
import collections
import datetime as dt
import json
import os
import warnings
from pathlib import Path

from coherent_itr.io import atomic_write_text
from coherent_itr.runs import RunCache
from reproduce.protocol import tuning
from reproduce.protocol.study import profile_for

ROOT = Path(__file__).resolve().parents[1]


def replay(data: str, cache: RunCache) -> dict:
    prof = profile_for("default", data)
    plan = {c.key(): (c, False) for c in tuning.tuning_configs(prof)}
    plan.update({c.key(): (c, True) for c in tuning.tuned_plan(prof, None, cache)})
    train_s = eval_s = 0.0
    by_loss: collections.Counter = collections.Counter()
    missing = 0
    for c, evaluated in plan.values():
        res = cache.load_training(c)
        if res is None:
            missing += 1
            continue
        t = float(res.record["timing"]["total_s"])
        e = 0.0
        if evaluated and cache.has(c):
            e = float(json.loads((cache.eval_path(c) / "metrics.json").read_text())["eval_s"])
        train_s, eval_s = train_s + t, eval_s + e
        by_loss[c.loss] += t + e
    return {"runs": len(plan), "missing": missing, "train_s": train_s, "eval_s": eval_s, "by_loss": by_loss}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    warnings.simplefilter("ignore")
    cache = RunCache()
    lines = [
        "# Replayed cost of a cold `make reproduce` (training and evaluation only)",
        "",
        f"{dt.datetime.now(dt.timezone.utc):%Y-%m-%d %H:%M} UTC · `benchmarks/bench_replay_cost.py` (its docstring: "
        f"the method) · {args.workers} workers, perfect packing · load average {os.getloadavg()[0]:.2f}",
        "",
        "| data | runs in the plan | not in the cache | training s | evaluation s | wall min at the workers | "
        "largest shares (s) |",
        "|---|---|---|---|---|---|---|",
    ]
    total = 0.0
    for data in ("synthetic", "flickr8k"):
        r = replay(data, cache)
        s = r["train_s"] + r["eval_s"]
        total += s
        top = ", ".join(f"{k} {v:.0f}" for k, v in r["by_loss"].most_common(4))
        lines.append(
            f"| {data} | {r['runs']} | {r['missing']} | {r['train_s']:.0f} | {r['eval_s']:.0f} | "
            f"{s / 60 / args.workers:.1f} | {top} |"
        )
    lines += [
        "",
        f"Both: **{total / 60 / args.workers:.1f} min** of training and evaluation wall time, before data "
        "preparation and notebooks (`results/manifest.json` phase times).",
    ]
    out = ROOT / "results" / "benchmarks" / "replay_cost.md"
    atomic_write_text(out, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
