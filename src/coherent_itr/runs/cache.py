"""The run cache (:mod:`coherent_itr.runs`): :class:`RunCache`, every run stored once under its key, trained under a
per-key file lock on a miss; the machines whose runs were imported; checks of a whole cache.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from .. import paths
from ..config import Config
from ..io import atomic_save_npz, atomic_write_json
from .identity import (
    RUNS_FROM_ENV,
    capture_failure,
    default_threads,
    device_type,
    engine_from_env,
    eval_key,
    evaluation_code_hash,
    local_numerics,
    machine_id,
    pinned_threads,
    run_key,
    training_code_hash,
)
from .store import (
    EVAL_FILES,
    TRAIN_FILES,
    CacheEntryError,
    CaptureFellBack,
    ImportedRunMissing,
    SlimArrays,
    _read_json,
    _read_npz,
    _report,
    embeddings_sha256,
    is_slim,
    verify_entry,
    write_entry,
)

MACHINES_DIR = "machines"  # under <root>/runs/: the numerics of machines whose runs were imported
DEFAULT_BYTES_PER_RUN = 32 * 2**20  # free-space estimate when the cache holds no entry yet


# ----------------------------------------------------------------------------- the cache
class RunCache:
    """On-disk store of finished runs under ``root`` (default :func:`paths.cache_dir`).

    ``threads`` is the intra-op thread count every run of this cache trains and evaluates with
    (default ``$COHERENT_ITR_THREADS`` or 1); it is part of the training key."""

    def __init__(
        self,
        root: str | os.PathLike | None = None,
        threads: int | None = None,
        machine: str | None = None,
        engine: dict | None | str = "env",
    ) -> None:
        self.root = paths.cache_dir(root) / "runs"
        # the engine its runs train with (and are looked up under): :data:`ENGINE_ENV` unless given
        self.engine = engine_from_env() if engine == "env" else engine
        self.threads = int(threads) if threads is not None else default_threads()
        if self.threads < 1:
            raise ValueError(f"RunCache threads must be ≥ 1, got {threads!r}")
        self.machine_name = machine if machine is not None else (os.environ.get(RUNS_FROM_ENV) or None)
        self.machine = load_machine(self.root.parent, self.machine_name) if self.machine_name else None
        self._keys: dict[str, str] | None = None  # config key -> training key, in a cache with_fixed_code()

    def with_fixed_code(self) -> "RunCache":
        """This cache with each config's training key computed once: for a caller whose code does not change while
        it asks (the driver between runs: ``reproduce.protocol.pipeline.KnownRuns`` asks for hundreds of keys after
        every run). A notebook that registers or edits a loss keeps the plain cache, whose keys follow the code."""
        other = copy.copy(self)
        other._keys = {}
        return other

    # keys and paths -----------------------------------------------------------------------
    def engine_of(self, config: Config) -> dict | None:
        """The engine a run of ``config`` trains with in this cache: its packed engine, unless the packed engine
        cannot train that config (:func:`coherent_itr.packed.solo_reason`: it trains solo, under its solo key)."""
        if self.engine is None:
            return None
        from ..packed import solo_reason  # a packed cache only

        return None if solo_reason(config) else self.engine

    def train_key(self, config: Config) -> str:
        if self._keys is None:
            return run_key(config, self.threads, self.machine, self.engine_of(config))
        k = config.key()
        if k not in self._keys:
            self._keys[k] = run_key(config, self.threads, self.machine, self.engine_of(config))
        return self._keys[k]

    def eval_key(self, config: Config) -> str:
        return eval_key(self.train_key(config))

    def train_path(self, config: Config) -> Path:
        return self.root / "train" / self.train_key(config)

    def eval_path(self, config: Config) -> Path:
        return self.root / "eval" / self.eval_key(config)

    path = train_path

    # queries ------------------------------------------------------------------------------
    def _valid(self, kind: str, path: Path) -> bool:
        problem = verify_entry(path, TRAIN_FILES if kind == "training" else EVAL_FILES)
        if problem is None:
            return True
        if problem != "missing":
            _report(kind, path, problem)
        return False

    def has_training(self, config: Config) -> bool:
        """A verified training entry of ``config`` exists (evaluation may still be missing)."""
        return self._valid("training", self.train_path(config))

    def has(self, config: Config) -> bool:
        """Both the training and the evaluation entry of ``config`` exist and verify (and the
        evaluation was computed from the stored embeddings)."""
        return self.has_training(config) and self._load_metrics(config) is not None

    def counts(self, configs) -> dict[str, int]:
        """``planned``, ``to_train`` (no valid training entry), ``to_evaluate`` (trained, not evaluated)
        and ``cached`` (both entries valid) for a plan of configs."""
        configs = list(configs)
        trained = [self.has_training(c) for c in configs]
        evaluated = [t and self._load_metrics(c) is not None for t, c in zip(trained, configs)]
        return {
            "planned": len(configs),
            "to_train": trained.count(False),
            "to_evaluate": sum(t and not e for t, e in zip(trained, evaluated)),
            "cached": sum(evaluated),
        }

    # reading ------------------------------------------------------------------------------
    def load_training(self, config: Config):
        """The verified training :class:`~coherent_itr.train.RunResult` (no test metrics), or ``None``."""
        from ..train import RunResult

        p = self.train_path(config)
        if not self._valid("training", p):
            return None
        record = _read_json(p / "record.json", "training entry")
        arrays = _read_npz(p / "arrays.npz", "training entry")
        if is_slim(p):
            arrays = SlimArrays(arrays)
            arrays.key = p.name
            return RunResult(record, arrays)
        missing = {"test_img", "test_cap"} - set(arrays)
        if missing:
            raise CacheEntryError(f"training entry {p.name} at {p}: arrays.npz lacks {sorted(missing)}")
        return RunResult(record, arrays)

    def _load_metrics(self, config: Config) -> dict | None:
        """The verified evaluation of ``config``'s stored embeddings, or ``None``."""
        p = self.eval_path(config)
        if not self._valid("evaluation", p):
            return None
        ev = _read_json(p / "metrics.json", "evaluation entry")
        if ev.get("embeddings_sha256") != embeddings_sha256(self.train_path(config)):
            _report(
                "evaluation",
                p,
                "it was computed from other test embeddings than those of the training "
                "entry now stored (retrained with different numbers?)",
            )
            return None
        return ev

    def load(self, config: Config, splits=None, evaluate: bool = True):
        """The cached run of ``config`` with its test metrics in ``record["test"]``, or ``None``.

        When only the evaluation entry is missing (new or changed metric code) the run is
        evaluated from its stored embeddings and the evaluation stored; ``evaluate=False`` returns
        ``None`` instead."""
        trained = self.load_training(config)
        if trained is None:
            return None
        ev = self._load_metrics(config)
        if ev is None:
            if not evaluate:
                return None
            ev = self._evaluate(config, trained, splits)
        return self._merge(trained, ev)

    def _merge(self, trained, ev: dict):
        from ..train import RunResult

        record = dict(trained.record)
        record["test"] = ev["test"]
        record["timing"] = {**record.get("timing", {}), "test_eval_s": ev["eval_s"]}
        record["eval_key"] = ev["eval_key"]
        record["evaluation_code_hash"] = ev["evaluation_code_hash"]
        return RunResult(record, trained.arrays)

    # writing ------------------------------------------------------------------------------
    def store_training(self, config: Config, result) -> Path:
        """Store ``result`` (of :func:`~coherent_itr.train.train`) as the training entry of ``config``;
        :class:`CaptureFellBack` (nothing stored) for a CUDA run whose graph capture failed partway."""
        import numpy as np

        final = self.train_path(config)
        why = capture_failure(result.record)
        if why is not None:
            raise CaptureFellBack(
                f"run {final.name} ({config.loss}, seed {config.seed}, lr {config.lr:g}) is not stored: its CUDA-graph "
                f"capture failed ({why}), so its later steps ran eagerly and its numbers are neither engine's. Fix "
                "the capture (tests/lib/test_cuda_graphs.py finds host reads on the CPU), or train eagerly under "
                "eager keys with COHERENT_ITR_CUDA_GRAPHS=0"
            )
        record = {k: v for k, v in result.record.items() if k != "test"}
        device = device_type(self.machine or local_numerics(config))
        record.update(run_key=final.name, training_code_hash=training_code_hash(config, device), threads=self.threads)
        arrays = {k: np.asarray(v) for k, v in result.arrays.items()}
        return write_entry(
            final,
            {
                "arrays.npz": lambda p: atomic_save_npz(p, **arrays),
                "record.json": lambda p: atomic_write_json(p, record),
            },
        )

    def store_evaluation(self, config: Config, test: dict, eval_s: float) -> Path:
        final = self.eval_path(config)
        ev = {
            "test": test,
            "eval_s": eval_s,
            "eval_key": final.name,
            "run_key": self.train_key(config),
            "evaluation_code_hash": evaluation_code_hash(),
            "embeddings_sha256": embeddings_sha256(self.train_path(config)),
        }
        write_entry(final, {"metrics.json": lambda p: atomic_write_json(p, ev)}, replace=True)
        return final

    def _lock(self, key: str, what: str):
        return _wait_lock(self.root / "locks" / f"{key}.lock", what)

    def _evaluate(self, config: Config, trained, splits) -> dict:
        from ..evaluation import evaluate_run

        if isinstance(trained.arrays, SlimArrays):
            raise ImportedRunMissing(
                f"run {self.train_key(config)} was imported without its test embeddings and has no evaluation "
                "under the current metric code (a metric changed since the export); it cannot be re-evaluated "
                "here: export it again with --export-embeddings all, or train it on this machine"
            )
        with self._lock(self.eval_key(config), f"evaluation of run {self.train_key(config)}"):
            ev = self._load_metrics(config)  # another process may have evaluated meanwhile
            if ev is not None:
                return ev
            t0 = time.perf_counter()
            with pinned_threads(self.threads):
                test = evaluate_run(trained, splits=splits, cache_dir=str(self.root.parent))
            self.store_evaluation(config, test, time.perf_counter() - t0)
        ev = self._load_metrics(config)
        if ev is None:
            raise CacheEntryError(
                f"evaluation entry {self.eval_key(config)} at {self.eval_path(config)} "
                "failed verification right after it was written"
            )
        return ev

    def get_or_train(self, config: Config, progress: bool = True, splits=None, evaluate: bool = True):
        """The cached run of ``config`` (with test metrics), training and/or evaluating it on a miss.

        ``evaluate=False`` trains (if missing) without evaluating the test split and returns the
        training entry only (no ``record["test"]``): the tuning phase, which reads validation only,
        and whose unchosen runs never need test metrics.

        Training holds a per-run lock: a second process asking for the same run waits, then
        loads the first one's result instead of training it again."""
        from .. import train as train_mod

        hit = self.load(config, splits=splits) if evaluate else self.load_training(config)
        if hit is not None:
            return hit
        key = self.train_key(config)
        if self.machine is not None:
            raise ImportedRunMissing(
                f"run {key} ({config.loss}, seed {config.seed}, lr {config.lr:g}) is not among the runs imported from "
                f"{self.machine_name} ({RUNS_FROM_ENV}={self.machine_name}): this cache reads that machine's runs "
                f"and never trains one here under its key; train it there and import again, or unset "
                f"{RUNS_FROM_ENV} to train it on this machine under this machine's key"
            )
        if self.engine_of(config) is not None:  # a pack of one, padded to the engine's width
            return self.get_or_train_pack([config], progress=progress, splits=splits, evaluate=evaluate)[0]
        with self._lock(key, f"training of run {key}"):
            if not self.has_training(config):
                with pinned_threads(self.threads):
                    result = train_mod.train(config, splits=splits, progress=progress, cache_dir=str(self.root.parent))
                self.store_training(config, result)
        res = self.load(config, splits=splits) if evaluate else self.load_training(config)
        if res is None:
            raise CacheEntryError(
                f"training entry {key} at {self.train_path(config)} failed verification right after it was written"
            )
        return res

    def get_or_train_pack(self, configs, progress: bool = True, splits=None, evaluate: bool = True) -> list:
        """:meth:`get_or_train` of every config in ``configs`` under this cache's packed engine: the ones not in the
        cache train as one pack (:func:`coherent_itr.packed.train_packed`, at the engine's width), each stored
        under its own key; then each is loaded (and evaluated unless ``evaluate=False``)."""
        from ..packed import pack_groups, train_packed

        if self.engine is None:
            raise ValueError("get_or_train_pack needs a cache of the packed engine (RunCache(engine=...))")
        configs = list(configs)
        for c in configs:  # the configs the packed engine cannot train: solo, under their solo keys
            if self.engine_of(c) is None:
                self.get_or_train(c, progress=progress, splits=splits, evaluate=evaluate)
        missing = [c for c in configs if self.engine_of(c) is not None and not self.has_training(c)]
        if missing and self.machine is not None:
            raise ImportedRunMissing(
                f"{len(missing)} run(s) of this pack (first: {missing[0].loss}, seed {missing[0].seed}) are not among "
                f"the runs imported from {self.machine_name}: this cache never trains under another machine's keys"
            )
        if missing:
            keys = sorted({self.train_key(c) for c in missing})
            with contextlib.ExitStack() as locks:  # every member's lock, in key order (no two packs deadlock)
                for k in keys:
                    locks.enter_context(self._lock(k, f"training of run {k}"))
                missing = [c for c in missing if not self.has_training(c)]  # another process may have trained some
                for group in pack_groups(missing, self.engine["width"]):
                    members = [missing[i] for i in group]
                    with pinned_threads(self.threads):
                        results = train_packed(
                            members,
                            splits=splits,
                            width=self.engine["width"],
                            progress=progress,
                            cache_dir=str(self.root.parent),
                        )
                    for c, r in zip(members, results):
                        self.store_training(c, r)
        out = []
        for c in configs:
            res = self.load(c, splits=splits) if evaluate else self.load_training(c)
            if res is None:
                raise CacheEntryError(f"training entry {self.train_key(c)} at {self.train_path(c)} failed verification")
            out.append(res)
        return out

    def verify(self) -> list[str]:
        """Every problem of every entry in this cache (see :func:`verify_cache`)."""
        return verify_cache(self.root.parent)


def machines_dir(root: str | os.PathLike | None = None) -> Path:
    return paths.cache_dir(root, create=False) / "runs" / MACHINES_DIR


def save_machine(root, numerics: dict) -> str:
    """Record the numerics of a machine whose runs are imported into the cache at ``root``; returns its id."""
    name = machine_id(numerics)
    d = machines_dir(root)
    d.mkdir(parents=True, exist_ok=True)
    atomic_write_json(d / f"{name}.json", numerics)
    return name


def load_machine(root, name: str) -> dict:
    """The numerics recorded by :func:`save_machine` under ``name``; ``ValueError`` naming the file if absent."""
    f = machines_dir(root) / f"{name}.json"
    try:
        numerics = json.loads(f.read_text())
    except (OSError, ValueError) as exc:
        known = sorted(p.stem for p in machines_dir(root).glob("*.json")) if machines_dir(root).is_dir() else []
        raise ValueError(
            f"{RUNS_FROM_ENV}={name}: no imported machine of that name in {f.parent} ({type(exc).__name__}); "
            f"imported: {known or 'none (python -m reproduce --import-runs FILE)'}"
        ) from None
    if not isinstance(numerics, dict) or "torch" not in numerics:
        raise ValueError(f"{f}: not a machine record (expected a JSON object with 'torch'); got {numerics!r:.80}")
    return numerics


@contextlib.contextmanager
def _wait_lock(lock_path: Path, what: str):
    from filelock import FileLock, Timeout

    lock_path.parent.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(lock_path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        print(f"run cache: waiting for another process to finish the {what} ({lock_path})", file=sys.stderr, flush=True)
        lock.acquire()
    try:
        yield
    finally:
        lock.release()


# ----------------------------------------------------------------------------- whole-cache checks
def verify_cache(root: str | os.PathLike | None = None) -> list[str]:
    """Check every training and evaluation entry under ``root`` (default: the configured cache)
    without training; one line per problem, naming the entry's key and path."""
    runs = paths.cache_dir(root) / "runs"
    problems = []
    for kind, sub, expected in (("training", "train", TRAIN_FILES), ("evaluation", "eval", EVAL_FILES)):
        d = runs / sub
        if not d.is_dir():
            continue
        for entry in sorted(d.iterdir()):
            if entry.name.startswith("."):  # temporary folder of a run being written
                continue
            problem = verify_entry(entry, expected)
            if problem is None:
                try:
                    obj = _read_json(entry / expected[0], f"{kind} entry")
                    if kind == "training":
                        _read_npz(entry / "arrays.npz", "training entry")
                    elif verify_entry(runs / "train" / str(obj.get("run_key")), TRAIN_FILES) is None and obj.get(
                        "embeddings_sha256"
                    ) != embeddings_sha256(runs / "train" / str(obj["run_key"])):
                        problem = (
                            f"computed from other test embeddings than those of training entry "
                            f"{obj.get('run_key')} (retrained with different numbers?)"
                        )
                except CacheEntryError as exc:
                    problem = str(exc)
            if problem is not None:
                problems.append(f"{kind} entry {entry.name} at {entry}: {problem}")
    return problems


def _entry_bytes(runs: Path) -> list[int]:
    d = runs / "train"
    if not d.is_dir():
        return []
    return [
        sum(f.stat().st_size for f in e.iterdir() if f.is_file())
        for e in d.iterdir()
        if e.is_dir() and not e.name.startswith(".")
    ]


def check_writable(root: str | os.PathLike | None = None, n_runs: int = 0, bytes_per_run: int | None = None) -> Path:
    """Fail before any training if the run cache under ``root`` cannot take ``n_runs`` new runs.

    Creates (and removes) a file in each entry folder — permission bits alone do not say whether
    a write succeeds — and compares the free space with ``n_runs`` × the mean size of the
    entries already stored (else :data:`DEFAULT_BYTES_PER_RUN`), with a factor 2 for temporary
    copies. Raises ``OSError`` naming the folder and what to do; returns the runs folder."""
    runs = paths.cache_dir(root, create=False) / "runs"
    try:
        runs = paths.cache_dir(root) / "runs"
        for sub in ("train", "eval", "locks"):
            d = runs / sub
            d.mkdir(parents=True, exist_ok=True)
            fd, probe = tempfile.mkstemp(dir=d, prefix=".probe-")
            os.write(fd, b"ok")
            os.close(fd)
            os.unlink(probe)
    except OSError as exc:
        raise OSError(
            exc.errno,
            f"run cache {runs} is not writable ({exc.filename or runs}: "
            f"{exc.strerror or exc}); set "
            f"{paths.CACHE_ENV} to a writable folder or fix its permissions",
        ) from exc
    if n_runs > 0:
        sizes = _entry_bytes(runs)
        per_run = bytes_per_run or (sum(sizes) // len(sizes) if sizes else DEFAULT_BYTES_PER_RUN)
        need = 2 * n_runs * per_run
        free = shutil.disk_usage(runs).free
        if free < need:
            raise OSError(
                28,
                f"run cache {runs}: {free / 2**20:.0f} MiB free, but {n_runs} run(s) need about "
                f"{need / 2**20:.0f} MiB ({per_run / 2**20:.1f} MiB each, ×2 while writing); "
                f"free space or set {paths.CACHE_ENV} to another folder",
            )
    return runs
