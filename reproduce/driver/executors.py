"""Executors: run a list of training configs into the run cache, locally or on a Ray cluster.

The unit of work is one Python call, ``RunCache(root).get_or_train(config)`` — never a notebook —
so any executor can run any subset, in any order, and every finished run is safe on disk the
moment it completes (the cache writes atomically). A failing run is recorded with its config
and traceback; the others still run.

Local worker processes die with the driver whatever kills it, SIGKILL included: each asks the
Linux kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``) and, on every
platform, a watcher thread ends the worker once its parent process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing as mp
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, as_completed, wait
from dataclasses import dataclass

import numpy as np
import torch
from tqdm.auto import tqdm

from coherent_itr import data as data_mod
from coherent_itr.config import Config
from coherent_itr.packed import pack_groups
from coherent_itr.runs import RunCache, default_threads, pinned_threads

from reproduce.protocol.prepare import train_rows
from reproduce.spec.profiles import COSTS, run_seconds

PARENT_POLL_S = 1.0  # how often a worker checks that the driver is still alive (fallback to prctl)
JOIN_POLL_S = 0.2  # how often a pack's waiting thread wakes to run a pending signal's handler (Ctrl-C)


@dataclass
class RunFailure:
    config: dict
    error: str
    traceback: str

    def __str__(self) -> str:
        return f"run failed: {self.error}\n  config: {self.config}\n{self.traceback}"

    @property
    def name(self) -> str:
        """The run in a few words: its data set, loss, lr and seed (the fields the config has)."""
        c = self.config
        parts = [str(c[k]) for k in ("data", "loss") if c.get(k) is not None]
        parts += [f"{k} {c[k]:g}" if isinstance(c[k], float) else f"{k} {c[k]}" for k in ("lr", "seed") if k in c]
        return " ".join(parts) or "a run"

    def line(self) -> str:
        """One line: the run and the first line of its error (the traceback goes to the failure log)."""
        return f"run failed: {self.name}: {self.error.splitlines()[0] if self.error else 'unknown error'}"


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


def _watch_parent(parent_pid: int) -> None:
    while True:
        if os.getppid() != parent_pid:  # reparented: the driver is gone
            os._exit(1)
        time.sleep(PARENT_POLL_S)


def die_with_parent(parent_pid: int) -> None:
    """Worker initializer: end this process when ``parent_pid`` (the driver) dies, by any signal.

    On Linux the kernel sends SIGTERM at the parent's death (``PR_SET_PDEATHSIG``); everywhere a
    daemon thread polls ``os.getppid()``. A parent that died before this ran is caught by the first
    poll, which happens at once."""
    if sys.platform.startswith("linux"):
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            PR_SET_PDEATHSIG = 1
            libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)
        except (OSError, AttributeError):  # pragma: no cover — the polling thread still covers it
            pass
    threading.Thread(target=_watch_parent, args=(parent_pid,), name="die-with-parent", daemon=True).start()


def init_worker(parent_pid: int) -> None:
    """Worker initializer: die with the driver (``die_with_parent``), give progress bars a thread lock, and leave
    the Flickr8k release's warnings to the driver, which reports each once while preparing the data.

    tqdm guards its bars with a cross-process lock, created at a process's first bar. In a spawned worker that
    is a named semaphore registered with multiprocessing's resource tracker; a worker stopped by the driver
    (Ctrl-C, SIGTERM) never unregisters it, and the tracker then warns of "leaked semaphore objects" at exit.
    A worker's bars are off (runs train with ``progress=False``) and share no terminal with another process,
    so a thread lock is all they need (``tqdm.set_lock``, tqdm's API for this)."""
    from tqdm.std import tqdm as base_tqdm  # every tqdm class (auto, notebook, asyncio) inherits its lock

    # the workers load the data module anyway; the driver has reported the release's warnings while preparing
    from coherent_itr.data.flickr8k import Flickr8kWarning

    die_with_parent(parent_pid)
    base_tqdm.set_lock(threading.RLock())
    warnings.filterwarnings("ignore", category=Flickr8kWarning)  # one copy per worker said nothing new


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


_SPLITS: dict[tuple, object] = {}  # this worker's loaded data sets, by what determines them
_SPLITS_LOCK = threading.Lock()  # the runs of a pack (threads) load a data set once between them


def _splits_for(config, cache_root: str, threads: int):
    """The data splits of ``config``, loaded once per worker process and data source (Flickr8k: 1.6–2.2 s a
    load — parsing the captions and judgements and reading the features — which every run used to repay).
    Training and evaluation only read them (a test trains runs with shared and with fresh splits and compares
    the numbers); a run's own subset (``train_fraction``) is taken from them inside ``train``. Flickr8k's
    training images come with the features the cache holds (the driver's preparation computed the plan's);
    a run whose subset lacks some has them computed here (and cached) before it trains."""
    with _SPLITS_LOCK:
        return _load_splits(config, cache_root, threads)


def _load_splits(config, cache_root: str, threads: int):
    key = (config.data, config.data_dir, config.data_scale, config.data_seed, cache_root)
    load = dict(data_dir=config.data_dir, scale=config.data_scale, seed=config.data_seed, cache_dir=cache_root)
    if key not in _SPLITS:
        _SPLITS.clear()  # one data source at a time: a worker never holds two copies of Flickr8k
        with pinned_threads(threads):  # as inside ``train``: a generated world is built with the run's threads
            _SPLITS[key] = data_mod.load_splits(config.data, train_images="cached", **load)
    train = _SPLITS[key].train
    rows = train_rows(config, train.n_images)
    if not np.isfinite(train.features[rows]).all():  # Flickr8k images no earlier run needed
        with pinned_threads(threads):
            _SPLITS[key] = data_mod.load_splits(config.data, train_images=[train.image_ids[i] for i in rows], **load)
    return _SPLITS[key]


class KeyMismatch(RuntimeError):
    """A worker would store a run under another key than the driver planned it under."""


def check_key(cache: RunCache, config: Config, expected: str | None) -> None:
    """Raise :class:`KeyMismatch` unless ``config``'s training key in this process is ``expected`` (the key the
    driver computed; ``None``: nothing to compare, e.g. a Ray task on another machine, whose device may differ).

    A worker process imports the library when it starts; a library file edited after the driver started (and not
    declared neutral, :mod:`reproduce.driver.code_identity`) then gives the worker's runs keys that the driver never
    asks for: they would train, be stored where no later driver looks, and train again."""
    if expected is None:
        return
    got = cache.train_key(config)
    if got != expected:
        raise KeyMismatch(
            f"this worker's training key {got} is not the driver's {expected}: the code or environment changed after "
            "the driver started (a library file edited? `python -m reproduce.driver.code_identity` names undeclared "
            "edits); nothing trained — restart the driver"
        )


def _run_one(
    config_dict: dict, cache_root: str, threads: int, evaluate: bool = True, expected_key: str | None = None
) -> RunFailure | None:
    """Train one config into the cache with ``threads`` intra-op threads (the driver's cache's count: it is part
    of the run key, and :meth:`RunCache.get_or_train` pins torch and BLAS to it); return a RunFailure instead of
    raising. The data splits are loaded once per worker (:func:`_splits_for`). ``expected_key``: the training key
    the driver computed for it (:func:`check_key`)."""
    try:
        config = Config.from_dict(config_dict)
        cache = RunCache(cache_root, threads=threads)
        check_key(cache, config, expected_key)
        needed = not (cache.has(config) if evaluate else cache.has_training(config))
        splits = _splits_for(config, cache_root, threads) if needed else None
        cache.get_or_train(config, progress=False, evaluate=evaluate, splits=splits)
        return None
    except Exception as exc:  # noqa: BLE001 — reported with config and traceback, never swallowed
        return RunFailure(config_dict, f"{type(exc).__name__}: {exc}", traceback.format_exc())


def _run_packed(
    config_dicts: list[dict], cache_root: str, threads: int, evaluate: bool = True, keys: list | None = None
) -> list:
    """Train configs that can share a pack (:func:`coherent_itr.packed.pack_groups`) as one packed model into the
    cache of the packed engine (``$COHERENT_ITR_ENGINE``), and evaluate each unless ``evaluate=False``; return, in
    order, what :func:`_run_one` returns for each (a failure of the pack is every member's)."""
    try:
        configs = [Config.from_dict(cd) for cd in config_dicts]
        cache = RunCache(cache_root, threads=threads)
        if cache.engine is None:
            raise RuntimeError("a pack needs the packed engine's cache: COHERENT_ITR_ENGINE=pack:<width> (--engine)")
        for c, k in zip(configs, keys if keys is not None else [None] * len(configs)):
            check_key(cache, c, k)
        needed = any(not (cache.has(c) if evaluate else cache.has_training(c)) for c in configs)
        splits = _splits_for(configs[0], cache_root, threads) if needed else None
        cache.get_or_train_pack(configs, progress=False, splits=splits, evaluate=evaluate)
        return [None] * len(configs)
    except Exception as exc:  # noqa: BLE001 — reported with config and traceback, never swallowed
        tb = traceback.format_exc()
        return [RunFailure(cd, f"{type(exc).__name__}: {exc}", tb) for cd in config_dicts]


@contextlib.contextmanager
def _own_stream():
    """On a CUDA machine, the calling thread's work goes to a new stream of its own (the kernels of runs trained
    side by side may then overlap on the GPU); elsewhere nothing changes."""
    if not torch.cuda.is_available():
        yield
        return
    with torch.cuda.stream(torch.cuda.Stream()):
        yield


RUN_THREAD = "run-"  # the name of side_by_side's threads, before their index


def runs_left() -> bool:
    """Whether a thread of :func:`side_by_side` is still alive in this process (a Ctrl-C left its run mid-step)."""
    return any(t.is_alive() and t.name.startswith(RUN_THREAD) for t in threading.enumerate())


def side_by_side(work, n: int) -> list:
    """``work(i)`` for every ``i < n`` at once, each in a daemon thread whose work goes to a CUDA stream of its own
    (:func:`_own_stream`); returns, in order, what each returned or the exception it raised (a ``RuntimeError``
    where its thread ended without either). Daemon threads: a Ctrl-C in the calling process ends it at once instead
    of waiting for the work (what a run had not stored is lost, as when a worker process stops; the cache writes
    atomically)."""
    results: list = [RuntimeError("the run's thread ended without a result") for _ in range(n)]

    def one(i: int) -> None:
        try:
            with _own_stream():
                results[i] = work(i)
        except Exception as exc:  # noqa: BLE001 — handed back in its place
            results[i] = exc

    workers = [threading.Thread(target=one, args=(i,), name=f"{RUN_THREAD}{i}", daemon=True) for i in range(n)]
    for w in workers:
        w.start()
    for w in workers:
        while w.is_alive():  # in short waits: a Ctrl-C the kernel hands to another thread still reaches this one
            w.join(JOIN_POLL_S)
    return results


def _run_pack(
    config_dicts: list[dict], cache_root: str, threads: int, evaluate: bool = True, keys: list | None = None
) -> list:
    """Train several configs side by side in this process, one thread each (on CUDA each on its own stream), and
    return what :func:`_run_one` returns for each, in order. The numbers are those of the runs one after another:
    they share only the loaded data, which training reads and never writes; ``train`` seeds and builds each
    model under one lock; and the process's thread counts are set once for the pack (``threads`` must be 1, so
    that no run's pinning changes another's). ``keys``: the driver's training key of each (:func:`check_key`)."""
    keys = list(keys) if keys is not None else [None] * len(config_dicts)
    if len(config_dicts) == 1:
        return [_run_one(config_dicts[0], cache_root, threads, evaluate, keys[0])]
    if threads != 1:
        raise ValueError(f"runs side by side in one process need 1 intra-op thread a run; the cache has {threads}")
    with pinned_threads(threads):
        results = side_by_side(
            lambda i: _run_one(config_dicts[i], cache_root, threads, evaluate, keys[i]), len(config_dicts)
        )
    return [  # _run_one hands back its failures; a thread that ended without one is a failure too
        RunFailure(cd, f"{type(r).__name__}: {r}", "") if isinstance(r, BaseException) else r
        for cd, r in zip(config_dicts, results)
    ]


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
    trains packs of that many runs side by side in each (:func:`packs`, :func:`_run_pack`: threads, each run on
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
        task = _run_pack
        if cache.engine is not None:  # packed engine: runs that can share a pack train as one model
            listed = [Config.from_dict(cd) for cd in todo]
            groups = [[todo[i] for i in g] for g in pack_groups(listed, cache.engine["width"])]
            task = _run_packed
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
        worker: a run, a pack of the packed engine, or ``runs_per_worker`` runs side by side (:func:`_run_pack`). One
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
    :func:`coherent_itr.packed.pack_groups`), or up to ``per_task`` runs side by side (:func:`_run_pack`); a task
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
        fn = _run_packed if self.cache.engine is not None else _run_pack
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
            tasks = {fn: remote(fn) for fn in (_run_one, _run_pack, _run_packed)}
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
                dicts[tasks[_run_one].remote(c.to_dict(), root, cache.threads, evaluate)] = c.to_dict()
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
