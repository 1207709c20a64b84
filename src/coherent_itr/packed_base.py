"""What every batched loss of the packed engine shares (:mod:`coherent_itr.packed_losses`): the modes, the
``[E]``-tensor helpers and :class:`_Family`, the interface of one loss over the pack's ``[E, B, B]`` similarities."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch

BATCHED, LOOP = "batched", "loop"


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
