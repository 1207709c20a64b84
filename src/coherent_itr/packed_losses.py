"""The packed engine's losses over a member dimension, and its relevance on the device.

A pack's similarities are ``[E, B, B]`` (member e's batch in ``sim[e]``). Each member keeps its own loss module
(:mod:`coherent_itr.losses`, frozen: its source is hashed into the solo runs' keys); this module computes what those
modules compute for all members at once, reading every hyper-parameter and warm-up switch from the members' own
modules (``[E]`` tensors), so that a loss over the pack is a fixed number of operations, not E times a loss's.

**Equality with the member's module.** Each batched form repeats its module's arithmetic element by element, in the
module's order and dtypes, with the member's hyper-parameters as tensors of the dtype the module's Python numbers
are rounded to (``sim``'s dtype; float64 where the module computes in float64). Every reduction runs along one
member's own rows, never across members: a member's numbers do not depend on its neighbours or its slot.
``tests/lib/test_packed_losses.py`` holds each batched loss equal to the per-member module call on planted inputs:
the values and the gradients bit for bit on the CPU, and the diagnostics the packed record keeps (the numeric ones)
within 1e-6 relative (a mean over a masked selection sums in another order than the module's gather); warm-up on
and off per member.

How each loss the study trains runs in a pack (:func:`member_loss_mode`; a pack is batched when every member is,
and its members agree on what the batched form shares, :class:`PackedLoss`):

============================  ========  ====================================================================
loss                          mode      why
============================  ========  ====================================================================
``triplet`` (VSE++, HN/all)   batched   element-wise hinges, row maxima/sums; margin, reduction and the
                                        max-violation/warm-up switch per member
``triplet_sn``                batched   masked log-sum-exp per row; margin, γ, negative sets per member
``vlc``, ``unified``          batched   log-sum-exp per row; γ, margin, reduction per member
``ladder``                    batched   levels from each member's thresholds (padded with −∞), hinges per
                                        level with α, β per member (padded levels weigh 0, are not counted)
``adaptive_ladder`` (torch)   batched   levels of every row of every member (both directions) in one
                                        :func:`coherent_itr.kmeans1d.adaptive_levels` call per (l_min, l_max)
                                        (equal to the module's back-end, bit for bit), then the ladder's hinges;
                                        both directions always (the module clusters a symmetric batch once:
                                        the same levels, twice the DP's rows here)
``adaptive_ladder`` (sklearn) loop      k-means restarts on the host, row by row
``sndcg``                     batched   smooth ranks of every member's rows in one B×B×B tensor per member
                                        (the module's one-chunk path); τ, clamp, IDCG rule per member.
                                        Loop when a member's batch needs more than one chunk (B > 256 in
                                        float32 at the default memory bound)
``kendall_sw_hs``             batched   the module's own per-row window search on the pack's rows; needs one
                                        set of window edges (α, β) for the pack, else loop
``kendall`` (full, O(B³))     loop      its autograd function counts the constrained/active triples over
                                        all its rows at once (one count per call): per-member counts need a
                                        call per member
``sam``, ``sam_authors``      loop      random negatives ("RS") drawn from each member's own host generator
                                        in the eager order, and per-step index lists in the diagnostics
``listwise``, ``bcls``,       batched   when every weighted term is, the terms' weights are non-zero in the
``vsepp``, ``cvsepp``,                  same places for every member and the terms are the same losses; a
``weighted_sum``                        term's value and diagnostics as the composite reports them
anything else                 loop      no batched form
============================  ========  ====================================================================

``vmap`` is not used: every module reads floats on the host for its diagnostics (``stat``), which ``vmap`` cannot
trace, so a pure-function form would be a second copy of the arithmetic anyway — the batched forms are that copy.

**Relevance on the device** (:func:`device_relevance`): a provider that is a table — the oracle's relevance matrix
(``TrueRelevance``) and the synthetic world's true relevance (``SyntheticTrueRelevance``, whose ``matrix()``
equals its ``batch()`` entry for entry: tested) — is copied to the device once, and a pack's ``[E, B, B]`` batch is
one gather from the ``[E, B]`` image and caption indices. Sentence-BERT and CIDEr-D relevance are computed on the
host per batch (a matrix product in numpy, a CIDEr-D sum; a device product would not be the solo run's numbers):
they stay on the host path, one ``provider.batch`` per member, copied to the device as one ``[E, B, B]`` tensor.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch

from . import kmeans1d, losses
from .data.base import TrueRelevance
from .data.synthetic import SyntheticTrueRelevance
from .losses.adaptive_ladder import AdaptiveLadderLoss, embed_offdiag_levels, offdiag_index
from .losses.base import off_diagonal_mask
from .losses.combined import CompositeLoss
from .losses.kendall import KendallLoss, KendallSWHSLoss, sw_hs_direction
from .losses.ladder import LadderLoss
from .losses.sam import _SAMBase
from .losses.sndcg import LN2, SmoothNDCGLoss, chunk_rows_for, clamp_is_negligible, hard_ranks, ideal_dcg
from .losses.triplet import TripletLoss
from .losses.triplet_sn import TripletSNLoss
from .losses.unified import UnifiedLoss, VLCLoss

BATCHED, LOOP = "batched", "loop"
#: entries of a relevance table copied to the device at most (float32: 1 GiB)
MAX_TABLE_ENTRIES = 1 << 28


# --- modes ---------------------------------------------------------------------------------------------------
def crit_mode(crit: torch.nn.Module, batch: int) -> tuple[str, str]:
    """``(mode, reason)`` of one built loss at batch size ``batch`` (the table of the module docstring)."""
    if isinstance(crit, CompositeLoss):
        for label, w, term in zip(crit.labels, crit.weights, crit.terms):
            if w > 0:
                mode, why = crit_mode(term, batch)
                if mode != BATCHED:
                    return LOOP, f"its term {label}: {why}"
        return BATCHED, "every weighted term is batched"
    if isinstance(crit, _SAMBase):
        return LOOP, "random negatives from the member's own host generator; per-step index lists in its diagnostics"
    if isinstance(crit, KendallLoss):
        return LOOP, "the full Kendall loss counts its triples over all rows of a call: one call per member"
    if isinstance(crit, AdaptiveLadderLoss) and crit.backend != "torch":
        return LOOP, f"adaptive_ladder backend={crit.backend!r} clusters on the host, row by row"
    if isinstance(crit, SmoothNDCGLoss):
        if chunk_rows_for(batch, torch.float32, crit.max_chunk_mb) < batch:
            return LOOP, f"sndcg at B={batch} needs more than one chunk of smooth ranks (max_chunk_mb)"
        return BATCHED, "smooth ranks of every member in one tensor"
    if type(crit) in _FAMILIES:
        return BATCHED, f"{type(crit).__name__} over [E, B, B]"
    return LOOP, f"no batched form of {type(crit).__name__}"


def member_loss_mode(config) -> tuple[str, str]:
    """``("batched" | "loop", reason)``: how ``config``'s loss runs in a pack (:func:`crit_mode` of its built
    loss at its batch size)."""
    return crit_mode(losses.build(config.loss, **config.loss_params), config.batch_size)


# --- helpers -------------------------------------------------------------------------------------------------
def _vec(values, dtype, device) -> torch.Tensor:
    return torch.tensor([float(v) for v in values], dtype=dtype, device=device)


def _pick(flags: Sequence[bool], when_true: Callable, when_false: Callable, shape=(-1, 1)) -> torch.Tensor:
    """Per member: ``when_true()`` where ``flags[e]``, else ``when_false()`` (only the branches some member needs
    are computed)."""
    if all(flags):
        return when_true()
    if not any(flags):
        return when_false()
    on = torch.tensor(list(flags), dtype=torch.bool)
    a, b = when_true(), when_false()
    return torch.where(on.to(a.device).view(shape), a, b)


def _reduce(values: torch.Tensor, means: Sequence[bool]) -> torch.Tensor:
    """:func:`coherent_itr.losses.base.reduce` of each member's row of ``values`` ([E, B]) by its reduction."""
    return _pick(means, lambda: values.mean(dim=1), lambda: values.sum(dim=1), shape=(-1,))


def _masked_mean(x: torch.Tensor, mask: torch.Tensor, dims, empty: float | None = None) -> torch.Tensor:
    """Per member, the mean of ``x`` where ``mask`` (``empty`` where nothing is selected)."""
    n = mask.sum(dim=dims)
    mean = torch.where(mask, x, torch.zeros_like(x)).sum(dim=dims) / n.clamp(min=1)
    return mean if empty is None else torch.where(n > 0, mean, torch.full_like(mean, empty))


def _same(crits, get) -> bool:
    first = get(crits[0])
    return all(get(c) == first for c in crits[1:])


# --- the families ----------------------------------------------------------------------------------------------
class _Family:
    """One loss over the pack: ``__call__(sim, rel) -> (loss [E], raw)``, ``raw`` the diagnostics' ingredients as
    ``[E]`` tensors; :meth:`finish` turns member k's host values into the diagnostics its module reports."""

    def __init__(self, crits: Sequence[torch.nn.Module], device) -> None:
        self.crits = list(crits)
        self.device = device

    @staticmethod
    def compatible(crits) -> str | None:
        """Why these members' modules cannot share this batched form, or ``None``."""
        return None

    def finish(self, raw: dict[str, float], k: int) -> dict[str, float]:
        return dict(raw)


class _Triplet(_Family):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.margin = _vec([c.margin for c in crits], torch.float32, device)
        self.means = [c.reduction == "mean" for c in crits]

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        hard = [c.max_violation and not c.warmup for c in self.crits]
        pos = sim.diagonal(dim1=1, dim2=2)
        neg = off_diagonal_mask(b, sim.device)
        m = self.margin.to(sim.dtype).view(e, 1, 1)
        cost_i2t = (m + sim - pos[:, :, None]).clamp(min=0).masked_fill(~neg, 0.0)
        cost_t2i = (m + sim - pos[:, None, :]).clamp(min=0).masked_fill(~neg, 0.0)
        per_i2t = _pick(hard, lambda: cost_i2t.amax(dim=2), lambda: cost_i2t.sum(dim=2))
        per_t2i = _pick(hard, lambda: cost_t2i.amax(dim=1), lambda: cost_t2i.sum(dim=1))
        with torch.no_grad():
            raw = {
                "active_fraction_i2t": (per_i2t > 0).float().mean(dim=1),
                "active_fraction_t2i": (per_t2i > 0).float().mean(dim=1),
            }
        return _reduce(per_i2t + per_t2i, self.means), raw


class _TripletSN(_Family):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.margin = _vec([c.margin for c in crits], torch.float32, device)
        self.gamma = _vec([c.gamma for c in crits], torch.float32, device)
        self.by_rel = [c.negatives == "relevance" for c in crits]
        self.means = [c.reduction == "mean" for c in crits]

    @staticmethod
    def _soft(x, mask, gamma, dim):
        """:func:`coherent_itr.losses.triplet_sn.soft_max_over` per member (γ ``[E, 1, 1]``)."""
        nonempty = mask.any(dim=dim)
        safe_mask = mask | ~nonempty.unsqueeze(dim)
        val = torch.logsumexp((gamma * x).masked_fill(~safe_mask, float("-inf")), dim=dim) / gamma.view(-1, 1)
        return torch.where(nonempty, val, torch.zeros_like(val)), nonempty

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        pos = sim.diagonal(dim1=1, dim2=2)
        off = off_diagonal_mask(b, sim.device).expand(e, b, b)
        if any(self.by_rel):
            from_rel = (rel < 1.0 - 1e-6) & off
            on = torch.tensor(self.by_rel, device=sim.device).view(e, 1, 1)
            neg = torch.where(on, from_rel, off)
        else:
            neg = off
        g = self.gamma.to(sim.dtype).view(e, 1, 1)
        m = self.margin.to(sim.dtype).view(e, 1)
        soft_i2t, ok_i2t = self._soft(sim, neg, g, dim=2)
        soft_t2i, ok_t2i = self._soft(sim, neg, g, dim=1)
        per_i2t = torch.where(ok_i2t, (soft_i2t - pos + m).clamp(min=0), torch.zeros_like(pos))
        per_t2i = torch.where(ok_t2i, (soft_t2i - pos + m).clamp(min=0), torch.zeros_like(pos))
        with torch.no_grad():
            hard_i2t = sim.masked_fill(~neg, float("-inf")).amax(dim=2)
            raw = {
                "active_fraction_i2t": (per_i2t > 0).float().mean(dim=1),
                "active_fraction_t2i": (per_t2i > 0).float().mean(dim=1),
                "soft_minus_hard_i2t": _masked_mean(soft_i2t - hard_i2t, ok_i2t, 1, empty=0.0),
                "empty_negative_rows": (~ok_i2t).sum(dim=1) + (~ok_t2i).sum(dim=1),
            }
        return _reduce(per_i2t + per_t2i, self.means), raw


class _Directional(_Family):
    """What VLC and Unified share: γ, the reduction and the averaging of the two directions per member."""

    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.gamma = _vec([c.gamma for c in crits], torch.float32, device)
        self.means = [c.reduction == "mean" for c in crits]
        self.halves = [c.average_directions for c in crits]

    def _combine(self, per_i2t, per_t2i):
        total = _reduce(per_i2t, self.means) + _reduce(per_t2i, self.means)
        return _pick(self.halves, lambda: total / 2, lambda: total, shape=(-1,))


class _VLC(_Directional):
    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        z = self.gamma.to(sim.dtype).view(e, 1, 1) * sim
        pos = z.diagonal(dim1=1, dim2=2)
        per_i2t = torch.logsumexp(z, dim=2) - pos
        per_t2i = torch.logsumexp(z, dim=1) - pos
        with torch.no_grad():
            raw = {
                "loss_i2t": per_i2t.mean(dim=1),
                "loss_t2i": per_t2i.mean(dim=1),
                "top1_i2t": (sim.argmax(dim=2) == torch.arange(b, device=sim.device)).float().mean(dim=1),
            }
        return self._combine(per_i2t, per_t2i), raw


class _Unified(_Directional):
    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        self.margin = _vec([c.margin for c in crits], torch.float32, device)

    def __call__(self, sim, rel):
        e, b, _ = sim.shape
        pos = sim.diagonal(dim1=1, dim2=2)
        m = self.margin.to(sim.dtype).view(e, 1, 1)
        g = self.gamma.to(sim.dtype).view(e, 1, 1)
        eye = torch.eye(b, dtype=torch.bool, device=sim.device)
        d_i2t = sim - pos[:, :, None] + m
        d_t2i = sim - pos[:, None, :] + m
        per_i2t = torch.logsumexp((g * d_i2t).masked_fill(eye, 0.0), dim=2) / g.view(e, 1)
        per_t2i = torch.logsumexp((g * d_t2i).masked_fill(eye, 0.0), dim=1) / g.view(e, 1)
        with torch.no_grad():
            off = ~eye.expand(e, b, b)
            raw = {
                "violation_fraction_i2t": _masked_mean((d_i2t > 0).float(), off, (1, 2)),
                "violation_fraction_t2i": _masked_mean((d_t2i > 0).float(), off, (1, 2)),
                "loss_i2t": per_i2t.mean(dim=1),
                "loss_t2i": per_t2i.mean(dim=1),
            }
        return self._combine(per_i2t, per_t2i), raw


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


class _Composite(_Family):
    """:class:`coherent_itr.losses.combined.CompositeLoss`: each weighted term's family on the members' own term
    modules; the total, each term's value and its diagnostics prefixed by the term's label."""

    @staticmethod
    def compatible(crits):
        first = crits[0]
        shape = [(lab, type(t), w > 0) for lab, w, t in zip(first.labels, first.weights, first.terms)]
        for c in crits[1:]:
            if [(lab, type(t), w > 0) for lab, w, t in zip(c.labels, c.weights, c.terms)] != shape:
                return "composite members whose terms, or whose zero weights, differ"
        for k, (_, _, on) in enumerate(shape):
            if on:
                why = _family_of([c.terms[k] for c in crits])[1]
                if why:
                    return why
        return None

    def __init__(self, crits, device) -> None:
        super().__init__(crits, device)
        first = crits[0]
        self.labels = [lab for lab, w in zip(first.labels, first.weights) if w > 0]
        keep = [k for k, w in enumerate(first.weights) if w > 0]
        self.weights = [_vec([c.weights[k] for c in crits], torch.float32, device) for k in keep]
        self.terms = [_FAMILIES[type(first.terms[k])]([c.terms[k] for c in crits], device) for k in keep]

    def __call__(self, sim, rel):
        total = sim.new_zeros(sim.shape[0])
        raw = {}
        for label, w, fam in zip(self.labels, self.weights, self.terms):
            value, sub = fam(sim, rel)
            total = total + w.to(sim.dtype) * value
            raw[f"{label}/value"] = value.detach()
            raw.update({f"{label}/{key}": v for key, v in sub.items()})
        return total, raw

    def finish(self, raw, k):
        out = {}
        for label, fam in zip(self.labels, self.terms):
            out[f"{label}/value"] = raw[f"{label}/value"]
            mine = {key[len(label) + 1 :]: v for key, v in raw.items() if key.startswith(f"{label}/")}
            mine.pop("value")
            out.update({f"{label}/{key}": v for key, v in fam.finish(mine, k).items()})
        return out


_FAMILIES: dict[type, type[_Family]] = {
    TripletLoss: _Triplet,
    TripletSNLoss: _TripletSN,
    VLCLoss: _VLC,
    UnifiedLoss: _Unified,
    LadderLoss: _Ladder,
    AdaptiveLadderLoss: _AdaptiveLadder,
    SmoothNDCGLoss: _SNDCG,
    KendallSWHSLoss: _KendallSWHS,
}


def _family_of(crits) -> tuple[type[_Family] | None, str | None]:
    """The batched family of these members' modules, or ``(None, why not)``."""
    kind = type(crits[0])
    if any(type(c) is not kind for c in crits):
        return None, "members with different loss classes"
    fam = _Composite if isinstance(crits[0], CompositeLoss) else _FAMILIES.get(kind)
    if fam is None:
        return None, f"no batched form of {kind.__name__}"
    return fam, fam.compatible(crits)


class PackedLoss:
    """Every member's loss over the pack's ``[E, B, B]`` similarities (and relevance): batched when every member's
    module has a batched form and the members agree on what it shares (:attr:`mode`, :attr:`reason`), else one
    call of each member's own module.

    ``loss, diagnostics = packed(sim, rel)``: ``loss`` ``[E]`` (the sum's gradient is each member's own), and per
    member ``train_loss`` and its module's numeric diagnostics as plain numbers, each named ``loss_<key>`` (what a
    run's record keeps), read from the device together with ``loss`` in one transfer."""

    def __init__(self, crits: Sequence[torch.nn.Module], batch: int, device) -> None:
        self.crits = list(crits)
        modes = [crit_mode(c, batch) for c in self.crits]
        fam, why = _family_of(self.crits)
        odd = next(((k, r) for k, (m, r) in enumerate(modes) if m != BATCHED), None)
        if odd is not None:
            self.mode, self.reason, self.family = LOOP, f"member {odd[0]}: {odd[1]}", None
        elif fam is None or why:
            self.mode, self.reason, self.family = LOOP, why, None
        else:
            self.mode, self.reason, self.family = BATCHED, modes[0][1], fam(self.crits, device)

    def __call__(self, sim: torch.Tensor, rel: torch.Tensor | None) -> tuple[torch.Tensor, list[dict]]:
        if self.family is None:
            each = [c(sim[k], None if rel is None else rel[k]) for k, c in enumerate(self.crits)]
            loss = torch.stack(each)
            values = loss.detach().cpu().tolist()
            diags = [
                {
                    key: float(x)
                    for key, x in c.diagnostics.items()
                    if isinstance(x, (int, float)) and not isinstance(x, bool)
                }
                for c in self.crits
            ]
            return loss, [{"train_loss": v, **{f"loss_{k}": x for k, x in d.items()}} for v, d in zip(values, diags)]
        if sim.dim() != 3 or sim.shape[1] != sim.shape[2] or sim.shape[1] < 2:
            raise ValueError(f"packed loss: sim must be [E, B, B] with B ≥ 2, got {tuple(sim.shape)}")
        e = sim.shape[0]
        if rel is None and any(getattr(c, "requires_relevance", False) for c in self.crits):
            raise ValueError(f"{type(self.crits[0]).__name__} needs a relevance tensor rel [E, B, B], got None")
        if rel is not None and rel.shape != sim.shape:
            raise ValueError(f"packed loss: rel shape {tuple(rel.shape)} != sim shape {tuple(sim.shape)}")
        loss, raw = self.family(sim, rel)
        names = list(raw)
        host = torch.stack([loss.detach().double(), *(raw[n].double() for n in names)]).cpu().numpy()
        out = []
        for k in range(e):
            got = self.family.finish({n: _plain(host[i + 1, k], raw[n]) for i, n in enumerate(names)}, k)
            out.append({"train_loss": float(host[0, k]), **{f"loss_{key}": float(v) for key, v in got.items()}})
        return loss, out


def _plain(x: np.float64, like: torch.Tensor):
    """A host value as the module's own host read gives it: a float (from its dtype) or an int count."""
    return int(x) if not like.is_floating_point() else float(x)


# --- relevance on the device -----------------------------------------------------------------------------------
class DeviceRelevance:
    """A relevance table on the device: ``gather(img [E, B], cap [E, B])`` is the ``[E, B, B]`` batch, entry
    ``[e, i, j]`` = table[img[e, i], cap[e, j]] — what ``provider.batch(img[e], cap[e])`` returns, in one op."""

    def __init__(self, table: np.ndarray, device) -> None:
        self.table = torch.from_numpy(np.ascontiguousarray(table, dtype=np.float32)).to(device)

    def gather(self, img_idx: torch.Tensor, cap_idx: torch.Tensor) -> torch.Tensor:
        img = img_idx.to(self.table.device)
        cap = cap_idx.to(self.table.device)
        return self.table[img.unsqueeze(2), cap.unsqueeze(1)]


def device_relevance(provider, device) -> DeviceRelevance | None:
    """The provider's table on the device where it is one (the oracle's matrix, the synthetic world's true
    relevance; at most :data:`MAX_TABLE_ENTRIES` entries), else ``None``: the host path."""
    if not isinstance(provider, (TrueRelevance, SyntheticTrueRelevance)):
        return None
    split = getattr(provider, "split", None)
    if split is not None and split.n_images * split.n_captions > MAX_TABLE_ENTRIES:
        return None
    return DeviceRelevance(provider.matrix(), device)


def host_relevance(provider, img_idx: torch.Tensor, cap_idx: torch.Tensor, device) -> torch.Tensor:
    """The host path: ``provider.batch`` per member, copied to the device as one ``[E, B, B]`` tensor."""
    got = np.stack([provider.batch(i.numpy(), c.numpy()) for i, c in zip(img_idx, cap_idx)])
    return torch.as_tensor(got, dtype=torch.float32, device=device)
