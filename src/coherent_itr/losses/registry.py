"""Name → loss-class registry, so notebooks and configs can pass losses by name.

``build("triplet", margin=0.2)`` constructs a registered loss; an unknown name or an
unknown/invalid parameter raises ``ValueError`` listing what is allowed.
"""

from __future__ import annotations

import inspect
from typing import Callable

import torch

_REGISTRY: dict[str, type[torch.nn.Module]] = {}


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make ``cls`` buildable as ``build(name, **params)``."""

    def deco(cls: type) -> type:
        if name in _REGISTRY and _REGISTRY[name] is not cls:
            raise ValueError(f"loss name {name!r} registered twice ({_REGISTRY[name].__name__}, {cls.__name__})")
        _REGISTRY[name] = cls
        cls.registry_name = name
        return cls

    return deco


def available() -> list[str]:
    """Sorted names of every registered loss."""
    return sorted(_REGISTRY)


def parameters(name: str) -> dict[str, object]:
    """The constructor parameters of loss ``name`` with their defaults (``inspect.Parameter.empty`` if required)."""
    cls = _get(name)
    sig = inspect.signature(cls.__init__)
    return {
        p.name: p.default
        for p in list(sig.parameters.values())[1:]
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }


def _get(name: str) -> type[torch.nn.Module]:
    if name not in _REGISTRY:
        raise ValueError(f"unknown loss {name!r}; valid names: {', '.join(available())}")
    return _REGISTRY[name]


def build(name: str, **params) -> torch.nn.Module:
    """Construct the loss registered as ``name`` with keyword ``params``.

    Raises ``ValueError`` for an unknown name, an unknown parameter (listing the valid ones),
    or a value the loss rejects.
    """
    cls = _get(name)
    allowed = parameters(name)
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(
            f"loss {name!r} got unknown parameter(s) {unknown}; valid parameters: "
            + ", ".join(f"{k}={v!r}" if v is not inspect.Parameter.empty else k for k, v in allowed.items())
        )
    try:
        return cls(**params)
    except TypeError as exc:  # e.g. a missing required argument
        raise ValueError(f"loss {name!r}: {exc}") from exc
