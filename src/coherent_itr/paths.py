"""Where things live on disk: configured by environment variables, never hard-coded.

* ``COHERENT_ITR_CACHE`` — run cache, features, pseudo labels (default ``~/.cache/coherent_itr``).
* ``FLICKR8K_DIR`` — the Flickr8k release folder (images/, Flickr8k.token.txt, splits, annotations).
"""
from __future__ import annotations

import os
from pathlib import Path

FLICKR8K_ENV = "FLICKR8K_DIR"
CACHE_ENV = "COHERENT_ITR_CACHE"


def cache_dir(override: str | os.PathLike | None = None) -> Path:
    """The cache root: ``override`` if given, else ``$COHERENT_ITR_CACHE``, else ``~/.cache/coherent_itr``."""
    p = Path(override) if override else Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "coherent_itr")
    p.mkdir(parents=True, exist_ok=True)
    return p


def flickr8k_dir(override: str | os.PathLike | None = None, required: bool = True) -> Path | None:
    """The Flickr8k folder from ``override`` or ``$FLICKR8K_DIR``.

    With ``required=True`` a missing setting or folder raises ``FileNotFoundError`` saying what to do.
    """
    raw = override or os.environ.get(FLICKR8K_ENV)
    if not raw:
        if not required:
            return None
        raise FileNotFoundError(
            f"Flickr8k is not configured: set {FLICKR8K_ENV}=/path/to/flickr8k (the folder holding images/, "
            "Flickr8k.token.txt and Flickr_8k.*Images.txt), or pass data_dir=. The study runs without it on "
            "the embedded synthetic world.")
    p = Path(raw).expanduser()
    if not p.is_dir():
        if not required:
            return None
        raise FileNotFoundError(f"Flickr8k folder {p} (from {FLICKR8K_ENV} or data_dir) does not exist")
    return p
