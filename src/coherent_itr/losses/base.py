"""Shared pieces of every loss: the call convention and masked reductions.

Convention (all losses): ``loss(sim, rel=None) -> scalar`` where ``sim[i, j] = s(V_i, T_j)`` for a
batch of B matched pairs (positives on the diagonal), rows images, columns captions, and
``rel[i, j]`` the continuous relevance of caption j to image i (same orientation). The
text→image direction uses ``sim.T`` and ``rel.T``.

After each forward call, ``loss.diagnostics`` holds a dict of plain floats/lists describing the
last batch (e.g. the fraction of active hinges) for the notebooks. While a CUDA graph captures the
training step (:mod:`coherent_itr.cuda_graphs`) a loss that declares ``capturable = True`` keeps them as
0-d tensors instead (:func:`stat`): reading a float would wait for the GPU, which a capture forbids.

Warm-up (VSE∞, Chen et al. 2021, ``vse_mean_warmup_epochs``; Unified paper Sec. 3.3 / Fig. 4:
hardest-negative similarities rise towards 1 in the first epochs): ``loss.set_warmup(True)``
switches every hardest-negative selection inside the loss (and its sub-losses) to the sum over
*all* negatives, the objective VSE∞ trains on before it turns max-violation on.
A loss that selects hardest negatives declares ``uses_hardest_negative = True`` and reads
``self.warmup`` in ``forward``; every other loss ignores the flag. The training loop
(:func:`coherent_itr.train.train`) sets it for the first ``Config.warmup_epochs`` epochs.
"""

from __future__ import annotations

import torch

from ..determinism import capturing

NEG_INF = float("-inf")
POS_INF = float("inf")


def stat(x: torch.Tensor):
    """A diagnostic value: ``float(x)``, or ``x`` detached while a CUDA graph is captured (:func:`capturing`)."""
    return x.detach() if capturing() else float(x)


def masked_mean_stat(x: torch.Tensor, mask: torch.Tensor, empty: float | None = None):
    """``float(x[mask].mean())`` (``empty`` when no entry is selected, if given); while a CUDA graph is captured,
    the same mean as a 0-d tensor computed without the data-dependent shape of ``x[mask]``."""
    if capturing():
        n = mask.sum()
        mean = torch.where(mask, x, torch.zeros_like(x)).sum() / n.clamp(min=1)
        return mean if empty is None else torch.where(n > 0, mean, torch.full_like(mean, empty))
    sel = x[mask]
    if empty is not None and not sel.numel():
        return empty
    return float(sel.mean())


class ITRLoss(torch.nn.Module):
    """Base class: stores ``diagnostics``, checks the inputs' shapes and carries the warm-up flag."""

    requires_relevance: bool = False
    #: True for a loss whose ``forward`` never waits for the device (no host reads, no data-dependent shapes or
    #: branches, no host random numbers) while :func:`capturing`: its training step can run as a CUDA graph
    capturable: bool = False
    #: True for a loss whose ``forward`` selects hardest negatives and honours ``self.warmup``
    #: (set per instance when it depends on a parameter, e.g. the triplet's ``max_violation``)
    uses_hardest_negative: bool = False

    def __init__(self) -> None:
        super().__init__()
        self.diagnostics: dict[str, object] = {}
        self.warmup = False

    def set_warmup(self, on: bool) -> None:
        """Warm-up on/off for this loss and every loss inside it (composites, SAM's triplet term)."""
        for m in self.modules():
            if isinstance(m, ITRLoss):
                m.warmup = bool(on)

    @property
    def honours_warmup(self) -> bool:
        """Whether warm-up changes this loss: it, or a loss inside it, selects hardest negatives."""
        return any(isinstance(m, ITRLoss) and m.uses_hardest_negative for m in self.modules())

    def check_inputs(self, sim: torch.Tensor, rel: torch.Tensor | None) -> None:
        if sim.dim() != 2 or sim.shape[0] != sim.shape[1]:
            raise ValueError(f"{type(self).__name__}: sim must be a square B×B matrix, got shape {tuple(sim.shape)}")
        if sim.shape[0] < 2:
            raise ValueError(f"{type(self).__name__}: need a batch of at least 2 pairs, got B={sim.shape[0]}")
        if self.requires_relevance:
            if rel is None:
                raise ValueError(f"{type(self).__name__} needs a relevance matrix rel (B×B), got None")
            if rel.shape != sim.shape:
                raise ValueError(f"{type(self).__name__}: rel shape {tuple(rel.shape)} != sim shape {tuple(sim.shape)}")


def off_diagonal_mask(n: int, device=None) -> torch.Tensor:
    """Boolean B×B mask, True off the diagonal."""
    return ~torch.eye(n, dtype=torch.bool, device=device)


def masked_max(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Max over ``dim`` of the entries where ``mask`` is True; −∞ where the set is empty.

    Uses −∞ filling, never ``x * mask`` (which silently treats masked entries as 0).
    """
    return x.masked_fill(~mask, NEG_INF).amax(dim=dim)


def masked_min(x: torch.Tensor, mask: torch.Tensor, dim: int) -> torch.Tensor:
    """Min over ``dim`` of the entries where ``mask`` is True; +∞ where the set is empty."""
    return x.masked_fill(~mask, POS_INF).amin(dim=dim)


def reduce(values: torch.Tensor, reduction: str) -> torch.Tensor:
    """``sum`` or ``mean`` of a tensor of per-anchor losses."""
    if reduction == "sum":
        return values.sum()
    if reduction == "mean":
        return values.mean()
    raise ValueError(f"reduction must be 'sum' or 'mean', got {reduction!r}")


def check_choice(owner: str, field: str, value, allowed) -> None:
    if value not in allowed:
        raise ValueError(f"{owner}: {field}={value!r} is not allowed; choose one of {list(allowed)}")


def check_range(owner: str, field: str, value, lo=None, hi=None, lo_open=False, hi_open=False) -> None:
    ok = True
    if lo is not None:
        ok &= value > lo if lo_open else value >= lo
    if hi is not None:
        ok &= value < hi if hi_open else value <= hi
    if not ok:
        lb = "(" if lo_open else "["
        rb = ")" if hi_open else "]"
        raise ValueError(
            f"{owner}: {field}={value!r} out of range; expected {lb}{lo if lo is not None else '-inf'}, "
            f"{hi if hi is not None else 'inf'}{rb}"
        )
