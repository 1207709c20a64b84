"""A tiny generated data set for unit tests: seconds to build, no files, no models.

Each image is a set of 2–3 "concepts" out of ``n_concepts``; its feature is a fixed random
projection of the concept indicator plus Gaussian noise; its captions name its concepts
(with a random subset dropped) in short template sentences. True relevance is the Jaccard
overlap of concept sets. This is *not* the study's synthetic world (see ``synthetic``); it only
has to be learnable and deterministic.
"""

from __future__ import annotations

import numpy as np

from .base import CaptionedImages, DataSplits

_WORDS = [
    "dog",
    "cat",
    "man",
    "woman",
    "child",
    "ball",
    "grass",
    "beach",
    "car",
    "bike",
    "tree",
    "water",
    "snow",
    "red",
    "blue",
    "running",
    "sitting",
    "jumping",
    "city",
    "park",
]


def make_toy_splits(
    n_train: int = 200,
    n_dev: int = 40,
    n_test: int = 40,
    dim: int = 32,
    n_concepts: int = 12,
    noise: float = 0.3,
    seed: int = 0,
) -> DataSplits:
    """A tiny learnable data set (module docstring), deterministic from ``seed``.

    Args:
        n_train, n_dev, n_test: images per split (5 captions each).
        dim: image feature size.
        n_concepts: concepts to draw from (each image has 2–3).
        noise: sd of the Gaussian noise on the features.
        seed: the generator's seed.

    Returns:
        :class:`DataSplits` whose :class:`CaptionedImages` carry the true relevance (Jaccard overlap).
    """
    if n_concepts > len(_WORDS):
        raise ValueError(f"n_concepts must be ≤ {len(_WORDS)}, got {n_concepts}")
    rng = np.random.default_rng(seed)
    proj = rng.normal(size=(n_concepts, dim)) / np.sqrt(n_concepts)

    def split(name: str, n: int) -> CaptionedImages:
        sets = [rng.choice(n_concepts, size=rng.integers(2, 4), replace=False) for _ in range(n)]
        ind = np.zeros((n, n_concepts))
        for i, s in enumerate(sets):
            ind[i, s] = 1.0
        feats = (np.tanh(ind @ proj * 3) + noise * rng.normal(size=(n, dim))).astype(np.float32)
        caps, cap_sets = [], []
        for s in sets:
            for _ in range(5):
                keep = [c for c in s if rng.random() > 0.25] or [s[0]]
                words = [_WORDS[c] for c in rng.permutation(keep)]
                caps.append("a photo of " + " and ".join(words))
                cap_sets.append(set(keep))
        rel = np.array([[len(set(s) & cs) / len(set(s) | cs) for cs in cap_sets] for s in sets], dtype=np.float32)
        return CaptionedImages(f"toy/{name}", feats, caps, [f"toy{name}{i}" for i in range(n)], 5, rel)

    return DataSplits(split("train", n_train), split("dev", n_dev), split("test", n_test))
