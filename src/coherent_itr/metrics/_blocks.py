"""Shared machinery of every metric: input checks, query chunks, and rankings with ONE tie rule.

Orientation. ``sim`` is (n_images, n_captions); ``image_of_caption[c]`` is the image of caption
``c``. Any relevance or positive matrix has the same orientation (rows images, columns captions).
Image→text (``"i2t"``) queries are rows, text→image (``"t2i"``) queries are columns.

Chunks. Metrics are computed over blocks of queries: a block is a (B, n_candidates) float64
copy of B query rows (for t2i, B columns transposed). Inputs are never converted as a whole, so
a float32 5,000 × 25,000 matrix is not duplicated; ``default_chunk`` keeps each block at about
one million entries.

The tie rule (used by every ranking metric in this package). Candidates are ranked by
decreasing model score; among equal scores the *less relevant* candidate is ranked first (then
the lower index). This is the pessimistic rule of the binary recall in :mod:`.retrieval`: a
constant similarity matrix never looks good on any metric. "Relevant" is whatever the metric
measures — the relevance value for CS/NDCG/NCS/SR, the positive flag for mAP@R/R-P/R@1.
"""

from __future__ import annotations

import numpy as np
import torch

DIRECTIONS = ("i2t", "t2i")
BLOCK_ELEMENTS = 1_000_000


def to_numpy(x, name: str) -> np.ndarray:
    """A numpy view of a numpy array or a (CPU/GPU, grad or not) torch tensor; no dtype change."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().numpy()
    return np.asarray(x)


def check_sim(sim) -> np.ndarray:
    sim = to_numpy(sim, "sim")
    if sim.ndim != 2:
        raise ValueError(f"sim must be 2-D (images × captions), got shape {sim.shape}")
    if not np.issubdtype(sim.dtype, np.number) or np.issubdtype(sim.dtype, np.complexfloating):
        raise ValueError(f"sim must hold real numbers, got dtype {sim.dtype}")
    check_finite(sim, "sim")
    return sim


def check_finite(m: np.ndarray, name: str) -> None:
    """Raise if ``m`` holds NaN or ±inf; checked by row chunks (no full-size temporary)."""
    if not np.issubdtype(m.dtype, np.floating):
        return
    step = max(1, BLOCK_ELEMENTS // max(1, m.shape[1]))
    for s in range(0, m.shape[0], step):
        blk = m[s : s + step]
        if not np.isfinite(blk).all():
            r, c = np.argwhere(~np.isfinite(blk))[0]
            raise ValueError(f"{name} contains NaN or infinite values (first at [{s + r}, {c}] = {blk[r, c]})")


def check_image_of_caption(image_of_caption, n_images: int, n_captions: int) -> np.ndarray:
    img = to_numpy(image_of_caption, "image_of_caption")
    if img.shape != (n_captions,):
        raise ValueError(f"image_of_caption must have one entry per caption ({n_captions}), got shape {img.shape}")
    if img.size and not np.issubdtype(img.dtype, np.integer):
        if not np.all(np.mod(img, 1) == 0):
            raise ValueError(f"image_of_caption must hold integer image indices, got dtype {img.dtype}")
    img = img.astype(np.int64)
    if img.size and (img.min() < 0 or img.max() >= n_images):
        raise ValueError(f"image_of_caption values must be in [0, {n_images}), got [{img.min()}, {img.max()}]")
    return img


def check_matrix(m, shape: tuple[int, int], name: str, dtype=None) -> np.ndarray:
    """A relevance / positive matrix aligned with ``sim`` (same shape, finite)."""
    m = to_numpy(m, name)
    if m.shape != tuple(shape):
        raise ValueError(
            f"{name} must have the shape of sim {tuple(shape)} (rows images, columns captions), got {m.shape}"
        )
    if dtype is bool:
        if m.dtype != bool:
            raise ValueError(f"{name} must be a boolean matrix (True = positive), got dtype {m.dtype}")
        return m
    if not np.issubdtype(m.dtype, np.number):
        raise ValueError(f"{name} must hold real numbers, got dtype {m.dtype}")
    check_finite(m, name)
    return m


def check_direction(direction: str) -> str:
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {list(DIRECTIONS)}, got {direction!r}")
    return direction


def check_ks(ks, name: str = "ks") -> tuple[int, ...]:
    ks = (ks,) if np.isscalar(ks) else tuple(ks)
    if not ks or any(int(k) != k or k < 1 for k in ks):
        raise ValueError(f"{name} must be positive integers, got {ks}")
    return tuple(int(k) for k in ks)


def check_ndcg_ks(ks) -> tuple:
    ks = tuple(ks or ())
    if any(k is not None and (int(k) != k or k < 1) for k in ks):
        raise ValueError(f"ndcg_ks must be positive integers or None (whole list), got {ks}")
    return tuple(None if k is None else int(k) for k in ks)


def n_queries(shape: tuple[int, int], direction: str) -> int:
    return shape[0] if direction == "i2t" else shape[1]


def n_candidates(shape: tuple[int, int], direction: str) -> int:
    return shape[1] if direction == "i2t" else shape[0]


def default_chunk(n_cand: int) -> int:
    return max(1, BLOCK_ELEMENTS // max(1, n_cand))


def query_slices(n_q: int, chunk: int):
    if chunk < 1:
        raise ValueError(f"chunk must be ≥ 1, got {chunk}")
    for s in range(0, n_q, chunk):
        yield s, min(n_q, s + chunk)


def block(m: np.ndarray, direction: str, s: int, e: int, dtype=None) -> np.ndarray:
    """Queries ``s:e`` of ``m`` as a contiguous (B, n_candidates) array. Floating inputs keep
    their dtype (so ties and comparisons are exactly those of the input); others become float64."""
    part = m[s:e] if direction == "i2t" else m[:, s:e].T
    if dtype is None:
        dtype = m.dtype if np.issubdtype(m.dtype, np.floating) else np.float64
    return np.ascontiguousarray(part, dtype=dtype)


def gt_block(image_of_caption: np.ndarray, n_images: int, direction: str, s: int, e: int) -> np.ndarray:
    """(B, n_candidates) bool: True where the candidate is the query's ground-truth pair."""
    if direction == "i2t":
        return image_of_caption[None, :] == np.arange(s, e)[:, None]
    return image_of_caption[s:e, None] == np.arange(n_images)[None, :]


class SparsePositives:
    """A boolean (n_images, n_captions) positive set stored as its True pairs; dense blocks are
    built per chunk (so 6,000 judged pairs of a 5K × 25K evaluation cost kilobytes, not 125 MB)."""

    def __init__(self, rows, cols, shape: tuple[int, int]) -> None:
        rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
        self.shape = tuple(shape)
        key = np.unique(rows * shape[1] + cols)
        self.rows, self.cols = key // shape[1], key % shape[1]  # sorted by row
        self._by_col = np.lexsort((self.rows, self.cols))

    def block(self, direction: str, s: int, e: int) -> np.ndarray:
        if direction == "i2t":
            lo, hi = np.searchsorted(self.rows, [s, e])
            out = np.zeros((e - s, self.shape[1]), dtype=bool)
            out[self.rows[lo:hi] - s, self.cols[lo:hi]] = True
        else:
            c = self.cols[self._by_col]
            lo, hi = np.searchsorted(c, [s, e])
            sel = self._by_col[lo:hi]
            out = np.zeros((e - s, self.shape[0]), dtype=bool)
            out[self.cols[sel] - s, self.rows[sel]] = True
        return out


def positives_block(p, direction: str, s: int, e: int) -> np.ndarray:
    """Dense (B, n_candidates) block of a positive set (boolean matrix or :class:`SparsePositives`)."""
    if isinstance(p, SparsePositives):
        return p.block(direction, s, e)
    return block(p, direction, s, e, dtype=bool)


def gt_pairs(image_of_caption: np.ndarray, direction: str, s: int, e: int) -> tuple[np.ndarray, np.ndarray]:
    """(query row within the block, candidate index) of every ground-truth pair of queries s:e."""
    if direction == "i2t":
        caps = np.flatnonzero((image_of_caption >= s) & (image_of_caption < e))
        return image_of_caption[caps] - s, caps
    return np.arange(e - s), image_of_caption[s:e]


def take(a: np.ndarray, idx: np.ndarray) -> np.ndarray:
    return np.take_along_axis(a, idx, axis=1)


def descending(x: np.ndarray) -> np.ndarray:
    """Row-wise indices sorting ``x`` in decreasing order, equal values by increasing index."""
    return Ranking(x).base


def run_starts(sorted_rows: np.ndarray) -> np.ndarray:
    """For rows whose equal values are contiguous: the index where each position's run starts."""
    bsz, n = sorted_rows.shape
    new = np.ones((bsz, n), dtype=bool)
    new[:, 1:] = sorted_rows[:, 1:] != sorted_rows[:, :-1]
    return np.maximum.accumulate(np.where(new, np.arange(n), 0), axis=1)


def tie_runs(sorted_rows: np.ndarray):
    """Positions lying in runs of equal values of row-sorted data: ``(rows, cols, start_cols)``
    (row-major), ``start_cols`` being the first column of each position's run; or None."""
    eq = sorted_rows[:, 1:] == sorted_rows[:, :-1]
    if not eq.any():
        return None
    in_run = np.zeros(sorted_rows.shape, dtype=bool)
    in_run[:, 1:] |= eq
    in_run[:, :-1] |= eq
    rows, cols = np.nonzero(in_run)
    first = (cols == 0) | ~eq[rows, np.maximum(cols - 1, 0)]
    start_idx = np.maximum.accumulate(np.where(first, np.arange(len(cols)), 0))
    return rows, cols, cols[start_idx]


class Ranking:
    """The descending ranking of a block of scores under the package's tie rule.

    One (fast, SIMD) ``np.argsort`` per block; the runs of tied scores — common with float32
    similarities — are then re-ordered by (key ascending, index ascending) with one small global
    ``np.lexsort`` over the tied positions only, for whichever key a metric needs.
    """

    def __init__(self, scores: np.ndarray) -> None:
        self.scores = scores
        self.base = np.argsort(-scores, axis=1)
        self.sorted = take(scores, self.base)  # scores in ranking order (same for every key)
        self.ties = tie_runs(self.sorted)  # (rows, cols, start_cols) of tied positions
        self.tied = self.ties is not None
        if self.tied:
            rows, cols, starts = self.ties
            self._run = np.cumsum(starts == cols)
            self._items = self.base[rows, cols]
            self.base = self.order(None)

    def order(self, key: np.ndarray | None) -> np.ndarray:
        """(B, n) candidate indices, best first; within tied scores by ``key`` ascending, then index."""
        if not self.tied:
            return self.base
        rows, cols, _ = self.ties
        k = np.zeros(len(self._items)) if key is None else key[rows, self._items]
        o = np.lexsort((self._items, k, self._run))
        perm = self.base.copy()
        perm[rows, cols] = self._items[o]
        return perm


class RankedRelevance:
    """A block of queries ranked by the model, seen through one relevance matrix.

    ``scores`` / ``rel``: (B, n) in ranking order (position 0 = the model's top candidate);
    ``rel_desc``: the relevance sorted decreasingly (the ideal ranking); ``gt_rows``/``gt_vals``:
    the query row and relevance of every ground-truth pair in the block.
    """

    def __init__(
        self, ranking: Ranking, rel: np.ndarray, gt: np.ndarray, gt_rows: np.ndarray, gt_cols: np.ndarray
    ) -> None:
        self.ranking = ranking
        self.perm = ranking.order(rel)
        self.scores = ranking.sorted
        self.rel = take(rel, self.perm)
        self._asc = np.argsort(self.rel, axis=1)
        self.rel_asc = take(self.rel, self._asc)
        self.gt = gt
        self.gt_rows, self.gt_vals = gt_rows, rel[gt_rows, gt_cols]
        self._rank = None

    @property
    def n(self) -> int:
        return self.rel.shape[1]

    @property
    def rel_desc(self) -> np.ndarray:
        return self.rel_asc[:, ::-1]

    def y_rank(self) -> np.ndarray:
        """Relevance as integer ranks ≥ 1 in ranking order (equal relevance ⇔ equal rank)."""
        if self._rank is None:
            minrank = (run_starts(self.rel_asc) + 1).astype(np.intp)
            self._rank = np.empty(self.rel.shape, dtype=np.intp)
            np.put_along_axis(self._rank, self._asc, minrank, axis=1)
        return self._rank

    def gt_head(self, length: int) -> np.ndarray:
        """Ground-truth flags of the model's first ``length`` candidates."""
        return take(self.gt, self.perm[:, :length])

    def ideal_head_without_gt(self, length: int) -> np.ndarray:
        """(B, length) mask over ``rel_desc[:, :length]``: False at one occurrence of each
        ground-truth value (so the True entries are the ideal ranking of the non-GT candidates)."""
        mask = np.ones((self.rel.shape[0], length), dtype=bool)
        if self.gt_rows.size == 0:
            return mask
        head = self.rel_desc[:, :length]
        pos = (head[self.gt_rows] > self.gt_vals[:, None]).sum(axis=1)
        o = np.lexsort((self.gt_vals, self.gt_rows))  # equal (row, value) pairs adjacent
        r, v = self.gt_rows[o], self.gt_vals[o]
        same = np.zeros(len(o), dtype=bool)
        same[1:] = (r[1:] == r[:-1]) & (v[1:] == v[:-1])
        idx = np.arange(len(o))
        offset = idx - np.maximum.accumulate(np.where(~same, idx, 0))
        p = pos[o] + offset
        keep = p < length
        mask[r[keep], p[keep]] = False
        return mask


def masked_mean(values: np.ndarray, valid: np.ndarray) -> tuple[float, int]:
    """Mean of ``values`` over ``valid`` queries and their number; 0.0 when no query is valid.

    This is the package-wide rule for undefined per-query values (constant relevance, empty
    positive set, fewer than two candidates): such queries are *skipped*, and the number of
    queries that entered the mean is reported next to it (keys ending in ``_nq``), so a 0.0
    from an empty average is never mistaken for a measured zero.
    """
    n = int(valid.sum())
    return (float(values[valid].mean()) if n else 0.0), n
