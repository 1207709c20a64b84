"""The driver of ``python -m reproduce``: plan, prepare, train, execute the notebooks, collect the ledger, write
the manifest. What it does and its exit statuses are its ``--help`` (:data:`reproduce.driver.arguments.DESCRIPTION`);
its options are parsed in :mod:`reproduce.driver.arguments` and resolved once into the frozen
:class:`reproduce.driver.invocation.Invocation` (:func:`build_invocation`) that everything below reads, its inputs
checked before any work in :mod:`reproduce.driver.preflight`, what it came to recorded and reported in
:mod:`reproduce.driver.outcome`, its signals handled in :mod:`reproduce.driver.signals`.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import sys
import threading
import time
import warnings
from types import MappingProxyType

from reproduce.spec.paths import ROOT
from reproduce.spec.power_seeds import pilot_only
from reproduce.spec.profiles import COSTS, get_profile, profile_for

NO_ENVIRONMENT = (
    "python -m reproduce: error: {name} is not installed for {python}; create the study's environment once "
    "with `make venv`, then run `.venv/bin/python -m reproduce` (or `make reproduce`)"
)
try:  # the study's environment (standard library above, below it what the environment installs)
    from coherent_itr import paths
    from tqdm.auto import tqdm

    from reproduce.driver import notebooks
    from reproduce.driver.arguments import (
        AUTO,
        COMMITTED,
        DATA_SETS,
        PROG,
        RUNS_FROM_ENV,
        UsageError,
        engine_setting,
        parse_args,
    )
    from reproduce.driver.invocation import ArchiveOptions, Invocation
    from reproduce.driver.outcome import Outcome, finish, log_failures, tally
    from reproduce.driver.preflight import data_warnings_once, validate
    from reproduce.driver.signals import interrupt
except ModuleNotFoundError as _exc:  # a Python without the study's environment, e.g. the system's python3
    print(NO_ENVIRONMENT.format(name=_exc.name, python=sys.executable), file=sys.stderr)
    sys.exit(2)


def run_cache():
    """The run cache's module (:mod:`coherent_itr.runs`), imported by the commands that read or train runs."""
    # heavy (torch): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from coherent_itr import runs

    return runs


def run_archive():
    """The run archive's module (:mod:`reproduce.driver.run_archive`), imported by the run-archive options only."""
    # heavy (torch, pandas): only the run-archive options load it (tests/reproduce/driver/test_cli.py)
    from reproduce.driver import run_archive

    return run_archive


class DataSetFailed(Exception):
    """A data set whose runs cannot start (its data cannot be prepared here): the others go on."""


# ------------------------------------------------------------------------------------------------
# The work
# ------------------------------------------------------------------------------------------------
def announce(inv: Invocation, plans: list) -> None:
    pilot = " (--pilot-only: every arm's pilot seeds, none of power_seeds.toml's)" if inv.pilot_only else ""
    print(f"reproduce: profile {inv.profile}{pilot}; " + "; ".join(inv.data_reasons), flush=True)
    nbs = [p.stem for p in notebooks.notebook_paths(notebooks.for_papers(inv.papers))]
    for p in plans:
        what = "tuning runs (seed 0, then the chosen settings with every seed)" if p.tuned else "runs planned"
        print(
            f"reproduce [{p.profile.name}/{p.data}]: {len(p.configs)} {what}, {len(p.todo)} to train or evaluate "
            f"({inv.executor} executor, {inv.workers} worker(s)"
            + (f" × {inv.runs_per_worker} runs side by side" if inv.runs_per_worker > 1 else "")
            + "); notebooks: "
            + ("skipped (--skip-notebooks)" if inv.skip_notebooks else ", ".join(nbs) or "none")
            + f"; results in {p.results_dir.relative_to(ROOT)}/",
            flush=True,
        )
    print(runs_known_line(plans, inv.papers, inv.runs_from), flush=True)


def runs_known_line(plans: list, papers=None, source: str | None = None) -> str:
    """What the cache holds of the runs planned before tuning chooses (``source``: the machine whose imported runs are
    read, ``--runs-from``), and how many of them are left to do."""
    total = sum(len(p.todo) for p in plans)
    todo = {c.key() for p in plans for c in p.todo}
    planned = {c.key() for p in plans for c in p.configs}
    if papers and all(p.papers == [] for p in plans):
        return f"reproduce: nothing to train (the selected papers train nothing); cache {paths.cache_dir()}"
    where = f"read from machine {source}" if source else "this machine's"
    return (
        f"reproduce: {total} run(s) to train or evaluate before tuning chooses; {len(planned - todo)} of the "
        f"{len(planned)} planned so far are in the cache ({where}); cache {paths.cache_dir()}"
    )


def train_data_set(inv: Invocation, plan, cache, out: Outcome, asked: dict) -> float | None:
    """Prepare and train the missing runs of one data set; returns the time its training ended, None when it had no
    run to train or evaluate (its notebooks then need no fresh execution).

    With a tuning grid, one tuning problem at a time (:func:`train_pipelined`; ``asked``: the runs it finds, for the
    interrupt's count); the tuning summary lands in the data set's results folder. Progress: the preparation's
    labelled lines and bars, then one line for the runs of the whole invocation (done / the plan's bound over every
    data set, an ETA from the estimated costs: :mod:`reproduce.protocol.progress`), open only while runs train so no
    other bar nests under it."""
    # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from reproduce.driver import executors
    from reproduce.protocol import prepare

    d = plan.data
    if plan.papers == []:  # only papers that train nothing (the data card): no preparation, no tuning summary
        return None
    progress = inv.progress
    executor = executors.make_executor(inv.executor, inv.workers, progress, inv.runs_per_worker)

    def prepare_once(todo) -> None:
        if todo:  # the final runs' images too (their bound: the seeds are known before tuning)
            est = plan.estimate  # the final runs' bound, or the exact list once tuning chose
            try:
                out.timings[f"{d}_prepare_s"] = prepare.prepare(todo, progress, later=est.final_todo if est else ())
            except prepare.PrepareError as exc:
                raise DataSetFailed(f"not prepared, its runs skipped: {exc}") from None

    if plan.tuned:
        return train_pipelined(plan, cache, executor, out, prepare_once, progress, asked)
    todo = plan.todo
    prepare_once(todo)
    t = time.perf_counter()
    if todo:
        before = cache.counts(todo)  # a run already trained is only evaluated: not counted as trained
        bar = training_bar(out, d, progress)
        try:
            failures = executor.run(todo, cache, bar=bar)
        finally:
            bar.close()
        tally(out, d, len(todo), before, cache.counts(todo), failures)
    out.timings[f"{d}_train_s"] = time.perf_counter() - t
    return time.time() if todo else None


def training_bar(out: Outcome, data: str, progress: bool):
    """The bar of the invocation's runs, open while ``data``'s runs train (:mod:`reproduce.protocol.progress`)."""
    if out.progress:
        return out.progress.open(f"training runs (now {data})")
    return tqdm(total=out.runs_to_do, initial=out.runs_done, desc=f"training runs (now {data})", disable=not progress)


def train_pipelined(plan, cache, executor, out: Outcome, prepare_once, progress: bool, asked: dict) -> float | None:
    """The tuned protocol one tuning problem at a time (:mod:`reproduce.protocol.pipeline`): each worker takes the
    longest run that nothing holds back, so a problem's final runs train while another's rungs do and no worker
    waits for another problem's slowest run; it ends when nothing is ready, the health check of the other seeds
    included. Every run it finds beyond the plan's goes into ``asked`` (``{key: config}``, what an interrupt counts).
    Returns the time its training ended, None when there was no run to train or evaluate."""
    # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from reproduce.present import tuning_tables
    from reproduce.protocol import pipeline

    d, prof = plan.data, plan.profile.name
    known = pipeline.KnownRuns(cache)
    counted = {c.key() for c in plan.todo}  # counted in out.runs_to_do before tuning
    before = {"to_train": 0, "cached": 0}
    t0 = time.perf_counter()
    chose = {"at": None}

    def ready(failed_keys) -> list:
        r = pipeline.ready_runs(plan.profile, plan.papers, known, failed_keys)
        new = []
        for c in [*r.tuning, *r.final]:  # each key once: the driver asks after every run
            k = c.key()
            if k not in seen:  # what the cache held when the driver first heard of the run
                seen[k] = c
                n = known.cache.counts([c])  # its key computed once (KnownRuns: the fixed code's keys)
                before["to_train"] += n["to_train"]
                before["cached"] += n["cached"]
                if k not in counted:
                    counted.add(k)
                    new.append(c)
        out.runs_to_do += len(new)
        asked.update((c.key(), c) for c in new)
        if out.progress:
            out.progress.ready(d, r.tuning, r.final)
        if r.chosen_all and chose["at"] is None:
            chose["at"] = time.perf_counter()
            out.timings[f"{d}_tuning_s"] = chose["at"] - t0
            if out.progress:
                out.progress.survivors_known(d, [])
                out.progress.final_known(d, r.final)
            print(
                f"reproduce [{prof}/{d}]: every tuning problem has chosen; {len(r.final)} final runs left to train or "
                "evaluate",
                flush=True,
            )
        return [(c, False) for c in r.tuning] + [(c, True) for c in r.final]

    seen: dict = {}
    first = pipeline.ready_runs(plan.profile, plan.papers, known)
    prepare_once([*first.tuning, *first.final])
    bar = training_bar(out, d, progress)
    try:
        failures = executor.run_as_ready(ready, cache, bar=bar)
    finally:
        bar.close()
    tally(out, d, len(seen), before, cache.counts(list(seen.values())), failures)
    out.timings[f"{d}_train_s"] = time.perf_counter() - t0
    tuning_tables.write_tuning_summary(plan.results_dir, plan.profile, cache, plan.papers)
    return time.time() if plan.todo or len(counted) > len(plan.todo) else None


def notebook_targets(inv: Invocation, plans: list, trained_until: dict, t_start: float) -> list:
    """``[(data, results folder, fresh_after)]``: a notebook re-executes when its inputs changed, when another kind
    of machine executed it, when any run of its data set trained in this invocation (``trained_until``: the time its
    training ended, None when it had no run to do), or always with ``--rerun-notebooks``
    (:func:`reproduce.driver.notebooks.is_current`)."""
    return [(p.data, p.results_dir, t_start if inv.rerun_notebooks else trained_until[p.data]) for p in plans]


def notebooks_due(inv: Invocation, plans: list, targets: list) -> set[str]:
    """The data sets with a notebook to execute (:func:`reproduce.driver.notebooks.is_current`): the ones whose data
    the driver prepares for them."""
    only = notebooks.for_papers(inv.papers)
    return {
        data
        for data, results_dir, fresh_after in targets
        if any(
            not notebooks.is_current(nb, plans[0].profile.name, data, results_dir, fresh_after)
            for nb in notebooks.notebook_paths(only)
        )
    }


def notebooks_all(inv: Invocation, plans: list, targets: list, out: Outcome) -> None:
    """Every data set's notebooks in one pool of ``--workers`` kernels, after all training (one pool: no core
    idles through one data set's last notebook); ``targets``: :func:`notebook_targets`."""
    t = time.perf_counter()
    fails = notebooks.execute_all(
        plans[0].profile.name,
        targets,
        only=notebooks.for_papers(inv.papers),
        progress=inv.progress,
        jobs=inv.workers,
    )
    out.timings["notebooks_s"] = time.perf_counter() - t
    for data, name, tb in fails:
        last = tb.strip().splitlines()[-1] if tb.strip() else "unknown error"
        print(f"notebook failed: {name} [{data}]: {last}", file=sys.stderr)
        out.failed_notebooks.append((data, name, tb))
    log_failures("notebooks", [f"{name} [{data}]\n{tb}" for data, name, tb in fails])


def run(inv: Invocation, asked: dict) -> int:
    """The work of ``inv``: plan, train, execute the notebooks, finish. ``asked`` (``{key: config}``) collects every
    run planned or found, for the line an interrupt prints (:func:`main`)."""
    t0, t_start = time.perf_counter(), time.time()
    # heavy (torch, pandas): --help and usage errors stay light (tests/reproduce/driver/test_cli.py)
    from reproduce.protocol import plan as plan_mod, prepare, progress as progress_mod

    cache = run_cache().RunCache()
    sets = list(inv.data_sets)
    nb_s = 0.0
    if not inv.skip_notebooks:
        nb_s = notebooks.expected_seconds(
            [(d, inv.results_dir(d)) for d in sets],
            notebooks.for_papers(inv.papers),
            inv.workers,
            {d: c["notebooks_s"] for d, c in COSTS.items()},
        )
        nb_s += prepare.analyses_estimate_s(sets)  # the notebooks' data, prepared before them (cold on a fresh cache)
    plan = plan_mod.make_plan(inv.run_profiles(), inv.papers, cache, inv.workers, nb_s, inv.runs_from)
    plans = plan.data_sets  # made once, read by all below, changed by none
    asked.update((c.key(), c) for p in plans for c in [*p.configs, *p.todo])
    announce(inv, plans)
    try:  # room for the runs known now (the final runs of a tuned plan come later)
        run_cache().check_writable(n_runs=plan.runs_known)
    except OSError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    out = Outcome(runs_to_do=plan.runs_known)
    out.progress = progress_mod.start(plan, enabled=inv.progress)  # the plan's lines and its bar
    if inv.dry_run:
        print("reproduce: --dry-run: the plan above; nothing trained, no notebook executed", flush=True)
        return 0
    trained_until = {}
    for p in plans:
        t = time.perf_counter()
        try:
            trained_until[p.data] = train_data_set(inv, p, cache, out, asked)
        except DataSetFailed as exc:  # the other data sets go on; the summary at the end names it
            print(f"reproduce [{p.profile.name}/{p.data}]: {exc}", file=sys.stderr, flush=True)
            out.failed_data.append((p.data, str(exc)))
            trained_until[p.data] = time.time() if p.todo else None
        out.timings[f"{p.data}_total_s"] = time.perf_counter() - t  # preparation, tuning and training
    if not inv.skip_notebooks:
        targets = notebook_targets(inv, plans, trained_until, t_start)
        failed = {d for d, _ in out.failed_data}
        for data in sorted(notebooks_due(inv, plans, targets) - failed, key=list(DATA_SETS).index):
            try:  # what the notebooks compute from the data, once, before their kernels start side by side
                out.timings.update(prepare.prepare_analyses(inv.profiles[data], data, progress=inv.progress))
            except prepare.PrepareError as exc:
                print(f"reproduce [{inv.profile}/{data}]: the notebooks' data not prepared: {exc}", flush=True)
        notebooks_all(inv, plans, targets, out)
    for p in plans:
        print(
            f"reproduce [{p.profile.name}/{p.data}]: "
            + ", ".join(
                f"{k.removeprefix(p.data + '_')} {v:.0f} s"
                for k, v in out.timings.items()
                if k.startswith(p.data + "_")
            ),
            flush=True,
        )
    if "notebooks_s" in out.timings:
        print(f"reproduce [{inv.profile}]: notebooks (every data set, one pool) {out.timings['notebooks_s']:.0f} s")
    return finish(inv, out, t0)


def runs_cached(configs) -> int:
    """How many of ``configs`` (the runs planned or found so far: tuning runs, final runs) have a training entry in
    the cache."""
    cache = run_cache().RunCache()
    return sum(cache.has_training(c) for c in configs)


def build_invocation(args) -> Invocation:
    """The invocation of the parsed command line ``args``, resolved and checked once (``UsageError`` if bad, before
    any work): the profile per data set (:func:`reproduce.spec.profiles.get_profile` with the pilot flag, entered
    here only), the data sets (:func:`reproduce.driver.preflight.validate`), the machine of ``--runs-from``
    (``committed``: the committed archives'; it must have been imported), the engine's setting and, unless only the
    cache is verified, ``--workers auto``. The one function besides :func:`main` that reads ``args``."""
    machine = args.runs_from or os.environ.get(RUNS_FROM_ENV)  # the variable: a driver above this one set it
    name, pilot = args.profile, args.pilot_only or pilot_only()
    base = get_profile(name, pilot_only=pilot)
    profiles = {d: profile_for(base, d) for d in DATA_SETS}
    engine = engine_setting(args.engine, args.pack_width, machine)
    sets, why = validate(base, args.data_sets, args.data_bundle, args.runs_per_worker)
    if machine:
        try:
            committed = machine == COMMITTED
            if committed:
                machine = run_archive().committed_machine(args.profile, sets)
            run_cache().load_machine(paths.cache_dir(create=False), machine)  # imported here, else ValueError
        except ValueError as exc:
            if committed and machine != COMMITTED:  # the archives name it, but it was never imported here
                raise UsageError(
                    f"--runs-from committed: the committed runs (machine {machine}) are not in the run cache "
                    f"{paths.cache_dir(create=False)}; `make runs` imports them (python -m reproduce --import-runs "
                    "results/runs/FILE, each archive)"
                ) from None
            raise UsageError(str(exc)) from None
    workers, why_workers = args.workers, None
    if workers == AUTO and not args.verify_cache:
        # heavy (torch): only --workers auto asks the device
        from reproduce.driver.executors import auto_workers

        workers, why_workers = auto_workers()
    return Invocation(
        profile=args.profile,
        pilot_only=pilot,
        profiles=MappingProxyType(profiles),
        data_sets=tuple(sets),
        data_reasons=tuple(why),
        papers=tuple(args.papers) if args.papers is not None else None,
        executor=args.executor,
        workers=workers,
        runs_per_worker=args.runs_per_worker,
        engine=engine,
        runs_from=machine or None,
        progress=not args.no_progress,
        skip_notebooks=args.skip_notebooks,
        rerun_notebooks=args.rerun_notebooks,
        verify_cache=args.verify_cache,
        dry_run=args.dry_run,
        export_runs=args.export_runs,
        export_embeddings=args.export_embeddings,
        workers_why=why_workers,
    )


def main(argv=None) -> int:
    args = parse_args(argv)

    if importlib.util.find_spec("torch") is None:  # found without importing it (seconds)
        print(NO_ENVIRONMENT.format(name="torch", python=sys.executable), file=sys.stderr)
        return 2
    in_main_thread = threading.current_thread() is threading.main_thread()  # only it may set signal handlers
    previous = {s: signal.signal(s, interrupt) for s in (signal.SIGINT, signal.SIGTERM)} if in_main_thread else {}
    asked: dict = {}  # the runs planned or found so far: what an interrupt counts
    try:
        if args.import_runs:
            return run_archive().import_command(ArchiveOptions(args.profile, import_runs=args.import_runs))
        inv = build_invocation(args)
        os.environ.update(inv.environment())  # once: every RunCache, worker and kernel reads it from here
        if inv.verify_cache:
            return verify()
        if inv.workers_why:
            print(f"reproduce: --workers auto: {inv.workers} ({inv.workers_why})", flush=True)
        with warnings.catch_warnings():
            data_warnings_once()
            status = run(inv, asked)
        if inv.export_runs:
            status = max(status, run_archive().export_command(inv.archive, list(inv.data_sets)))
        return status
    except UsageError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt as exc:  # finished runs are safe in the cache: a rerun trains only the others
        print(f"interrupted: {runs_cached(asked.values())} runs cached, rerun to continue", file=sys.stderr)
        return 128 + getattr(exc, "signum", signal.SIGINT)
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def verify() -> int:
    problems = run_cache().verify_cache()
    for p in problems:
        print(f"reproduce: BAD CACHE ENTRY {p}", flush=True)
    print(
        f"reproduce: cache {paths.cache_dir()} verified: "
        + (
            f"{len(problems)} bad entr{'y' if len(problems) == 1 else 'ies'} (redone by the next run)"
            if problems
            else "every entry intact"
        ),
        flush=True,
    )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
