"""The VSE++ / SCAN "precomp" layout: precomputed image features and their captions.

A split ``s`` of data set ``name`` (``f8k``, ``f30k``, ``coco``) is two files in one folder:

* ``{s}_ims.npy`` — float features, one row per image, or one row per caption (the row repeated
  for the image's 5 captions, as some releases do; we keep one row per image);
* ``{s}_caps.txt`` — one caption per line, 5 consecutive lines per image
  (caption k describes image k // 5);
* optionally ``{s}_ids.txt`` — one image id per line (otherwise ids are ``name/s/<index>``).

The folder is ``<data_dir>/<name>_precomp`` (VSE++), ``<data_dir>/<name>``, or ``data_dir``
itself. Splits are ``train``, ``dev`` and ``test``; for COCO the 5K ``testall`` is used as the
test split when present (COCO 1K numbers are then the mean over its five folds). Region
features (SCAN's (n, 36, 2048) arrays) are refused: pool them to one vector per image first.
"""

from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Sequence

import numpy as np

from ..io import atomic_write_bytes, atomic_write_text, load_npy, read_text_lines
from .base import CaptionedImages, DataSplits

NAMES = ("f8k", "f30k", "coco")
SPLITS = ("train", "dev", "test")


def precomp_folder(data_dir: str | os.PathLike, name: str) -> Path:
    """The folder holding ``name``'s precomp files (see the module docstring)."""
    if name not in NAMES:
        raise ValueError(f"precomp data set name={name!r} is invalid; expected one of {list(NAMES)}")
    if data_dir is None:
        raise ValueError("precomp data needs data_dir= (the folder with the <name>_precomp folder)")
    root = Path(data_dir).expanduser()
    if not root.is_dir():
        raise FileNotFoundError(f"precomp folder {root} does not exist")
    for cand in (root / f"{name}_precomp", root / name, root):
        if (cand / "train_caps.txt").exists() or (cand / "test_caps.txt").exists():
            return cand
    raise FileNotFoundError(
        f"no precomp files for {name!r} under {root}: expected {root / (name + '_precomp')}/"
        "{train,dev,test}_ims.npy and _caps.txt"
    )


def read_captions(path: Path) -> list[str]:
    """One caption per line (UTF-8); an empty caption raises ValueError naming the file and line."""
    caps = []
    for k, line in enumerate(read_text_lines(path, "caption file"), start=1):
        c = line.strip()
        if not c:
            raise ValueError(f"{path}: line {k}: empty caption (every line must hold one caption)")
        caps.append(c)
    return caps


def read_features(path: Path) -> np.ndarray:
    """A 2-D finite float array from ``.npy`` (never unpickled); bad input names the file."""
    if not path.is_file():
        raise FileNotFoundError(f"feature file {path} does not exist")
    arr = load_npy(path)
    if not np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.complexfloating):
        raise ValueError(f"{path}: features must be a real numeric array, got dtype {arr.dtype}")
    if arr.ndim == 3:
        raise ValueError(
            f"{path}: got region features of shape {arr.shape}; this study uses one vector per "
            "image — pool them first (e.g. arr.mean(axis=1))"
        )
    if arr.ndim != 2 or arr.shape[0] == 0 or arr.shape[1] == 0:
        raise ValueError(f"{path}: features must be a non-empty 2-D array (rows × dim), got shape {arr.shape}")
    finite = np.isfinite(arr).all(axis=1)
    if not finite.all():
        bad = np.flatnonzero(~finite)
        raise ValueError(f"{path}: {len(bad)} feature row(s) contain NaN or infinite values (first: row {bad[0]})")
    return arr.astype(np.float32, copy=False)


def load_precomp_split(
    folder: str | os.PathLike, split: str, name: str = "precomp", captions_per_image: int = 5
) -> CaptionedImages:
    folder = Path(folder)
    ims_path, caps_path = folder / f"{split}_ims.npy", folder / f"{split}_caps.txt"
    caps = read_captions(caps_path)
    feats = read_features(ims_path)
    cpi = captions_per_image
    if len(caps) % cpi:
        raise ValueError(f"{caps_path}: {len(caps)} captions is not a multiple of {cpi} captions per image")
    n_img = len(caps) // cpi
    if feats.shape[0] == len(caps) and cpi > 1:
        groups = feats.reshape(n_img, cpi, -1)
        if not np.allclose(groups, groups[:, :1], rtol=1e-5, atol=1e-6):
            bad = int(np.flatnonzero(~np.isclose(groups, groups[:, :1], rtol=1e-5, atol=1e-6).all(axis=(1, 2)))[0])
            raise ValueError(
                f"{ims_path}: one row per caption ({feats.shape[0]} rows) but the {cpi} rows of image "
                f"{bad} (rows {bad * cpi}–{bad * cpi + cpi - 1}) differ; expected each image's row repeated"
            )
        feats = np.ascontiguousarray(groups[:, 0])
    elif feats.shape[0] != n_img:
        raise ValueError(
            f"{ims_path}: {feats.shape[0]} feature rows, but {caps_path} has {len(caps)} captions = "
            f"{n_img} images × {cpi}; expected {n_img} rows (per image) or {len(caps)} (per caption)"
        )
    ids_path = folder / f"{split}_ids.txt"
    if ids_path.exists():
        ids = [x.strip() for x in ids_path.read_text(encoding="utf-8").splitlines() if x.strip()]
        if len(ids) != n_img:
            raise ValueError(f"{ids_path}: {len(ids)} image ids for {n_img} images")
    else:
        ids = [f"{name}/{split}/{i}" for i in range(n_img)]
    return CaptionedImages(f"{name}/{split}", feats, caps, ids, cpi)


def load_precomp(data_dir: str | os.PathLike, name: str) -> DataSplits:
    """Train/dev/test of a precomp data set ``name`` under ``data_dir``."""
    folder = precomp_folder(data_dir, name)
    out = []
    for split in SPLITS:
        file_split = split
        if split == "test" and name == "coco" and (folder / "testall_caps.txt").exists():
            file_split = "testall"
        s = load_precomp_split(folder, file_split, name)
        s.name = f"{name}/{split}"
        out.append(s)
    return DataSplits(*out)


def write_precomp_split(
    folder: str | os.PathLike,
    split: str,
    features: np.ndarray,
    captions: Sequence[str],
    image_ids: Sequence[str] | None = None,
) -> Path:
    """Write ``{split}_ims.npy``, ``{split}_caps.txt`` (and ``_ids.txt``) atomically."""
    folder = Path(folder)
    bad = [k for k, c in enumerate(captions) if not c.strip() or "\n" in c]
    if bad:
        raise ValueError(f"caption {bad[0]} of split {split!r} is empty or contains a newline: {captions[bad[0]]!r}")
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(features, dtype=np.float32), allow_pickle=False)
    atomic_write_bytes(folder / f"{split}_ims.npy", buf.getvalue())
    atomic_write_text(folder / f"{split}_caps.txt", "".join(c.strip() + "\n" for c in captions))
    if image_ids is not None:
        atomic_write_text(folder / f"{split}_ids.txt", "".join(f"{i}\n" for i in image_ids))
    return folder
