"""A model of the default plan's wall time on W workers: the protocol in waves against one tuning problem at a time.

Not a measurement of training: every run of the default plan (both data sets, from an empty cache; the settings that
go on past the rungs and the final runs at each problem's largest-lr setting stand in for the ones tuning picks) is
priced by the GPU's measured costs (``reproduce.protocol.cost.gpu_run_estimate_s``; ``--price cpu``: the 2-core CPU's)
and scheduled longest first on W workers, (a) in waves — every rung, then every setting that goes on, then every final
run, each wave waiting for its slowest run, the data sets one after the other — and (b) one problem at a time
(``reproduce.protocol.pipeline``): a problem's next stage is ready when its previous one finished, across both data
sets. Also the share of the plan's work by data set and loss. Writes ``results/benchmarks/schedule.md``.

    python benchmarks/bench_schedule.py [--workers 16] [--price gpu|cpu]
"""

from __future__ import annotations

import argparse
import heapq
import os
import sys
import tempfile
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
os.environ["COHERENT_ITR_CACHE"] = tempfile.mkdtemp()  # an empty cache: the whole plan

from reproduce.protocol import cost, tuning  # noqa: E402
from reproduce.protocol.halving import n_survivors  # noqa: E402
from reproduce.spec import experiments  # noqa: E402
from reproduce.spec.profiles import profile_for  # noqa: E402

STAGES = ("rung", "survivors", "final")


def problems(data: str, price) -> dict:
    """tuning key -> {stage: {config key: seconds}} for the default plan of ``data``."""
    prof = profile_for("default", data)
    out: dict = {}
    for paper in experiments.PAPERS:
        for arm in tuning.main_arms(prof, paper):
            stages = out.setdefault(tuning.tuning_key(arm, prof), {s: {} for s in STAGES})
            grid = tuning.grid(arm, prof)
            for s in grid:
                c = tuning.rung_config(arm, prof, s)
                stages["rung"][c.key()] = price(c, data, evaluated=False)
            for s in grid[-n_survivors(len(grid), prof.tuning.keep) :]:
                c = tuning._tuning_config(arm, prof, s)
                stages["survivors"][c.key()] = price(c, data, evaluated=False)
    for paper in experiments.PAPERS:
        arms = experiments.arms(paper, prof)
        for arm in arms:
            fam = tuning.family_of(arm, arms)
            for c in arm.configs(prof, **tuning.grid(fam, prof)[-1]):
                out[tuning.tuning_key(fam, prof)]["final"][c.key()] = price(c, data)
    return out


def longest_first_makespan(durations: list[float], workers: int) -> float:
    free = [0.0] * workers
    for d in sorted(durations, reverse=True):
        heapq.heappush(free, heapq.heappop(free) + d)
    return max(free)


def pipelined_makespan(probs: dict, workers: int) -> float:
    """Event simulation: a problem's next stage is released when its previous stage's runs have all finished."""
    ready: list = []
    left: dict = {}
    n = 0

    def release(key, stage: int) -> None:
        nonlocal n
        runs = probs[key][STAGES[stage]]
        left[key] = len(runs)
        for d in runs.values():
            n += 1
            heapq.heappush(ready, (-d, n, key, stage))
        if not runs and stage + 1 < len(STAGES):
            release(key, stage + 1)

    for key in probs:
        release(key, 0)
    t, free, running = 0.0, workers, []
    while ready or running:
        while free and ready:
            d, _, key, stage = heapq.heappop(ready)
            heapq.heappush(running, (t - d, key, stage))
            free -= 1
        t, key, stage = heapq.heappop(running)
        free += 1
        left[key] -= 1
        if left[key] == 0 and stage + 1 < len(STAGES):
            release(key, stage + 1)
    return t


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--price", choices=("gpu", "cpu"), default="gpu")
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "schedule.md"))
    a = ap.parse_args(argv)
    price = cost.gpu_run_estimate_s if a.price == "gpu" else cost.run_estimate_s
    w = a.workers
    lines = [
        f"# The default plan on {w} workers: waves against one tuning problem at a time (a model, {a.price} prices)",
        "",
        "Produced by `benchmarks/bench_schedule.py` (see its docstring for the model). Minutes of wall time.",
        "",
        "| data | problems | runs | worker-min | waves (rungs + survivors + finals) | one problem at a time "
        "| perfect packing |",
        "|---|---|---|---|---|---|---|",
    ]
    both: dict = {}
    waves_total = 0.0
    for data in ("synthetic", "flickr8k"):
        probs = problems(data, price)
        both.update({(data, k): v for k, v in probs.items()})
        waves = [longest_first_makespan([d for p in probs.values() for d in p[s].values()], w) for s in STAGES]
        waves_total += sum(waves)
        work = sum(d for p in probs.values() for s in STAGES for d in p[s].values())
        runs = sum(len(p[s]) for p in probs.values() for s in STAGES)
        lines.append(
            f"| {data} | {len(probs)} | {runs} | {work / 60:.1f} | {sum(waves) / 60:.1f} "
            f"({' + '.join(f'{x / 60:.1f}' for x in waves)}) | {pipelined_makespan(probs, w) / 60:.1f} | "
            f"{work / w / 60:.1f} |"
        )
    work = sum(d for p in both.values() for s in STAGES for d in p[s].values())
    lines.append(
        f"| both | {len(both)} | {sum(len(p[s]) for p in both.values() for s in STAGES)} | {work / 60:.1f} | "
        f"{waves_total / 60:.1f} (one data set after the other) | {pipelined_makespan(both, w) / 60:.1f} | "
        f"{work / w / 60:.1f} |"
    )
    by_loss: Counter = Counter()
    for data in ("synthetic", "flickr8k"):
        prof = profile_for("default", data)
        for paper in experiments.PAPERS:
            arms = experiments.arms(paper, prof)
            for arm in arms:
                fam = tuning.family_of(arm, arms)
                for c in arm.configs(prof, **tuning.grid(fam, prof)[-1]):
                    by_loss[(data, c.loss)] += price(c, data)
    total = sum(by_loss.values())
    lines += [
        "",
        "The final runs' work by data set and loss (the largest shares):",
        "",
        "| data | loss | worker-min | share |",
    ]
    lines += ["|---|---|---|---|"]
    for (data, loss), s in by_loss.most_common(8):
        lines.append(f"| {data} | {loss} | {s / 60:.1f} | {100 * s / total:.1f} % |")
    text = "\n".join(lines) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
