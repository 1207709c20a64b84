"""Tangent-gradient diagnostics of the Unified-loss paper (Li et al.), Eqs. 11–12 and 17–18.

On the unit hypersphere only the component of a gradient tangent to the sphere moves an
embedding; the radial part is undone by normalisation. The paper shows that for Triplet-HN this
tangent part vanishes when the hardest negative nears the anchor (s → 1). We *measure* it from
autograd, for any loss, on a training batch:

* ``G = ∂L/∂S`` (B×B) and ``∂L/∂v_i`` come from autograd of the actual loss;
* ``grad_anchor``: mean over image anchors of ‖P_{v_i} ∂L/∂v_i‖ with P_v g = g − (g·v)v (Eqs. 11, 17);
* ``grad_hardneg``: mean over anchors i of the tangent norm of the gradient that pair (i, ĵ)
  sends to the hardest negative caption ĵ = argmax_{j≠i} s_ij: |G_iĵ|·sin θ(v_i, t_ĵ) (Eq. 12);
* ``grad_negatives``: mean over anchors i of Σ_{j≠i} |G_ij|·sin θ(v_i, t_j), the tangent push that
  anchor i gives all its negatives (the sum of Eq. 18 over j).

Both retrieval directions of a symmetric loss contribute to G_ij; the paper analyses the
image→text direction alone and the text→image one mirrors it. The values scale with the loss's
reduction (sum vs mean): compare losses with the same reduction.
Also returned: ``pos_sim`` (mean s_ii) and ``hardneg_sim`` (mean max_{j≠i} s_ij) of the batch.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def tangent_gradient_stats(
    img: torch.Tensor, cap: torch.Tensor, sim: torch.Tensor, grad_sim: torch.Tensor, grad_img: torch.Tensor
) -> dict[str, float]:
    """Diagnostics from unit-norm embeddings ``img``/``cap`` (B×d), ``sim = img @ cap.T`` and the
    autograd gradients ``grad_sim = ∂L/∂sim`` and ``grad_img = ∂L/∂img``."""
    b = sim.shape[0]
    eye = torch.eye(b, dtype=torch.bool, device=sim.device)
    tangent = grad_img - (grad_img * img).sum(-1, keepdim=True) * img
    sin = (1.0 - sim.clamp(-1.0, 1.0) ** 2).clamp(min=0.0).sqrt()
    push = grad_sim.abs() * sin
    hard = sim.masked_fill(eye, float("-inf")).argmax(dim=1)
    rows = torch.arange(b, device=sim.device)
    return {
        "grad_anchor": float(tangent.norm(dim=-1).mean()),
        "grad_hardneg": float(push[rows, hard].mean()),
        "grad_negatives": float(push.masked_fill(eye, 0.0).sum(dim=1).mean()),
        "pos_sim": float(sim.diagonal().mean()),
        "hardneg_sim": float(sim[rows, hard].mean()),
    }
