"""The worker's side of the executors (:mod:`reproduce.driver.executors`): what runs inside a worker process (or a
Ray task) to train configs into the run cache, and how a worker dies with its driver.

A task is one call that hands back one :class:`RunFailure` or None per run, never raising: :func:`run_one` (a run),
:func:`run_pack` (runs side by side in one process, each in a thread of its own) and :func:`run_packed` (runs that
share a pack of the packed engine, trained as one model). A worker loads each data set once for all its runs
(:func:`_splits_for`) and refuses a run whose key differs from the driver's (:func:`check_key`).

Local worker processes die with the driver whatever kills it, SIGKILL included: each asks the
Linux kernel for a parent-death signal (``prctl(PR_SET_PDEATHSIG, SIGTERM)``) and, on every
platform, a watcher thread ends the worker once its parent process is gone.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
import traceback
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from coherent_itr import data as data_mod
from coherent_itr.config import Config
from coherent_itr.runs import RunCache, pinned_threads

from reproduce.protocol.prepare import train_rows

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


def run_one(
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


def run_packed(
    config_dicts: list[dict], cache_root: str, threads: int, evaluate: bool = True, keys: list | None = None
) -> list:
    """Train configs that can share a pack (:func:`coherent_itr.packed.pack_groups`) as one packed model into the
    cache of the packed engine (``$COHERENT_ITR_ENGINE``), and evaluate each unless ``evaluate=False``; return, in
    order, what :func:`run_one` returns for each (a failure of the pack is every member's)."""
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


def run_pack(
    config_dicts: list[dict], cache_root: str, threads: int, evaluate: bool = True, keys: list | None = None
) -> list:
    """Train several configs side by side in this process, one thread each (on CUDA each on its own stream), and
    return what :func:`run_one` returns for each, in order. The numbers are those of the runs one after another:
    they share only the loaded data, which training reads and never writes; ``train`` seeds and builds each
    model under one lock; and the process's thread counts are set once for the pack (``threads`` must be 1, so
    that no run's pinning changes another's). ``keys``: the driver's training key of each (:func:`check_key`)."""
    keys = list(keys) if keys is not None else [None] * len(config_dicts)
    if len(config_dicts) == 1:
        return [run_one(config_dicts[0], cache_root, threads, evaluate, keys[0])]
    if threads != 1:
        raise ValueError(f"runs side by side in one process need 1 intra-op thread a run; the cache has {threads}")
    with pinned_threads(threads):
        results = side_by_side(
            lambda i: run_one(config_dicts[i], cache_root, threads, evaluate, keys[i]), len(config_dicts)
        )
    return [  # run_one hands back its failures; a thread that ended without one is a failure too
        RunFailure(cd, f"{type(r).__name__}: {r}", "") if isinstance(r, BaseException) else r
        for cd, r in zip(config_dicts, results)
    ]
