"""Name → loss-class registry, so notebooks and configs can pass losses by name.

``build("triplet", margin=0.2)`` constructs a registered loss. An unknown name, an unknown or missing
parameter, or a value the loss rejects raises ``ValueError`` listing what is allowed; a value of the
wrong type raises :class:`LossParameterTypeError` (a ``TypeError`` and a ``ValueError``) naming the
parameter and the type its constructor declares::

    >>> from coherent_itr import losses
    >>> losses.build("triplet", margin="a")
    Traceback (most recent call last):
    ...
    coherent_itr.losses.registry.LossParameterTypeError: loss 'triplet': parameter margin expects float, got 'a' (str)
    >>> losses.build("weighted_sum")
    Traceback (most recent call last):
    ...
    ValueError: loss 'weighted_sum': missing required parameter(s) ['terms']; parameters: terms

The registry is a :class:`coherent_itr.registry.Registry`: ``register`` (a class decorator),
``unregister``, ``registered`` (a context manager) and ``available``.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import numbers
import types
import typing
from collections.abc import Callable, Iterator, Sequence

import numpy as np
import torch

from ..registry import Registry

REGISTRY: Registry[type[torch.nn.Module]] = Registry("loss", describe=lambda cls: cls.__name__)


class LossParameterTypeError(TypeError, ValueError):
    """A loss parameter of the wrong type. A ``ValueError`` too, so callers that catch the
    registry's ``ValueError`` (``Config`` validation, combined losses) report it the same way."""


def register(name: str) -> Callable[[type], type]:
    """Class decorator: make ``cls`` buildable as ``build(name, **params)``.

    Args:
        name: the registry name (e.g. ``"triplet"``).

    Returns:
        The decorator; it returns the class unchanged apart from ``cls.registry_name = name``.

    Raises:
        ValueError: ``name`` is already taken by another class.
    """

    def deco(cls: type) -> type:
        REGISTRY.register(name, cls)
        cls.registry_name = name
        return cls

    return deco


def unregister(name: str) -> type[torch.nn.Module]:
    """Remove loss ``name`` from the registry.

    Args:
        name: a registered loss name.

    Returns:
        The class that was registered.

    Raises:
        ValueError: ``name`` is not registered.
    """
    return REGISTRY.unregister(name)


@contextlib.contextmanager
def registered(name: str, cls: type) -> Iterator[type]:
    """Context manager: ``cls`` registered as loss ``name`` inside the block, removed after it.

    Args:
        name: the registry name.
        cls: a loss class (a ``torch.nn.Module`` called as ``loss(sim, rel=None)``).

    Returns:
        A context manager yielding ``cls``.
    """
    with REGISTRY.registered(name, cls):
        cls.registry_name = name
        yield cls


def available() -> list[str]:
    """The registered losses.

    Args:
        (none)

    Returns:
        The sorted names of every registered loss.
    """
    return sorted(REGISTRY.available())


def parameters(name: str) -> dict[str, object]:
    """The constructor parameters of loss ``name``.

    Args:
        name: a registered loss name.

    Returns:
        ``{parameter: default}`` in signature order (``inspect.Parameter.empty`` for a required one).
    """
    return dict(_init_parameters(_get(name)))


@functools.cache
def _init_parameters(cls: type) -> tuple[tuple[str, object], ...]:
    # read once per class: every Config builds its loss, and a plan builds thousands of Configs
    sig = inspect.signature(cls.__init__)
    return tuple(
        (p.name, p.default)
        for p in list(sig.parameters.values())[1:]
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    )


def _get(name: str) -> type[torch.nn.Module]:
    if name not in REGISTRY:
        raise ValueError(f"unknown loss {name!r}; valid names: {', '.join(available())}")
    return REGISTRY.get(name)


def _is_number(value) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _matches(value, hint) -> bool | None:
    """Whether ``value`` fits the annotation ``hint``; None when the hint is not one this checks."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        answers = [_matches(value, a) for a in args]
        return None if None in answers else any(answers)
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, (bool, np.bool_))
    if hint is int:
        return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))
    if hint is float:
        return _is_number(value)
    if hint is str:
        return isinstance(value, str)
    if hint is dict:
        return isinstance(value, dict)
    if hint is list:
        return isinstance(value, (list, tuple))
    if origin is Sequence and args == (float,):
        if isinstance(value, np.ndarray):
            return value.ndim == 1 and np.issubdtype(value.dtype, np.number)
        return isinstance(value, (list, tuple)) and all(_is_number(v) for v in value)
    return None


def _type_name(hint) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "None"
    if typing.get_origin(hint) is Sequence:
        return "a sequence of float"
    return getattr(hint, "__name__", str(hint))


@functools.cache
def _init_hints(cls: type) -> dict | None:
    try:
        return typing.get_type_hints(cls.__init__)
    except Exception:  # noqa: BLE001 - an annotation this module cannot resolve: no type check
        return None


def _check_types(name: str, cls: type, params: dict) -> None:
    hints = _init_hints(cls)
    if hints is None:
        return
    for key, value in params.items():
        if key in hints and _matches(value, hints[key]) is False:
            raise LossParameterTypeError(
                f"loss {name!r}: parameter {key} expects {_type_name(hints[key])}, "
                f"got {value!r} ({type(value).__name__})"
            )


class LossTraits(typing.NamedTuple):
    """What a built loss says of itself that a plan asks: whether it trains on relevance (``requires_relevance``)
    and whether a warm-up changes it (``honours_warmup``: it selects hardest negatives)."""

    requires_relevance: bool
    honours_warmup: bool


_TRAITS: dict[tuple, LossTraits] = {}  # (loss class, repr of the sorted parameters) -> its traits


def _plain(value) -> bool:
    """Whether ``value``'s repr says all of it (Python scalars, strings and containers of them; not an array,
    whose repr may elide)."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if type(value) in (list, tuple):
        return all(_plain(v) for v in value)
    if type(value) is dict:
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def traits(name: str, **params) -> LossTraits:
    """The :class:`LossTraits` of ``build(name, **params)``, built once per loss class and parameters (a plan makes
    thousands of Configs, each checked by building its loss; parameters other than plain Python values are built
    every time); a loss registered again under ``name`` is built again. Raises as :func:`build` does (a failed
    build is not remembered)."""
    key = (_get(name), repr(sorted(params.items()))) if _plain(params) else None
    got = _TRAITS.get(key) if key else None
    if got is None:
        crit = build(name, **params)
        got = LossTraits(bool(getattr(crit, "requires_relevance", False)), bool(getattr(crit, "honours_warmup", False)))
        if key:
            _TRAITS[key] = got
    return got


def build(name: str, **params) -> torch.nn.Module:
    """Construct the loss registered as ``name``.

    Args:
        name: a registered loss name (see :func:`available`).
        **params: keyword parameters of the loss's constructor (see :func:`parameters`).

    Returns:
        The loss module, called as ``loss(sim, rel=None)``.

    Raises:
        ValueError: unknown name, unknown or missing parameter (listing the valid ones), or a value
            the loss rejects.
        LossParameterTypeError: a parameter whose type does not match the constructor's annotation.

    Example::

        >>> import torch
        >>> from coherent_itr import losses
        >>> crit = losses.build("triplet", margin=0.2)
        >>> float(crit(torch.eye(3, dtype=torch.float64)))
        0.0
    """
    cls = _get(name)
    allowed = parameters(name)
    listed = ", ".join(f"{k}={v!r}" if v is not inspect.Parameter.empty else k for k, v in allowed.items())
    unknown = sorted(set(params) - set(allowed))
    if unknown:
        raise ValueError(f"loss {name!r} got unknown parameter(s) {unknown}; valid parameters: {listed}")
    missing = [k for k, v in allowed.items() if v is inspect.Parameter.empty and k not in params]
    if missing:
        raise ValueError(f"loss {name!r}: missing required parameter(s) {missing}; parameters: {listed}")
    _check_types(name, cls, params)
    try:
        return cls(**params)
    except TypeError as exc:  # a check this module does not make (e.g. an element of a nested parameter)
        raise LossParameterTypeError(f"loss {name!r}: {exc}") from exc
