"""Kendall τ between model scores and relevance over every top-K prefix of a ranking.

For a list of n items with model scores x and relevance y, let (ladder Eq. 13)

* P — concordant pairs, Q — discordant pairs,
* T — pairs tied only in x, U — pairs tied only in y, and n₀ = n(n − 1)/2.

Then τ-b = (P − Q) / √((P + Q + T)(P + Q + U)) (ladder Eq. 13, the Coherent Score), and
τ-a = (P − Q) / n₀ (BCLS Eq. 2, "N(N − 1)/2"). With n₁ = pairs tied in x, n₂ = pairs tied in y
and n₃ = pairs tied in both, P − Q = n₀ − n₁ − n₂ + n₃ − 2Q, P + Q + T = n₀ − n₂ and
P + Q + U = n₀ − n₁.

:func:`prefix_stats` evaluates these counts for several prefixes (the model's top K) of many
ranked lists at once: tie counts are vectorised over the block (from the sparse tied positions),
and Q is counted by a compiled O(n log n) discordant-pair counter (``backend="fast"``): with
numba installed (requirements pin it), :func:`_discordant_prefixes_numba` — one Fenwick-tree pass
per list that yields Q of *every* prefix at once; without numba, scipy's counter
``scipy.stats._stats._kendall_dis`` (the very routine the public ``kendalltau`` calls; one call per
list and prefix). Or Q comes from the public ``scipy.stats.kendalltau`` on every prefix
(``backend="scipy"``: several times slower, mostly its argument-checking wrapper; timings in
``benchmarks/bench_metrics.py``). ``"scipy"`` is also the automatic fallback
if a future scipy drops the private counter (requirements pin scipy).

Undefined values: τ-b is undefined when all x or all y in the list are equal (a zero
denominator) or the list has < 2 items; τ-a when the list has < 2 items. Such lists are marked
invalid (``valid`` False) and skipped by the averages (see ``_blocks.masked_mean``).
"""

from __future__ import annotations

import numpy as np

from ._blocks import tie_runs

try:  # scipy's Cython Fenwick-tree counter of discordant pairs (used by scipy.stats.kendalltau)
    from scipy.stats._stats import _kendall_dis
except ImportError:  # pragma: no cover - depends on the scipy build
    _kendall_dis = None

try:
    import numba
except ImportError:  # pragma: no cover - numba is pinned in requirements.txt
    numba = None

if numba is not None:

    @numba.njit(cache=True, nogil=True)
    def _discordant_prefixes_numba(y_rank, start, ks):  # pragma: no cover - compiled; tested via its output
        """Q of every top-K prefix of every row: rows in *descending* x, ``start[r, p]`` = first
        position of p's run of tied x, ``y_rank`` integer ranks ≥ 1. Position p is discordant with
        every q < start[r, p] (strictly higher x) with y_q < y_p; a Fenwick tree over y holds the
        positions before p's run, so one pass gives the cumulative Q at every K."""
        bsz, n = y_rank.shape
        out = np.zeros((bsz, ks.shape[0]))
        size = 0
        for r in range(bsz):
            for p in range(n):
                size = max(size, y_rank[r, p])
        tree = np.zeros(size + 1, dtype=np.int64)
        for r in range(bsz):
            tree[:] = 0
            inserted = 0
            q_cum = 0
            j = 0
            for p in range(n):
                while inserted < start[r, p]:  # insert the positions with strictly higher x
                    i = y_rank[r, inserted]
                    while i <= size:
                        tree[i] += 1
                        i += i & (-i)
                    inserted += 1
                i = y_rank[r, p] - 1  # how many of them have y < y_p
                c = 0
                while i > 0:
                    c += tree[i]
                    i -= i & (-i)
                q_cum += c
                while j < ks.shape[0] and ks[j] == p + 1:
                    out[r, j] = q_cum
                    j += 1
        return out
else:  # pragma: no cover
    _discordant_prefixes_numba = None

BACKENDS = ("fast", "scipy")


def _earlier_equal(a: np.ndarray, b: np.ndarray | None = None) -> np.ndarray:
    """Per position p: the number of q < p with equal value(s), for rows whose equal values are
    contiguous. Summed over a prefix of length K this is the number of tied pairs in it."""
    bsz, n = a.shape
    new = np.ones((bsz, n), dtype=bool)
    if n > 1:
        new[:, 1:] = a[:, 1:] != a[:, :-1]
        if b is not None:
            new[:, 1:] |= b[:, 1:] != b[:, :-1]
    pos = np.arange(n)
    return pos - np.maximum.accumulate(np.where(new, pos, 0), axis=1)


def prefix_stats(
    x: np.ndarray, y_rank: np.ndarray, ks, ties=None, y_sorted: np.ndarray | None = None, backend: str = "fast"
) -> dict[str, np.ndarray]:
    """Kendall counts of every row's top-K prefix, for each K in ``ks``.

    ``x``: (B, n) model scores in ranking order (non-increasing along each row); ``y_rank``: (B, n)
    integer ranks ≥ 1 of the relevance in the same order (equal relevance ⇔ equal rank). Within
    a run of tied x, y must be non-decreasing (the package's tie rule guarantees it) so joint ties
    are contiguous. ``ties``: :func:`._blocks.tie_runs` of x (computed if not given).
    ``y_sorted``: each row's relevance sorted (any monotone form), for the whole-list y ties.

    Returns arrays of shape (B, len(ks)): ``s`` = P − Q, ``n0``, ``n1`` (pairs tied in x), ``n2``
    (pairs tied in y). K larger than n is clipped to n.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {list(BACKENDS)}, got {backend!r}")
    if backend == "fast" and _kendall_dis is None:  # pragma: no cover
        backend = "scipy"
    bsz, n = x.shape
    kk = [min(int(k), n) for k in ks]
    uniq = sorted(set(kk))
    if ties is None and n > 1:
        ties = tie_runs(x)
    if ties is not None:
        # ties in x, and joint ties, from the tied positions only: a tied position at column c
        # forms a pair with every earlier position of its run (of its (x, y) sub-run)
        rows, cols, start = ties
        yt = y_rank[rows, cols]
        idx = np.arange(len(cols))
        new_sub = start == cols
        new_sub[1:] |= yt[1:] != yt[:-1]
        earlier_x = cols - start
        earlier_xy = idx - np.maximum.accumulate(np.where(new_sub, idx, 0))
    st = {f: np.zeros((bsz, len(uniq))) for f in ("s", "n0", "n1", "n2")}
    n3 = np.zeros((bsz, len(uniq)))
    for j, k in enumerate(uniq):
        if k < 2:
            continue
        st["n0"][:, j] = k * (k - 1) / 2
        if ties is not None:
            m = cols < k
            st["n1"][:, j] = np.bincount(rows[m], weights=earlier_x[m], minlength=bsz)
            n3[:, j] = np.bincount(rows[m], weights=earlier_xy[m], minlength=bsz)
        ys = y_sorted if (k == n and y_sorted is not None) else np.sort(y_rank[:, :k], axis=1)
        st["n2"][:, j] = _earlier_equal(ys).sum(axis=1)
    base = st["n0"] - st["n1"] - st["n2"] + n3
    if backend == "fast":
        st["s"] = base - 2 * _discordant(y_rank, uniq, ties)
    else:
        from scipy.stats import kendalltau

        den = np.sqrt((st["n0"] - st["n1"]) * (st["n0"] - st["n2"]))
        for r in range(bsz):
            for j, k in enumerate(uniq):
                if den[r, j] > 0:
                    st["s"][r, j] = kendalltau(x[r, :k], y_rank[r, :k]).statistic * den[r, j]
    cols_out = [uniq.index(k) for k in kk]
    return {f: a[:, cols_out] for f, a in st.items()}


def _discordant(y_rank: np.ndarray, ks, ties, counter: str | None = None) -> np.ndarray:
    """Discordant pairs Q of every top-K prefix (``ks`` sorted, ≤ n). ``counter``: ``"numba"``
    (default when numba is installed) or ``"scipy"``."""
    counter = counter or ("numba" if _discordant_prefixes_numba is not None else "scipy")
    if counter == "numba":
        bsz, n = y_rank.shape
        start = np.broadcast_to(np.arange(n, dtype=np.int64), (bsz, n)).copy()
        if ties is not None:
            rows, cols, st = ties
            start[rows, cols] = st
        return _discordant_prefixes_numba(
            np.ascontiguousarray(y_rank, dtype=np.int64), start, np.asarray(ks, dtype=np.int64)
        )
    return _discordant_scipy(y_rank, ks, ties)


def _discordant_scipy(y_rank: np.ndarray, ks, ties) -> np.ndarray:
    """Discordant pairs Q of every top-K prefix, by scipy's compiled counter. It takes the list in
    *ascending* x with tied x as equal group ids, so the top-K prefix of our descending list is
    the last K items of the reversed one. Group id of reversed position q = n − 1 − (start of the
    run of descending position n − 1 − q): ``arange`` for rows without ties."""
    bsz, n = y_rank.shape
    ya = np.ascontiguousarray(y_rank[:, ::-1], dtype=np.intp)
    ids = np.arange(n, dtype=np.intp)
    groups = {}
    if ties is not None:
        rows, cols, start = ties
        for r in np.unique(rows):
            sel = slice(np.searchsorted(rows, r), np.searchsorted(rows, r, side="right"))
            g = ids.copy()
            g[n - 1 - cols[sel]] = n - 1 - start[sel]
            groups[int(r)] = g
    out = np.empty((bsz, len(ks)))
    starts = [n - k for k in ks]
    for r in range(bsz):
        xr, yr = groups.get(r, ids), ya[r]
        for j, s0 in enumerate(starts):
            out[r, j] = _kendall_dis(xr[s0:], yr[s0:]) if s0 <= n - 2 else 0
    return out


def tau_from_stats(st: dict[str, np.ndarray], variant: str = "b") -> tuple[np.ndarray, np.ndarray]:
    """τ-b (ladder Eq. 13) or τ-a (BCLS Eq. 2) from :func:`prefix_stats`; returns (tau, valid)."""
    s, n0, n1, n2 = st["s"], st["n0"], st["n1"], st["n2"]
    if variant == "b":
        den = np.sqrt(np.maximum(n0 - n1, 0) * np.maximum(n0 - n2, 0))
    elif variant == "a":
        den = n0
    else:
        raise ValueError(f"Kendall variant must be 'a' (BCLS Eq. 2) or 'b' (ladder Eq. 13), got {variant!r}")
    valid = den > 0
    tau = np.where(valid, s / np.where(valid, den, 1.0), 0.0)
    return np.clip(tau, -1.0, 1.0), valid
