"""The run cache: every training run stored once, keyed by its config and the library source.

A run's key is a hash of its :class:`Config` (seed included) and of the source code of the
``coherent_itr`` package, so editing the library invalidates every cached result while editing
a notebook or a plot does not. Entries are directories ``<root>/runs/<key>/`` holding
``result.json`` and ``arrays.npz``; they are written into a temporary directory first and
renamed into place, so an interrupted run leaves nothing that looks like a result and is simply
redone on the next call.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from functools import lru_cache
from pathlib import Path

from . import paths
from .config import Config
from .io import atomic_save_npz, atomic_write_json, load_npz

PACKAGE_DIR = Path(__file__).resolve().parent


def source_hash(package_dir: str | os.PathLike = PACKAGE_DIR) -> str:
    """SHA-256 (first 16 hex digits) of every ``.py`` file of the library, path and content."""
    h = hashlib.sha256()
    root = Path(package_dir)
    for f in sorted(root.rglob("*.py")):
        if "__pycache__" in f.parts:
            continue
        h.update(str(f.relative_to(root)).encode())
        h.update(b"\0")
        h.update(f.read_bytes())
        h.update(b"\0")
    return h.hexdigest()[:16]


@lru_cache(maxsize=1)
def _current_source_hash() -> str:
    return source_hash()


def run_key(config: Config, src_hash: str | None = None) -> str:
    """Cache key of ``config`` under the library source ``src_hash`` (default: the current source)."""
    src_hash = src_hash or _current_source_hash()
    return hashlib.sha256(f"{config.key()}:{src_hash}".encode()).hexdigest()[:20]


class RunCache:
    """On-disk store of finished runs under ``root`` (default :func:`paths.cache_dir`)."""

    def __init__(self, root: str | os.PathLike | None = None, src_hash: str | None = None) -> None:
        self.root = paths.cache_dir(root) / "runs"
        self.root.mkdir(parents=True, exist_ok=True)
        self.src_hash = src_hash or _current_source_hash()

    def path(self, config: Config) -> Path:
        return self.root / run_key(config, self.src_hash)

    def has(self, config: Config) -> bool:
        return (self.path(config) / "result.json").is_file()

    def load(self, config: Config):
        """The cached :class:`~coherent_itr.train.RunResult` of ``config``, or ``None``."""
        from .train import RunResult
        p = self.path(config)
        if not (p / "result.json").is_file():
            return None
        record = json.loads((p / "result.json").read_text())
        arrays = load_npz(p / "arrays.npz") if (p / "arrays.npz").is_file() else {}
        return RunResult(record, arrays)

    def store(self, config: Config, result) -> Path:
        """Write ``result`` for ``config`` atomically (temporary directory, then rename)."""
        final = self.path(config)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=f".tmp-{final.name}-"))
        try:
            record = dict(result.record, run_key=final.name, source_hash=self.src_hash)
            atomic_save_npz(tmp / "arrays.npz", **result.arrays)
            atomic_write_json(tmp / "result.json", record)
            try:
                os.rename(tmp, final)
            except OSError:  # another process stored the same run first: keep theirs
                if not (final / "result.json").is_file():
                    raise
                shutil.rmtree(tmp, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        return final

    def get_or_train(self, config: Config, progress: bool = True, splits=None):
        """The cached result of ``config``, training (and storing) it on a miss."""
        from .train import train
        hit = self.load(config)
        if hit is not None:
            return hit
        result = train(config, splits=splits, progress=progress, cache_dir=str(self.root.parent))
        self.store(config, result)
        return self.load(config)
