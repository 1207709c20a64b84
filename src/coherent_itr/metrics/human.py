"""Agreement with human relevance judgements (Flickr8k expert / CrowdFlower scores).

Human judgements are sparse: a table of judged (image, caption, score) triples, indices into the
evaluated split (rows of ``sim``, columns of ``sim``). Two uses:

1. **Agreement** (SAM Table 1, claims S4 and B9): Pearson r and Kendall τ-b between some values at
   the judged pairs — the model's similarity, a pseudo-label provider's relevance, or the binary
   ground-truth indicator ("binary relevance (GT)" in SAM Table 1) — and the human score, over
   all judged pairs and over the non-ground-truth pairs only (caption not written for that image).
   A correlation that is undefined (fewer than 2 pairs, or a constant input — e.g. the GT
   indicator on non-GT pairs) is reported as 0.0, which is what SAM Table 1 prints for binary
   relevance on non-GT pairs; the number of pairs is reported beside it.
2. **Positives** for the semantic metrics (mAP@R, R-P, R@1): a judged pair is a positive when its
   score is ≥ the source's threshold. For the expert scores (mean of 3 experts on the 1–4 scale)
   the threshold is :data:`EXPERT_POSITIVE_THRESHOLD` = 3 ("the caption describes the image with
   minor errors" or better); it is stated here and nowhere else. Unjudged pairs are negatives;
   ground-truth pairs are positives only if judged so (``include_gt=True`` adds them all). Only
   queries with ≥ 1 positive are evaluated (the others are skipped, see ``_nq``). Duplicate
   judgements of one pair are averaged.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import kendalltau

from ._blocks import to_numpy
from .registry import register

EXPERT_POSITIVE_THRESHOLD = 3.0


@dataclass(frozen=True)
class HumanJudgements:
    """Judged pairs: ``image_idx[k]`` (row of sim), ``caption_idx[k]`` (column), ``score[k]``."""

    image_idx: np.ndarray
    caption_idx: np.ndarray
    score: np.ndarray
    name: str = "human"
    positive_threshold: float | None = None  # None: agreement only, no positive set

    def __post_init__(self) -> None:
        img = to_numpy(self.image_idx, "image_idx")
        cap = to_numpy(self.caption_idx, "caption_idx")
        sc = to_numpy(self.score, "score").astype(np.float64)
        for fld, a in (("image_idx", img), ("caption_idx", cap), ("score", sc)):
            if a.ndim != 1:
                raise ValueError(f"HumanJudgements({self.name}).{fld} must be 1-D, got shape {a.shape}")
        if not (len(img) == len(cap) == len(sc)):
            raise ValueError(
                f"HumanJudgements({self.name}): image_idx, caption_idx and score must have one entry "
                f"per judged pair, got lengths {len(img)}, {len(cap)}, {len(sc)}"
            )
        for fld, a in (("image_idx", img), ("caption_idx", cap)):
            if a.size and (not np.issubdtype(a.dtype, np.integer) or a.min() < 0):
                raise ValueError(
                    f"HumanJudgements({self.name}).{fld} must hold non-negative integer indices, "
                    f"got dtype {a.dtype}, min {a.min()}"
                )
        if not np.isfinite(sc).all():
            k = int(np.flatnonzero(~np.isfinite(sc))[0])
            raise ValueError(f"HumanJudgements({self.name}).score[{k}] = {sc[k]} is not finite")
        object.__setattr__(self, "image_idx", img.astype(np.int64))
        object.__setattr__(self, "caption_idx", cap.astype(np.int64))
        object.__setattr__(self, "score", sc)

    @classmethod
    def expert(cls, image_idx, caption_idx, score) -> "HumanJudgements":
        """Flickr8k ExpertAnnotations (mean of 3 experts, 1–4); positives at ≥ EXPERT_POSITIVE_THRESHOLD."""
        return cls(image_idx, caption_idx, score, "expert", EXPERT_POSITIVE_THRESHOLD)

    @classmethod
    def crowd(cls, image_idx, caption_idx, score) -> "HumanJudgements":
        """Flickr8k CrowdFlowerAnnotations (fraction of yes votes); agreement only (no threshold stated)."""
        return cls(image_idx, caption_idx, score, "crowd", None)

    def __len__(self) -> int:
        return len(self.score)

    def check_shape(self, shape: tuple[int, int]) -> None:
        if len(self) and (self.image_idx.max() >= shape[0] or self.caption_idx.max() >= shape[1]):
            raise ValueError(
                f"HumanJudgements({self.name}) index out of range for a {shape[0]} × {shape[1]} "
                f"matrix: max image_idx {self.image_idx.max()}, max caption_idx {self.caption_idx.max()}"
            )

    def restrict(self, images: np.ndarray, captions: np.ndarray) -> "HumanJudgements":
        """The judgements within a sub-matrix (e.g. a 1K fold), re-indexed to it."""
        imap = np.full(int(max(self.image_idx.max(initial=-1), images.max(initial=-1))) + 1, -1)
        cmap = np.full(int(max(self.caption_idx.max(initial=-1), captions.max(initial=-1))) + 1, -1)
        imap[images] = np.arange(len(images))
        cmap[captions] = np.arange(len(captions))
        ni, nc = imap[self.image_idx], cmap[self.caption_idx]
        keep = (ni >= 0) & (nc >= 0)
        return HumanJudgements(ni[keep], nc[keep], self.score[keep], self.name, self.positive_threshold)


def as_judgements(h, name: str = "human") -> HumanJudgements:
    """Accept a :class:`HumanJudgements`, an (image_idx, caption_idx, score) tuple, or a mapping /
    pandas DataFrame with those columns (as ``coherent_itr.data.flickr8k`` stores them in
    ``split.extras["expert"]`` and ``["crowd"]``). The source named ``expert`` gets the positive
    threshold :data:`EXPERT_POSITIVE_THRESHOLD`; other names none unless the mapping has a
    ``positive_threshold`` entry."""
    if isinstance(h, HumanJudgements):
        return h
    default_thr = EXPERT_POSITIVE_THRESHOLD if name == "expert" else None
    if isinstance(h, dict) or hasattr(h, "columns"):
        cols = set(h.columns) if hasattr(h, "columns") else set(h)
        missing = {"image_idx", "caption_idx", "score"} - cols
        if missing:
            raise ValueError(
                f"human judgements {name!r}: columns {sorted(missing)} are missing (have {sorted(map(str, cols))[:8]})"
            )
        thr = h.get("positive_threshold", default_thr) if isinstance(h, dict) else default_thr
        return HumanJudgements(
            np.asarray(h["image_idx"]),
            np.asarray(h["caption_idx"]),
            np.asarray(h["score"], dtype=np.float64),
            name,
            thr,
        )
    if isinstance(h, (tuple, list)) and len(h) == 3:
        return HumanJudgements(*h, name=name, positive_threshold=default_thr)
    raise ValueError(
        f"human judgements {name!r}: expected HumanJudgements, a DataFrame / mapping with "
        f"image_idx, caption_idx, score, or an (image_idx, caption_idx, score) tuple, "
        f"got {type(h).__name__}"
    )


def _pearson(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(np.corrcoef(a, b)[0, 1])


def _kendall(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2 or np.ptp(a) == 0 or np.ptp(b) == 0:
        return 0.0
    return float(kendalltau(a, b).statistic)


def agreement_at_pairs(x, judgements: HumanJudgements, image_of_caption) -> dict[str, float]:
    """Agreement of values at the judged pairs with the human scores.

    Args:
        x: one value per judged pair (same order as ``judgements``).
        judgements: one human source.
        image_of_caption: (n_captions,) image index of every caption (to tell ground-truth pairs apart).

    Returns:
        ``pearson_all``, ``kendall_all`` (τ-b), ``n_all`` over every judged pair and the same ``…_nongt``
        over the pairs that are not ground truth (a correlation of a constant side is 0.0).
    """
    x = to_numpy(x, "x").astype(np.float64)
    if x.shape != judgements.score.shape:
        raise ValueError(f"x must hold one value per judged pair ({len(judgements)}), got shape {x.shape}")
    img = np.asarray(image_of_caption)
    if len(judgements) and judgements.caption_idx.max() >= len(img):
        raise ValueError(
            f"HumanJudgements({judgements.name}).caption_idx max {judgements.caption_idx.max()} "
            f"out of range for {len(img)} captions"
        )
    y = judgements.score
    nongt = img[judgements.caption_idx] != judgements.image_idx
    out = {}
    for tag, m in (("all", np.ones(len(y), dtype=bool)), ("nongt", nongt)):
        out[f"pearson_{tag}"] = _pearson(x[m], y[m])
        out[f"kendall_{tag}"] = _kendall(x[m], y[m])
        out[f"n_{tag}"] = float(m.sum())
    return out


def agreement(values, judgements: HumanJudgements, image_of_caption) -> dict[str, float]:
    """:func:`agreement_at_pairs` of a matrix read at the judged pairs.

    Args:
        values: any (n_images, n_captions) matrix: the model's similarity or a provider's relevance.
        judgements: one human source.
        image_of_caption: (n_captions,) image index of every caption.

    Returns:
        The record of :func:`agreement_at_pairs`.
    """
    v = to_numpy(values, "values")
    if v.ndim != 2:
        raise ValueError(f"values must be a 2-D (images × captions) matrix, got shape {v.shape}")
    judgements.check_shape(v.shape)
    return agreement_at_pairs(v[judgements.image_idx, judgements.caption_idx], judgements, image_of_caption)


def binary_at_pairs(judgements: HumanJudgements, image_of_caption) -> np.ndarray:
    """The ground-truth indicator (1 if the caption was written for the image) at the judged pairs."""
    img = np.asarray(image_of_caption)
    return (img[judgements.caption_idx] == judgements.image_idx).astype(np.float64)


def provider_agreement(
    providers: dict, judgements: HumanJudgements, image_of_caption, include_binary: bool = True
) -> dict[str, float]:
    """Agreement of several relevance providers with one human source.

    Args:
        providers: provider name → (n_images, n_captions) relevance.
        judgements: one human source.
        image_of_caption: (n_captions,) image index of every caption.
        include_binary: add the ground-truth indicator as provider ``binary`` (SAM Table 1's "Binary
            relevance (GT)").

    Returns:
        One flat record ``{f"{source}_{provider}_{stat}"}`` of :func:`agreement` statistics.
    """
    out = {
        f"{judgements.name}_{p}_{k}": v
        for p, m in providers.items()
        for k, v in agreement(m, judgements, image_of_caption).items()
    }
    if include_binary:
        out.update(
            {
                f"{judgements.name}_binary_{k}": v
                for k, v in agreement_at_pairs(
                    binary_at_pairs(judgements, image_of_caption), judgements, image_of_caption
                ).items()
            }
        )
    return out


def positive_pairs(judgements: HumanJudgements, shape: tuple[int, int], threshold: float | None = None):
    """(image_idx, caption_idx) of the judged pairs whose mean score is ≥ the threshold (default:
    the source's ``positive_threshold``)."""
    thr = judgements.positive_threshold if threshold is None else threshold
    if thr is None:
        raise ValueError(f"human judgements {judgements.name!r} have no positive threshold; pass threshold=…")
    judgements.check_shape(shape)
    key = judgements.image_idx * shape[1] + judgements.caption_idx
    uniq, inv = np.unique(key, return_inverse=True)
    mean = np.bincount(inv, weights=judgements.score, minlength=len(uniq)) / np.bincount(inv, minlength=len(uniq))
    hit = uniq[mean >= thr]
    return hit // shape[1], hit % shape[1]


def positive_matrix(
    judgements: HumanJudgements,
    shape: tuple[int, int],
    image_of_caption=None,
    include_gt: bool = False,
    threshold: float | None = None,
) -> np.ndarray:
    """The judged positives of a human source as a matrix.

    Args:
        judgements: one human source.
        shape: (n_images, n_captions).
        image_of_caption: (n_captions,) image index of every caption; needed with ``include_gt``.
        include_gt: also mark every ground-truth pair.
        threshold: a pair is positive when its mean score is ≥ it (default: the source's
            ``positive_threshold``).

    Returns:
        A boolean (n_images, n_captions) matrix.
    """
    rows, cols = positive_pairs(judgements, shape, threshold)
    pos = np.zeros(shape, dtype=bool)
    pos[rows, cols] = True
    if include_gt:
        if image_of_caption is None:
            raise ValueError("include_gt=True needs image_of_caption")
        img = np.asarray(image_of_caption)
        pos[img, np.arange(len(img))] = True
    return pos


@register("human_agreement", "matrix")
def _agreement_metric(problem) -> dict[str, float]:
    """``{src}_pearson_all`` …: :func:`agreement` of the similarity with every human source."""
    out: dict[str, float] = {}
    for h in problem.humans:
        out.update({f"{h.name}_{k}": v for k, v in agreement(problem.sim, h, problem.image_of_caption).items()})
    return out
