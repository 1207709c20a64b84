"""The entries of the run cache on disk (:mod:`coherent_itr.runs`): each written into a temporary folder with
``checksum.json`` (sha256 and size of every other file) last, then renamed into place; verified whenever read; the
errors that name an entry that cannot be read, written or served.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

from ..io import atomic_write_json, load_npz, sha256_file
from .identity import RUNS_FROM_ENV

CHECKSUM_FILE = "checksum.json"
TRAIN_FILES = ("record.json", "arrays.npz")
EVAL_FILES = ("metrics.json",)
# checksum.json field of a training entry imported without its test embeddings: the sha256 its arrays.npz
# had where it trained (its evaluation entries name that one); its arrays.npz holds per-query hits instead
SLIM_KEY = "embeddings_not_stored_sha256"


def member_sha256(data: bytes) -> str:
    """The sha256 of a run archive member's bytes, as its manifest lists it."""
    return hashlib.sha256(data).hexdigest()


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
