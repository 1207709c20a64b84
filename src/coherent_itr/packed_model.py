"""The packed engine's model and optimiser (:mod:`coherent_itr.packed`): :class:`PackedVSE`, E
:class:`coherent_itr.models.VSEModel` stacked along a leading member dimension (the GRU as :class:`torch.nn.GRU`'s
recurrence in batched matrix products, one time step at a time); :class:`PackedAdam`, torch's single-tensor Adam
with a learning rate, a step count and an on/off switch per member (bit-equal to :class:`torch.optim.Adam` per
member); :func:`clip_per_member`, :func:`torch.nn.utils.clip_grad_norm_` per member."""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from .models import VSEModel


class PackedVSE(nn.Module):
    """E :class:`coherent_itr.models.VSEModel` stacked along a leading member dimension: ``image([E, n, F])`` and
    ``text([E, n, T], [E, n])`` return ``[E, n, D]`` L2-normalised embeddings, member e computed from member e's
    parameters only."""

    def __init__(self, models: Sequence[VSEModel]) -> None:
        super().__init__()

        def stack(get):
            return nn.Parameter(torch.stack([get(m).detach().clone() for m in models]))

        self.img_w = stack(lambda m: m.image.fc.weight)  # [E, D, F]
        self.img_b = stack(lambda m: m.image.fc.bias)  # [E, D]
        self.embed = stack(lambda m: m.text.embed.weight)  # [E, V, W]
        self.w_ih = stack(lambda m: m.text.gru.weight_ih_l0)  # [E, 3H, W]
        self.w_hh = stack(lambda m: m.text.gru.weight_hh_l0)  # [E, 3H, H]
        self.b_ih = stack(lambda m: m.text.gru.bias_ih_l0)  # [E, 3H]
        self.b_hh = stack(lambda m: m.text.gru.bias_hh_l0)  # [E, 3H]
        proj = models[0].text.proj
        self.proj_w = stack(lambda m: m.text.proj.weight) if proj is not None else None  # [E, D, H]
        self.proj_b = stack(lambda m: m.text.proj.bias) if proj is not None else None  # [E, D]

    @property
    def members(self) -> int:
        return self.img_w.shape[0]

    def image(self, features: torch.Tensor) -> torch.Tensor:
        x = F.normalize(features, dim=-1)
        return F.normalize(torch.baddbmm(self.img_b.unsqueeze(1), x, self.img_w.transpose(1, 2)), dim=-1)

    def text(self, tokens: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """Embeddings of ``tokens`` ([E, n, T], 0-padded) whose real lengths are ``lengths`` ([E, n], each in [1, T]):
        the GRU's state after each caption's last real token (:class:`coherent_itr.models.text.TextEncoder`)."""
        e, n, width = tokens.shape
        lo, hi = int(lengths.min()), int(lengths.max())
        if lo < 1 or hi > width:
            raise ValueError(f"caption lengths must lie in [1, {width}] (the padded width); got [{lo}, {hi}]")
        vocab = self.embed.shape[1]
        offset = (torch.arange(e, device=tokens.device) * vocab).view(e, 1, 1)
        x = F.embedding(tokens + offset, self.embed.reshape(e * vocab, -1))  # [E, n, T, W]
        w_ih, w_hh = self.w_ih.transpose(1, 2), self.w_hh.transpose(1, 2)
        b_ih, b_hh = self.b_ih.unsqueeze(1), self.b_hh.unsqueeze(1)
        h = x.new_zeros(e, n, self.w_hh.shape[2])
        last = torch.zeros_like(h)
        at = (lengths.to(tokens.device) - 1).unsqueeze(-1)  # [E, n, 1]
        for t in range(hi):
            i_r, i_z, i_n = torch.baddbmm(b_ih, x[:, :, t], w_ih).chunk(3, dim=-1)
            h_r, h_z, h_n = torch.baddbmm(b_hh, h, w_hh).chunk(3, dim=-1)
            r = torch.sigmoid(i_r + h_r)
            z = torch.sigmoid(i_z + h_z)
            cand = torch.tanh(i_n + r * h_n)
            h = (1 - z) * cand + z * h  # torch.nn.GRU's update
            last = torch.where(at == t, h, last)
        if self.proj_w is not None:
            last = torch.baddbmm(self.proj_b.unsqueeze(1), last, self.proj_w.transpose(1, 2))
        return F.normalize(last, dim=-1)


class PackedAdam:
    """Adam (``torch.optim.Adam``'s single-tensor arithmetic, no weight decay) over stacked parameters with a
    learning rate, a step count and an on/off switch per member: ``step(lr, active)`` with ``lr`` and ``active``
    ``[E]``; a member that is not active keeps its parameters, moments and step count."""

    def __init__(self, params: Sequence[torch.Tensor], betas=(0.9, 0.999), eps: float = 1e-8) -> None:
        self.params = [p for p in params if p is not None]
        self.beta1, self.beta2 = betas
        self.eps = eps
        e = self.params[0].shape[0]
        self.steps = torch.zeros(e, dtype=torch.float64)  # on the host: the bias corrections are host arithmetic
        self.exp_avg = [torch.zeros_like(p) for p in self.params]
        self.exp_avg_sq = [torch.zeros_like(p) for p in self.params]

    def zero_grad(self) -> None:
        for p in self.params:
            p.grad = None

    @torch.no_grad()
    def step(self, lr: Sequence[float], active: torch.Tensor) -> None:
        active = torch.as_tensor(active, dtype=torch.bool)
        self.steps += active.double()
        steps = self.steps.clamp(min=1)
        step_size = torch.as_tensor(lr, dtype=torch.float64) / (1 - self.beta1**steps)
        bc2_sqrt = (1 - self.beta2**steps).sqrt()
        for p, m, v in zip(self.params, self.exp_avg, self.exp_avg_sq):
            if p.grad is None:
                continue
            shape = (-1,) + (1,) * (p.dim() - 1)
            on = active.to(p.device).view(shape)
            g = p.grad
            m.copy_(torch.where(on, torch.lerp(m, g, 1 - self.beta1), m))
            v.copy_(torch.where(on, (v * self.beta2).addcmul_(g, g, value=1 - self.beta2), v))
            denom = (v.sqrt() / bc2_sqrt.to(p.device, p.dtype).view(shape)).add_(self.eps)
            update = (-step_size).to(p.device, p.dtype).view(shape) * m / denom
            p.copy_(torch.where(on, p + update, p))

    def state(self) -> list[torch.Tensor]:
        return [*self.exp_avg, *self.exp_avg_sq]


@torch.no_grad()
def clip_per_member(params: Sequence[torch.Tensor], max_norm: Sequence[float]) -> torch.Tensor:
    """``torch.nn.utils.clip_grad_norm_`` per member: member e's gradients (row e of every parameter) scaled by
    min(1, max_norm[e] / (‖g_e‖ + 1e-6)); a ``max_norm`` of 0 leaves that member unclipped. Returns the norms."""
    grads = [p.grad for p in params if p is not None and p.grad is not None]
    norms = torch.stack([torch.linalg.vector_norm(g.flatten(1), dim=1) for g in grads], dim=1)
    total = torch.linalg.vector_norm(norms, dim=1)  # [E]
    limit = torch.as_tensor(max_norm, dtype=total.dtype, device=total.device)
    coef = torch.where(limit > 0, (limit / (total + 1e-6)).clamp(max=1.0), torch.ones_like(total))
    for g in grads:
        g.mul_(coef.view((-1,) + (1,) * (g.dim() - 1)))
    return total
