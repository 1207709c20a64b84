"""Tie-aware ranking metrics: each metric's exact expectation over every order of the tied candidates.

Where a query's scores tie, a ranking metric depends on the order chosen among the tied candidates. The
library's metrics (:mod:`coherent_itr.metrics`) order them by one fixed, pessimistic rule. The metrics here
report the mean of the metric over all orders of every tie group, equally likely, in closed form (McSherry &
Najork, "Computing information retrieval performance measures efficiently in the presence of tied scores",
ECIR 2008). No random draw is involved, so the value is the same on every run and every CPU whose scores
form the same tie groups.

Tie groups (the tolerance rule). Each query's scores are sorted in decreasing order and two neighbours
whose difference is at most ``tol`` belong to the same group; a group is a maximal chain of such neighbours.
With ``tol=0`` exactly equal scores tie. The default :data:`TIE_TOL` (1e-5) is for scores held in float32,
such as the Sentence-BERT relevance, whose last bits differ between CPUs (their BLAS kernels sum in other
orders): on the synthetic test split the float32 relevance differs from the same relevance evaluated in float64
by up to 5e-7, and under ``max5`` an image's own captions (relevance ≈ 1) spread over up to 7e-7 before the
next caption, 3e-3 below. With exact ties (``tol=0``) that cluster splits by its last bits and R@1 of ranking
by the relevance moved 4 points between the two evaluations; with 1e-6 or 1e-5 no Table I metric moved.
1e-5 keeps a margin of 10× over two CPUs' errors, and two relevances closer than 1e-5 are not told apart at the
relevance's precision anyway. Chaining, rather than rounding to a 1e-5 grid, never splits a tight cluster that
happens to straddle a grid boundary; only a gap within the CPUs' error of ``tol`` itself can group differently,
and then only two neighbours that close in score are averaged or not.

Per query with n candidates, positions 1 … n, group g covering positions s_g + 1 … s_g + n_g and holding
k_g positives (c_g positives in the groups before it), a position i = s_g + j of g has

* E[hit_i] = k_g / n_g and E[#hits in 1 … i] = c_g + j·k_g / n_g (R-Precision, precision at K);
* E[hit_i · #hits in 1 … i] = (k_g / n_g)(c_g + 1) + (j − 1)·k_g(k_g − 1) / (n_g(n_g − 1)) (AP, mAP@R);
* P(a positive in the top K) = 1 if a group before the one holding place K has a positive, else
  1 − C(n_g − k_g, t) / C(n_g, t) with t = K − s_g places of that group in the top K (hypergeometric; R@K);
* E[gain at position i] = the mean gain of its group (DCG, NDCG: scikit-learn's ``ndcg_score`` averages the
  gains of tied scores the same way; its ``average_precision_score`` does not average: it credits a tie group
  with the precision of the whole group, 0.5 where the two orders of one positive tied with one negative
  average 0.75).

Without ties every formula is the metric of the single ranking. This module is used by the study's analyses
(Listwise Table I and the N6 claim); the runs' test evaluation (:func:`coherent_itr.metrics.evaluate`) does not
call it, so it is not part of any run's code hash (:mod:`coherent_itr.runs`).

Example:

>>> import numpy as np
>>> scores = np.array([[1.0, 1.0, 0.5]])  # the first two candidates tie
>>> pos = np.array([[False, True, False]])
>>> m = expected_positive_metrics(scores, pos, ks=(1,))
>>> float(m["p1"][0][0]), float(m["ap"][0][0])  # P@1 and AP over the two orders: (0 + 1)/2, (1/2 + 1)/2
(0.5, 0.75)
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

TIE_TOL = 1e-5  # float32 scores: 10× two CPUs' rounding errors, below any difference the relevance resolves
BLOCK_ELEMENTS = 1_000_000  # per block of queries, as the library's metrics


@dataclass
class TieGroups:
    """The descending order of a block of queries' scores and its tie groups, per sorted position.

    ``order`` (B, n): candidate indices, best first (ties by index; any order within a group gives the same
    expectations). ``start`` / ``size`` (B, n): the 0-based first position and the size of the group holding
    each position."""

    order: np.ndarray
    start: np.ndarray
    size: np.ndarray

    def group_sum(self, values_sorted: np.ndarray) -> np.ndarray:
        """Per position, the sum of ``values_sorted`` (B, n, in sorted order) over its group."""
        cum = _cum0(values_sorted)
        return np.take_along_axis(cum, self.start + self.size, axis=1) - np.take_along_axis(cum, self.start, axis=1)

    def before_group(self, values_sorted: np.ndarray) -> np.ndarray:
        """Per position, the sum of ``values_sorted`` over the positions before its group."""
        return np.take_along_axis(_cum0(values_sorted), self.start, axis=1)


def _cum0(v: np.ndarray) -> np.ndarray:
    """(B, n + 1) cumulative sums along rows with a leading 0."""
    out = np.zeros((v.shape[0], v.shape[1] + 1), dtype=np.result_type(v.dtype, np.int64))
    np.cumsum(v, axis=1, out=out[:, 1:])
    return out


def tie_groups(scores, tol: float = TIE_TOL) -> TieGroups:
    """The tie groups of each row of ``scores`` (B, n): sorted decreasing, neighbours ≤ ``tol`` apart chained
    into one group (module docstring)."""
    x = _scores(scores)
    if tol < 0:
        raise ValueError(f"tol must be ≥ 0, got {tol}")
    b, n = x.shape
    order = np.argsort(-x, axis=1, kind="stable")
    xs = np.take_along_axis(x, order, axis=1)
    pos = np.broadcast_to(np.arange(n), (b, n))
    first = np.ones((b, n), dtype=bool)
    first[:, 1:] = (xs[:, :-1] - xs[:, 1:]) > tol
    last = np.ones((b, n), dtype=bool)
    last[:, :-1] = first[:, 1:]
    start = np.maximum.accumulate(np.where(first, pos, 0), axis=1)
    end = np.minimum.accumulate(np.where(last, pos, n - 1)[:, ::-1], axis=1)[:, ::-1]
    return TieGroups(order=order, start=start, size=end - start + 1)


def _scores(scores) -> np.ndarray:
    x = np.asarray(scores, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"scores must be 2-D (queries × candidates), got shape {x.shape}")
    if not np.isfinite(x).all():
        raise ValueError("scores must be finite")
    return x


def _aligned(m, shape, name: str, dtype=None) -> np.ndarray:
    m = np.asarray(m, dtype=dtype)
    if m.shape != shape:
        raise ValueError(f"{name} must have the shape of scores {shape}, got {m.shape}")
    return m


def expected_positive_metrics(
    scores, positives, ks=(1,), tol: float = TIE_TOL, with_ap: bool = True
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per query, the expectation over tied orders of mAP@R, R-Precision, AP, precision at K and R@K.

    Args:
        scores: (B, n) scores of n candidates for B queries (higher ranks first).
        positives: boolean (B, n) positives.
        ks: cut-offs K of ``p{K}`` (precision at K: expected positives in the top K / K; ``p1`` is ECCV
            Caption's R@1) and ``r{K}`` (R@K: probability of a positive in the top K).
        tol: the tie tolerance (module docstring).
        with_ap: also AP over the whole list (``ap``).

    Returns:
        ``{"mapr", "rprec", "ap", "p{K}", "r{K}"}`` → (per query values as fractions in [0, 1], defined):
        a query without a positive is undefined (value 0).
    """
    x = _scores(scores)
    pos = _aligned(positives, x.shape, "positives")
    if pos.dtype != bool:
        raise ValueError(f"positives must be boolean, got dtype {pos.dtype}")
    b, n = x.shape
    g = tie_groups(x, tol)
    hs = np.take_along_axis(pos, g.order, axis=1).astype(np.int64)
    k_g = g.group_sum(hs).astype(np.float64)  # positives in the group of each position
    c_g = g.before_group(hs).astype(np.float64)  # positives before it
    n_g = g.size.astype(np.float64)
    j = np.arange(n)[None, :] - g.start + 1.0  # 1-based place within the group
    hit = k_g / n_g
    cum = c_g + j * hit
    pair = np.where(n_g > 1, k_g * (k_g - 1) / np.maximum(n_g * (n_g - 1), 1.0), 0.0)
    prec_term = (hit * (c_g + 1.0) + (j - 1.0) * pair) / np.arange(1, n + 1)  # E[hit_i · cum_i] / i
    r = pos.sum(axis=1)
    valid = r > 0
    r1 = np.maximum(r, 1)
    rows = np.arange(b)
    out = {}
    within = np.arange(n)[None, :] < r[:, None]
    out["mapr"] = (np.where(valid, (prec_term * within).sum(axis=1) / r1, 0.0), valid)
    out["rprec"] = (np.where(valid, cum[rows, np.clip(r - 1, 0, max(n - 1, 0))] / r1, 0.0), valid)
    if with_ap:
        out["ap"] = (np.where(valid, prec_term.sum(axis=1) / r1, 0.0), valid)
    for k in ks:
        k = int(k)
        if k < 1:
            raise ValueError(f"K must be ≥ 1, got {k}")
        kk = min(k, n)
        at = kk - 1  # the position of place K (clipped to the list)
        out[f"p{k}"] = (np.where(valid, cum[rows, at] / k, 0.0), valid)
        out[f"r{k}"] = (np.where(valid, _hit_at(g, c_g, k_g, kk, rows), 0.0), valid)
    return out


def _hit_at(g: TieGroups, c_g: np.ndarray, k_g: np.ndarray, kk: int, rows: np.ndarray) -> np.ndarray:
    """P(a positive among the top ``kk`` places) per query: a positive before the group of place ``kk`` is
    sure; else ``t`` of that group's ``n_g`` members are drawn into the top kk, none positive with probability
    C(n_g − k_g, t) / C(n_g, t)."""
    at = kk - 1
    before, inside = c_g[rows, at], k_g[rows, at]
    size = g.size[rows, at].astype(np.float64)
    t = (kk - g.start[rows, at]).astype(np.float64)
    miss = np.zeros_like(size)
    free = size - inside  # non-positives in the group
    ok = free >= t
    if ok.any():
        f, s, tt = free[ok], size[ok], t[ok]
        miss[ok] = np.exp(gammaln(f + 1) - gammaln(f - tt + 1) - gammaln(s + 1) + gammaln(s - tt + 1))
    miss = np.where(inside == 0, np.where(ok, 1.0, 0.0), miss)  # no positive in the group: exactly a miss
    return np.where(before > 0, 1.0, 1.0 - miss)


def expected_ndcg(scores, gains, ks=(None,), tol: float = TIE_TOL) -> dict:
    """Per query, the expectation over tied orders of NDCG@K with the given gains and discount
    1 / log2(i + 1) (scikit-learn's ``ndcg_score``: pass gains 2^r − 1 for the library's NDCG of relevance r).

    Args:
        scores: (B, n) scores (higher ranks first).
        gains: (B, n) gains ≥ 0 of the candidates.
        ks: cut-offs K (None: the whole list).
        tol: the tie tolerance (module docstring).

    Returns:
        ``{K: (per query NDCG@K in [0, 1], defined)}``; a query whose ideal DCG is 0 is undefined (value 0).
    """
    x = _scores(scores)
    gain = _aligned(gains, x.shape, "gains", dtype=np.float64)
    if not np.isfinite(gain).all() or (gain < 0).any():
        raise ValueError("gains must be finite and ≥ 0")
    n = x.shape[1]
    g = tie_groups(x, tol)
    gs = np.take_along_axis(gain, g.order, axis=1)
    mean_gain = g.group_sum(gs) / g.size
    disc = 1.0 / np.log2(np.arange(2, n + 2))
    dcg = np.cumsum(mean_gain * disc, axis=1)
    idcg = np.cumsum(-np.sort(-gain, axis=1) * disc, axis=1)
    out = {}
    for k in ks:
        at = n - 1 if k is None else min(int(k), n) - 1
        d, i = dcg[:, at], idcg[:, at]
        valid = i > 0
        out[k] = (np.where(valid, d / np.where(valid, i, 1.0), 0.0), valid)
    return out


def positive_set_metrics(
    sim, positives, positives_t2i=None, tol: float = TIE_TOL, directions=("i2t", "t2i"), chunk: int | None = None
) -> dict[str, float]:
    """mAP@R, R-Precision and R@1 (%) against a set of positives, each the expectation over tied orders: the
    tie-aware counterpart of :func:`coherent_itr.metrics.positive_set_metrics` (same keys and query rule).

    Args:
        sim: (n_images, n_captions) scores.
        positives: boolean (n_images, n_captions) positives, for both directions unless ``positives_t2i``.
        positives_t2i: boolean positives of the caption queries.
        tol: the tie tolerance (module docstring).
        directions: ``"i2t"`` (rows are queries) and / or ``"t2i"`` (columns are queries).
        chunk: queries per block (default: about a million scores per block).

    Returns:
        ``{"mapr_i2t", "rprec_i2t", "r1_i2t", …}``: means in percent over the queries with a positive (0.0 when
        none), and their counts ``…_nq``.
    """
    sim = _scores(sim)
    p_i2t = _aligned(positives, sim.shape, "positives")
    p_t2i = p_i2t if positives_t2i is None else _aligned(positives_t2i, sim.shape, "positives_t2i")
    out: dict[str, float] = {}
    for d in directions:
        if d not in ("i2t", "t2i"):
            raise ValueError(f"unknown direction {d!r} (i2t, t2i)")
        s, p = (sim, p_i2t) if d == "i2t" else (sim.T, p_t2i.T)
        step = chunk or max(1, BLOCK_ELEMENTS // max(1, s.shape[1]))
        sums = {"mapr": 0.0, "rprec": 0.0, "r1": 0.0}
        nq = 0
        for a in range(0, s.shape[0], step):
            m = expected_positive_metrics(s[a : a + step], p[a : a + step], ks=(1,), tol=tol, with_ap=False)
            valid = m["mapr"][1]
            nq += int(valid.sum())
            for key, src in (("mapr", "mapr"), ("rprec", "rprec"), ("r1", "p1")):
                sums[key] += float(m[src][0][valid].sum())
        for key, total in sums.items():
            out[f"{key}_{d}"] = 100.0 * total / nq if nq else 0.0
            out[f"{key}_{d}_nq"] = float(nq)
    return out
