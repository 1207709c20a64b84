"""Ladder loss of CVSE++ (Zhou et al., "Adaptive Ladder Loss for Learning Coherent
Visual-Semantic Embedding"), Ladder paper Eqs. 5–8.

Notation (paper Sec. III-B). For a query q (row q of ``sim``), the non-positive candidates
``N^{-q}`` (every column j ≠ q) are split into L *relevance levels* ``N_1^{-q}, …, N_L^{-q}``,
``N_1`` the most relevant. Here a level matrix ``level[q, j]`` holds 0 for the positive (the
diagonal, "level 0") and 1…L for the others. The inequality chain (Eq. 5) gives one hinge
family per level l = 1…L (Eq. 7)::

    L^l(q) = Σ_{i ∈ N_{l-1}, j ∈ N_{l:L}} [α_l − s(q, i) + s(q, j)]_+        (N_0 = {q})

(``L^1`` is the triplet loss of Eq. 3: the positive against every negative), and
``L_lad(q) = Σ_l β_l · L^l(q)`` (Eq. 6). With hard-contrastive sampling (HC, Eq. 8) each family
keeps one pair per anchor: the *least* similar candidate of the more-relevant set ``N_{l-1}``
against the *most* similar of the less-relevant set ``N_{l:L}``::

    L^l_HC(q) = [α_l − min_{i ∈ N_{l-1}} s(q, i) + max_{j ∈ N_{l:L}} s(q, j)]_+

Eq. 8 prints ``α_1`` inside ``L^2_HC``; that is a typo for ``α_2`` (Eq. 7 uses α_2 for L^2 and
the text says level-2 sentences are pushed by α_1 + α_2), so level l always uses α_l here.
``L^1_HC`` is exactly VSE++'s max-violation triplet loss; with β_2 = … = β_L = 0 the ladder
loss equals the triplet loss (paper Sec. III-B, claim U6).

Empty sets contribute nothing: masked minima/maxima use ±∞ (never ``scores * mask``) and a
(q, l) term whose more- or less-relevant set is empty is dropped. The authors' code adds a
spurious hinge ``[α_l − s_min + 0]_+`` there (reference-implementations notes).

Levels from fixed thresholds θ_1 > θ_2 > … > θ_{L-1} (Ladder Sec. III-B): a non-positive
candidate j of query q is in level ``1 + #{l : rel[q, j] < θ_l}``, i.e. ``rel ≥ θ_1`` → level 1.
Paper defaults (Sec. IV-A): L = 2, θ_1 = 0.40 for Sentence-BERT cosine (0.63 for the "hybrid"
relevance), α = (0.2, 0.01), β = (1, 0.25); for L = 3, θ_2 = 0.35, α_3 = 0.01, β_3 = 0.125
(Sec. V-B), i.e. β_1 = 1 and β_i = 1/2^i, α_1 = 0.2 and α_i = 0.01 — the defaults used when
``alpha``/``beta`` are not given. The diagonal is always level 0 whatever ``rel[q, q]`` is
(the authors force it to 1).

Both retrieval directions ("cycle-consistent" ladder, Sec. III-B): image→text uses rows of
``sim`` and ``rel``; text→image uses ``sim.T`` and ``rel.T``. Per-anchor losses of both
directions are added and reduced over anchors by ``sum`` (VSE++/authors' code) or ``mean``.

The hinge computation (:func:`ladder_per_anchor`) is shared with ``adaptive_ladder``, which
only chooses the levels differently (Eqs. 9–12).

Warm-up (``set_warmup(True)``, VSE∞'s all-negatives warm-up): hard-contrastive sampling (Eq. 8)
is replaced by the sum over all pairs of every level (Eq. 7) with the same α, β and levels — the
ladder's own all-negatives objective, which for β_2 = … = 0 is the all-negatives triplet loss
(BCLS Eq. 12). Same for ``adaptive_ladder``. The sum over all pairs is taken in O(B² log B) from
sorted rows (:func:`all_pairs_hinge_sum`), not over a B³ tensor.
"""

from __future__ import annotations

import math
from typing import Sequence

import torch

from .base import ITRLoss, capturing, check_choice, check_range, masked_max, masked_min, reduce
from .registry import register

ALPHA_FIRST, ALPHA_REST = 0.2, 0.01


def default_alphas(n_levels: int) -> list[float]:
    """Paper margins: α_1 = 0.2, α_l = 0.01 for l ≥ 2 (Ladder Sec. IV-A)."""
    return [ALPHA_FIRST] + [ALPHA_REST] * (n_levels - 1)


def default_betas(n_levels: int) -> list[float]:
    """Paper weights: β_1 = 1, β_l = 1/2^l for l ≥ 2 (Sec. IV-A; β_2 = 0.25, β_3 = 0.125)."""
    return [1.0] + [2.0**-l for l in range(2, n_levels + 1)]


def resolve_alpha_beta(
    owner: str, n_levels: int, alpha: Sequence[float] | None, beta: Sequence[float] | None
) -> tuple[list[float], list[float]]:
    """Validate user margins/weights (or fill the paper defaults) for ``n_levels`` levels."""
    alpha = default_alphas(n_levels) if alpha is None else [float(a) for a in alpha]
    beta = default_betas(n_levels) if beta is None else [float(b) for b in beta]
    for field, vals in (("alpha", alpha), ("beta", beta)):
        if len(vals) != n_levels:
            raise ValueError(
                f"{owner}: {field} has {len(vals)} entries {vals}; expected one per level, i.e. {n_levels}"
            )
        for v in vals:
            check_range(owner, field + " entry", v, lo=0.0)
    return alpha, beta


def levels_from_thresholds(rel: torch.Tensor, thresholds: Sequence[float]) -> torch.Tensor:
    """Level matrix from fixed thresholds θ_1 > … > θ_{L-1}: 0 on the diagonal, else
    ``1 + #{l : rel[q, j] < θ_l}`` (``rel ≥ θ_1`` → level 1, the most relevant). Each θ_l is compared as a
    Python number (rounded to ``rel``'s dtype, as a tensor of them would be): no host-to-device copy, which a
    CUDA graph's capture refuses."""
    level = torch.ones(rel.shape, dtype=torch.long, device=rel.device)
    for t in thresholds:
        level += rel < float(t)
    level.fill_diagonal_(0)
    return level


def _count(x: torch.Tensor):
    """A count: ``int(x)``, or the 0-d tensor ``x`` while a CUDA graph is captured (no host read)."""
    return x if capturing() else int(x)


def level_sizes(level: torch.Tensor, n_levels: int) -> torch.Tensor:
    """``sizes[q, l-1]`` = |N_l^{-q}| for l = 1…n_levels (an int64 B×L tensor)."""
    return torch.stack([(level == l).sum(dim=1) for l in range(1, n_levels + 1)], dim=1)


def all_pairs_hinge_sum(
    sim: torch.Tensor, more: torch.Tensor, less: torch.Tensor, alpha: float
) -> tuple[torch.Tensor, int]:
    """``term[q] = Σ_{i ∈ more_q, j ∈ less_q} [α − s(q, i) + s(q, j)]_+`` (one family of Eq. 7) and
    the number of pairs with a positive hinge, in O(B² log B) time and memory instead of B³.

    The hinge is piecewise linear, so with ``n_i = #{j ∈ less_q : s(q, j) > s(q, i) − α}`` (the
    active partners of i) and ``m_j = #{i ∈ more_q : s(q, i) < s(q, j) + α}``::

        term[q] = α · Σ_i n_i − Σ_{i ∈ more_q} n_i · s(q, i) + Σ_{j ∈ less_q} m_j · s(q, j)

    — the same value and (sub)gradient as the sum over all pairs. The counts come from sorted rows
    (``searchsorted``, no gradient); the weighted sums are taken in float64 so the cancellation
    between the three terms costs no precision.
    """
    s = sim.detach()
    # ±∞ as Python numbers: a tensor of one would be copied from the host, which a CUDA graph's capture refuses
    less_sorted = torch.where(less, s, -math.inf).sort(dim=1).values  # non-members at −∞: never counted
    more_sorted = torch.where(more, s, math.inf).sort(dim=1).values  # non-members at +∞: never counted
    b = s.shape[1]
    n_i = b - torch.searchsorted(less_sorted, (s - alpha).contiguous(), right=True)  # #{j: s_j > s_i − α}
    m_j = torch.searchsorted(more_sorted, (s + alpha).contiguous(), right=False)  # #{i: s_i < s_j + α}
    n_i = torch.where(more, n_i, 0)
    m_j = torch.where(less, m_j, 0)
    s64 = sim.to(torch.float64)
    n_sum = n_i.sum(dim=1)
    term = alpha * n_sum.to(torch.float64) - (n_i.to(torch.float64) * s64).sum(1) + (m_j.to(torch.float64) * s64).sum(1)
    return term.to(sim.dtype), _count(n_sum.sum())


def ladder_per_anchor(
    sim: torch.Tensor, level: torch.Tensor, alpha: Sequence[float], beta: Sequence[float], hard: bool
) -> tuple[torch.Tensor, dict[str, int]]:
    """Per-anchor ladder loss ``L_lad(q)`` (Eqs. 6–8) for one retrieval direction.

    ``sim[q, j]``: similarity of anchor q to candidate j (positive on the diagonal).
    ``level[q, j]``: 0 for the positive, 1…L for the other candidates (rows may use fewer
    levels than ``len(alpha)``; their missing families have an empty set and contribute 0).
    ``hard``: hard-contrastive sampling (Eq. 8) or the sum over all pairs (Eq. 7).

    Returns ``(loss[B], counts)`` with ``counts = {"terms", "active", "empty"}``: for HC, the
    number of (anchor, level) hinges with both sets non-empty, how many are > 0, and how many
    (anchor, level) families were skipped as empty; for all pairs, the number of (anchor, i, j)
    pairs, how many are > 0, and the empty families.
    """
    total = sim.new_zeros(sim.shape[0])
    counts = {"terms": 0, "active": 0, "empty": 0}
    for l, (a_l, b_l) in enumerate(zip(alpha, beta), start=1):
        more = level == (l - 1)  # N_{l-1} (N_0 = the positive)
        less = level >= l  # N_{l:L}
        valid = more.any(dim=1) & less.any(dim=1)
        counts["empty"] += _count((~valid).sum())
        if hard:
            lo = masked_min(sim, more, dim=1)  # least similar of the more-relevant set
            hi = masked_max(sim, less, dim=1)  # most similar of the less-relevant set
            # replace ±inf of empty rows before combining so no inf/NaN reaches autograd
            hinge = (a_l - torch.where(valid, lo, 0.0) + torch.where(valid, hi, 0.0)).clamp(min=0)
            term = torch.where(valid, hinge, 0.0)
            counts["terms"] += _count(valid.sum())
            counts["active"] += _count((term > 0).sum())
        else:
            term, active = all_pairs_hinge_sum(sim, more, less, a_l)
            counts["terms"] += _count((more.sum(1) * less.sum(1)).sum())
            counts["active"] += active
        total = total + b_l * term
    return total, counts


def direction_diagnostics(prefix: str, level: torch.Tensor, n_levels: int, counts: dict[str, int]) -> dict:
    """Plain-python diagnostics of one direction: level sizes per row, active/empty fractions (while a CUDA
    graph is captured, the fractions as 0-d tensors and no per-row sizes)."""
    n_fam = level.shape[0] * n_levels
    if capturing():
        terms, active = counts["terms"].double(), counts["active"].double()
        return {
            f"active_fraction_{prefix}": torch.where(terms > 0, active / terms.clamp(min=1), torch.zeros_like(terms)),
            f"empty_fraction_{prefix}": counts["empty"].double() / n_fam,
        }
    sizes = level_sizes(level, n_levels)
    return {
        f"level_sizes_{prefix}": sizes.tolist(),
        f"level_size_mean_{prefix}": sizes.double().mean(dim=0).tolist(),
        f"active_fraction_{prefix}": counts["active"] / counts["terms"] if counts["terms"] else 0.0,
        f"empty_fraction_{prefix}": counts["empty"] / n_fam,
    }


@register("ladder")
class LadderLoss(ITRLoss):
    """CVSE++ ladder loss with fixed relevance thresholds (Ladder Eqs. 5–8).

    ``thresholds``: θ_1 > θ_2 > … (strictly decreasing, L − 1 of them; default (0.40,) for
    Sentence-BERT cosine). ``alpha``/``beta``: one margin/weight per level (default: paper's
    α = (0.2, 0.01, …), β = (1, 1/4, 1/8, …)). ``hard_contrastive``: Eq. 8 (default, as in all
    the paper's experiments) or all pairs (Eq. 7).
    ``reduction``: ``sum`` over anchors (authors' code, VSE++) or ``mean``.

    ``diagnostics`` per direction (``_i2t``, ``_t2i``): ``level_sizes`` (|N_l| per row and level,
    Ladder Fig. 6), ``level_size_mean``, ``active_fraction`` (hinges > 0 among the computed ones)
    and ``empty_fraction`` ((anchor, level) families dropped because a set is empty).
    """

    requires_relevance = True
    capturable = True  # fixed thresholds: levels, sets and counts stay on the device while captured

    @staticmethod
    def check_relevance(rel: torch.Tensor) -> None:
        """The relevance check of :meth:`forward` (made on the host for a batch a captured step copies in)."""
        if not torch.isfinite(rel).all():
            raise ValueError("ladder: rel contains NaN or infinite values")

    def __init__(
        self,
        thresholds: Sequence[float] = (0.40,),
        alpha: Sequence[float] | None = None,
        beta: Sequence[float] | None = None,
        hard_contrastive: bool = True,
        reduction: str = "sum",
    ) -> None:
        super().__init__()
        owner = "ladder"
        th = [float(t) for t in thresholds]
        if any(b >= a for a, b in zip(th, th[1:])):
            raise ValueError(f"{owner}: thresholds={th} must be strictly decreasing (θ_1 > θ_2 > …)")
        for t in th:
            if t != t:
                raise ValueError(f"{owner}: thresholds={th} contains NaN")
        check_choice(owner, "reduction", reduction, ("sum", "mean"))
        self.thresholds = th
        self.n_levels = len(th) + 1
        self.alpha, self.beta = resolve_alpha_beta(owner, self.n_levels, alpha, beta)
        self.hard_contrastive = bool(hard_contrastive)
        self.uses_hardest_negative = self.hard_contrastive
        self.reduction = reduction

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        rel = rel.detach().to(sim.dtype)
        if not capturing():
            self.check_relevance(rel)
        level_i2t = levels_from_thresholds(rel, self.thresholds)
        level_t2i = levels_from_thresholds(rel.T, self.thresholds)
        hard = self.hard_contrastive and not self.warmup
        per_i2t, c_i2t = ladder_per_anchor(sim, level_i2t, self.alpha, self.beta, hard)
        per_t2i, c_t2i = ladder_per_anchor(sim.T, level_t2i, self.alpha, self.beta, hard)
        with torch.no_grad():
            self.diagnostics = {
                **direction_diagnostics("i2t", level_i2t, self.n_levels, c_i2t),
                **direction_diagnostics("t2i", level_t2i, self.n_levels, c_t2i),
            }
        return reduce(per_i2t + per_t2i, self.reduction)
