"""Executors: run a list of training configs into the run cache, locally or on a Ray cluster.

The unit of work is one Python call, ``RunCache(root).get_or_train(config)`` — never a notebook —
so any executor can run any subset, in any order, and every finished run is safe on disk the
moment it completes (the cache writes atomically). A failing run is recorded with its config
and traceback; the others still run. What runs inside a worker (a task's functions, the worker's
death with the driver, its loaded data) is :mod:`reproduce.driver.worker`; here is the driver's
side: which runs go out in which tasks, to which pool, and what came back.
"""

from __future__ import annotations

import contextlib
import multiprocessing as mp
import os
import signal
import threading
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait

import torch
from tqdm.auto import tqdm

from coherent_itr.config import Config
from coherent_itr.packed import pack_groups
from coherent_itr.runs import RunCache, default_threads

from reproduce.driver.worker import RunFailure, init_worker, run_one, run_pack, run_packed
from reproduce.spec.profiles import COSTS, run_seconds


def failure_summary(failures: list[RunFailure], shown: int = 3) -> list[str]:
    """The lines of the end-of-study summary: the failures grouped by their error, most frequent first, each
    with how many runs it stopped and the first ``shown`` of them by name."""
    groups: dict[str, list[RunFailure]] = {}
    for f in failures:
        groups.setdefault(f.error.splitlines()[0] if f.error else "unknown error", []).append(f)
    lines = []
    for error, fs in sorted(groups.items(), key=lambda kv: -len(kv[1])):
        names = "; ".join(f.name for f in fs[:shown]) + (f"; and {len(fs) - shown} more" if len(fs) > shown else "")
        lines.append(f"  {len(fs)} run(s): {error} ({names})")
    return lines


@contextlib.contextmanager
def _children_ignore_sigint():
    """Processes started inside ignore SIGINT from their first instruction (an ignored signal stays ignored
    across exec, and Python then installs no KeyboardInterrupt handler): a terminal's Ctrl-C, sent to the whole
    process group, then prints no traceback per worker. Only the main thread can change signal handlers."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def packs(todo: list, workers: int, per_worker: int) -> list[list]:
    """``todo`` (ordered longest first) in packs of at most ``per_worker`` consecutive runs, trained side by side
    by one worker: as few packs as that allows, but at least one per worker while there are runs for them, so
    no worker idles while another holds two; neighbours in the order have similar lengths, so a pack's threads
    finish at about the same time."""
    if workers < 1 or per_worker < 1:
        raise ValueError(f"workers and runs per worker must be ≥ 1; got {workers} and {per_worker}")
    n = len(todo)
    if n == 0:
        return []
    count = max(-(-n // per_worker), min(n, workers))
    size, extra = divmod(n, count)
    out, start = [], 0
    for j in range(count):
        end = start + size + (1 if j < extra else 0)
        out.append(todo[start:end])
        start = end
    return out


def _advance(bar, config_dict: dict) -> None:
    """One run finished: a driver's bar that prices runs (``reproduce.protocol.progress.RunProgress``) is told which."""
    if hasattr(bar, "run_done"):
        bar.run_done(config_dict)
    else:
        bar.update(1)


def longest_first(configs: list[Config]) -> list[Config]:
    """``configs`` ordered by their expected run time, longest first (:func:`reproduce.spec.profiles.run_seconds`;
    ties keep the given order; a data set without measured costs is priced as the synthetic world). Runs are
    independent, so the order changes no number — only how well the workers' last minutes are packed: a long
    run started last would leave the other workers idle."""

    def cost(c) -> float:
        return run_seconds(c, c.data if c.data in COSTS else "synthetic")

    return sorted(configs, key=cost, reverse=True)


@contextlib.contextmanager
def worker_pool(workers: int):
    """A pool of ``workers`` spawned worker processes (:func:`init_worker`), shut down on leaving. Interrupted
    (Ctrl-C, or SIGTERM turned into KeyboardInterrupt by the driver), it stops the workers too, so no orphan keeps
    training; finished runs are already safe in the cache."""
    pool = ProcessPoolExecutor(
        workers, mp_context=mp.get_context("spawn"), initializer=init_worker, initargs=(os.getpid(),)
    )
    try:
        yield pool
    except BaseException:
        for proc in list(getattr(pool, "_processes", {}).values()):
            proc.terminate()
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()


class LocalExecutor:
    """Runs configs in this process (``workers=1``) or in a pool of worker processes; ``runs_per_worker`` > 1
    trains packs of that many runs side by side in each (:func:`packs`, :func:`run_pack`: threads, each run on
    its own CUDA stream), for a GPU whose kernels one run leaves mostly idle."""

    def __init__(self, workers: int = 1, progress: bool = True, runs_per_worker: int = 1) -> None:
        if workers < 1:
            raise ValueError(f"workers must be ≥ 1, got {workers}")
        if runs_per_worker < 1:
            raise ValueError(f"runs per worker must be ≥ 1, got {runs_per_worker}")
        self.workers, self.progress, self.runs_per_worker = workers, progress, runs_per_worker

    def run(
        self, configs: list[Config], cache: RunCache, bar: tqdm | None = None, evaluate: bool = True
    ) -> list[RunFailure]:
        """Train ``configs`` (and evaluate them unless ``evaluate=False``); ``bar``: a progress bar to advance
        by one per finished run (else its own)."""
        root = str(cache.root.parent)
        serial = self.workers == 1 and self.runs_per_worker == 1
        todo = [c.to_dict() for c in (configs if serial else longest_first(configs))]
        task = run_pack
        if cache.engine is not None:  # packed engine: runs that can share a pack train as one model
            listed = [Config.from_dict(cd) for cd in todo]
            groups = [[todo[i] for i in g] for g in pack_groups(listed, cache.engine["width"])]
            task = run_packed
        else:
            groups = packs(todo, self.workers, self.runs_per_worker)
        # the driver's key of each run: a worker whose code differs refuses it (check_key)
        keys = [[cache.train_key(Config.from_dict(cd)) for cd in pack] for pack in groups]
        failures: list[RunFailure] = []
        own_bar = bar is None
        if own_bar:
            bar = tqdm(total=len(todo), desc="training runs", unit="run", disable=not self.progress)

        def finished(pack: list[dict], results: list) -> None:
            for cd, f in zip(pack, results):
                if f:
                    failures.append(f)
                _advance(bar, cd)

        if self.workers == 1:
            for pack, pack_keys in zip(groups, keys):
                finished(pack, task(pack, root, cache.threads, evaluate, pack_keys))
        else:
            with worker_pool(self.workers) as pool:
                with _children_ignore_sigint():  # Ctrl-C reaches the driver alone, which stops the workers
                    futs = {
                        pool.submit(task, pack, root, cache.threads, evaluate, pack_keys): pack
                        for pack, pack_keys in zip(groups, keys)
                    }
                for fut in as_completed(futs):
                    finished(futs[fut], fut.result())
        if own_bar:
            bar.close()
        return failures

    def run_as_ready(self, ready, cache: RunCache, bar: tqdm | None = None) -> list[RunFailure]:
        """Train runs as they become ready (:class:`AsReady`: ``ready(failed_keys)`` returns ``[(config, evaluate)]``,
        asked again whenever a task finishes; each free worker takes the longest ready runs not in flight), one task a
        worker: a run, a pack of the packed engine, or ``runs_per_worker`` runs side by side (:func:`run_pack`). One
        pool of worker processes serves every phase, so a worker keeps its loaded data. ``bar``: advanced by one per
        finished run."""
        todo = AsReady(ready, cache, bar, self.runs_per_worker, self.progress, "training runs")
        if self.workers == 1:
            while tasks := todo.next_tasks(1):
                todo.start(None, tasks[0])
                fn, args = todo.call(tasks[0])
                todo.finish(None, fn(*args))
        else:
            with worker_pool(self.workers) as pool:
                while True:
                    for task in todo.next_tasks(self.workers - len(todo.flying)):
                        fn, args = todo.call(task)
                        with _children_ignore_sigint():  # a worker may start here: Ctrl-C reaches the driver alone
                            todo.start(pool.submit(fn, *args), task)
                    if not todo.flying:
                        break
                    for fut in wait(list(todo.flying), return_when=FIRST_COMPLETED).done:
                        todo.finish(fut, fut.result())
        return todo.close()


class AsReady:
    """The bookkeeping of an executor's ``run_as_ready`` (:mod:`reproduce.protocol.pipeline`): which runs are ready
    and not in flight, in which tasks, and what came of them.

    ``ready(failed_keys)`` returns ``[(config, evaluate)]``, every run that can train now (those in flight among them
    are left to finish); it is asked again for every batch of tasks. Runs go out longest first (:func:`longest_first`)
    in tasks: one run, a pack of the packed engine (``cache.engine``: runs that can share a pack,
    :func:`coherent_itr.packed.pack_groups`), or up to ``per_task`` runs side by side (:func:`run_pack`); a task
    never mixes runs to evaluate with runs that are not. A run that finished yet is asked for again (the cache does
    not show it) is a failure, never trained again. ``bar``: advanced by one per finished run (else its own).
    ``check_keys``: a worker refuses a run whose key differs from the driver's (:func:`check_key`)."""

    def __init__(
        self, ready, cache: RunCache, bar, per_task: int = 1, progress: bool = True, desc: str = "", check_keys=True
    ) -> None:
        self.ready, self.cache, self.per_task, self.check_keys = ready, cache, per_task, check_keys
        self.root = str(cache.root.parent)
        self.failures: list[RunFailure] = []
        self.failed: set[str] = set()
        self.finished: set[tuple[str, bool]] = set()
        self.flying: dict = {}  # a handle (a future, an object ref, None in this process) -> [(config, evaluate)]
        self.own_bar = bar is None
        self.bar = tqdm(total=0, desc=desc, unit="run", disable=not progress) if self.own_bar else bar

    def next_runs(self) -> list[tuple[Config, bool]]:
        """The ready runs not in flight, failed or finished, longest first."""
        busy = {c.key() for task in self.flying.values() for c, _ in task}
        todo = {}
        for c, evaluate in self.ready(self.failed):
            k = c.key()
            if k in busy or k in self.failed or k in todo:
                continue
            if (k, evaluate) in self.finished:  # it finished, yet the cache does not show it: never again
                self.failures.append(
                    RunFailure(
                        c.to_dict(),
                        "RuntimeError: finished, yet the protocol asks for it again (the cache does not show it)",
                        "",
                    )
                )
                self.failed.add(k)
                continue
            todo[k] = (c, evaluate)
        return [todo[c.key()] for c in longest_first([c for c, _ in todo.values()])]

    def next_tasks(self, n: int) -> list[list[tuple[Config, bool]]]:
        """Up to ``n`` tasks, the one with the longest run first."""
        if n <= 0:
            return []
        runs = self.next_runs()
        tasks = []
        for wanted in (True, False):
            same = [r for r in runs if r[1] is wanted]
            tasks += [[same[i] for i in g] for g in self._groups(same, n)]
        first = {c.key(): i for i, (c, _) in enumerate(runs)}
        return sorted(tasks, key=lambda t: first[t[0][0].key()])[:n]

    def _groups(self, runs: list, n: int) -> list[list[int]]:
        """The indices of ``runs`` (longest first) by task: the packed engine's packs, else consecutive runs, at
        most ``per_task`` a task and at least one task per free worker (``n``) while there are runs (:func:`packs`)."""
        if not runs:
            return []
        if self.cache.engine is not None:
            return pack_groups([c for c, _ in runs], self.cache.engine["width"])
        return packs(list(range(len(runs))), n, self.per_task)

    def call(self, task) -> tuple:
        """``(function, arguments)`` that train ``task`` in a worker and return one failure or None per run."""
        dicts = [c.to_dict() for c, _ in task]
        keys = [self.cache.train_key(c) for c, _ in task] if self.check_keys else None
        fn = run_packed if self.cache.engine is not None else run_pack
        return fn, (dicts, self.root, self.cache.threads, task[0][1], keys)

    def start(self, handle, task) -> None:
        self.flying[handle] = task

    def finish(self, handle, results: list) -> None:
        """The task of ``handle`` ended with ``results`` (what :meth:`call`'s function returned)."""
        for (c, evaluate), f in zip(self.flying.pop(handle), results):
            self.finished.add((c.key(), evaluate))
            if f:
                self.failures.append(f)
                self.failed.add(c.key())
            if self.own_bar:
                self.bar.total += 1
            _advance(self.bar, c.to_dict())

    def close(self) -> list[RunFailure]:
        """The failures, once nothing is in flight (the bar closed if it is this object's)."""
        if self.own_bar:
            self.bar.close()
        return self.failures


class RayExecutor:
    """Each run a Ray task (``num_gpus=1`` when the cluster has GPUs), all writing one shared cache.

    ``address=None`` starts a local Ray instance with ``num_cpus`` CPUs; pass the cluster address
    (e.g. ``"auto"``) on a cluster, where the cache root must be on a shared file system.
    """

    def __init__(self, address: str | None = None, num_cpus: int | None = None, progress: bool = True) -> None:
        self.address, self.num_cpus, self.progress = address, num_cpus, progress

    @contextlib.contextmanager
    def _session(self, cache: RunCache):
        """``(ray, tasks, slots)``: Ray, started here unless it already runs (and then shut down on leaving); the run
        functions as Ray tasks of one run's resources (a GPU when the cluster has GPUs, ``cache.threads`` CPUs); and
        how many such tasks the cluster runs at once."""
        import ray  # optional: only the Ray executor needs Ray

        started = False
        if not ray.is_initialized():
            kw = dict(address=self.address) if self.address else dict(num_cpus=self.num_cpus, include_dashboard=False)
            ray.init(ignore_reinit_error=True, log_to_driver=False, **kw)
            started = True
        try:
            resources = ray.cluster_resources()
            gpus = int(resources.get("GPU", 0))
            remote = ray.remote(num_gpus=1 if gpus else 0, num_cpus=cache.threads)
            tasks = {fn: remote(fn) for fn in (run_one, run_pack, run_packed)}
            yield ray, tasks, max(1, gpus or int(resources.get("CPU", 1) // cache.threads))
        finally:
            if started:
                ray.shutdown()

    def run(
        self, configs: list[Config], cache: RunCache, bar: tqdm | None = None, evaluate: bool = True
    ) -> list[RunFailure]:
        with self._session(cache) as (ray, tasks, _):
            root = str(cache.root.parent)
            dicts = {}
            for c in longest_first(configs):
                dicts[tasks[run_one].remote(c.to_dict(), root, cache.threads, evaluate)] = c.to_dict()
            pending = list(dicts)
            failures: list[RunFailure] = []
            own_bar = bar is None
            if own_bar:
                bar = tqdm(total=len(pending), desc="training runs (ray)", unit="run", disable=not self.progress)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                f = ray.get(done[0])
                if f:
                    failures.append(f)
                _advance(bar, dicts[done[0]])
            if own_bar:
                bar.close()
            return failures

    def run_as_ready(self, ready, cache: RunCache, bar: tqdm | None = None) -> list[RunFailure]:
        """Train runs as they become ready, as :meth:`LocalExecutor.run_as_ready` does (:class:`AsReady`), each task
        a Ray task, at most as many in flight as the cluster has GPUs (else CPUs at ``cache.threads`` a run). The
        driver's keys are not checked in the tasks: another machine's device may give other keys (:func:`check_key`).
        ``bar``: advanced by one per finished run."""
        todo = AsReady(ready, cache, bar, 1, self.progress, "training runs (ray)", check_keys=False)
        with self._session(cache) as (ray, tasks, slots):
            while True:
                for task in todo.next_tasks(slots - len(todo.flying)):
                    fn, args = todo.call(task)
                    todo.start(tasks[fn].remote(*args), task)
                if not todo.flying:
                    break
                (ref,), _ = ray.wait(list(todo.flying), num_returns=1)
                todo.finish(ref, ray.get(ref))
        return todo.close()


# processes sharing one GPU under --workers auto: on one H200 with 16 cores, 16 processes training eagerly gave 6,290
# synthetic epochs an hour against 637 for one process and 3,873 for 8 (docs/compute.md, "Runs side by side")
GPU_WORKERS = 16


def auto_workers(cuda: bool | None = None, cores: int | None = None, threads: int | None = None) -> tuple[int, str]:
    """``--workers auto``: (the count, why). With a CUDA device, one process per CPU core up to :data:`GPU_WORKERS`
    sharing it; on a CPU, one per core at the run's threads (``$COHERENT_ITR_THREADS``, 1). Defaults: this machine."""
    cores = cores or os.cpu_count() or 1
    if cuda if cuda is not None else torch.cuda.is_available():
        n = min(GPU_WORKERS, cores)
        return n, f"{n} processes sharing the CUDA device (one per CPU core, at most {GPU_WORKERS})"
    threads = threads or default_threads()
    n = max(1, cores // threads)
    return n, f"one per CPU core at {threads} thread(s) a run ({cores} cores)"


def make_executor(name: str, workers: int = 1, progress: bool = True, runs_per_worker: int = 1):
    if name == "local":
        return LocalExecutor(workers=workers, progress=progress, runs_per_worker=runs_per_worker)
    if runs_per_worker != 1:
        raise ValueError(f"runs per worker > 1 needs the local executor; {name!r} runs one run a task")
    if name == "ray":  # a running cluster when $RAY_ADDRESS is set (its nodes say how many CPUs), else a local Ray
        address = os.environ.get("RAY_ADDRESS") or None
        return RayExecutor(address=address, num_cpus=None if address or workers == 1 else workers, progress=progress)
    raise ValueError(f"unknown executor {name!r}; choose 'local' or 'ray'")
