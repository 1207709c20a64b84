"""Triplet ranking loss with Soft Negative mining (Triplet-SN), BCLS Eqs. 14–16.

For a batch of B matched pairs with ``sim[i, j] = s(V_i, T_j)``, the hardest negative of
Triplet-HN (BCLS Eqs. 12–13) is replaced by a log-sum-exp "soft maximum" over the negatives:

* image→text, anchor image i:  ``s~(V_i) = (1/γ) · log Σ_{j ∈ N_i} exp(γ · s_ij)``
* text→image, anchor caption i: ``s~(T_i) = (1/γ) · log Σ_{j ∈ N'_i} exp(γ · s_ji)``

and ``L_T-SN = Σ_i [s~(V_i) − s_ii + m]_+ + Σ_i [s~(T_i) − s_ii + m]_+`` (Eq. 14). As γ → ∞
the soft maximum tends to the maximum (Eq. 16) and L_T-SN to Triplet-HN; for finite γ,
``0 ≤ s~ − max ≤ log|N_i| / γ``. Paper defaults: m = 0.2, γ = 50 (BCLS Sec. IV-A).

The negative sets are ``N_i = {j : r_ij < 1}`` and ``N'_i = {j : r_ji < 1}`` in Eqs. 13 and 15.
With the binary labels of the paper's binary branch (r = 1 on the diagonal only) this is
``j ≠ i`` — the default ``negatives="off_diagonal"``, which needs no relevance matrix.
``negatives="relevance"`` uses the continuous ``rel``: j is a negative of anchor i when j ≠ i
(BCLS Sec. III-A sets r_ii = 1) and ``r_ij < 1 − 1e-6`` (the tolerance keeps float32 cosines of
identical captions, 0.99999994, out of the negatives); caption duplicates are thus not negatives,
and a row whose negative set is empty contributes 0.

Reduction over anchors: ``sum`` (Eq. 14, default) or ``mean`` (divided by B).
The log-sum-exp is computed with ``torch.logsumexp`` (max-shifted), so values and gradients stay
finite in float32 for γ up to at least 1e4.
"""

from __future__ import annotations

import math

import torch

from .base import ITRLoss, check_choice, check_range, masked_mean_stat, off_diagonal_mask, reduce, stat
from .registry import register

_ONE_TOL = 1e-6  # r ≥ 1 − tol counts as "r = 1" (fully relevant) for the negative sets of Eqs. 13/15


def soft_max_over(x: torch.Tensor, mask: torch.Tensor, gamma: float, dim: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(1/γ)·logsumexp(γ·x)`` over the entries of ``dim`` where ``mask`` is True.

    Returns ``(value, nonempty)``; rows with an empty set get value 0 and ``nonempty=False``
    (the caller must drop them). Never produces NaN gradients for empty rows.
    """
    nonempty = mask.any(dim=dim)
    safe_mask = mask | ~nonempty.unsqueeze(dim)  # empty rows: compute on everything, then discard
    val = torch.logsumexp((gamma * x).masked_fill(~safe_mask, float("-inf")), dim=dim) / gamma
    return torch.where(nonempty, val, torch.zeros_like(val)), nonempty


@register("triplet_sn")
class TripletSNLoss(ITRLoss):
    """Triplet-SN of BCLS (Eqs. 14–15): hinge on a log-sum-exp soft hardest negative."""

    capturable = True

    def __init__(
        self, margin: float = 0.2, gamma: float = 50.0, reduction: str = "sum", negatives: str = "off_diagonal"
    ) -> None:
        super().__init__()
        check_range("triplet_sn", "margin", margin, lo=0.0)
        check_range("triplet_sn", "gamma", gamma, lo=0.0, lo_open=True)
        if not math.isfinite(gamma):
            raise ValueError(f"triplet_sn: gamma={gamma!r} must be finite (use loss 'triplet' for the γ→∞ limit)")
        check_choice("triplet_sn", "reduction", reduction, ("sum", "mean"))
        check_choice("triplet_sn", "negatives", negatives, ("off_diagonal", "relevance"))
        self.margin = float(margin)
        self.gamma = float(gamma)
        self.reduction = reduction
        self.negatives = negatives
        self.requires_relevance = negatives == "relevance"

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        pos = sim.diagonal()
        if self.negatives == "relevance":
            # Eqs. 13/15: r_ij < 1 (rows: image anchors); r_ii := 1 (Sec. III-A), whatever rel's diagonal holds
            neg = (rel < 1.0 - _ONE_TOL) & off_diagonal_mask(sim.shape[0], sim.device)
        else:
            neg = off_diagonal_mask(sim.shape[0], sim.device)
        soft_i2t, ok_i2t = soft_max_over(sim, neg, self.gamma, dim=1)  # s~(V_i): over captions j
        soft_t2i, ok_t2i = soft_max_over(sim, neg, self.gamma, dim=0)  # s~(T_i): over images j (r_ji)
        per_i2t = torch.where(ok_i2t, (soft_i2t - pos + self.margin).clamp(min=0), torch.zeros_like(pos))
        per_t2i = torch.where(ok_t2i, (soft_t2i - pos + self.margin).clamp(min=0), torch.zeros_like(pos))
        with torch.no_grad():
            hard_i2t = sim.masked_fill(~neg, float("-inf")).amax(dim=1)
            self.diagnostics = {
                "active_fraction_i2t": stat((per_i2t > 0).float().mean()),
                "active_fraction_t2i": stat((per_t2i > 0).float().mean()),
                "soft_minus_hard_i2t": masked_mean_stat(soft_i2t - hard_i2t, ok_i2t, empty=0.0),
                "empty_negative_rows": stat((~ok_i2t).sum() + (~ok_t2i).sum()),
            }
        return reduce(per_i2t + per_t2i, self.reduction)
