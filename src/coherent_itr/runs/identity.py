"""The keys of the run cache (:mod:`coherent_itr.runs`): what of the code, the machine and the engine a run's
training key hashes, and its evaluation key.

The **training key** (:func:`run_key`) hashes ``Config.key()``, the number of intra-op threads the run uses
(:func:`pinned_threads`), the torch version, the device (:func:`device_numerics`), the form of its data
(:func:`data_form`), the engine of a packed run (:func:`record_engine`) and the source of only the code the run
executes (:func:`training_files`, frozen by :mod:`coherent_itr.code_identity`); a run of another machine keeps that
machine's key (:func:`local_numerics`, ``$COHERENT_ITR_RUNS_FROM``). The **evaluation key** (:func:`eval_key`)
hashes the training key and the evaluation code (:func:`evaluation_files`).
"""

from __future__ import annotations

import ast
import contextlib
import glob
import hashlib
import json
import os
import re
from functools import lru_cache
from pathlib import Path

from .. import code_identity, paths
from ..determinism import cpu_identity  # a CPU run's key names its CPU
from ..config import Config
from ..io import sha256_file

# the library's package (coherent_itr) and its folder, whose files the keys hash: this module lies in its runs/
PACKAGE = __package__.rpartition(".")[0]
PACKAGE_DIR = Path(__file__).resolve().parent.parent
THREADS_ENV = "COHERENT_ITR_THREADS"
RUNS_FROM_ENV = "COHERENT_ITR_RUNS_FROM"
# the training engine of a cache's runs: unset or "solo" — coherent_itr.train, one run a model (its keys name no
# engine); "pack:<width>" — coherent_itr.packed, runs trained as one model of that many members (keys of their own)
ENGINE_ENV = "COHERENT_ITR_ENGINE"


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
    from .. import losses

    crit = losses.build(loss, **json.loads(params_json))
    files = set()
    prefix = PACKAGE + "."
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

    from .. import losses

    crit = losses.build(config.loss, **config.loss_params)
    prefix = PACKAGE + "."
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
    from ..metrics import registry

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
    (:func:`cpu_identity`), ``{"cpu": "AuthenticAMD/AVX2"}``, ``{"cpu": "GenuineIntel/AVX512"}`` and the like — on
    every CPU (archives of format 1, whose keys left out the reference CPU, are upgraded as they are read:
    :mod:`coherent_itr.runs.migrations`); on CUDA the device type, its compute capability, the
    TF32 switches of matmul and cuDNN (settings of the process that ``train`` leaves as it finds them) and the step
    engine (``"eager"``, or the CUDA-graph engine and its source hash: :func:`coherent_itr.cuda_graphs.step_identity`).
    A CUDA run and a CPU run of one config thus have two keys, as have runs on two CPUs, and one cache holds them
    all. (Keys named no CPU before: the run caches of this study's machines — Intel Xeons with AVX-512, AMD EPYCs with
    AVX2 — then held runs of several CPUs under one key, and a run could not be regenerated on another machine.)"""
    import torch

    from .. import cuda_graphs

    device = config.device if config.device != "auto" else ("cuda" if torch.cuda.is_available() else "cpu")
    if device == "cpu":
        return {"cpu": cpu_identity()}
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
        from ..data import sbert  # the data layer: only a key of such a run reads it

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
    from ..packed import engine_identity  # a packed cache only: solo runs never import the engine

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
