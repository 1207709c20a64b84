"""The model-independent half of ranking against a relevance matrix, computed once per matrix.

:class:`~coherent_itr.metrics._blocks.RankedRelevance` sorts each block's relevance in the model's
ranking order for every run evaluated; but a model only permutes the candidates, so the sorted values and
each candidate's rank among its query's relevance depend on the matrix alone. :class:`RelevanceOrder`
computes them once per matrix (kept by content, :func:`relevance_order`) and :class:`OrderedRelevance`
uses them — equal numbers, one sort per yardstick instead of one per run (evaluation only: the validation
R@K of training never ranks relevance, so ``_blocks.py``, part of every training key, is unchanged).
"""

from __future__ import annotations

import hashlib

import numpy as np

from ._blocks import RankedRelevance, block, n_queries, run_starts, take


class RelevanceOrder:
    """The half of :class:`RankedRelevance` that does not depend on the model, for one relevance matrix:
    per direction, every query's relevance sorted ascending (``rel_asc``) and each candidate's rank
    ``1 + #{candidates of the query with strictly smaller relevance}`` (so equal relevance ⇔ equal rank).
    A trained model only permutes the candidates, so one sort per matrix serves every run evaluated
    against it; :func:`relevance_order` keeps the last few by content."""

    def __init__(self, rel: np.ndarray) -> None:
        self.rel = rel
        self._full: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    def _direction(self, d: str) -> tuple[np.ndarray, np.ndarray]:
        if d not in self._full:
            m = block(self.rel, d, 0, n_queries(self.rel.shape, d))
            asc_idx = np.argsort(m, axis=1, kind="stable")
            asc = take(m, asc_idx)
            rank = np.empty(m.shape, dtype=np.int32)
            np.put_along_axis(rank, asc_idx, (run_starts(asc) + 1).astype(np.int32), axis=1)
            self._full[d] = (asc, rank)
        return self._full[d]

    def block(self, d: str, s: int, e: int) -> tuple[np.ndarray, np.ndarray]:
        """(rel_asc, rank) of queries ``s:e`` in direction ``d`` (views)."""
        asc, rank = self._direction(d)
        return asc[s:e], rank[s:e]


ORDER_CACHE_SIZE = 4  # relevance matrices kept (synthetic: sbert, cider, true; ≈ 80 MB each at 1K × 5K)
# larger matrices (5K × 25K: ≈ 3 GB of orders) are sorted block by block, nothing kept
ORDER_CACHE_MAX_ELEMENTS = 10_000_000
_ORDERS: dict[str, RelevanceOrder] = {}


def relevance_order(rel: np.ndarray) -> RelevanceOrder:
    """The :class:`RelevanceOrder` of ``rel``, reused while a matrix with the same content (dtype, shape,
    bytes: hashed, so an equal copy hits and an edited matrix misses) is among the last
    :data:`ORDER_CACHE_SIZE`."""
    c = np.ascontiguousarray(rel)
    h = hashlib.blake2b(f"{c.dtype.str}{c.shape}".encode(), digest_size=16)
    h.update(memoryview(c).cast("B"))
    key = h.hexdigest()
    hit = _ORDERS.pop(key, None)
    if hit is None:
        hit = RelevanceOrder(c.copy())  # its own copy: later edits of the caller's array cannot reach it
        while len(_ORDERS) >= ORDER_CACHE_SIZE:
            _ORDERS.pop(next(iter(_ORDERS)))
    _ORDERS[key] = hit  # most recently used last
    return hit


class OrderedRelevance(RankedRelevance):
    """:class:`RankedRelevance` with the block's ``(rel_asc, rank)`` from :meth:`RelevanceOrder.block`
    instead of a sort per run; ``y_rank`` is then one gather of the candidates' ranks."""

    def __init__(self, ranking, rel, gt, gt_rows, gt_cols, order: tuple[np.ndarray, np.ndarray]) -> None:
        self.ranking = ranking
        self.perm = ranking.order(rel)
        self.scores = ranking.sorted
        self.rel = take(rel, self.perm)
        self.gt = gt
        self.gt_rows, self.gt_vals = gt_rows, rel[gt_rows, gt_cols]
        self.rel_asc, self._rank_of_candidate = order
        self._rank = None

    def y_rank(self) -> np.ndarray:
        if self._rank is None:
            self._rank = take(self._rank_of_candidate, self.perm).astype(np.intp)
        return self._rank
