"""Binary retrieval metrics of VSE++ (Faghri et al.) used by every paper's tables.

Inputs: ``sim`` of shape (n_images, n_captions), and ``image_of_caption`` (length n_captions)
giving the index of each caption's image (VSE++ precomp order: caption k ↦ image k // 5).

* image→text: rank of an image query = best (smallest) 0-based rank among its captions;
* text→image: rank of a caption query = 0-based rank of its one image;
* R@K = 100 · fraction of queries with rank < K (a percentage);
* RSUM = R@1 + R@5 + R@10 of both directions;
* medr / meanr = median / mean of the 1-based ranks;
* image→text mAP with the image's captions as positives (ladder Table XI): :func:`i2t_map`.

Ties are broken pessimistically (an equal-scoring wrong item counts as ranked above), so a
constant similarity matrix never looks good. Computation is chunked over queries (blocks of
about one million entries by default) and the input is never copied as a whole.
"""

from __future__ import annotations

import numpy as np

from ._blocks import block, check_image_of_caption, check_sim, default_chunk, gt_block

KS = (1, 5, 10)


def _as_arrays(sim, image_of_caption):
    """Validated views (no float64 copy of the whole matrix: blocks are converted one at a time)."""
    sim = check_sim(sim)
    return sim, check_image_of_caption(image_of_caption, *sim.shape)


def i2t_ranks(sim, image_of_caption, chunk: int | None = None) -> np.ndarray:
    """Rank of the best-ranked ground-truth caption of every image query (pessimistic ties).

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        chunk: image queries per block (default: about one million matrix entries per block).

    Returns:
        (n_images,) int64 0-based ranks.

    Raises:
        ValueError: an image without a caption (an image query needs a positive).
    """
    sim, img = _as_arrays(sim, image_of_caption)
    n_img = sim.shape[0]
    counts = np.bincount(img, minlength=n_img)
    if (counts == 0).any():
        missing = np.flatnonzero(counts == 0)[:5]
        raise ValueError(f"image(s) {missing.tolist()} have no caption; every image query needs ≥ 1 positive")
    ranks = np.empty(n_img, dtype=np.int64)
    chunk = chunk or default_chunk(sim.shape[1])
    for s in range(0, n_img, chunk):
        e = min(n_img, s + chunk)
        blk, g = block(sim, "i2t", s, e), gt_block(img, n_img, "i2t", s, e)
        best_pos = np.where(g, blk, -np.inf).max(axis=1)
        # pessimistic ties: count negatives scoring >= the best positive
        ranks[s:e] = ((blk >= best_pos[:, None]) & ~g).sum(axis=1)
    return ranks


def t2i_ranks(sim, image_of_caption, chunk: int | None = None) -> np.ndarray:
    """Rank of the ground-truth image of every caption query (pessimistic ties).

    Args:
        sim, image_of_caption: as for :func:`i2t_ranks`.
        chunk: caption queries per block (default: about one million matrix entries per block).

    Returns:
        (n_captions,) int64 0-based ranks.
    """
    sim, img = _as_arrays(sim, image_of_caption)
    n_cap = sim.shape[1]
    ranks = np.empty(n_cap, dtype=np.int64)
    chunk = chunk or default_chunk(sim.shape[0])
    for s in range(0, n_cap, chunk):
        e = min(n_cap, s + chunk)
        blk = block(sim, "t2i", s, e)  # captions × images
        pos = blk[np.arange(blk.shape[0]), img[s:e]]
        ranks[s:e] = (blk >= pos[:, None]).sum(axis=1) - 1
    return ranks


def recall_from_ranks(ranks: np.ndarray, ks=KS) -> dict[str, float]:
    """R@K from 0-based ranks.

    Args:
        ranks: 0-based ranks of the queries (:func:`i2t_ranks`, :func:`t2i_ranks`).
        ks: the cut-offs K.

    Returns:
        ``{"r{K}": 100 · share of queries with rank < K}``.
    """
    return {f"r{k}": 100.0 * float(np.mean(ranks < k)) for k in ks}


def retrieval_metrics(sim, image_of_caption, ks=KS) -> dict[str, float]:
    """R@K for both directions, RSUM, median and mean rank.

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        ks: the cut-offs K.

    Returns:
        ``{"i2t_r1" … "i2t_r10", "i2t_medr", "i2t_meanr", "t2i_r1" …, "rsum"}``: recalls in percent,
        ranks 1-based, RSUM the sum of the six recalls.
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
    """COCO-"1K"-style evaluation: :func:`retrieval_metrics` on consecutive folds of ``fold_size``
    images (captions go with their image's fold), averaged over folds.

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        fold_size: images per fold; with fewer than ``2 * fold_size`` images the whole set is one fold.
        ks: the cut-offs K.

    Returns:
        The keys of :func:`retrieval_metrics` averaged over folds, and ``n_folds`` (so tables can say
        which protocol they report).
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


def i2t_map(sim, image_of_caption, chunk: int | None = None) -> float:
    """Image→text mean average precision with the image's captions as the positives (ladder
    Sec. IV-F, Table XI; a fraction in [0, 1]). Per image, AP = (1/|P|) Σ_{k: item_k ∈ P} P@k over
    the whole caption ranking (ties pessimistic, see :mod:`._blocks`); averaged over images.
    (Table XI's column header reads "Sentence to Image", its text says image-to-sentence, the
    only direction with several positives; we follow the text.)

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        chunk: image queries per block.

    Returns:
        The mean AP over image queries, a fraction in [0, 1].
    """
    from ._engine import GT, Plan, reduce, run

    sim, img = _as_arrays(sim, image_of_caption)
    res = reduce(run(sim, img, Plan(positives={GT: (True, None)}, ap_for=(GT,), directions=("i2t",), chunk=chunk)))
    return res["ap_i2t_gt"]
