"""What the driver itself costs between runs when it trains one tuning problem at a time.

:meth:`reproduce.driver.executors.LocalExecutor.run_as_ready` asks :func:`reproduce.protocol.pipeline.ready_runs`
again after every finished run and orders the answer longest first (:func:`~reproduce.driver.executors.
longest_first`); while it asks, the worker whose run just finished waits. On 16 GPU workers a run ends every few
seconds, so the answer's cost matters. This times one answer on a real run cache in three states: empty (the start
of a plan), and with a run archive imported (mid-plan), first with :class:`~reproduce.protocol.pipeline.KnownRuns`
cold (every record read and verified once) and then warm (what every later answer costs). Writes
``results/benchmarks/driver.md``.

    python benchmarks/bench_driver.py [--archive results/runs/flickr8k-default-cpu.tar.xz] [--repeat 5]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]
os.environ["COHERENT_ITR_CACHE"] = tempfile.mkdtemp()  # set before the library reads it

from coherent_itr.runs import RunCache, archive  # noqa: E402

from reproduce.driver.executors import longest_first  # noqa: E402
from reproduce.protocol import pipeline, tuning  # noqa: E402
from reproduce.spec import experiments  # noqa: E402
from reproduce.spec.profiles import profile_for  # noqa: E402


def answer(prof, known) -> tuple[int, int, int]:
    """One answer as the driver asks it: the ready runs, longest first. Returns (tuning, final, waiting)."""
    r = pipeline.ready_runs(prof, None, known, set())
    longest_first([*r.tuning, *r.final])
    return len(r.tuning), len(r.final), r.waiting


def timed(prof, cache, warm: bool, repeat: int) -> tuple[list[float], tuple]:
    """Seconds of ``repeat`` answers, each from a new :class:`KnownRuns` (``warm``: one untimed answer first)."""
    times, got = [], None
    for _ in range(repeat):
        known = pipeline.KnownRuns(cache)
        if warm:
            answer(prof, known)
        t = time.perf_counter()
        got = answer(prof, known)
        times.append(time.perf_counter() - t)
    return times, got


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--archive", default=str(ROOT / "results" / "runs" / "flickr8k-default-cpu.tar.xz"))
    ap.add_argument("--data", default="flickr8k")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--out", default=str(ROOT / "results" / "benchmarks" / "driver.md"))
    a = ap.parse_args(argv)
    prof = profile_for("default", a.data)
    cache = RunCache()
    planned = len(experiments.plan(prof))
    rows = []
    times, got = timed(prof, cache, warm=False, repeat=a.repeat)
    rows.append(("empty cache", times, got))
    imported = archive.import_runs(a.archive)
    try:
        tuned = tuning.tuned_plan(prof, None, cache)
        n = sum(cache.has(c) for c in tuned)
        held = f"every tuning run and {n} of the {len(tuned)} final runs of the tuned plan"
    except tuning.TuningIncomplete:
        held = "some tuning runs: not every tuning problem can choose yet"
    for name, warm in (("archive imported, KnownRuns cold", False), ("archive imported, KnownRuns warm", True)):
        times, got = timed(prof, cache, warm=warm, repeat=a.repeat)
        rows.append((name, times, got))
    load = os.getloadavg()
    commit = subprocess.run(
        ["git", "-C", str(ROOT), "describe", "--always", "--dirty", "--abbrev=7"], capture_output=True, text=True
    )
    lines = [
        f"# The driver's answer between runs: `ready_runs` + `longest_first`, {a.data}, default profile",
        "",
        "Produced by `benchmarks/bench_driver.py` (see its docstring). One answer is what the worker whose run just "
        "finished waits for before its next run; the driver asks once per finished run.",
        "",
        f"- machine: {platform.machine()}, {os.cpu_count()} cores, load average {load[0]:.2f} / {load[1]:.2f} / "
        f"{load[2]:.2f} at the end; Python {platform.python_version()}; commit {commit.stdout.strip() or '?'}",
        f"- archive: `{Path(a.archive).name}` ({imported.get('runs', '?')} runs imported; of {a.data} it holds "
        f"{held}); {a.repeat} answers per state",
        "",
        "| cache | median ms | min ms | max ms | ready tuning runs | ready final runs | problems still tuning |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, times, (n_tune, n_final, waiting) in rows:
        ms = [1000 * t for t in times]
        lines.append(
            f"| {name} | {statistics.median(ms):.0f} | {min(ms):.0f} | {max(ms):.0f} | {n_tune} | {n_final} | "
            f"{waiting} |"
        )
    warm_s = statistics.median(rows[-1][1])
    lines += [
        "",
        f"At the warm answer's median, one answer per finished run costs the driver {warm_s * planned:.0f} s over the "
        f"{planned} final runs of the {a.data} plan (and one more for each tuning run), one answer after "
        "another in the driver process; each finished run's worker waits one answer.",
    ]
    text = "\n".join(lines) + "\n"
    Path(a.out).write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
