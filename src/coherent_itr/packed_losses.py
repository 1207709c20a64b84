"""The packed engine's losses over a member dimension (its relevance on the device:
:mod:`coherent_itr.packed_relevance`).

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

**Relevance on the device** (:mod:`coherent_itr.packed_relevance`, :func:`device_relevance`): a provider that is a
table — the oracle's relevance matrix (``TrueRelevance``) and the synthetic world's true relevance
(``SyntheticTrueRelevance``, whose ``matrix()`` equals its ``batch()`` entry for entry: tested) — is copied to the
device once, and a pack's ``[E, B, B]`` batch is one gather from the ``[E, B]`` image and caption indices.
Sentence-BERT and CIDEr-D relevance are computed on the host per batch (a matrix product in numpy, a CIDEr-D sum; a
device product would not be the solo run's numbers): they stay on the host path, one ``provider.batch`` per member,
copied to the device as one ``[E, B, B]`` tensor.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from . import losses
from .losses.adaptive_ladder import AdaptiveLadderLoss
from .losses.base import off_diagonal_mask
from .losses.combined import CompositeLoss
from .losses.kendall import KendallLoss, KendallSWHSLoss
from .losses.ladder import LadderLoss
from .losses.sam import _SAMBase
from .losses.sndcg import SmoothNDCGLoss, chunk_rows_for
from .losses.triplet import TripletLoss
from .losses.triplet_sn import TripletSNLoss
from .losses.unified import UnifiedLoss, VLCLoss
from .packed_base import BATCHED, LOOP, _Family, _masked_mean, _pick, _reduce, _vec
from .packed_graded import _SNDCG, _AdaptiveLadder, _KendallSWHS, _Ladder
from .packed_relevance import MAX_TABLE_ENTRIES, DeviceRelevance, device_relevance, host_relevance

__all__ = [
    "BATCHED",
    "LOOP",
    "MAX_TABLE_ENTRIES",
    "DeviceRelevance",
    "PackedLoss",
    "crit_mode",
    "device_relevance",
    "host_relevance",
    "member_loss_mode",
]


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


# --- the families ----------------------------------------------------------------------------------------------
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
