"""What one invocation of ``python -m reproduce`` came to, and the end that reports it: the :class:`Outcome` (runs
trained, evaluated and failed, notebooks and data sets that failed, timings), filled as runs finish (:func:`tally`;
each failure's full traceback appended to the run cache's :data:`FAILURE_LOG` by :func:`log_failures`), and
:func:`finish`: the ledger (stale claims marked), the README (unless something failed), the manifest, one summary of
the failures (:func:`failure_report`) and the exit status.

A unit because everything here records or reports the outcome and nothing trains; :mod:`reproduce.driver.cli` runs
the work and hands each result here. Its module level imports nothing heavy (torch, pandas), like the driver's, so
``--help`` and a usage error stay light.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field

from coherent_itr import paths

from reproduce.driver import notebooks
from reproduce.driver.arguments import DATA_SETS
from reproduce.driver.invocation import Invocation
from reproduce.spec.paths import ROOT


@dataclass
class Outcome:
    failed_runs: list = field(default_factory=list)  # RunFailure
    failed_notebooks: list = field(default_factory=list)  # (data, notebook, traceback)
    failed_data: list = field(default_factory=list)  # (data set, why its final runs were skipped)
    timings: dict = field(default_factory=dict)
    runs_to_do: int = 0  # runs to train in this invocation, all data sets
    runs_done: int = 0  # of which finished (trained or failed)
    # data set → {"runs_trained": runs that trained (a training entry written), "runs_evaluated": runs
    # whose test evaluation was computed here (trained here or cached before)}
    by_data: dict = field(default_factory=dict)
    progress: object = None  # reproduce.protocol.progress.RunProgress: the plan's bar and estimate

    @property
    def runs_trained(self) -> int:
        return sum(v["runs_trained"] for v in self.by_data.values())

    @property
    def runs_evaluated(self) -> int:
        return sum(v["runs_evaluated"] for v in self.by_data.values())


def tally(out: Outcome, data: str, n_done: int, before: dict, after: dict, failures: list) -> None:
    """Count ``n_done`` finished runs of ``data`` into ``out``: trained and evaluated ones from the cache's counts
    (:meth:`coherent_itr.runs.RunCache.counts`) before and after them; each failure on stderr, in the log and in
    ``out``."""
    out.runs_done += n_done
    per = out.by_data.setdefault(data, {"runs_trained": 0, "runs_evaluated": 0})
    per["runs_trained"] += before["to_train"] - after["to_train"]
    per["runs_evaluated"] += after["cached"] - before["cached"]
    for f in failures:
        print(f.line(), file=sys.stderr)
    log_failures(f"{data}: runs", [str(f) for f in failures])
    out.failed_runs += failures


FAILURE_LOG = "failures.log"  # in the run cache's folder: every failed run's and notebook's full traceback


def log_failures(what: str, texts: list[str]) -> None:
    """Append the full tracebacks of ``texts`` under a dated heading to the run cache's :data:`FAILURE_LOG` (the
    terminal gets one line per failure and the summary)."""
    if not texts:
        return
    path = paths.cache_dir() / FAILURE_LOG
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    with open(path, "a", encoding="utf-8") as f:
        f.write(f"=== {stamp} UTC: {what} ({len(texts)}) ===\n" + "\n".join(texts) + "\n")


def failure_report(out: Outcome) -> list[str]:
    """The summary after a study with failures: each failure once (runs grouped by their error), and where the
    full tracebacks are."""
    # heavy (torch): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from reproduce.driver.executors import failure_summary

    lines = ["reproduce: FAILED —"]
    lines += [f"  {d}: {why}" for d, why in out.failed_data]
    lines += failure_summary(out.failed_runs)
    lines += [
        f"  notebook {name} [{data}]: {tb.strip().splitlines()[-1] if tb.strip() else 'unknown error'}"
        for data, name, tb in out.failed_notebooks
    ]
    lines.append(f"  full tracebacks: {paths.cache_dir(create=False) / FAILURE_LOG}; rerun to retry the failed runs")
    return lines


def finish(inv: Invocation, out: Outcome, t0: float) -> int:
    """Ledger (stale claims marked), README (unless something failed; stale rows marked), manifest; the exit
    status."""
    # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from reproduce.driver import ledger_files

    dirs = {d: ROOT / inv.profiles[d].results_dir for d in DATA_SETS}
    base = dirs["synthetic"]  # the invocation's ledger and manifest: the synthetic world's results folder
    stale = notebooks.stale_claims(inv.profile, dirs)
    for p, why in stale.items():
        print(f"reproduce: STALE {p.relative_to(ROOT)}: {why}", flush=True)
    failed = bool(out.failed_runs or out.failed_notebooks or out.failed_data)
    before = ledger_files.committed_ledger(base / "claims.csv")
    collapsed = None if failed else ledger_files.collapsed_arms(inv.run_profiles().values(), inv.papers)
    table = ledger_files.collect(base, stale=stale, collapsed=collapsed)
    change = ledger_files.compare_ledgers(before, base / "claims.csv")
    if inv.pilot_only:
        print(
            f"reproduce: README.md left alone (--pilot-only: the pilot's ledger is {base.relative_to(ROOT)})",
            flush=True,
        )
    elif inv.profile == "paper":  # the papers' size: its verdicts join the default's rows (protocol.scale)
        print(f"reproduce: README.md left alone (profile paper: its ledger is {base.relative_to(ROOT)})", flush=True)
    elif inv.profile != "smoke":
        if failed:
            print("reproduce: README.md NOT updated (failures, see above)", flush=True)
        else:
            n_stale = ledger_files.update_readme(table, inv.profile)
            print(
                "reproduce: README.md claims-ledger table rewritten"
                + (f" ({n_stale} stale primary rows shown as awaiting a current run)" if n_stale else ""),
                flush=True,
            )
    failures = {
        "runs": [{"config": f.config, "error": f.error} for f in out.failed_runs],
        "notebooks": [
            {"data": d, "notebook": n, "error": tb.strip().splitlines()[-1] if tb.strip() else ""}
            for d, n, tb in out.failed_notebooks
        ],
        "stale_claims": {str(p.relative_to(ROOT)): why for p, why in stale.items()},
        "data_sets": [{"data": d, "error": why} for d, why in out.failed_data],
    }
    estimate = None
    if out.progress:
        estimate = out.progress.report(time.perf_counter() - t0, out.runs_done)
    ledger_files.write_manifest(
        base,
        inv.profile,
        list(inv.data_sets),
        time.perf_counter() - t0,
        out.timings,
        n_workers=inv.workers,
        runs_trained=out.runs_trained,
        runs_evaluated=out.runs_evaluated,
        by_data=out.by_data,
        failures=failures,
        estimate=estimate,
        ledger_change=change,
    )
    print(
        f"reproduce: profile={inv.profile} finished in {time.perf_counter() - t0:.0f} s; "
        f"{out.runs_trained} run(s) trained, {out.runs_evaluated} evaluated; "
        f"ledger in {base.relative_to(ROOT)}/claims.md"
        + (
            f"; FAILED: {len(out.failed_runs)} run(s), {len(out.failed_notebooks)} notebook(s), "
            f"{len(out.failed_data)} data set(s) (summary below)"
            if failed
            else ""
        )
        + (f"; {len(stale)} stale claim file(s)" if stale else ""),
        flush=True,
    )
    if failed:
        print("\n".join(failure_report(out)), file=sys.stderr, flush=True)
    return 1 if failed else 0
