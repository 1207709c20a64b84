"""``python -m reproduce --profile default``: the study from planning to the claims ledger.

plan every run the profile needs → prepare their data once (features, Sentence-BERT embeddings)
→ train the missing ones through an executor → execute every
notebook with papermill (profile and data as parameters) → collect the claims ledger → write
it into README.md → write ``results/manifest.json``. Exits non-zero if any run or notebook failed
(the others still finish).
"""
from __future__ import annotations

import argparse
import os
import signal
import sys
import time

from coherent_itr import paths
from coherent_itr.runs import RunCache

from . import experiments, ledger_io, notebooks
from .executors import make_executor
from .prepare import prepare
from .study import profile_for


def data_sets(choice: str) -> list[str]:
    if choice == "auto":
        return ["synthetic"] + (["flickr8k"] if paths.flickr8k_dir(required=False) else [])
    return choice.split(",")


def _sigterm_as_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv=None) -> int:
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)   # `kill` stops the worker processes too
    ap = argparse.ArgumentParser(prog="python -m reproduce", description=__doc__.splitlines()[0])
    ap.add_argument("--profile", default="default", help="smoke | default | paper")
    ap.add_argument("--data", default="auto",
                    help="synthetic, flickr8k, or both comma-separated; auto = synthetic (+ flickr8k when "
                         "$FLICKR8K_DIR is set)")
    ap.add_argument("--executor", default="local", choices=["local", "ray"])
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1),
                    help="parallel training processes (local) or CPUs for a local Ray instance")
    ap.add_argument("--papers", default=None, help="comma-separated subset of " + ",".join(experiments.PAPERS))
    ap.add_argument("--skip-notebooks", action="store_true")
    ap.add_argument("--rerun-notebooks", action="store_true",
                    help="execute every notebook even if its inputs are unchanged since its last run")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    progress = not args.no_progress
    cache = RunCache()
    papers = args.papers.split(",") if args.papers else None
    failed = False
    timings: dict[str, float] = {}
    runs_trained = 0
    for data in data_sets(args.data):
        profile = profile_for(args.profile, data)
        configs = experiments.plan(profile, papers)
        todo = [c for c in configs if not cache.has(c)]
        print(f"reproduce [{profile.name}/{data}]: {len(configs)} runs planned, {len(todo)} to train "
              f"({args.executor} executor, {args.workers} worker(s))", flush=True)
        t = time.perf_counter()
        if todo:
            timings[f"{data}_prepare_s"] = prepare(todo, progress)
        t1 = time.perf_counter()
        failures = make_executor(args.executor, args.workers, progress).run(todo, cache)
        runs_trained += len(todo) - len(failures)
        timings[f"{data}_train_s"] = time.perf_counter() - t1
        for f in failures:
            print(f, file=sys.stderr)
        failed |= bool(failures)
        if not args.skip_notebooks:
            nb_fail = notebooks.execute(profile.name, data, profile.results_dir, only=papers_to_notebooks(papers),
                                        progress=progress, force=args.rerun_notebooks or bool(todo))
            for name, tb in nb_fail:
                print(f"notebook failed: {name} [{data}]\n{tb}", file=sys.stderr)
            failed |= bool(nb_fail)
        timings[f"{data}_total_s"] = time.perf_counter() - t
        print(f"reproduce [{profile.name}/{data}]: " + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items()
                                                            if k.startswith(data)), flush=True)
    base = profile_for(args.profile, "synthetic").results_dir
    table = ledger_io.collect(base)
    if args.profile != "smoke":
        ledger_io.update_readme(table, args.profile)
    ledger_io.write_manifest(base, args.profile, data_sets(args.data), time.perf_counter() - t0, timings,
                             n_workers=args.workers, runs_trained=runs_trained)
    print(f"reproduce: profile={args.profile} finished in {time.perf_counter() - t0:.0f} s; results in {base}/"
          + ("; SOME RUNS OR NOTEBOOKS FAILED (see above)" if failed else ""))
    return 1 if failed else 0


def papers_to_notebooks(papers):
    if not papers:
        return None
    names = {"overview": "00", "bcls": "01", "ladder": "02", "sam": "03", "listwise": "04", "unified": "05",
             "data": "06"}
    return [names[p] for p in papers if p in names]


if __name__ == "__main__":
    sys.exit(main())
