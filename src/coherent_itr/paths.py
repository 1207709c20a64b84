"""Where things live on disk: configured by environment variables, never hard-coded.

* ``COHERENT_ITR_CACHE`` — run cache, features, pseudo labels. Default: ``.cache/`` in the checkout this
  package is imported from (``make``, ``python -m reproduce``, notebooks in Lab and their kernels all import
  it from ``src/``, so they share one cache); ``~/.cache/coherent_itr`` for a copy installed outside a
  checkout. :func:`cache_origin` says which applies.
* ``FLICKR8K_DIR`` — the Flickr8k release folder (images/, Flickr8k.token.txt, splits, annotations).

This module imports nothing heavy: the command line checks its inputs with it before any work.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

FLICKR8K_ENV = "FLICKR8K_DIR"
CACHE_ENV = "COHERENT_ITR_CACHE"
# src/coherent_itr/paths.py → the checkout (a folder with pyproject.toml and src/coherent_itr/) when run from one
_CHECKOUT = Path(__file__).resolve().parents[2]


def default_cache_dir() -> Path:
    """The cache root when ``$COHERENT_ITR_CACHE`` is unset: ``<checkout>/.cache`` (git-ignored; ``make clean``
    removes it) when this package is imported from a checkout's ``src/`` (editable install or
    ``PYTHONPATH=src``), else ``~/.cache/coherent_itr``."""
    if (_CHECKOUT / "pyproject.toml").is_file() and (_CHECKOUT / "src" / "coherent_itr").is_dir():
        return _CHECKOUT / ".cache"
    return Path.home() / ".cache" / "coherent_itr"


def cache_origin(override: str | os.PathLike | None = None) -> str:
    """Where the cache root comes from, for messages: ``cache_dir=...``, ``$COHERENT_ITR_CACHE=...`` or the default."""
    if override:
        return f"cache_dir={override}"
    if os.environ.get(CACHE_ENV):
        return f"${CACHE_ENV}={os.environ[CACHE_ENV]}"
    return f"the default {default_cache_dir()} (${CACHE_ENV} unset)"


def cache_dir(override: str | os.PathLike | None = None, create: bool = True) -> Path:
    """The cache root: ``override`` if given, else ``$COHERENT_ITR_CACHE``, else :func:`default_cache_dir`.

    With ``create``, a folder that cannot be made raises ``OSError`` naming the folder and where it came from
    (the variable, the argument or the default)."""
    raw = override or os.environ.get(CACHE_ENV)
    p = Path(raw).expanduser() if raw else default_cache_dir()
    if create:
        try:
            p.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OSError(
                exc.errno,
                f"cache folder {p} (from {cache_origin(override)}) cannot be created: {exc.strerror or exc}; "
                f"set {CACHE_ENV} to a writable folder",
            ) from exc
    return p


def writable_problem(folder: str | os.PathLike) -> str | None:
    """``None`` if files can be created in ``folder`` (created if missing), else why not, naming it.

    Checked by creating and removing a temporary file, so it also catches a full or read-only
    file system, not only the permission bits (which do not stop root)."""
    folder = Path(folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".write-check-")
        os.close(fd)
        os.unlink(tmp)
    except OSError as exc:
        return f"{folder} is not a writable folder ({exc.strerror or exc})"
    return None


def flickr8k_dir(override: str | os.PathLike | None = None, required: bool = True) -> Path | None:
    """The Flickr8k folder from ``override`` or ``$FLICKR8K_DIR``.

    Unset: ``None`` with ``required=False``, else ``FileNotFoundError`` saying what to do. Set but
    not a folder: always ``FileNotFoundError`` naming it — a typo must never silently drop the data set."""
    raw = override or os.environ.get(FLICKR8K_ENV)
    if not raw:
        if not required:
            return None
        raise FileNotFoundError(
            f"Flickr8k is not configured: set {FLICKR8K_ENV}=/path/to/flickr8k (the folder holding images/, "
            "Flickr8k.token.txt and Flickr_8k.*Images.txt), or pass data_dir=. The study runs without it on "
            "the embedded synthetic world."
        )
    p = Path(raw).expanduser()
    if not p.is_dir():
        source = "data_dir" if override else f"${FLICKR8K_ENV}"
        raise FileNotFoundError(f"Flickr8k folder {p} (from {source}) does not exist or is not a folder")
    return p
