"""The packed engine's batched losses that read graded relevance (:mod:`coherent_itr.packed_losses`): the ladder
(fixed and adaptive levels, the adaptive ones for every row of every member in one
:func:`coherent_itr.kmeans1d.adaptive_levels` call), S-NDCG and Kendall SW-HS over ``[E, B, B]``, each equal to its
member's module bit for bit (``tests/lib/test_packed_losses.py``)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from . import kmeans1d
from .losses.adaptive_ladder import AdaptiveLadderLoss, embed_offdiag_levels, offdiag_index
from .losses.kendall import sw_hs_direction
from .losses.ladder import LadderLoss
from .losses.sndcg import LN2, SmoothNDCGLoss, chunk_rows_for, clamp_is_negligible, hard_ranks, ideal_dcg
from .packed_base import _Family, _pick, _reduce, _same, _vec


def _all_pairs(sim, more, less, alpha, alpha64):
    """:func:`coherent_itr.losses.ladder.all_pairs_hinge_sum` per member (α ``[E]``, in sim's dtype and in
    float64): the family's term ``[E, B]`` and its active pairs ``[E]``."""
    e, _, b = sim.shape
    s = sim.detach()
    less_sorted = torch.where(less, s, -np.inf).sort(dim=2).values
    more_sorted = torch.where(more, s, np.inf).sort(dim=2).values
    a = alpha.view(e, 1, 1)
    n_i = b - torch.searchsorted(less_sorted, (s - a).contiguous(), right=True)
    m_j = torch.searchsorted(more_sorted, (s + a).contiguous(), right=False)
    n_i = torch.where(more, n_i, 0)
    m_j = torch.where(less, m_j, 0)
    s64 = sim.to(torch.float64)
    n_sum = n_i.sum(dim=2)
    term = (
        alpha64.view(e, 1) * n_sum.to(torch.float64)
        - (n_i.to(torch.float64) * s64).sum(2)
        + (m_j.to(torch.float64) * s64).sum(2)
    )
    return term.to(sim.dtype), n_sum.sum(dim=1)


def _ladder(sim, level, alpha, alpha64, beta, on, hard: bool):
    """:func:`coherent_itr.losses.ladder.ladder_per_anchor` per member: α, β ``[L, E]`` (a member's levels past its
    own are off in ``on`` and weigh 0). Returns the per-anchor loss ``[E, B]`` and the counts ``terms``,
    ``active``, ``empty`` as ``[E]`` tensors."""
    e, b, _ = sim.shape
    total = sim.new_zeros(e, b)
    zero = torch.zeros(e, dtype=torch.long, device=sim.device)
    terms, active, empty = zero, zero, zero
    for l in range(1, alpha.shape[0] + 1):
        a_l, b_l, on_l = alpha[l - 1].to(sim.dtype), beta[l - 1].to(sim.dtype), on[l - 1].long()
        more = level == (l - 1)
        less = level >= l
        valid = more.any(dim=2) & less.any(dim=2)
        empty = empty + on_l * (~valid).sum(dim=1)
        if hard:
            lo = sim.masked_fill(~more, float("inf")).amin(dim=2)
            hi = sim.masked_fill(~less, float("-inf")).amax(dim=2)
            hinge = (a_l.view(e, 1) - torch.where(valid, lo, 0.0) + torch.where(valid, hi, 0.0)).clamp(min=0)
            term = torch.where(valid, hinge, 0.0)
            terms = terms + on_l * valid.sum(dim=1)
            active = active + on_l * (term > 0).sum(dim=1)
        else:
            term, act = _all_pairs(sim, more, less, a_l, alpha64[l - 1])
            terms = terms + on_l * (more.sum(2) * less.sum(2)).sum(1)
            active = active + on_l * act
        total = total + b_l.view(e, 1) * term
    return total, {"terms": terms, "active": active, "empty": empty}


class _LadderBase(_Family):
    """The hinges of the ladder and the adaptive ladder, per member, both directions; the levels are the
    subclass's. ``n_levels``: the levels each member's module has (its α, β)."""

    def __init__(self, crits, device, n_levels: Sequence[int]) -> None:
        super().__init__(crits, device)
        top = max(n_levels)
        pad = [list(c.alpha) + [0.0] * (top - len(c.alpha)) for c in crits]
        padb = [list(c.beta) + [0.0] * (top - len(c.beta)) for c in crits]
        self.alpha = torch.tensor(pad, dtype=torch.float32, device=device).T.contiguous()  # [L, E]
        self.alpha64 = torch.tensor(pad, dtype=torch.float64, device=device).T.contiguous()
        self.beta = torch.tensor(padb, dtype=torch.float32, device=device).T.contiguous()
        self.on = (torch.arange(1, top + 1).view(-1, 1) <= torch.tensor(list(n_levels)).view(1, -1)).to(device)
        self.n_levels = list(n_levels)
        self.means = [c.reduction == "mean" for c in crits]

    def _hinges(self, sim, level_i2t, level_t2i):
        hard = [c.hard_contrastive and not c.warmup for c in self.crits]
        out = {}
        for flag in sorted(set(hard)):
            args = (self.alpha, self.alpha64, self.beta, self.on, flag)
            out[flag] = (_ladder(sim, level_i2t, *args), _ladder(sim.transpose(1, 2), level_t2i, *args))
        if len(out) == 1:
            (p_i2t, c_i2t), (p_t2i, c_t2i) = next(iter(out.values()))
        else:
            on = torch.tensor(hard, device=sim.device)
            (h_i2t, hc_i2t), (h_t2i, hc_t2i) = out[True]
            (a_i2t, ac_i2t), (a_t2i, ac_t2i) = out[False]
            p_i2t = torch.where(on.view(-1, 1), h_i2t, a_i2t)
            p_t2i = torch.where(on.view(-1, 1), h_t2i, a_t2i)
            c_i2t = {k: torch.where(on, hc_i2t[k], ac_i2t[k]) for k in hc_i2t}
            c_t2i = {k: torch.where(on, hc_t2i[k], ac_t2i[k]) for k in hc_t2i}
        raw = {f"{k}_{d}": v for d, c in (("i2t", c_i2t), ("t2i", c_t2i)) for k, v in c.items()}
        return _reduce(p_i2t + p_t2i, self.means), raw

    def finish(self, raw, k):
        """:func:`coherent_itr.losses.ladder.direction_diagnostics`'s numbers (its lists are not kept)."""
        n_fam = self.batch * self.n_levels[k]
        out = {}
        for d in ("i2t", "t2i"):
            terms, active, empty = (int(raw[f"{c}_{d}"]) for c in ("terms", "active", "empty"))
            out[f"active_fraction_{d}"] = active / terms if terms else 0.0
            out[f"empty_fraction_{d}"] = empty / n_fam
        return out


class _Ladder(_LadderBase):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device, [c.n_levels for c in crits])
        top = max(len(c.thresholds) for c in crits)
        th = [list(c.thresholds) + [float("-inf")] * (top - len(c.thresholds)) for c in crits]
        self.thresholds = torch.tensor(th, dtype=torch.float32, device=device).T.contiguous()  # [T, E]

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        self.batch = b
        rel = rel.detach().to(sim.dtype)
        LadderLoss.check_relevance(rel)
        level = torch.ones(rel.shape, dtype=torch.long, device=rel.device)
        for t in self.thresholds.to(sim.dtype):  # a padded θ = −∞ counts nothing
            level += rel < t.view(e, 1, 1)
        eye = torch.eye(b, dtype=torch.bool, device=rel.device)
        level_i2t = level.masked_fill(eye, 0)
        level_t2i = level.transpose(1, 2).masked_fill(eye, 0)
        return self._hinges(sim, level_i2t, level_t2i)


class _AdaptiveLadder(_LadderBase):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device, [c.l_max for c in crits])
        self.bounds = [(c.l_min, c.l_max) for c in crits]

    def levels(self, rel: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """Levels ``[E, B, B]`` (0 on the diagonal) and the chosen numbers of levels ``[E, B]`` of both directions,
        from one :func:`coherent_itr.kmeans1d.adaptive_levels` call per distinct (l_min, l_max) over every row of
        the members that have it (image→text rows, then text→image rows)."""
        e, b, _ = rel.shape
        index = offdiag_index(b, 1, rel.device).unsqueeze(0).expand(e, -1, -1)
        values = torch.stack([rel.gather(2, index), rel.transpose(1, 2).gather(2, index)])  # [2, E, B, B−1]
        level = torch.empty(values.shape, dtype=torch.long, device=rel.device)
        chosen = torch.empty(values.shape[:3], dtype=torch.long, device=rel.device)
        for lo, hi in sorted(set(self.bounds)):
            idx = [k for k, bd in enumerate(self.bounds) if bd == (lo, hi)]
            if len(idx) == e:
                lev, kk = kmeans1d.adaptive_levels(values.reshape(-1, b - 1), lo, hi)
                level, chosen = lev.view(level.shape), kk.view(chosen.shape)
                break
            at = torch.tensor(idx, device=rel.device)
            lev, kk = kmeans1d.adaptive_levels(values.index_select(1, at).reshape(-1, b - 1), lo, hi)
            level.index_copy_(1, at, lev.view(2, len(idx), b, b - 1))
            chosen.index_copy_(1, at, kk.view(2, len(idx), b))
        full = embed_offdiag_levels(level.reshape(-1, b - 1)).view(2, e, b, b)
        return full[0], full[1], chosen[0], chosen[1]

    def __call__(self, sim, rel):
        self.batch = sim.shape[1]
        rel = rel.detach()
        AdaptiveLadderLoss.check_relevance(rel)
        level_i2t, level_t2i, _, _ = self.levels(rel)
        return self._hinges(sim, level_i2t, level_t2i)


class _SmoothDCGPack(torch.autograd.Function):
    """:class:`coherent_itr.losses.sndcg._SmoothDCG`'s one-chunk path for every member's rows at once: ``sim``,
    ``gains`` ``[E, B, B]``, τ and the clamp per member (``[E]``; ``exact[e]``: the member's clamp is applied,
    ``any_exact``: some member's is, known on the host). Memory: three E·B³ tensors at the peak."""

    @staticmethod
    def forward(ctx, sim, gains, tau, clamp, exact, any_exact: bool):
        e = sim.shape[0]
        st = (sim / tau.view(e, 1, 1)).contiguous()
        x = st.unsqueeze(2) - st.unsqueeze(3)  # x[e, c, j, k] = (s_k − s_j)/τ_e
        if any_exact:
            lim = clamp.view(e, 1, 1, 1)
            on = exact.view(e, 1, 1, 1)
            sig = torch.sigmoid(torch.where(on, torch.minimum(torch.maximum(x, -lim), lim), x))
        else:
            sig = torch.sigmoid(x)
        sig.diagonal(dim1=2, dim2=3).zero_()
        outside = ((x.abs() > clamp.view(e, 1, 1, 1)) & exact.view(e, 1, 1, 1)) if any_exact else None
        del x
        dsig = torch.addcmul(sig, sig, sig, value=-1.0)
        if outside is not None:
            dsig.masked_fill_(outside, 0.0)
        rank = 1.0 + sig.sum(dim=3)
        del sig
        out = (gains / torch.log2(1.0 + rank)).sum(dim=2)
        ctx.save_for_backward(gains, rank, dsig, tau)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        gains, rank, dsig, tau = ctx.saved_tensors
        e, b, _ = gains.shape
        lg = torch.log2(1.0 + rank)
        g = grad_out.unsqueeze(2) * (-gains / ((1.0 + rank) * LN2 * lg * lg))
        flat = dsig.view(e * b, b, b)
        gf = g.reshape(e * b, b)
        grad = (torch.bmm(gf.unsqueeze(1), flat).squeeze(1) - gf * flat.sum(dim=2)) / tau.repeat_interleave(b).view(
            -1, 1
        )
        return grad.view(e, b, b), None, None, None, None, None


class _SNDCG(_Family):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.tau = _vec([c.tau for c in crits], torch.float32, device)
        self.clamp = _vec([c.clamp for c in crits], torch.float32, device)
        exact = [not clamp_is_negligible(c.clamp, torch.float32) for c in crits]
        self.exact, self.any_exact = torch.tensor(exact, device=device), any(exact)
        self.paper = [c.idcg == "paper" for c in crits]
        self.transposed = [c.t2i_rel == "transposed" for c in crits]
        self.max_chunk_mb = [c.max_chunk_mb for c in crits]

    def _direction(self, sim, rel):
        e, b, _ = sim.shape
        gains = torch.pow(2.0, rel) - 1.0
        g2, r2 = gains.reshape(e * b, b), rel.reshape(e * b, b)
        idcg = _pick(
            self.paper,
            lambda: ideal_dcg(g2, r2, "paper").view(e, b),
            lambda: ideal_dcg(g2, r2, "sorted").view(e, b),
        )
        ok = idcg > 0
        safe = torch.where(ok, idcg, 1.0)
        tau, clamp = self.tau.to(sim.dtype), self.clamp.to(sim.dtype)
        dcg_hat = _SmoothDCGPack.apply(sim, gains, tau, clamp, self.exact, self.any_exact)
        ndcg_hat = torch.where(ok, dcg_hat / safe, 1.0)
        with torch.no_grad():
            ranks = hard_ranks(sim.detach().reshape(e * b, b)).view(e, b, b)
            dcg = (gains / torch.log2(1.0 + ranks)).sum(dim=2)
            ndcg = torch.where(ok, dcg / safe, 1.0)
        return (1.0 - ndcg_hat).mean(dim=1), ndcg_hat.detach(), ndcg

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        self.batch = b
        rel = rel.detach().to(sim.dtype)
        SmoothNDCGLoss.check_relevance(rel)
        rel = rel.clamp(0.0, 1.0)
        l_i2t, nh_i2t, n_i2t = self._direction(sim, rel)
        rel_t = _pick(self.transposed, lambda: rel.transpose(1, 2), lambda: rel, shape=(-1, 1, 1))
        l_t2i, nh_t2i, n_t2i = self._direction(sim.transpose(1, 2), rel_t)
        raw = {
            "ndcg_hat_i2t": nh_i2t.mean(dim=1),
            "ndcg_i2t": n_i2t.mean(dim=1),
            "ndcg_hat_t2i": nh_t2i.mean(dim=1),
            "ndcg_t2i": n_t2i.mean(dim=1),
        }
        return l_i2t + l_t2i, raw

    def finish(self, raw, k):
        chunk = chunk_rows_for(self.batch, torch.float32, self.max_chunk_mb[k])
        return {**raw, "chunk_rows": chunk, "n_chunks": -(-self.batch // chunk)}


class _KendallSWHS(_Family):
    @staticmethod
    def compatible(crits):
        if not _same(crits, lambda c: (c.lower, c.upper)):
            return "kendall_sw_hs members with different window edges (α, β)"
        return None

    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.margin = _vec([c.margin for c in crits], torch.float32, device)
        self.means = [c.reduction == "mean" for c in crits]
        self.n_windows = crits[0].n_windows

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        self.crits[0].check_relevance(rel)
        rel64 = rel.detach().to(torch.float64)
        lower, upper = self.crits[0]._edges(sim.device)
        m = self.margin.to(sim.dtype).repeat_interleave(b).view(-1, 1)
        h_i2t, v_i2t = sw_hs_direction(sim.reshape(e * b, b), rel64.reshape(e * b, b), lower, upper, m)
        st, rt = sim.transpose(1, 2).reshape(e * b, b), rel64.transpose(1, 2).reshape(e * b, b)
        h_t2i, v_t2i = sw_hs_direction(st, rt, lower, upper, m)
        w = self.n_windows
        h_i2t, v_i2t, h_t2i, v_t2i = (x.view(w, e, b) for x in (h_i2t, v_i2t, h_t2i, v_t2i))
        per_i2t = h_i2t.sum(dim=0) / w
        per_t2i = h_t2i.sum(dim=0) / w
        with torch.no_grad():
            raw = {
                "windows_used_i2t": v_i2t.any(dim=2).sum(dim=0),
                "windows_used_t2i": v_t2i.any(dim=2).sum(dim=0),
                "valid_pairs": v_i2t.sum(dim=(0, 2)) + v_t2i.sum(dim=(0, 2)),
                "active_pairs": ((h_i2t > 0) & v_i2t).sum(dim=(0, 2)) + ((h_t2i > 0) & v_t2i).sum(dim=(0, 2)),
            }
        return _reduce(per_i2t + per_t2i, self.means), raw

    def finish(self, raw, k):
        valid, active = int(raw["valid_pairs"]), int(raw["active_pairs"])
        return {
            "n_windows": float(self.n_windows),
            "windows_used_i2t": float(raw["windows_used_i2t"]),
            "windows_used_t2i": float(raw["windows_used_t2i"]),
            "valid_pairs": float(valid),
            "active_pairs": float(active),
            "active_fraction": float(active / valid) if valid else 0.0,
        }
