"""VLC (InfoNCE) and the Unified loss of pair similarity optimisation (Unified paper, Eqs. 3–7, 20–23).

With ``sim[i, j] = s_ij`` for a batch of B matched pairs (positives on the diagonal):

* **VLC** (Eq. 3): ``L_VLC = −Σ_i [ log(e^{γ s_ii} / Σ_j e^{γ s_ij}) + log(e^{γ s_ii} / Σ_j e^{γ s_ji}) ]``
  — the symmetric InfoNCE / CLIP loss with scale γ (= 1/temperature). Eq. 4 (derived in Eq. 20)
  rewrites it as ``Σ_i [ log(1 + Σ_{j≠i} e^{γ(s_ij − s_ii)}) + log(1 + Σ_{j≠i} e^{γ(s_ji − s_ii)}) ]``;
  the two forms are algebraically identical (the j = i term of the denominator is the "1").
* **Unified** (Eq. 5): ``L = (1/γ) Σ_i [ log(1 + Σ_{j≠i} e^{γ(s_ij − s_ii + m)})``
  ``+ log(1 + Σ_{j≠i} e^{γ(s_ji − s_ii + m)}) ]``.
  Special cases: γ → ∞ gives Triplet-HN with margin m (Eqs. 6, 21–22; for finite γ,
  ``0 ≤ L_Unified − L_Triplet-HN ≤ 2·B·log(B)/γ`` under sum reduction); m = 0 gives
  ``L_VLC = γ · L_Unified(m = 0)`` (Eqs. 7, 23).

Paper defaults: m = 0.2, γ = 50 (γ = 60 for VSE++ (BUTD), Sec. 4.5 / App. B). The paper sums over
anchors (``reduction="sum"``). The author's code (MV-VSE) takes the **mean** over anchors and
averages the two directions, (i2t + t2i)/2, with γ = 1/τ = 100: that is
``reduction="mean", average_directions=True, gamma=100``.

Numerics: ``log(1 + Σ_j e^{x_j})`` is ``logsumexp([0, x_1, …])`` — computed by ``torch.logsumexp``
on the matrix whose diagonal is replaced by 0 (= log of the "1"), so values and gradients are
finite in float32 for γ up to at least 1e4.
"""

from __future__ import annotations

import math

import torch

from .base import ITRLoss, check_choice, check_range, masked_mean_stat, reduce, stat
from .registry import register


def _check_gamma(owner: str, gamma: float) -> None:
    check_range(owner, "gamma", gamma, lo=0.0, lo_open=True)
    if not math.isfinite(gamma):
        raise ValueError(f"{owner}: gamma={gamma!r} must be finite (use loss 'triplet' for the γ→∞ limit)")


def log1p_sum_exp_offdiag(z: torch.Tensor, dim: int) -> torch.Tensor:
    """``log(1 + Σ_{j≠i} exp(z_ij))`` along ``dim`` of a square matrix, stably (diagonal ignored)."""
    eye = torch.eye(z.shape[0], dtype=torch.bool, device=z.device)
    return torch.logsumexp(z.masked_fill(eye, 0.0), dim=dim)


class _DirectionalLoss(ITRLoss):
    """Shared reduction: per-anchor losses of both directions → scalar."""

    reduction: str
    average_directions: bool
    capturable = True

    def _combine(self, per_i2t: torch.Tensor, per_t2i: torch.Tensor) -> torch.Tensor:
        total = reduce(per_i2t, self.reduction) + reduce(per_t2i, self.reduction)
        return total / 2 if self.average_directions else total


@register("vlc")
class VLCLoss(_DirectionalLoss):
    """Vision-language contrastive loss (InfoNCE), Unified paper Eq. 3 (≡ Eq. 4)."""

    def __init__(self, gamma: float = 50.0, reduction: str = "sum", average_directions: bool = False) -> None:
        super().__init__()
        _check_gamma("vlc", gamma)
        check_choice("vlc", "reduction", reduction, ("sum", "mean"))
        self.gamma = float(gamma)
        self.reduction = reduction
        self.average_directions = bool(average_directions)

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        z = self.gamma * sim
        pos = z.diagonal()
        per_i2t = torch.logsumexp(z, dim=1) - pos  # −log softmax over captions j (row i)
        per_t2i = torch.logsumexp(z, dim=0) - pos  # −log softmax over images j (column i)
        with torch.no_grad():
            self.diagnostics = {
                "loss_i2t": stat(per_i2t.mean()),
                "loss_t2i": stat(per_t2i.mean()),
                "top1_i2t": stat((sim.argmax(dim=1) == torch.arange(sim.shape[0], device=sim.device)).float().mean()),
            }
        return self._combine(per_i2t, per_t2i)


@register("unified")
class UnifiedLoss(_DirectionalLoss):
    """Unified loss (Eq. 5): VLC with the triplet margin m, scaled by 1/γ."""

    def __init__(
        self, margin: float = 0.2, gamma: float = 50.0, reduction: str = "sum", average_directions: bool = False
    ) -> None:
        super().__init__()
        check_range("unified", "margin", margin, lo=0.0)
        _check_gamma("unified", gamma)
        check_choice("unified", "reduction", reduction, ("sum", "mean"))
        self.margin = float(margin)
        self.gamma = float(gamma)
        self.reduction = reduction
        self.average_directions = bool(average_directions)

    def forward(self, sim: torch.Tensor, rel: torch.Tensor | None = None) -> torch.Tensor:
        self.check_inputs(sim, rel)
        pos = sim.diagonal()
        d_i2t = sim - pos[:, None] + self.margin  # [i, j] = s_ij − s_ii + m
        d_t2i = sim - pos[None, :] + self.margin  # [j, i] = s_ji − s_ii + m
        per_i2t = log1p_sum_exp_offdiag(self.gamma * d_i2t, dim=1) / self.gamma
        per_t2i = log1p_sum_exp_offdiag(self.gamma * d_t2i, dim=0) / self.gamma
        with torch.no_grad():
            off = ~torch.eye(sim.shape[0], dtype=torch.bool, device=sim.device)
            self.diagnostics = {
                "violation_fraction_i2t": masked_mean_stat((d_i2t > 0).float(), off),
                "violation_fraction_t2i": masked_mean_stat((d_t2i > 0).float(), off),
                "loss_i2t": stat(per_i2t.mean()),
                "loss_t2i": stat(per_t2i.mean()),
            }
        return self._combine(per_i2t, per_t2i)
