"""The data containers every source produces and every consumer reads.

A split is a :class:`CaptionedImages`: one feature row per image and ``captions_per_image``
captions per image in VSE++ precomp order (caption k describes image ``k // captions_per_image``).
A :class:`DataSplits` bundles train/dev/test. Relevance providers (pseudo labels, true or human
relevance) implement :class:`RelevanceProvider`: rows are images, columns captions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

import numpy as np


@dataclass
class CaptionedImages:
    """One split: image features, their captions, and (synthetic world only) true relevance."""

    name: str  # e.g. "synthetic/test", "flickr8k/dev"
    features: np.ndarray  # (n_images, d) float32
    captions: list[str]  # n_images * captions_per_image, grouped by image
    image_ids: list[str]
    captions_per_image: int = 5
    true_relevance: np.ndarray | None = None  # (n_images, n_captions) in [0, 1], if known
    extras: dict = field(default_factory=dict)  # source-specific tables (e.g. human judgements)

    def __post_init__(self) -> None:
        n = self.features.shape[0]
        if self.features.ndim != 2:
            raise ValueError(f"{self.name}: features must be 2-D (images × dim), got shape {self.features.shape}")
        if len(self.image_ids) != n:
            raise ValueError(f"{self.name}: {len(self.image_ids)} image ids for {n} feature rows")
        if len(self.captions) != n * self.captions_per_image:
            raise ValueError(
                f"{self.name}: {len(self.captions)} captions for {n} images × "
                f"{self.captions_per_image} captions per image = {n * self.captions_per_image}"
            )
        if self.true_relevance is not None and self.true_relevance.shape != (n, len(self.captions)):
            raise ValueError(
                f"{self.name}: true_relevance shape {self.true_relevance.shape} != ({n}, {len(self.captions)})"
            )

    @property
    def n_images(self) -> int:
        return self.features.shape[0]

    @property
    def n_captions(self) -> int:
        return len(self.captions)

    @property
    def image_of_caption(self) -> np.ndarray:
        return np.arange(self.n_captions) // self.captions_per_image

    def subset_images(self, image_idx: np.ndarray, name: str | None = None) -> "CaptionedImages":
        """The split restricted to ``image_idx`` (in that order) with their captions."""
        image_idx = np.asarray(image_idx, dtype=np.int64)
        cpi = self.captions_per_image
        cap_idx = (image_idx[:, None] * cpi + np.arange(cpi)[None, :]).reshape(-1)
        tr = None if self.true_relevance is None else self.true_relevance[np.ix_(image_idx, cap_idx)]
        extras = {
            k: _subset_pairs_table(v, image_idx, cap_idx, self.n_images, self.n_captions)
            for k, v in self.extras.items()
        }
        return CaptionedImages(
            name or self.name,
            self.features[image_idx],
            [self.captions[k] for k in cap_idx],
            [self.image_ids[i] for i in image_idx],
            cpi,
            tr,
            extras,
        )


def _subset_pairs_table(value, image_idx: np.ndarray, cap_idx: np.ndarray, n_images: int, n_captions: int):
    """Tables of (image_idx, caption_idx, …) pairs (e.g. human judgements) follow a subset: rows whose
    image and caption both survive are kept, their indices renumbered; anything else is unchanged."""
    cols = getattr(value, "columns", ())
    if "image_idx" not in cols or "caption_idx" not in cols:
        return value
    new_img = np.full(n_images, -1, dtype=np.int64)
    new_img[image_idx] = np.arange(len(image_idx))
    new_cap = np.full(n_captions, -1, dtype=np.int64)
    new_cap[cap_idx] = np.arange(len(cap_idx))
    out = value.copy()
    out["image_idx"] = new_img[out["image_idx"].to_numpy()]
    out["caption_idx"] = new_cap[out["caption_idx"].to_numpy()]
    return out[(out["image_idx"] >= 0) & (out["caption_idx"] >= 0)].reset_index(drop=True)


DATASET_CAPTIONS = "dataset_captions"  # split.extras key: every caption of the data set (train, dev, test, in order)


@dataclass
class DataSplits:
    """Train/dev/test of one data set. Each split's ``extras[DATASET_CAPTIONS]`` names every caption of the three
    (one shared list; a split's subsets keep it), so Sentence-BERT relevance reads a caption's row of its data set's
    whole embedding wherever the split goes (:class:`~coherent_itr.data.sbert.SBERTRelevance`), as training does:
    a caption embedded with other captions gets other last bits."""

    train: CaptionedImages
    dev: CaptionedImages
    test: CaptionedImages

    def __post_init__(self) -> None:
        every = [c for s in (self.train, self.dev, self.test) for c in s.captions]
        for s in (self.train, self.dev, self.test):
            s.extras.setdefault(DATASET_CAPTIONS, every)


class RelevanceProvider(Protocol):
    """Continuous relevance of captions to images (rows images, columns captions)."""

    name: str

    def batch(self, image_idx: np.ndarray, caption_idx: np.ndarray) -> np.ndarray:
        """(B, B) float32: relevance of caption ``caption_idx[j]`` to image ``image_idx[i]``."""

    def matrix(self) -> np.ndarray:
        """(n_images, n_captions) float32 over the whole split."""


class TrueRelevance:
    """The oracle provider: a split's known true relevance (synthetic world only)."""

    name = "true"

    def __init__(self, split: CaptionedImages) -> None:
        if split.true_relevance is None:
            raise ValueError(f"{split.name} has no true relevance; it exists for the synthetic world only")
        self._m = split.true_relevance.astype(np.float32)

    def batch(self, image_idx, caption_idx) -> np.ndarray:
        return self._m[np.ix_(np.asarray(image_idx), np.asarray(caption_idx))]

    def matrix(self) -> np.ndarray:
        return self._m
