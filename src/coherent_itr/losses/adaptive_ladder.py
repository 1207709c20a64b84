"""Adaptive ladder loss (Ladder paper Sec. III-C, Eqs. 9–12): the ladder levels of each query
chosen by 1-D k-means of its relevance values with the number of levels picked by the mean
silhouette.

For query q (a row of ``rel`` for image→text, a row of ``rel.T`` for text→image), the relevance
values of its non-positive candidates ``R_{q,i}, i ∈ N^{-q}`` (the diagonal excluded) are
clustered by k-means for every k in [L_MIN, L_MAX]; the k with the highest mean silhouette
(Eq. 9; Eqs. 10–12 are Rousseeuw's silhouette with distance |R_{q,i} − R_{q,j}|, a singleton's
silhouette being 0) is kept, and its clusters ordered by decreasing centroid are the levels
``N_1^{-q}`` (most relevant) … ``N_{L*}^{-q}``. The hinges are then those of the ladder loss
(:func:`coherent_itr.losses.ladder.ladder_per_anchor`, shared, not duplicated) with the paper's
α_1 = 0.2, α_i = 0.01 and β_1 = 1, β_i = 1/2^i (Ladder Sec. IV-A, Eq. after Table II), and
hard-contrastive sampling by default.

Two back-ends choose the levels (both: k-means on the row's values, first k on silhouette ties;
a k is only eligible if the row has at least k distinct values and k ≤ n − 1 where n = B − 1;
a row with no eligible k keeps one level, i.e. the plain triplet term):

* ``backend="sklearn"`` — the design card's reference: per row and k, ``sklearn.cluster.KMeans``
  (``n_init`` k-means++ restarts, fixed ``random_state``, one BLAS/OpenMP thread — on ~100 points
  far cheaper than the default thread pool) and ``sklearn.metrics.silhouette_score``.
  A Python loop over rows, kept as the reference.
* ``backend="torch"`` — all rows at once: *exact* 1-D k-means (the globally optimal partition,
  which in 1-D is contiguous in sorted order) by dynamic programming over sorted values with
  prefix-sum segment costs (Bellman; Wang & Song's Ckmeans.1d.dp), and a vectorised silhouette
  from the same prefix sums (O(B·n·k), no B×n×n distance tensor). Cuts are only allowed between
  distinct values, so tied relevances always share a level. The DP table is float32 on
  cache-sized row chunks (partitions whose SSE differ by less than float32 rounding, ~1e-6, are
  interchangeable); the silhouettes are float64.

Agreement of the chosen number of levels (rows of B = 128 batches of real Sentence-BERT caption
cosines from Flickr8k, and of the synthetic stand-in used in the tests): torch vs sklearn with
n_init = 10: 98–99.6% of rows; with n_init = 30: 99.6–100%; with sklearn's default n_init = 1:
only 87–92%; sklearn (n_init = 10) against itself with another random_state: 97–98.5%. Where
they differ, sklearn's Lloyd iterations stopped at a local optimum (its inertia exceeds the exact
SSE; tested), so the torch back-end is the more faithful k-means.

When ``rel`` is symmetric (the paper's caption–caption relevance), text→image levels equal the
image→text ones and are computed once.

Warm-up (``set_warmup(True)``): all pairs of every level (Eq. 7) instead of hard-contrastive
sampling, as in ``ladder``.

L_MIN = L_MAX = 1 gives the plain triplet loss (Table VIII row (1, 1)); L_MIN = 1 < L_MAX is
rejected because one cluster has no silhouette.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import torch

from .base import ITRLoss, capturing, check_choice, check_range, off_diagonal_mask, reduce
from .ladder import direction_diagnostics, ladder_per_anchor, resolve_alpha_beta
from .registry import register

_NEG_INF = float("-inf")
#: elements of the rows × (n+1) × (n+1) dynamic-programming table per chunk (cache-sized)
DP_CHUNK_ELEMENTS = 1 << 19
#: the same on a CUDA device, where one launch per operation for all rows of a batch (both directions at B = 128:
#: 256 × 128 × 128, 16 MiB in float32) replaces nine chunks' launches (a captured step is launch-bound)
DP_CHUNK_ELEMENTS_CUDA = 1 << 24
#: dtype of the DP table (the silhouette is computed in float64)
DP_DTYPE = torch.float32


# --------------------------------------------------------------------------- torch back-end
def _prefix(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    z = x.new_zeros(x.shape[0], 1)
    return torch.cat([z, x.cumsum(1)], 1), torch.cat([z, (x * x).cumsum(1)], 1)


_STATIC: dict = {}


def _static(n: int, device, dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """Cached (n+1)×(n+1) tables [b, a]: 1/(b − a) for a < b (else 0) and +∞ where a ≥ b."""
    key = (n, str(device), dtype)
    if key not in _STATIC:
        idx = torch.arange(n + 1, device=device)
        diff = idx.view(-1, 1) - idx.view(1, -1)
        inv = torch.where(diff > 0, 1.0 / diff.clamp(min=1).to(dtype), 0.0).to(dtype)
        bad = torch.zeros(n + 1, n + 1, dtype=dtype, device=device).masked_fill_(diff <= 0, float("inf"))
        _STATIC[key] = (inv, bad)
    return _STATIC[key]


def exact_kmeans_1d_sorted(
    xs: torch.Tensor, k_max: int, table_dtype: torch.dtype | None = None
) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    """Globally optimal 1-D k-means of every row of ``xs`` (rows sorted ascending), k = 1…k_max.

    Returns ``(starts, ok)``: for each k, ``starts[k-1]`` is a (rows × k) int64 tensor of the
    first sorted index of each cluster (ascending), and ``ok[k-1]`` a bool per row saying the
    k-partition exists (the row has ≥ k distinct values; otherwise ``starts`` is meaningless).
    Clusters are contiguous runs of the sorted values; a cut is allowed only between two
    different values. Dynamic programming over prefix sums P1, P2 of the (row-centred) values::

        SSE(a, b) = (P2[b] − P2[a]) − (P1[b] − P1[a])² / (b − a)       (cluster = sorted[a:b])
        D_1[b] = SSE(0, b),   D_k[b] = min_a D_{k-1}[a] + SSE(a, b)

    D_1 … D_{k_max−1} are needed for every end b, the last level only for b = n. Ties and prefix
    sums use ``xs``' dtype; the B×(n+1)×(n+1) table uses ``table_dtype`` (default: the same;
    float32 in :func:`adaptive_levels_torch`, where partitions whose SSE differ by less than its
    rounding, ~1e-6, are interchangeable).
    """
    rows, n = xs.shape
    dev, dt = xs.device, (table_dtype or xs.dtype)
    inv, bad = _static(n, dev, dt)
    p1, p2 = (p.to(dt) for p in _prefix(xs - xs.mean(dim=1, keepdim=True)))  # centring: less cancellation
    # t[r, b, a] = P2[a] + (P1[b] − P1[a])² / (b − a), −∞ where a ≥ b, so SSE(a, b) = P2[b] − t
    t = p1.unsqueeze(2) - p1.unsqueeze(1)
    t.square_().mul_(inv).add_(p2.unsqueeze(1)).sub_(bad)
    cut_ok = torch.ones(rows, n + 1, dtype=torch.bool, device=dev)
    cut_ok[:, 1:n] = xs[:, 1:] > xs[:, :-1]  # a boundary before sorted index c
    bad_end = ~cut_ok
    d = (p2 - t[:, :, 0]).masked_fill(bad_end, float("inf"))  # D_1[b]
    back = []  # back[k-2][r, b] = argmin a of D_k[b]
    for k in range(2, k_max + 1):
        if k < k_max:
            m, arg = (d.unsqueeze(1) - t).min(dim=2)
            d = (p2 + m).masked_fill(bad_end, float("inf"))
        else:  # last level: only b = n
            arg = torch.zeros(rows, n + 1, dtype=torch.long, device=dev)
            arg[:, n] = (d - t[:, n, :]).argmin(dim=1)
        back.append(arg)
    starts = []
    for k in range(1, k_max + 1):
        cuts = [torch.full((rows,), n, dtype=torch.long, device=dev)]
        for j in range(k, 1, -1):  # back-track from b = n
            cuts.append(back[j - 2].gather(1, cuts[-1].unsqueeze(1)).squeeze(1))
        starts.append(torch.stack([torch.zeros_like(cuts[0])] + cuts[1:][::-1], dim=1))
    n_distinct = 1 + cut_ok[:, 1:n].sum(1)
    ok = [n_distinct >= k for k in range(1, k_max + 1)]
    return starts, ok


def labels_from_starts(starts: torch.Tensor, n: int) -> torch.Tensor:
    """Cluster index (0 = lowest values) of each sorted position, from the clusters' start indices."""
    pos = torch.arange(n, device=starts.device)
    return (pos.view(1, -1, 1) >= starts[:, 1:].unsqueeze(1)).sum(-1)


def silhouette_1d_sorted(xs: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """Mean silhouette (Ladder Eqs. 10–12, distance |x − y|) of contiguous clusters of sorted rows.

    ``xs``: rows × n sorted ascending; ``starts``: rows × k first index of each (non-empty)
    cluster, ascending, with cuts only between distinct values. Then every other cluster lies
    entirely on one side of a point, so its mean distance to the point is ``|x_p − μ_c|`` and the
    nearest one (Eq. 11) is an adjacent cluster; the within-cluster sum (Eq. 10) comes from prefix
    sums: ``(p − a)·x_p − (P[p] − P[a]) + (P[b] − P[p+1]) − (b − p − 1)·x_p`` for cluster [a, b).
    A singleton's silhouette is 0 (Eq. 12). O(rows · n).
    """
    rows, n = xs.shape
    k = starts.shape[1]
    ends = torch.cat([starts[:, 1:], torch.full_like(starts[:, :1], n)], dim=1)
    p1, _ = _prefix(xs)
    size = (ends - starts).to(xs.dtype)
    mu = (p1.gather(1, ends) - p1.gather(1, starts)) / size.clamp(min=1)
    own = labels_from_starts(starts, n)  # rows × n
    a_idx, b_idx = starts.gather(1, own), ends.gather(1, own)
    pos = torch.arange(n, device=xs.device).view(1, n)
    intra = (
        (pos - a_idx) * xs
        - (p1[:, :n] - p1.gather(1, a_idx))
        + (p1.gather(1, b_idx) - p1[:, 1:])
        - (b_idx - pos - 1) * xs
    )
    own_size = (b_idx - a_idx).to(xs.dtype)
    a_val = intra / (own_size - 1).clamp(min=1)
    inf = torch.full_like(xs, float("inf"))
    below = torch.where(own > 0, xs - mu.gather(1, (own - 1).clamp(min=0)), inf)
    above = torch.where(own < k - 1, mu.gather(1, (own + 1).clamp(max=k - 1)) - xs, inf)
    b_val = torch.minimum(below, above)
    denom = torch.maximum(a_val, b_val)
    sil = torch.where(denom > 0, (b_val - a_val) / denom.clamp(min=torch.finfo(xs.dtype).tiny), 0.0)
    sil = torch.where(own_size > 1, sil, 0.0)
    return sil.mean(dim=1)


def adaptive_levels_torch(values: torch.Tensor, l_min: int, l_max: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Levels (1 = most relevant) and the chosen number of levels for every row of ``values``.

    ``values``: rows × n relevance of the non-positive candidates. Returns ``(level, k)`` with
    ``level`` rows × n int64 in 1…k_row and ``k`` rows int64. The DP runs in ``DP_DTYPE`` on
    cache-sized chunks of ≤ ``DP_CHUNK_ELEMENTS`` table entries (``DP_CHUNK_ELEMENTS_CUDA`` on a CUDA device); the
    silhouettes in float64. Rows are independent: on the CPU the levels are the same for any chunk size (tested).
    """
    rows, n = values.shape
    xs, order = values.detach().to(torch.float64).sort(dim=1)
    per_chunk = DP_CHUNK_ELEMENTS_CUDA if xs.device.type == "cuda" else DP_CHUNK_ELEMENTS
    chunk = max(1, per_chunk // ((n + 1) * (n + 1)))
    parts = [exact_kmeans_1d_sorted(xs[r0 : r0 + chunk], l_max, DP_DTYPE) for r0 in range(0, rows, chunk)]
    starts = [torch.cat([p[0][k] for p in parts]) for k in range(l_max)]
    ok = [torch.cat([p[1][k] for p in parts]) for k in range(l_max)]
    cand = list(range(l_min, l_max + 1))
    elig = torch.stack([ok[k - 1] & (k <= n - 1) for k in cand], dim=1)
    if l_max == 1:
        best = torch.ones(rows, dtype=torch.long, device=xs.device)
    elif l_min == l_max:
        best = torch.where(elig[:, 0], l_max, 1)
    else:
        scores = torch.stack([silhouette_1d_sorted(xs, starts[k - 1]) for k in cand], dim=1)
        scores = scores.masked_fill(~elig, _NEG_INF)
        best = torch.arange(l_min, l_max + 1, device=xs.device)[scores.argmax(dim=1)]  # first max on ties
        best = torch.where(elig.any(dim=1), best, 1)
    seg = torch.ones_like(order)
    for k in range(max(2, l_min), l_max + 1):  # 1 = highest cluster
        seg = torch.where(best.unsqueeze(1) == k, k - labels_from_starts(starts[k - 1], n), seg)
    level = torch.empty_like(seg).scatter_(1, order, seg)  # back to original order
    return level, best


# --------------------------------------------------------------------------- sklearn back-end
def adaptive_levels_sklearn(
    values: torch.Tensor, l_min: int, l_max: int, n_init: int = 10, random_state: int = 0
) -> tuple[torch.Tensor, torch.Tensor]:
    """Reference back-end: per row, sklearn ``KMeans`` + ``silhouette_score`` (Eqs. 9–12)."""
    from threadpoolctl import threadpool_limits

    x_all = values.detach().to(torch.float64).cpu().numpy()
    rows, n = x_all.shape
    levels = np.ones((rows, n), dtype=np.int64)
    ks = np.ones(rows, dtype=np.int64)
    with threadpool_limits(1):  # one thread: 10–40× faster on 1-D problems of ~100 points
        _sklearn_rows(x_all, levels, ks, l_min, l_max, n_init, random_state)
    return torch.from_numpy(levels).to(values.device), torch.from_numpy(ks).to(values.device)


def _sklearn_rows(
    x_all: np.ndarray, levels: np.ndarray, ks: np.ndarray, l_min: int, l_max: int, n_init: int, random_state: int
) -> None:
    """Fill ``levels``/``ks`` in place: the per-row loop of the reference back-end."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import silhouette_score

    rows, n = x_all.shape
    for r in range(rows):
        x = x_all[r].reshape(-1, 1)
        n_distinct = len(np.unique(x))
        best_k, best_score, best_labels = 1, -np.inf, np.zeros(n, dtype=np.int64)
        for k in range(l_min, l_max + 1):
            if k == 1 or k > n_distinct or k > n - 1:
                continue
            km = KMeans(n_clusters=k, n_init=n_init, random_state=random_state).fit(x)
            lab = km.labels_
            if l_min == l_max:
                score = 0.0
            elif len(np.unique(lab)) < 2:
                continue
            else:
                score = float(silhouette_score(x, lab))
            if score > best_score:
                rank = np.argsort(np.argsort(-km.cluster_centers_.ravel()))  # 0 = highest centroid
                best_k, best_score, best_labels = k, score, rank[lab] + 1
        ks[r] = best_k
        levels[r] = best_labels if best_k > 1 else 1


def offdiag_index(b: int, m: int, device) -> torch.Tensor:
    """(m·B) × (B−1) column indices of the non-positive candidates of each row of m stacked B×B blocks, in
    order (row q: 0…q−1, q+1…B−1): the gather that a boolean mask does with a data-dependent shape."""
    c = torch.arange(b - 1, device=device).unsqueeze(0)
    q = torch.arange(b, device=device).unsqueeze(1)
    return (c + (c >= q).long()).repeat(m, 1)


def embed_offdiag_levels(level_off: torch.Tensor) -> torch.Tensor:
    """(m·B) × (B−1) levels of the non-positive candidates → (m·B) × B level matrix with 0 on
    the diagonal of each B×B block."""
    b = level_off.shape[1] + 1
    m = level_off.shape[0] // b
    full = torch.zeros(m * b, b, dtype=torch.long, device=level_off.device)
    if capturing():  # the same entries, without a boolean mask's host read
        return full.scatter_(1, offdiag_index(b, m, level_off.device), level_off)
    full[off_diagonal_mask(b, level_off.device).repeat(m, 1)] = level_off.reshape(-1)
    return full


@register("adaptive_ladder")
class AdaptiveLadderLoss(ITRLoss):
    """Adaptive ladder loss (Ladder Eqs. 9–12) with levels from per-row k-means + silhouette.

    ``l_min``, ``l_max``: bounds on the number of levels (paper default (2, 4)).
    ``alpha``/``beta``: one per level up to ``l_max`` (default α = (0.2, 0.01, …),
    β_1 = 1, β_i = 1/2^i). ``backend``: ``"torch"`` (default, batched exact k-means) or
    ``"sklearn"`` (reference loop; ``n_init`` KMeans restarts, ``random_state``).
    ``hard_contrastive``, ``reduction``: as in ``ladder``.

    ``diagnostics``: ``levels_per_row_{i2t,t2i}`` (the chosen L* per query),
    ``levels_histogram_{i2t,t2i}`` ({L: number of queries}) and the ``ladder`` diagnostics
    (level sizes per row — Ladder Fig. 6 —, active and empty fractions).
    """

    requires_relevance = True

    def __init__(
        self,
        l_min: int = 2,
        l_max: int = 4,
        alpha: Sequence[float] | None = None,
        beta: Sequence[float] | None = None,
        backend: str = "torch",
        hard_contrastive: bool = True,
        reduction: str = "sum",
        n_init: int = 10,
        random_state: int = 0,
    ) -> None:
        super().__init__()
        owner = "adaptive_ladder"
        for field, v in (("l_min", l_min), ("l_max", l_max), ("n_init", n_init)):
            if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                raise ValueError(f"{owner}: {field}={v!r} must be an integer")
        check_range(owner, "l_min", l_min, lo=1)
        check_range(owner, "l_max", l_max, lo=l_min)
        if l_min == 1 and l_max > 1:
            raise ValueError(
                f"{owner}: l_min=1 with l_max={l_max} is not allowed: one cluster has no silhouette; "
                "use l_min=l_max=1 for the triplet baseline or l_min ≥ 2"
            )
        check_range(owner, "n_init", n_init, lo=1)
        check_choice(owner, "backend", backend, ("torch", "sklearn"))
        check_choice(owner, "reduction", reduction, ("sum", "mean"))
        self.l_min, self.l_max = int(l_min), int(l_max)
        self.alpha, self.beta = resolve_alpha_beta(owner, self.l_max, alpha, beta)
        self.backend = backend
        self.hard_contrastive = bool(hard_contrastive)
        self.uses_hardest_negative = self.hard_contrastive
        self.reduction = reduction
        self.n_init, self.random_state = int(n_init), int(random_state)

    @property
    def capturable(self) -> bool:
        """The batched back-end keeps everything on the device (a captured step clusters both directions, the
        symmetric shortcut being a host read); sklearn's runs on the host."""
        return self.backend == "torch"

    @staticmethod
    def check_relevance(rel: torch.Tensor) -> None:
        """The relevance check of :meth:`forward` (made on the host for a batch a captured step copies in)."""
        if not torch.isfinite(rel).all():
            raise ValueError("adaptive_ladder: rel contains NaN or infinite values")

    def levels(self, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Level matrix and number of levels chosen per row, for a B×B ``rel`` or a stack of
        several B×B matrices along dim 0 (m·B × B); the diagonal of each B×B block is level 0."""
        b = rel.shape[1]
        m = rel.shape[0] // b
        if capturing():  # the same values, without a boolean mask's host read
            values = rel.gather(1, offdiag_index(b, m, rel.device))
        else:
            keep = off_diagonal_mask(b, rel.device).repeat(m, 1)
            values = rel[keep].view(m * b, b - 1)
        if self.backend == "torch":
            lev, k = adaptive_levels_torch(values, self.l_min, self.l_max)
        else:
            lev, k = adaptive_levels_sklearn(values, self.l_min, self.l_max, self.n_init, self.random_state)
        return embed_offdiag_levels(lev), k

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        rel = rel.detach()
        captured = capturing()
        if not captured:
            self.check_relevance(rel)
        b = sim.shape[0]
        if not captured and torch.equal(rel, rel.T):  # symmetric relevance: one clustering serves both
            level_i2t, k_i2t = self.levels(rel)
            level_t2i, k_t2i = level_i2t, k_i2t
        else:  # both directions' rows in one batched call
            level, k = self.levels(torch.cat([rel, rel.T], dim=0))
            level_i2t, level_t2i, k_i2t, k_t2i = level[:b], level[b:], k[:b], k[b:]
        hard = self.hard_contrastive and not self.warmup  # warm-up: all pairs (Eq. 7), see ladder
        per_i2t, c_i2t = ladder_per_anchor(sim, level_i2t, self.alpha, self.beta, hard)
        per_t2i, c_t2i = ladder_per_anchor(sim.T, level_t2i, self.alpha, self.beta, hard)
        if captured:  # no host reads: the fractions as 0-d tensors, no per-row lists or histograms
            self.diagnostics = {
                **direction_diagnostics("i2t", level_i2t, self.l_max, c_i2t),
                **direction_diagnostics("t2i", level_t2i, self.l_max, c_t2i),
            }
            return reduce(per_i2t + per_t2i, self.reduction)
        with torch.no_grad():
            hist = {
                f"levels_histogram_{d}": {int(k): int((kk == k).sum()) for k in range(1, self.l_max + 1)}
                for d, kk in (("i2t", k_i2t), ("t2i", k_t2i))
            }
            self.diagnostics = {
                "levels_per_row_i2t": k_i2t.tolist(),
                "levels_per_row_t2i": k_t2i.tolist(),
                **hist,
                **direction_diagnostics("i2t", level_i2t, self.l_max, c_i2t),
                **direction_diagnostics("t2i", level_t2i, self.l_max, c_t2i),
            }
        return reduce(per_i2t + per_t2i, self.reduction)
