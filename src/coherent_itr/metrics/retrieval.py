"""Binary retrieval metrics of VSE++ (Faghri et al.) used by every paper's tables.

Inputs: ``sim`` of shape (n_images, n_captions), and ``image_of_caption`` (length n_captions)
giving the index of each caption's image (VSE++ precomp order: caption k ↦ image k // 5).

* image→text: rank of an image query = best (smallest) 0-based rank among its captions;
* text→image: rank of a caption query = 0-based rank of its one image;
* R@K = 100 · fraction of queries with rank < K (a percentage);
* RSUM = R@1 + R@5 + R@10 of both directions;
* medr / meanr = median / mean of the 1-based ranks.

Ties are broken pessimistically (an equal-scoring wrong item counts as ranked above), so a
constant similarity matrix never looks good. Computation is chunked over queries so a
5,000 × 25,000 evaluation never materialises more than ``chunk`` rows of ranks at once.
"""
from __future__ import annotations

import numpy as np

KS = (1, 5, 10)


def _as_arrays(sim, image_of_caption):
    sim = np.asarray(sim, dtype=np.float64)
    img = np.asarray(image_of_caption, dtype=np.int64)
    if sim.ndim != 2:
        raise ValueError(f"sim must be 2-D (images × captions), got shape {sim.shape}")
    if img.shape != (sim.shape[1],):
        raise ValueError(f"image_of_caption must have one entry per caption ({sim.shape[1]}), got shape {img.shape}")
    if img.size and (img.min() < 0 or img.max() >= sim.shape[0]):
        raise ValueError(f"image_of_caption values must be in [0, {sim.shape[0]}), got [{img.min()}, {img.max()}]")
    if not np.isfinite(sim).all():
        raise ValueError("sim contains NaN or infinite values")
    return sim, img


def i2t_ranks(sim, image_of_caption, chunk: int = 256) -> np.ndarray:
    """0-based rank of the best-ranked ground-truth caption for every image query."""
    sim, img = _as_arrays(sim, image_of_caption)
    n_img = sim.shape[0]
    ranks = np.empty(n_img, dtype=np.int64)
    gt = np.zeros((n_img, sim.shape[1]), dtype=bool)
    gt[img, np.arange(img.size)] = True
    if not gt.any(axis=1).all():
        missing = np.flatnonzero(~gt.any(axis=1))[:5]
        raise ValueError(f"image(s) {missing.tolist()} have no caption; every image query needs ≥ 1 positive")
    for s in range(0, n_img, chunk):
        block, g = sim[s:s + chunk], gt[s:s + chunk]
        best_pos = np.where(g, block, -np.inf).max(axis=1)
        # pessimistic ties: count negatives scoring >= the best positive
        ranks[s:s + chunk] = ((block >= best_pos[:, None]) & ~g).sum(axis=1)
    return ranks


def t2i_ranks(sim, image_of_caption, chunk: int = 1024) -> np.ndarray:
    """0-based rank of the ground-truth image for every caption query."""
    sim, img = _as_arrays(sim, image_of_caption)
    n_cap = sim.shape[1]
    ranks = np.empty(n_cap, dtype=np.int64)
    for s in range(0, n_cap, chunk):
        block = sim[:, s:s + chunk].T  # captions × images
        gi = img[s:s + chunk]
        pos = block[np.arange(block.shape[0]), gi]
        ranks[s:s + chunk] = (block >= pos[:, None]).sum(axis=1) - 1
    return ranks


def recall_from_ranks(ranks: np.ndarray, ks=KS) -> dict[str, float]:
    return {f"r{k}": 100.0 * float(np.mean(ranks < k)) for k in ks}


def retrieval_metrics(sim, image_of_caption, ks=KS) -> dict[str, float]:
    """R@K for both directions, RSUM, median and mean rank (1-based), as a flat dict.

    Keys: ``i2t_r1 … i2t_r10, i2t_medr, i2t_meanr, t2i_r1 …, rsum``. Recalls are percentages.
    """
    out: dict[str, float] = {}
    for name, ranks in (("i2t", i2t_ranks(sim, image_of_caption)), ("t2i", t2i_ranks(sim, image_of_caption))):
        for k, v in recall_from_ranks(ranks, ks).items():
            out[f"{name}_{k}"] = v
        out[f"{name}_medr"] = float(np.floor(np.median(ranks))) + 1.0
        out[f"{name}_meanr"] = float(ranks.mean()) + 1.0
    out["rsum"] = sum(out[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in ks)
    return out


def fold_averaged_retrieval_metrics(sim, image_of_caption, fold_size: int = 1000, ks=KS) -> dict[str, float]:
    """COCO-"1K"-style evaluation: metrics on consecutive folds of ``fold_size`` images, averaged.

    Captions go with their image's fold. With fewer than ``2 * fold_size`` images this is the
    plain evaluation on the whole set (a single fold). The number of folds is returned as
    ``n_folds`` so tables can say which protocol they report.
    """
    sim, img = _as_arrays(sim, image_of_caption)
    n_img = sim.shape[0]
    n_folds = max(1, n_img // fold_size)
    if n_folds == 1:
        res = retrieval_metrics(sim, img, ks)
        res["n_folds"] = 1.0
        return res
    per_fold = []
    for f in range(n_folds):
        lo, hi = f * fold_size, (f + 1) * fold_size
        caps = np.flatnonzero((img >= lo) & (img < hi))
        per_fold.append(retrieval_metrics(sim[lo:hi][:, caps], img[caps] - lo, ks))
    res = {k: float(np.mean([p[k] for p in per_fold])) for k in per_fold[0]}
    res["n_folds"] = float(n_folds)
    return res
