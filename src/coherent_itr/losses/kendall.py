"""Kendall ranking loss of BCLS: full (Eqs. 4, 17) and with SW-HS (Eqs. 18–20).

Notation: ``sim[i, j] = s(V_i, T_j)``, ``rel[i, j] = r_ij`` the continuous pseudo label of caption j
for image i (BCLS Sec. III-A: r ∈ [−1, 1], S-BERT cosine, r_ii = 1). Both retrieval directions are
computed by one routine on (sim, rel) for image anchors and on (simᵀ, relᵀ) for caption anchors:
the text→image term of anchor caption i ranks images j by ``s_ji`` against ``r_ji`` (Eq. 17,
second line), i.e. row i of ``simᵀ`` and ``relᵀ``.

``kendall`` — BCLS Eq. 17 (Eq. 4 when α = 0)::

    L_K = Σ_i Σ_j Σ_k 1(r_ij > r_ik + α)·[s_ik − s_ij + m]_+  +  Σ_i Σ_j Σ_k 1(r_ji > r_ki + α)·[s_ki − s_ji + m]_+

with j and k running over the whole batch (the positive included) and m = 0 (Eqs. 4, 17; Eq. 6
writes a margin m, exposed as ``margin``). Every triple is evaluated: O(B³) time, computed in
chunks of anchors by a custom autograd function (forward and backward recompute the B×B pair
masks per anchor chunk), so memory stays O(chunk·B²) — B = 512 fits in a few hundred MB.
Binary labels (r = identity matrix) reduce it to the all-negatives triplet loss with m = 0 — BCLS
Eqs. 10–11 (the "j = i" terms are the only constrained ones then).

``kendall_sw_hs`` — BCLS Eqs. 18–20. Our reading of the sliding windows (Fig. 3, Sec. III-D):
a window of width α (the relaxation) slides over the relevance range [−1, 1] with stride β.
Window m = 1..M has lower edge ``l_m = −1 + m·β`` and upper edge ``u_m = l_m + α``. For anchor i it
splits the candidates into

* ``Pos^m_i = {j : r_ij ≥ u_m}`` (above the window) and ``Neg^m_i = {k : r_ik < l_m}`` (below it),

so every (j, k) ∈ Pos × Neg satisfies ``r_ij > r_ik + α`` — the constraint of Eq. 17, as the
paper requires ("the pseudo label of the positive sample set is greater than the negative sample
set plus the relaxation α"). With ``M = floor((2 − α)/β)`` (the paper's M = (2 − α)/β) these are
exactly the window positions for which both sets can be non-empty: the position l = −1 has no
r < −1, and the last one, u_M = 1, keeps the positive pair (r_ii = 1) in Pos. Both edges are
shifted down by ``edge_tol`` (1e-6) so a float32 cosine of 0.99999994 on the diagonal still
counts as 1. Hard-sample mining (Eq. 20) keeps, per window and anchor, the least similar member
of Pos (T~) and the most similar member of Neg (T^), and Eq. 19 averages over the M windows::

    L_K-SW-HS = (1/M) Σ_m Σ_i [s(V_i, T^_i^m) − s(V_i, T~_i^m) + margin]_+  + (same for text→image)

(``margin`` = 0 in Eq. 19; exposed as an option like Eq. 6's m.) Ties in similarity go to the
smallest candidate index. With S-BERT labels few r are negative, so the lowest windows are
usually empty — ``valid_anchors_per_window_*`` in the diagnostics shows which windows act.

A window whose Pos or Neg is empty for an anchor contributes nothing (an explicit validity mask,
never ``scores*mask``); the 1/M stays the paper's constant. Vectorised without materialising the
M windows' B×B masks: candidates are bucketed by relevance between consecutive window edges, the
per-bucket extreme similarities are taken once, and running max/min over buckets give every
window's hardest pair — O(B²·log M + B·M) time (within the paper's O(M·B²)), O(B²) memory.
Binary labels give (number of windows with 0 < l_m ≤ 1 − α)/M times Triplet-HN with m = 0.

Reductions over anchors: ``sum`` (the papers' Σ_i, default) or ``mean`` (÷ B). ``kendall``
also offers ``pair_mean`` (÷ number of constrained triples, both directions): the normalisation
of the authors' later ITM_CLS code, which also drops windows and mining.

Diagnostics: constrained and active triples (``kendall``); per window the anchors with both sets
non-empty, the windows used, and the active hinges (``kendall_sw_hs``).
"""

from __future__ import annotations

import math

import torch

from .base import ITRLoss, capturing, check_choice, check_range, reduce
from .registry import register

_CHUNK_ELEMENTS = 1 << 22  # ~4M (anchor, j, k) triples per chunk of the full Kendall loss


def _check_rel_values(owner: str, rel: torch.Tensor, bounded: bool = False, tol: float = 1e-4) -> None:
    if not bool(torch.isfinite(rel).all()):
        raise ValueError(f"{owner}: rel contains NaN or infinite values")
    if bounded:
        rmin, rmax = float(rel.min()), float(rel.max())
        if rmin < -1 - tol or rmax > 1 + tol:
            raise ValueError(
                f"{owner}: rel values must lie in [-1, 1] (BCLS Sec. III-A; the windows cover that "
                f"range), got min {rmin:.6g}, max {rmax:.6g}"
            )


def _chunks(n: int):
    step = max(1, _CHUNK_ELEMENTS // (n * n))
    for a in range(0, n, step):
        yield a, min(n, a + step)


def _triple_masks(s: torch.Tensor, r: torch.Tensor, alpha: float, margin: float):
    """For anchor rows s, r (c×B): D[c,j,k] = r_j > r_k + α, hinge argument x = s_k − s_j + m."""
    d = r[:, :, None] > r[:, None, :] + alpha
    x = s[:, None, :] - s[:, :, None] + margin
    return d, x


class _KendallDirection(torch.autograd.Function):
    """Per-anchor ``Σ_{j,k} 1(r_ij > r_ik + α)·[s_ik − s_ij + m]_+`` for the rows of ``sim`` (chunked)."""

    @staticmethod
    def forward(ctx, sim, rel, alpha, margin):
        out = torch.empty(sim.shape[0], dtype=sim.dtype, device=sim.device)
        counts = torch.zeros(2, dtype=torch.int64, device=sim.device)  # (constrained, active) triples
        for a, b in _chunks(sim.shape[0]):
            d, x = _triple_masks(sim[a:b], rel[a:b], alpha, margin)
            act = d & (x > 0)
            out[a:b] = torch.where(act, x, torch.zeros((), dtype=x.dtype, device=x.device)).sum(dim=(1, 2))
            counts[0] += d.sum()
            counts[1] += act.sum()
        ctx.save_for_backward(sim, rel)
        ctx.alpha, ctx.margin = alpha, margin
        ctx.mark_non_differentiable(counts)
        return out, counts

    @staticmethod
    def backward(ctx, grad_out, _grad_counts):
        sim, rel = ctx.saved_tensors
        grad = torch.zeros_like(sim)
        for a, b in _chunks(sim.shape[0]):
            d, x = _triple_masks(sim[a:b], rel[a:b], ctx.alpha, ctx.margin)
            act = (d & (x > 0)).to(sim.dtype)
            # ∂/∂s_ik: + Σ_j act[j, k] (k as the less relevant item);  − Σ_k act[j, k] for s_ij (j as the more relevant)
            grad[a:b] = (act.sum(dim=1) - act.sum(dim=2)) * grad_out[a:b, None]
        return grad, None, None, None


def kendall_direction(sim: torch.Tensor, rel: torch.Tensor, alpha: float, margin: float = 0.0):
    """Per-anchor full Kendall loss of one direction (rows are anchors) and its (constrained, active) triple counts."""
    per_anchor, counts = _KendallDirection.apply(sim, rel.detach(), float(alpha), float(margin))
    if capturing():  # no host read: the counts stay 0-d tensors
        return per_anchor, (counts[0], counts[1])
    return per_anchor, (int(counts[0]), int(counts[1]))


@register("kendall")
class KendallLoss(ITRLoss):
    """Full Kendall ranking loss, BCLS Eq. 17 (Eq. 4 for α = 0): every discordant (j, k) pair, O(B³)."""

    requires_relevance = True
    capturable = True  # while a CUDA graph is captured: counts stay on the device (the host checks rel first)

    @staticmethod
    def check_relevance(rel: torch.Tensor) -> None:
        """The relevance check of :meth:`forward`, made on the host for a batch a captured step copies in."""
        _check_rel_values("kendall", rel)

    def __init__(self, alpha: float = 0.2, margin: float = 0.0, reduction: str = "sum") -> None:
        super().__init__()
        check_range("kendall", "alpha", alpha, lo=0.0)
        check_range("kendall", "margin", margin, lo=0.0)
        check_choice("kendall", "reduction", reduction, ("sum", "mean", "pair_mean"))
        self.alpha = float(alpha)
        self.margin = float(margin)
        self.reduction = reduction

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        if not capturing():
            self.check_relevance(rel)
        per_i2t, counts_i2t = kendall_direction(sim, rel, self.alpha, self.margin)
        per_t2i, counts_t2i = kendall_direction(sim.T, rel.T, self.alpha, self.margin)
        constrained = counts_i2t[0] + counts_t2i[0]
        active = counts_i2t[1] + counts_t2i[1]
        if capturing():
            c, a = constrained.double(), active.double()
            self.diagnostics = {
                "constrained_triples": c,
                "active_triples": a,
                "active_fraction": torch.where(c > 0, a / c.clamp(min=1), torch.zeros_like(c)),
            }
            if self.reduction == "pair_mean":
                return (per_i2t.sum() + per_t2i.sum()) / c.clamp(min=1).to(per_i2t.dtype)
            return reduce(per_i2t + per_t2i, self.reduction)
        self.diagnostics = {
            "constrained_triples": float(constrained),
            "active_triples": float(active),
            "active_fraction": float(active / constrained) if constrained else 0.0,
        }
        if self.reduction == "pair_mean":
            return (per_i2t.sum() + per_t2i.sum()) / max(constrained, 1)
        return reduce(per_i2t + per_t2i, self.reduction)


def window_edges(alpha: float, beta: float, edge_tol: float = 1e-6) -> tuple[list[float], list[float]]:
    """Lower and upper edges ``(l_m, u_m)``, m = 1..M, of the SW-HS windows (see the module docstring)."""
    n = int(math.floor((2.0 - alpha) / beta + 1e-9))
    lower = [round(-1.0 + m * beta, 12) - edge_tol for m in range(1, n + 1)]
    upper = [x + alpha for x in lower]
    return lower, upper


@torch.no_grad()
def _hardest_per_window(sim: torch.Tensor, bucket: torch.Tensor, n_win: int, largest: bool) -> torch.Tensor:
    """Index (B×M) of the most (``largest``) or least similar candidate among buckets ≤ m−1 (largest) or ≥ m.

    ``bucket[i, j] ∈ [0, M]``. Returns −1 where the set is empty. Ties: the smallest column index.
    """
    n_rows, n_cols = sim.shape
    fill = float("-inf") if largest else float("inf")
    red = "amax" if largest else "amin"
    ext = torch.full((n_rows, n_win + 1), fill, dtype=sim.dtype, device=sim.device)
    ext = ext.scatter_reduce(1, bucket, sim, reduce=red, include_self=True)  # per-bucket extreme
    cols = torch.arange(n_cols, device=sim.device).expand(n_rows, n_cols)
    hit = sim == ext.gather(1, bucket)  # candidates attaining it
    arg = torch.full((n_rows, n_win + 1), n_cols, dtype=torch.long, device=sim.device)
    arg = arg.scatter_reduce(1, bucket, torch.where(hit, cols, n_cols), reduce="amin", include_self=True)
    if largest:  # window m (1..M): buckets 0..m−1 → running max, read at m−1
        run, which = ext.cummax(dim=1)
        run, which = run[:, :n_win], which[:, :n_win]
    else:  # window m: buckets m..M → running min from the end, read at m
        run, which = ext.flip(1).cummin(dim=1)
        run, which = run.flip(1)[:, 1:], (n_win - which.flip(1))[:, 1:]
    idx = arg.gather(1, which)
    return torch.where(torch.isfinite(run), idx, torch.full_like(idx, -1))


def sw_hs_direction(
    sim: torch.Tensor, rel: torch.Tensor, lower: torch.Tensor, upper: torch.Tensor, margin: float = 0.0
):
    """Hinges (M×B) of Eq. 19 for the rows of ``sim`` as anchors, and the (M×B) mask of valid (window, anchor).

    No M×B×B mask is built. Each candidate's relevance is bucketed against the lower edges,
    ``a = #{m : l_m ≤ r}`` (so r < l_m ⟺ a < m), and against the upper edges, ``c = #{m : u_m ≤ r}``
    (r ≥ u_m ⟺ c ≥ m). Per anchor, the most similar candidate of each a-bucket and the least
    similar of each c-bucket (``scatter_reduce``), followed by a running max over buckets 0..m−1
    and a running min over buckets m..M, give the indices of T^ and T~ for every window at once
    (without gradient); the hinge is then built from ``sim`` gathered at those indices, so the
    gradient flows to the selected entries only. O(B²·log M + B·M) time, O(B² + B·M) memory.
    """
    n_win = lower.shape[0]
    rel = rel.contiguous()
    j_neg = _hardest_per_window(sim.detach(), torch.bucketize(rel, lower, right=True), n_win, largest=True)
    j_pos = _hardest_per_window(sim.detach(), torch.bucketize(rel, upper, right=True), n_win, largest=False)
    valid = (j_neg >= 0) & (j_pos >= 0)
    hardest_neg = sim.gather(1, j_neg.clamp(min=0))  # T^: most similar of Neg^m = {r < l_m}
    hardest_pos = sim.gather(1, j_pos.clamp(min=0))  # T~: least similar of Pos^m = {r ≥ u_m}
    zero = torch.zeros((), dtype=sim.dtype, device=sim.device)
    hinge = torch.where(valid, (hardest_neg - hardest_pos + margin).clamp(min=0), zero)
    return hinge.T, valid.T


@register("kendall_sw_hs")
class KendallSWHSLoss(ITRLoss):
    """Kendall ranking loss with Sliding-Window sampling and Hard-Sample mining, BCLS Eqs. 18–20."""

    requires_relevance = True
    capturable = True  # while a CUDA graph is captured: no host reads (the host checks rel before the copy)

    def __init__(
        self, alpha: float = 0.2, beta: float = 0.1, margin: float = 0.0, reduction: str = "sum", edge_tol: float = 1e-6
    ) -> None:
        super().__init__()
        check_range("kendall_sw_hs", "alpha", alpha, lo=0.0, hi=2.0, hi_open=True)
        check_range("kendall_sw_hs", "beta", beta, lo=0.0, lo_open=True, hi=2.0)
        check_range("kendall_sw_hs", "margin", margin, lo=0.0)
        check_range("kendall_sw_hs", "edge_tol", edge_tol, lo=0.0, hi=1e-2)
        check_choice("kendall_sw_hs", "reduction", reduction, ("sum", "mean"))
        lower, upper = window_edges(alpha, beta, edge_tol)
        if not lower:
            raise ValueError(
                f"kendall_sw_hs: (2 − alpha)/beta = {(2 - alpha) / beta:.4g} < 1 gives no window; "
                f"choose beta ≤ 2 − alpha"
            )
        self.alpha, self.beta, self.margin = float(alpha), float(beta), float(margin)
        self.reduction = reduction
        self.edge_tol = float(edge_tol)
        self.lower, self.upper = lower, upper
        self.n_windows = len(lower)
        self._edge_cache: dict = {}  # device -> the edges as float64 tensors there (_edges)

    def check_relevance(self, rel: torch.Tensor) -> None:
        """The relevance check of :meth:`forward`, made on the host for a batch a captured step copies in."""
        _check_rel_values("kendall_sw_hs", rel, bounded=True)

    def _edges(self, device) -> tuple[torch.Tensor, torch.Tensor]:
        """The windows' lower and upper edges as float64 tensors on ``device`` (made once per device: a captured
        step copies nothing from the host)."""
        key = str(device)
        if key not in self._edge_cache:
            self._edge_cache[key] = (
                torch.tensor(self.lower, dtype=torch.float64, device=device),
                torch.tensor(self.upper, dtype=torch.float64, device=device),
            )
        return self._edge_cache[key]

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        if not capturing():
            self.check_relevance(rel)
        # compare with the edges in float64 (−1 + m·β is not float32-exact); sim keeps its dtype
        rel64 = rel.detach().to(torch.float64)
        lower, upper = self._edges(sim.device)
        h_i2t, v_i2t = sw_hs_direction(sim, rel64, lower, upper, self.margin)
        h_t2i, v_t2i = sw_hs_direction(sim.T, rel64.T, lower, upper, self.margin)
        per_i2t = h_i2t.sum(dim=0) / self.n_windows  # Eq. 19: (1/M) Σ_m, per anchor
        per_t2i = h_t2i.sum(dim=0) / self.n_windows
        if capturing():
            self._captured_diagnostics(h_i2t, v_i2t, h_t2i, v_t2i)
            return reduce(per_i2t + per_t2i, self.reduction)
        with torch.no_grad():
            valid = int(v_i2t.sum() + v_t2i.sum())
            active = int(((h_i2t > 0) & v_i2t).sum() + ((h_t2i > 0) & v_t2i).sum())
            self.diagnostics = {
                "n_windows": float(self.n_windows),
                "windows_used_i2t": float(v_i2t.any(dim=1).sum()),
                "windows_used_t2i": float(v_t2i.any(dim=1).sum()),
                "valid_pairs": float(valid),  # (window, anchor) with Pos and Neg non-empty
                "active_pairs": float(active),  # … whose hinge is > 0
                "active_fraction": float(active / valid) if valid else 0.0,
                "valid_anchors_per_window_i2t": [int(x) for x in v_i2t.sum(dim=1).tolist()],
                "valid_anchors_per_window_t2i": [int(x) for x in v_t2i.sum(dim=1).tolist()],
                "window_lower_edges": [round(x + self.edge_tol, 12) for x in self.lower],
            }
        return reduce(per_i2t + per_t2i, self.reduction)

    @torch.no_grad()
    def _captured_diagnostics(self, h_i2t, v_i2t, h_t2i, v_t2i) -> None:
        """The numeric diagnostics of :meth:`forward` as 0-d tensors (no host read; the per-window lists are an
        eager step's only)."""
        valid = (v_i2t.sum() + v_t2i.sum()).double()
        active = (((h_i2t > 0) & v_i2t).sum() + ((h_t2i > 0) & v_t2i).sum()).double()
        self.diagnostics = {
            "n_windows": float(self.n_windows),
            "windows_used_i2t": v_i2t.any(dim=1).sum().double(),
            "windows_used_t2i": v_t2i.any(dim=1).sum().double(),
            "valid_pairs": valid,
            "active_pairs": active,
            "active_fraction": torch.where(valid > 0, active / valid.clamp(min=1), torch.zeros_like(valid)),
        }
