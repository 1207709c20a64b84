"""Safe, atomic file I/O: nothing half-written survives an interrupt, no pickles are loaded.

Every writer writes to a temporary file in the destination folder, flushes and fsyncs it, then
``os.replace``s it into place (atomic on POSIX), so a reader sees the old file or the new one,
never a fragment.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
from pathlib import Path

import numpy as np

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644 & ~_UMASK)  # mkstemp creates 0600; results are meant to be shared
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike, obj) -> Path:
    return atomic_write_text(path, json.dumps(obj, indent=1, sort_keys=True, allow_nan=True) + "\n")


def atomic_save_npz(path: str | os.PathLike, **arrays: np.ndarray) -> Path:
    """``np.savez`` atomically. Object arrays are refused (they would need pickles to load)."""
    for k, a in arrays.items():
        if np.asarray(a).dtype == object:
            raise ValueError(f"refusing to save object array {k!r} to {path}: it could only be loaded with pickles")
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    return atomic_write_bytes(path, buf.getvalue())


def load_npz(path: str | os.PathLike) -> dict[str, np.ndarray]:
    """Load an ``.npz`` written by :func:`atomic_save_npz`; never unpickles."""
    with np.load(path, allow_pickle=False) as z:
        return {k: z[k] for k in z.files}


def read_text_lines(path: str | os.PathLike, what: str = "file", drop_trailing_blank: bool = False) -> list[str]:
    """The lines of a UTF-8 text file, without their line endings (``\\n`` and ``\\r``).

    The final newline ends the last line rather than starting an empty one; with
    ``drop_trailing_blank`` every blank line at the end is dropped too. A missing file raises
    ``FileNotFoundError`` and a non-UTF-8 one ``ValueError``, both naming ``what`` / the path."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{what} {path} does not exist")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from exc
    lines = text.split("\n")
    if drop_trailing_blank:
        while lines and not lines[-1].strip():
            lines.pop()
    elif lines and lines[-1] == "":
        lines.pop()
    return [ln.rstrip("\r") for ln in lines]


def load_npy(path: str | os.PathLike) -> np.ndarray:
    """Load an ``.npy`` array without pickles; a pickled/object array raises ``ValueError`` naming the file."""
    try:
        return np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise ValueError(f"{path}: cannot load without pickles (object array or pickle file?): {exc}") from exc


def sha256_file(path: str | os.PathLike) -> str:
    """The sha256 of a file's bytes, read in 1 MiB blocks (the checksums of run-cache entries and bundles).

    Args:
        path: the file.

    Returns:
        The hexadecimal digest.
    """
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
