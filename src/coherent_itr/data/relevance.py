"""Shared machinery of the relevance (pseudo-label) providers: hashing and the on-disk cache.

A provider computes two things over a split (rows images, columns captions, VSE++ precomp order):

* ``batch(image_idx, caption_idx)`` — the (B, B) block a training step needs, computed on the fly
  from per-caption data prepared once (embeddings, sparse tf-idf vectors);
* ``matrix()`` — the full (n_images, n_captions) relevance for evaluation, cached on disk under
  ``<cache>/relevance/<provider>/<key>.npy`` where the key hashes the provider, its parameters,
  the captions (in order) and the number of captions per image.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from ..io import atomic_write_bytes, load_npy
from ..paths import cache_dir as _cache_root


def captions_hash(captions: Sequence[str]) -> str:
    """sha256 of the captions in order (each caption's length-prefixed UTF-8 bytes)."""
    h = hashlib.sha256()
    for c in captions:
        b = c.encode("utf-8")
        h.update(len(b).to_bytes(8, "little"))
        h.update(b)
    return h.hexdigest()


def params_key(provider: str, params: dict, captions: Sequence[str], captions_per_image: int, extra: str = "") -> str:
    blob = json.dumps(
        {
            "provider": provider,
            "params": params,
            "captions": captions_hash(captions),
            "cpi": captions_per_image,
            "extra": extra,
        },
        sort_keys=True,
        default=str,
    )
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _save_npy(path: Path, arr: np.ndarray) -> None:
    import io

    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    atomic_write_bytes(path, buf.getvalue())


def cached_matrix(
    provider: str,
    params: dict,
    captions: Sequence[str],
    captions_per_image: int,
    compute: Callable[[], np.ndarray],
    cache_dir=None,
    extra: str = "",
) -> np.ndarray:
    """``compute()`` once, then from ``<cache>/relevance/<provider>/<key>.npy`` (written atomically).

    ``cache_dir=False`` disables the disk cache."""
    if cache_dir is False:
        return compute().astype(np.float32)
    key = params_key(provider, params, captions, captions_per_image, extra)
    path = _cache_root(cache_dir) / "relevance" / provider / f"{key}.npy"
    if path.exists():
        return load_npy(path)
    m = np.asarray(compute(), dtype=np.float32)
    _save_npy(path, m)
    return m


def check_params(provider: str, params: dict, allowed: dict) -> dict:
    """Validate ``params`` against ``allowed`` = {name: (default, tuple of allowed values | type)}."""
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"relevance provider {provider!r}: unknown parameter(s) {unknown}; valid: {sorted(allowed)}")
    out = {}
    for name, (default, ok) in allowed.items():
        v = params.get(name, default)
        if isinstance(ok, tuple):
            if v not in ok:
                raise ValueError(
                    f"relevance provider {provider!r}: {name}={v!r} is invalid; expected one of {list(ok)}"
                )
        elif not isinstance(v, ok) or isinstance(v, bool) and ok is not bool:
            raise ValueError(f"relevance provider {provider!r}: {name}={v!r} is invalid; expected {ok.__name__}")
        out[name] = v
    return out
