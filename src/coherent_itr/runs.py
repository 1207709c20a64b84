"""The run cache: every training run stored once, evaluated apart, verified whenever it is read.

Two kinds of entries live under ``<root>/runs/``:

* ``train/<training key>/`` — what :func:`coherent_itr.train.train` returns: ``record.json``
  (config, history, best epoch, timing, …) and ``arrays.npz`` (the selected checkpoint's test
  embeddings, float32). The **training key** hashes ``Config.key()``, the number of intra-op
  threads the run uses (results depend on it: :func:`pinned_threads`), the torch version, the device (on the
  CPU its vendor and instruction set, :func:`cpu_identity`), and
  the source of only the code the run executes (:func:`training_files`): the train loop,
  models, determinism/io/config, the data source it loads, the relevance provider it trains
  with, the loss modules :func:`coherent_itr.losses.build` instantiates for it, and the
  validation metric that selects the checkpoint. Adding a loss therefore trains only that
  loss's runs, and editing a notebook or a test metric trains nothing. The files' hash of a set the
  study's runs execute is its frozen one (:mod:`coherent_itr.code_identity`) while its files are as frozen
  or their edits are declared to keep every number; a run of another machine keeps that machine's key
  (:func:`local_numerics`, ``$COHERENT_ITR_RUNS_FROM``).
* ``eval/<evaluation key>/`` — ``metrics.json``: every test metric of that training entry. The
  **evaluation key** hashes the training key and the evaluation code (:func:`evaluation_files`:
  ``evaluation.py``, ``metrics/``, the yardstick providers), so adding or fixing a metric
  re-evaluates from the stored embeddings without training.

Integrity: an entry is written into a temporary folder, ``checksum.json`` (sha256 and size of
every other file) is written **last**, and the folder is renamed into place. Every read
verifies the checksums; a missing, truncated or altered entry is reported with
:class:`CacheIntegrityWarning` naming its key and path, treated as absent (``has()`` is False,
so a driver counts it as to-train) and redone. :func:`verify_cache` checks a whole cache without
training; :func:`check_writable` fails early on an unwritable or full cache folder. A per-key
file lock (``filelock``) makes two processes or drivers sharing one cache train each run once:
the second waits for the first and then loads its result. A CUDA run whose graph capture failed partway (steps of
two engines under a key that names one) is never stored (:class:`CaptureFellBack`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import glob
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings
import zipfile
from functools import lru_cache
from pathlib import Path

from . import code_identity, paths
from .determinism import REFERENCE_CPU, cpu_identity  # a CPU run's key names its CPU
from .config import Config
from .io import atomic_save_npz, atomic_write_json, load_npz, sha256_file

PACKAGE_DIR = Path(__file__).resolve().parent
THREADS_ENV = "COHERENT_ITR_THREADS"
RUNS_FROM_ENV = "COHERENT_ITR_RUNS_FROM"
# the training engine of a cache's runs: unset or "solo" — coherent_itr.train, one run a model (its keys name no
# engine); "pack:<width>" — coherent_itr.packed, runs trained as one model of that many members (keys of their own)
ENGINE_ENV = "COHERENT_ITR_ENGINE"
MACHINES_DIR = "machines"  # under <root>/runs/: the numerics of machines whose runs were imported
CHECKSUM_FILE = "checksum.json"
TRAIN_FILES = ("record.json", "arrays.npz")
EVAL_FILES = ("metrics.json",)
# checksum.json field of a training entry imported without its test embeddings: the sha256 its arrays.npz
# had where it trained (its evaluation entries name that one); its arrays.npz holds per-query hits instead
SLIM_KEY = "embeddings_not_stored_sha256"
DEFAULT_BYTES_PER_RUN = 32 * 2**20  # free-space estimate when the cache holds no entry yet


class CacheIntegrityWarning(UserWarning):
    """A cache entry failed verification (named with key and path); it is ignored and redone."""


class CacheEntryError(RuntimeError):
    """A cache entry could not be read or written; the message names the entry."""


class ImportedRunMissing(CacheEntryError):
    """A cache reading another machine's imported runs lacks a run, or its test embeddings: it is never
    trained (or re-evaluated) here under that machine's key."""


class CaptureFellBack(CacheEntryError):
    """A CUDA run whose graph capture failed after its engine started: its later steps ran eagerly, so its numbers
    are neither the captured engine's nor the eager one's, and its key (which names the captured engine) would
    serve them for a captured run. Such a run is never stored, exported or imported (:func:`capture_failure`)."""


class SlimArrays(dict):
    """The arrays of a training entry imported without its test embeddings (per-query hits only): asking for
    an embedding says so instead of a bare ``KeyError``."""

    key: str = ""

    def __missing__(self, name):
        raise ImportedRunMissing(
            f"run {self.key}: {name!r} is not stored: the run was imported without its test embeddings "
            f"(its archive kept them only for the runs the qualitative views read); export it again with "
            f"--export-embeddings all, or train it on this machine (unset {RUNS_FROM_ENV})"
        )


# ----------------------------------------------------------------------------- code hashes
def source_hash(package_dir: str | os.PathLike = PACKAGE_DIR) -> str:
    """SHA-256 (first 16 hex digits) of every ``.py`` file of the library, path and content.

    Not part of any run key (see :func:`training_code_hash`); used to stamp notebooks and the
    results manifest with the library version they were produced by."""
    root = Path(package_dir)
    return hash_files(
        root, tuple(sorted(str(f.relative_to(root)) for f in root.rglob("*.py") if "__pycache__" not in f.parts))
    )


def hash_files(root: Path, rel_paths: tuple[str, ...]) -> str:
    h = hashlib.sha256()
    for rel in rel_paths:
        h.update(rel.encode())
        h.update(b"\0")
        h.update((root / rel).read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


def _expand(patterns: tuple[str, ...]) -> set[str]:
    return set(_expand_in(Path(PACKAGE_DIR), tuple(patterns)))


@lru_cache(maxsize=64)
def _expand_in(package: Path, patterns: tuple[str, ...]) -> frozenset[str]:
    # the package's files are listed once a process, as _files_hash reads their contents once
    out: set[str] = set()
    for pat in patterns:
        for f in glob.glob(str(package / pat)):
            out.add(str(Path(f).relative_to(package)))
    return frozenset(out)


# Code every training run executes. The validation R@K (metrics/retrieval.py + _blocks.py) picks
# the checkpoint, so it belongs to training; every other metric belongs to evaluation.
TRAINING_CORE = (
    "train.py",
    "config.py",
    "determinism.py",
    "io.py",
    "paths.py",
    "gradients.py",
    "health.py",
    "models/*.py",
    "data/__init__.py",
    "data/base.py",
    "metrics/retrieval.py",
    "metrics/_blocks.py",
    "losses/__init__.py",
    "losses/base.py",
    "losses/registry.py",
    "registry.py",
)
DATA_SOURCE_FILES = {
    "synthetic": ("data/synthetic.py",),
    "flickr8k": ("data/flickr8k.py", "data/features.py", "data/precomp.py", "data/bundle.py"),
    "precomp": ("data/precomp.py",),
    "toy": ("data/toy.py",),
}
RELEVANCE_FILES = {
    "sbert": ("data/sbert.py", "data/relevance.py"),
    "cider": ("data/cider.py", "data/relevance.py"),
    "true": ("data/synthetic.py",),
}  # + data/base.py (TrueRelevance), in the core
EVALUATION_CODE = (
    "evaluation.py",
    "registry.py",
    "metrics/*.py",
    "data/relevance.py",
    "data/sbert.py",
    "data/cider.py",
    "data/synthetic.py",
    "data/base.py",
)


def _relative_imports(rel: str) -> set[str]:
    """Files of the same package that module ``rel`` imports with ``from .x import …``."""
    tree = ast.parse((PACKAGE_DIR / rel).read_text(), filename=rel)
    here = Path(rel).parent
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module:
            cand = here / (node.module.replace(".", "/") + ".py")
            if (PACKAGE_DIR / cand).is_file():
                out.add(str(cand))
    return out


@lru_cache(maxsize=256)
def _loss_files(loss: str, params_json: str) -> frozenset[str]:
    from . import losses

    crit = losses.build(loss, **json.loads(params_json))
    files = set()
    prefix = __package__ + "."
    for m in crit.modules():  # composite losses: every term's class and its bases
        for cls in type(m).__mro__:
            if cls.__module__.startswith(prefix):
                rel = cls.__module__[len(prefix) :].replace(".", "/")
                files.add(f"{rel}.py" if (PACKAGE_DIR / f"{rel}.py").is_file() else f"{rel}/__init__.py")
    todo = list(files)
    while todo:  # helpers imported from sibling loss modules
        for dep in _relative_imports(todo.pop()):
            if dep not in files:
                files.add(dep)
                todo.append(dep)
    return frozenset(files)


def training_files(config: Config) -> list[str]:
    """Package-relative paths of the source files a training run of ``config`` executes."""
    files = _expand(TRAINING_CORE)
    files |= _expand(DATA_SOURCE_FILES.get(config.data, ("data/*.py",)))
    if config.relevance:
        files |= _expand(RELEVANCE_FILES.get(config.relevance, ("data/*.py",)))
    files |= _loss_files(config.loss, json.dumps(config.loss_params, sort_keys=True, default=str))
    return sorted(files)


def evaluation_files() -> list[str]:
    """Package-relative paths of the test-evaluation code (metrics and yardstick providers)."""
    return sorted(_expand(EVALUATION_CODE))


@lru_cache(maxsize=1024)
def _files_hash(rel_paths: tuple[str, ...], device: str = "cpu") -> str:
    """The code hash of a file set for the runs of a ``device`` type: its frozen hash
    (:mod:`coherent_itr.code_identity`) while its files are as frozen or their edits are declared neutral on that
    device, else the hash of the files as they are."""
    frozen = code_identity.frozen_hash(rel_paths, device) if PACKAGE_DIR == code_identity.PACKAGE_DIR else None
    return frozen or hash_files(PACKAGE_DIR, rel_paths)


def _outside_loss_source(config: Config) -> str:
    """The source of the loss classes a run of ``config`` builds that live *outside* this package (a loss
    registered from user code); '' for the package's own losses, whose files :func:`training_files` hashes."""
    import inspect

    from . import losses

    crit = losses.build(config.loss, **config.loss_params)
    prefix = __package__ + "."
    parts = []
    for m in crit.modules():
        for cls in type(m).__mro__:
            mod = cls.__module__ or ""
            if mod.startswith(prefix) or mod.split(".")[0] in ("torch", "builtins"):
                continue
            try:
                parts.append(f"{mod}.{cls.__qualname__}\0{inspect.getsource(cls)}")
            except (OSError, TypeError):
                parts.append(f"{mod}.{cls.__qualname__}")
    return "\0".join(sorted(set(parts)))


def _with(code_hash: str, extra: str) -> str:
    return hashlib.sha256(f"{code_hash}:{extra}".encode()).hexdigest()[:16] if extra else code_hash


def training_code_hash(config: Config, device: str = "cpu") -> str:
    """The hash of the code a run of ``config`` on a ``device`` type executes (its files; a loss from outside the
    package adds its classes' source — so the keys of the package's runs do not depend on it)."""
    return _with(_files_hash(tuple(training_files(config)), device), _outside_loss_source(config))


def device_type(numerics: dict) -> str:
    """``"cuda"`` or ``"cpu"``: the device type of a machine's numerics (:func:`local_numerics`)."""
    return str(numerics.get("device", "cpu")).split(":")[0]


def evaluation_code_hash() -> str:
    """The hash of the evaluation code: its files, and the metrics registered from outside the package
    (:func:`coherent_itr.metrics.registry.fingerprint`; none: the files' hash alone)."""
    from .metrics import registry

    return _with(_files_hash(tuple(evaluation_files())), registry.fingerprint())


def default_threads() -> int:
    """Intra-op threads of a run: ``$COHERENT_ITR_THREADS`` or 1 (one per worker process)."""
    raw = os.environ.get(THREADS_ENV, "1")
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"{THREADS_ENV}={raw!r} is invalid; expected a positive integer")
    return n


@contextlib.contextmanager
def pinned_threads(n: int):
    """Run with exactly ``n`` torch intra-op threads and ``n`` BLAS/OpenMP threads, then restore.

    Float reductions are split differently with a different thread count (a smoke triplet run
    gave test RSUM 65.8 with 1 thread and 63.8 with 2), so the count is part of the training key
    and fixed whatever the executor or worker count."""
    import torch
    from threadpoolctl import threadpool_limits

    prev = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        with threadpool_limits(limits=n):
            yield
    finally:
        torch.set_num_threads(prev)


def device_numerics(config: Config) -> dict:
    """What of the device changes a run's numbers, beyond its config and code: on the CPU, the CPU
    (:func:`cpu_identity`) — ``{}`` on :data:`REFERENCE_CPU` (so the keys of its runs are what they always were),
    ``{"cpu": "GenuineIntel/AVX512"}`` and the like elsewhere; on CUDA the device type, its compute capability, the
    TF32 switches of matmul and cuDNN (settings of the process that ``train`` leaves as it finds them) and the step
    engine (``"eager"``, or the CUDA-graph engine and its source hash: :func:`coherent_itr.cuda_graphs.step_identity`).
    A CUDA run and a CPU run of one config thus have two keys, as have runs on two CPUs, and one cache holds them
    all. (Keys named no CPU before: the run caches of this study's machines — Intel Xeons with AVX-512, AMD EPYCs with
    AVX2 — then held runs of several CPUs under one key, and a run could not be regenerated on another machine.)"""
    import torch

    from . import cuda_graphs

    device = config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        cpu = cpu_identity()
        return {} if cpu == REFERENCE_CPU else {"cpu": cpu}
    major, minor = torch.cuda.get_device_capability()
    return {
        "device": f"{device}:sm{major}{minor}",
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
        "tf32_cudnn": bool(torch.backends.cudnn.allow_tf32),
        "step": cuda_graphs.step_identity(config, device),
    }


#: the fields of a machine's numerics that name the form of one data set's data (:func:`data_form`)
DATA_FORM_FIELDS = ("flickr8k_form", "synthetic_form")
#: the field that names the host CPU of a CUDA machine whose runs compute their data there (:func:`local_numerics`)
HOST_FIELD = "host_cpu"


def form_field(config: Config) -> str | None:
    """The field of a machine's numerics that names the form of ``config``'s data (:func:`data_form`), if any."""
    if config.data == "flickr8k":
        return "flickr8k_form"
    if config.data == "synthetic":  # its Sentence-BERT relevance, and its test metrics' caption similarities
        return "synthetic_form"
    return None


def data_form(config: Config) -> dict:
    """``{}`` for a run that reads its data set as released, or computes what it trains with on this machine; else
    what it reads instead, since its numbers differ and so must its key:

    * a Flickr8k run from a bundle (:mod:`coherent_itr.data.bundle`: float16 features and caption embeddings):
      ``{"flickr8k_form": "bundle:<content hash>"}``, :func:`bundle_content_hash` — the same files and models give
      the same key, whoever built the bundle when;
    * a run of the generated world on a machine without the sentence model (a GPU machine), whose caption
      embeddings were carried from another machine: ``{"synthetic_form": "carried:<content hash>"}``,
      :func:`coherent_itr.data.sbert.carried_embeddings_hash` — embeddings made on two CPUs differ in their last
      bits, so runs from two carries have two keys. Every run of the world: a Sentence-BERT relevance trains with
      them, and every run's test metrics read them (the evaluation key follows the training key). (The world itself
      is generated in float64 and stored as float32: the same bytes under OpenBLAS's SSE, AVX and AVX2 kernels,
      ``docs/compute.md``.)"""
    field = form_field(config)
    if field == "synthetic_form":
        from .data import sbert  # the data layer: only a key of such a run reads it

        carried = sbert.carried_embeddings_hash()
        return {} if carried is None else {field: f"carried:{carried}"}
    if field != "flickr8k_form":
        return {}
    try:
        folder = paths.flickr8k_dir(config.data_dir, required=False)
    except FileNotFoundError:  # a folder that is not there: no run of it can load, the loader says why
        return {}
    manifest = Path(folder) / "MANIFEST.json" if folder is not None else None
    if manifest is None or not manifest.is_file():
        return {}
    return {field: f"bundle:{bundle_content_hash(manifest)}"}


def bundle_content_hash(manifest: Path) -> str:
    """sha256 (16 hex digits) of a bundle's ``MANIFEST.json`` without its ``info`` entry (who built it, with
    which library version: nothing a run reads), as sorted JSON. The rest names every file by its sha256 and the
    models that made the features and embeddings. A manifest that is not a JSON object is hashed as its bytes:
    the loader refuses it by name."""
    try:
        content = json.loads(manifest.read_text())
    except (ValueError, UnicodeDecodeError):
        return sha256_file(manifest)[:16]
    if not isinstance(content, dict):
        return sha256_file(manifest)[:16]
    content.pop("info", None)
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]


def local_numerics(config: Config) -> dict:
    """What of this machine enters the key of a run of ``config``: the torch version, :func:`device_numerics`
    and :func:`data_form` (a bundle's or carried embeddings' content). On CUDA, a run that computes its data on this
    machine — image features and caption embeddings are computed on the CPU — also names the host CPU
    (``host_cpu``: :func:`cpu_identity`), as a CPU run names its CPU: two GPU machines with other CPUs compute other
    last bits."""
    import torch

    numerics = {"torch": torch.__version__, **device_numerics(config), **data_form(config)}
    field = form_field(config)
    if device_type(numerics) == "cuda" and field is not None and field not in numerics:
        numerics[HOST_FIELD] = cpu_identity()
    return numerics


def machine_id(numerics: dict) -> str:
    """A readable, stable name of a machine's numerics, e.g. ``cuda-sm90-torch2.11.0-3f2a9c1e``."""
    device = str(numerics.get("device", "cpu")).replace(":", "-")
    if "cpu" in numerics:  # a CPU other than the reference
        device += "-" + str(numerics["cpu"]).replace("/", "-")
    torch_v = str(numerics.get("torch", "?")).split("+")[0]
    digest = hashlib.sha256(json.dumps(numerics, sort_keys=True).encode()).hexdigest()[:8]
    return f"{device}-torch{torch_v}-{digest}"


def engine_from_env() -> dict | None:
    """The engine :data:`ENGINE_ENV` names: ``None`` for the solo engine, else the packed engine's identity
    (:func:`coherent_itr.packed.engine_identity`)."""
    raw = os.environ.get(ENGINE_ENV, "").strip()
    if raw in ("", "solo"):
        return None
    m = re.fullmatch(r"(pack|auto):([0-9]+)", raw)
    if m is None or int(m[2]) < 1:
        raise ValueError(
            f"{ENGINE_ENV}={raw!r}: expected 'solo', 'pack:<width>' or 'auto:<width>' (packed on CUDA, else solo) "
            "with a width ≥ 1, e.g. pack:8"
        )
    if m[1] == "auto":
        import torch

        if not torch.cuda.is_available():
            return None
    from .packed import engine_identity  # a packed cache only: solo runs never import the engine

    return engine_identity(int(m[2]))


def record_engine(record: dict) -> dict | None:
    """The engine part of the key of the run ``record`` describes: ``None`` for a solo run, whose key names no
    engine; for a packed run its engine, width and source (not its slot: a member's numbers do not depend on it)."""
    engine = record.get("engine") or {}
    if engine.get("step") != "packed":
        return None
    return {k: engine[k] for k in ("step", "width", "source")}


def run_key(config: Config, threads: int = 1, machine: dict | None = None, engine: dict | None = None) -> str:
    """Training key of ``config`` run with ``threads`` intra-op threads under the current code, on this
    machine's device (:func:`local_numerics`) or, with ``machine``, on the machine of those numerics (the
    key under which a run imported from that machine is stored). ``engine``: the packed engine's identity
    (:func:`record_engine`) for a packed run, whose key is never a solo run's; ``None`` (solo) leaves the key as it
    always was."""
    numerics = dict(local_numerics(config) if machine is None else machine)
    if engine is not None:  # the solo engine's CUDA step (graphs or eager) is not what a packed run executes
        numerics.pop("step", None)
        numerics["engine"] = dict(engine)
    forms = {k: numerics.pop(k) for k in DATA_FORM_FIELDS if k in numerics}  # a machine's record names them all
    host = numerics.pop(HOST_FIELD, None)
    field = form_field(config)
    if forms.get(field):  # a run's key names the form of its own data only
        numerics["data_form"] = forms[field]
    elif field is not None and host:  # or the CPU that computed it
        numerics[HOST_FIELD] = host
    code = training_code_hash(config, device_type(numerics))
    blob = json.dumps({"config": config.key(), "code": code, "threads": int(threads), **numerics}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:20]


def eval_key(train_key: str) -> str:
    """Evaluation key: the training key and the current evaluation code."""
    return hashlib.sha256(f"{train_key}:{evaluation_code_hash()}".encode()).hexdigest()[:20]


def capture_failure(record: dict) -> str | None:
    """Why the CUDA-graph engine of the run whose record this is fell back to eager steps after it started
    (:meth:`coherent_itr.cuda_graphs.GraphedSteps.describe`: a capture that failed), or ``None``: a CPU run, a
    captured run, or a run whose loss is never captured (it trains eagerly, the same way every time, under the
    same engine record)."""
    engine = record.get("engine") or {}
    if "graphs" in engine and engine.get("reason"):
        return str(engine["reason"])
    return None


# ----------------------------------------------------------------------------- entries on disk
def embeddings_sha256(train_entry: Path) -> str | None:
    """The recorded sha256 of a training entry's test embeddings (what an evaluation was computed from): its
    ``arrays.npz``, or for an entry imported without them, the sha256 its ``arrays.npz`` had where it trained."""
    try:
        meta = json.loads((train_entry / CHECKSUM_FILE).read_text())
        return meta.get(SLIM_KEY) or meta["files"]["arrays.npz"]["sha256"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def is_slim(train_entry: Path) -> bool:
    try:
        return bool(json.loads((train_entry / CHECKSUM_FILE).read_text()).get(SLIM_KEY))
    except (OSError, ValueError, AttributeError):
        return False


def write_entry(final: Path, writers: dict, replace: bool = False, meta: dict | None = None) -> Path:
    """Write an entry folder atomically: each ``name -> writer(path)`` into a temporary folder,
    then ``checksum.json`` last (with ``meta``'s fields beside the checksums), then rename into place,
    replacing a corrupt old entry (or, with ``replace``, any old entry; callers hold the entry's lock)."""
    final.parent.mkdir(parents=True, exist_ok=True)
    try:
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".tmp-{final.name}-"))
    except OSError as exc:
        raise CacheEntryError(f"cannot create cache entry {final.name} in {final.parent}: {exc}") from exc
    try:
        for name, writer in writers.items():
            writer(tmp / name)
        files = {name: {"sha256": sha256_file(tmp / name), "bytes": (tmp / name).stat().st_size} for name in writers}
        atomic_write_json(tmp / CHECKSUM_FILE, {**(meta or {}), "key": final.name, "files": files})
        if final.exists():
            if not replace and verify_entry(final) is None:  # another writer was first: keep theirs
                shutil.rmtree(tmp, ignore_errors=True)
                return final
            _discard(final)  # a corrupt entry is replaced
        try:
            os.rename(tmp, final)
        except OSError:  # another writer was first: keep a valid entry of theirs
            if verify_entry(final) is not None:
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _discard(path: Path) -> None:
    aside = path.with_name(f".discard-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    os.rename(path, aside)
    shutil.rmtree(aside, ignore_errors=True)


def verify_entry(path: Path, expected: tuple[str, ...] = ()) -> str | None:
    """``None`` if the entry folder ``path`` is complete and unaltered, else what is wrong.

    A folder that does not exist is "missing"; ``expected`` names files the entry must have."""
    if not path.is_dir():
        return "missing"
    ck = path / CHECKSUM_FILE
    if not ck.is_file():
        return f"{CHECKSUM_FILE} missing (entry incomplete or written by an older version)"
    try:
        meta = json.loads(ck.read_text())
        files = meta["files"]
        if not isinstance(files, dict):
            raise TypeError("'files' is not a mapping")
    except (ValueError, KeyError, TypeError) as exc:
        return f"{CHECKSUM_FILE} unreadable ({type(exc).__name__}: {exc})"
    for name in expected:
        if name not in files:
            return f"{name} not listed in {CHECKSUM_FILE}"
    for name, want in files.items():
        f = path / name
        if not f.is_file():
            return f"{name} missing"
        size = f.stat().st_size
        if size != want.get("bytes"):
            return f"{name} has {size} bytes, {want.get('bytes')} were written (truncated or altered)"
        if sha256_file(f) != want.get("sha256"):
            return f"{name} altered (sha256 differs from {CHECKSUM_FILE})"
    return None


_REPORTED: set[tuple[str, str]] = set()


def _report(kind: str, path: Path, problem: str) -> None:
    if (str(path), problem) in _REPORTED:
        return
    _REPORTED.add((str(path), problem))
    warnings.warn(
        f"run cache: {kind} entry {path.name} at {path} is not usable: {problem}; it will be redone",
        CacheIntegrityWarning,
        stacklevel=3,
    )


def _read_json(path: Path, what: str) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise CacheEntryError(f"{what} {path.parent.name}: cannot read {path}: {type(exc).__name__}: {exc}") from exc


def _read_npz(path: Path, what: str) -> dict:
    try:
        return load_npz(path)
    except (OSError, ValueError, zipfile.BadZipFile, EOFError) as exc:
        raise CacheEntryError(f"{what} {path.parent.name}: cannot read {path}: {type(exc).__name__}: {exc}") from exc


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
        from .packed import solo_reason  # a packed cache only

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
        from .train import RunResult

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
        from .train import RunResult

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
        from .evaluation import evaluate_run

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
        from . import train as train_mod

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
        from .packed import pack_groups, train_packed

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
