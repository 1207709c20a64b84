"""Triplet ranking loss of VSE++ (Faghri et al.), BCLS Eqs. 1 and 12–13, Unified Eq. 1.

For a batch of B matched pairs with similarities ``sim[i, j] = s(V_i, T_j)``:

* image→text hinge of anchor i and negative caption j ≠ i: ``[m + s_ij − s_ii]_+``
* text→image hinge of anchor caption i and negative image j ≠ i: ``[m + s_ji − s_ii]_+``

``max_violation=True`` (Triplet-HN, VSE++ "max violation") keeps only the hardest negative per
anchor and direction (BCLS Eq. 13 / Unified Eqs. 1–2); ``False`` sums the hinges over all
negatives (BCLS Eq. 12, VSE0). Per-anchor losses of both directions are added and reduced over
anchors by ``sum`` (VSE++ code and paper; collapsed value 2·B·m) or ``mean``.

Warm-up (``set_warmup(True)``, VSE∞'s ``vse_mean_warmup_epochs``): a max-violation loss computes
the all-negatives objective instead — the hinges summed over every negative (BCLS Eq. 12, VSE0),
same margin and reduction — exactly the value of ``max_violation=False``.
"""

from __future__ import annotations

import torch

from .base import ITRLoss, check_choice, check_range, off_diagonal_mask, reduce, stat
from .registry import register


@register("triplet")
class TripletLoss(ITRLoss):
    """VSE++ triplet hinge loss (Triplet-HN with ``max_violation=True``)."""

    capturable = True

    def __init__(self, margin: float = 0.2, max_violation: bool = True, reduction: str = "sum") -> None:
        super().__init__()
        check_range("triplet", "margin", margin, lo=0.0)
        check_choice("triplet", "reduction", reduction, ("sum", "mean"))
        self.margin = float(margin)
        self.max_violation = bool(max_violation)
        self.uses_hardest_negative = self.max_violation
        self.reduction = reduction

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        pos = sim.diagonal()
        neg = off_diagonal_mask(sim.shape[0], sim.device)
        # hinge[i, j]: anchor image i, negative caption j;  hinge_t[j, i]... via columns
        cost_i2t = (self.margin + sim - pos[:, None]).clamp(min=0).masked_fill(~neg, 0.0)
        cost_t2i = (self.margin + sim - pos[None, :]).clamp(min=0).masked_fill(~neg, 0.0)
        if self.max_violation and not self.warmup:
            per_i2t = cost_i2t.amax(dim=1)
            per_t2i = cost_t2i.amax(dim=0)
        else:
            per_i2t = cost_i2t.sum(dim=1)
            per_t2i = cost_t2i.sum(dim=0)
        with torch.no_grad():
            self.diagnostics = {
                "active_fraction_i2t": stat((per_i2t > 0).float().mean()),
                "active_fraction_t2i": stat((per_t2i > 0).float().mean()),
            }
        return reduce(per_i2t + per_t2i, self.reduction)
