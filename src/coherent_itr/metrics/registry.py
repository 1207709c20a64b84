"""Name → metric registry: every metric :func:`coherent_itr.metrics.evaluate` computes is registered here
(a :class:`coherent_itr.registry.Registry`).

A metric is one function and a few declarations, registered with :func:`register` (a decorator).
It declares its **kind** — where it plugs into the evaluation — and its **options** (the keyword
arguments of ``evaluate`` it reads, with their defaults)::

    >>> import numpy as np
    >>> from coherent_itr import metrics
    >>> @metrics.register("mean_diag", kind="matrix")
    ... def mean_diag(problem):                 # problem: sim, image_of_caption, rels, humans, positives
    ...     sim, img = problem.sim, problem.image_of_caption
    ...     return {"mean_diag": float(sim[img, range(len(img))].mean())}
    >>> metrics.evaluate(np.eye(2), [0, 1], include=["mean_diag"])
    {'mean_diag': 1.0}
    >>> metrics.unregister("mean_diag")          # or register for one block: ``with metrics.registered(…)``

Kinds and the function each one registers:

==============  ====================================================  =====================================
kind            function                                              keys
==============  ====================================================  =====================================
``matrix``      ``fn(problem, **options) -> {key: float}``            as returned
``relevance``   ``fn(rr, **options) -> {stem: (values, defined)}``    ``{stem}_{d}_{rel}`` and ``…_nq``
                per block of queries, ``rr`` a
                :class:`._blocks.RankedRelevance` (one per relevance
                matrix; the ranking is shared by all metrics)
``positives``   ``fn(ranking, pos, **options) -> {stem: (values,      ``{stem}_{d}_{pos}`` and ``…_nq``
                defined)}`` per block, ``pos`` the (B, n) boolean
                positives of a positive set (the ground truth is the
                set named ``gt``)
``derived``     ``fn(problem, record, **options) -> {key: float}``    as returned
                from the keys computed before it
==============  ====================================================  =====================================

Per-query values are averaged over the defined queries, which are counted under ``…_nq`` (see
:func:`._blocks.masked_mean`). With folds (``fold_size``) every key is averaged over folds, keys
ending in ``_nq`` or holding ``_n_`` are summed.

Order: the record lists the keys of the metrics in registration order, the per-query metrics (both
kinds, one shared pass over the queries) at the place of the first of them. The package's own
metrics register when :mod:`coherent_itr.metrics` is imported (``binary``, ``coherence``,
``semantic``, ``human``, then any other module of the package), so a module added to
``src/coherent_itr/metrics/`` with a ``@register`` is evaluated everywhere, and re-evaluates cached
runs (the evaluation key hashes ``metrics/*.py``). A metric registered from outside the package
enters the evaluation key by its name and source (:func:`fingerprint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from ..registry import Registry

KINDS = ("matrix", "relevance", "positives", "derived")
PER_QUERY = ("relevance", "positives")
GT = "gt"  # reserved positive-set name: the ground-truth pairs given by image_of_caption


@dataclass
class Problem:
    """What a metric sees of one evaluation (one fold): ``sim`` (n_images × n_captions),
    ``image_of_caption``, relevance matrices by name, human judgement sources (list of
    :class:`.human.HumanJudgements`) and positive sets by name (``(i2t, t2i)`` pairs; ``gt`` first)."""

    sim: np.ndarray
    image_of_caption: np.ndarray
    rels: dict = field(default_factory=dict)
    humans: list = field(default_factory=list)
    positives: dict = field(default_factory=dict)


def _default_key(stem: str, direction: str, target: str) -> str:
    return f"{stem}_{direction}_{target}"


@dataclass(frozen=True)
class Metric:
    """A registered metric (see the module docstring). Per-query metrics may also restrict the
    relevance / positive sets they apply to (``targets``: name → bool), name their keys (``key``:
    (stem, direction, set name) → key), leave out the ``_nq`` count (``count=False``), or ask for
    extra passes over a subset of the candidates (``passes``: options → [(columns or None, options)],
    ``columns(image_of_caption)`` giving the caption columns kept)."""

    name: str
    kind: str
    fn: Callable
    options: dict = field(default_factory=dict)  # option name -> default
    check: Callable | None = None  # (**options) -> normalised options dict; raises ValueError
    validate: Callable | None = None  # (problem, **options) -> None: input checks on the whole problem
    targets: Callable | None = None  # per-query: which relevance / positive-set names (None: all)
    key: Callable = _default_key
    count: bool = True
    passes: Callable | None = None

    def applies(self, target: str) -> bool:
        return self.targets is None or bool(self.targets(target))

    def normalise(self, options: dict) -> dict:
        opts = {k: options.get(k, d) for k, d in self.options.items()}
        return dict(self.check(**opts)) if self.check else opts


REGISTRY: Registry[Metric] = Registry(
    "metric", same=lambda old, new: old.fn is new.fn, describe=lambda m: m.fn.__qualname__
)


def register(
    name: str,
    kind: str,
    *,
    options: dict | None = None,
    check: Callable | None = None,
    validate: Callable | None = None,
    targets: Callable | None = None,
    key: Callable | None = None,
    count: bool = True,
    passes: Callable | None = None,
) -> Callable:
    """Decorator: register ``fn`` as metric ``name`` of ``kind`` (see the module docstring).

    Args:
        name: the metric's name (``include`` / ``exclude`` of ``evaluate`` use it).
        kind: ``"matrix"``, ``"relevance"``, ``"positives"`` or ``"derived"``.
        options: option name → default (keyword arguments of ``evaluate`` the metric reads). An
            option name two metrics share (e.g. ``ncs_ks``: NCS and its sum Nsum) must have the same
            default in both.
        check, validate, targets, key, count, passes: see :class:`Metric`.

    Returns:
        The decorator (it returns ``fn`` unchanged).

    Raises:
        ValueError: an unknown kind, a name registered to another function, or a shared option with
            another default.
    """

    def deco(fn: Callable) -> Callable:
        if kind not in KINDS:
            raise ValueError(f"metric {name!r}: kind must be one of {list(KINDS)}, got {kind!r}")
        if name in REGISTRY and REGISTRY.get(name).fn is not fn:
            old = REGISTRY.get(name).fn
            raise ValueError(f"metric name {name!r} registered twice ({old.__qualname__}, {fn.__qualname__})")
        opts = dict(options or {})
        for m in REGISTRY.values():
            for o in set(opts) & set(m.options):
                if m.name != name and not _same(m.options[o], opts[o]):
                    raise ValueError(
                        f"metric {name!r}: option {o!r} has default {opts[o]!r}, but metric {m.name!r} "
                        f"declares it with {m.options[o]!r}"
                    )
        REGISTRY.register(
            name, Metric(name, kind, fn, opts, check, validate, targets, key or _default_key, bool(count), passes)
        )
        return fn

    return deco


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001 - e.g. arrays
        return a is b


def unregister(name: str) -> None:
    """Remove metric ``name``.

    Args:
        name: a metric name; an unknown name is a no-op.

    Returns:
        None.
    """
    REGISTRY.unregister(name, missing_ok=True)


@contextlib.contextmanager
def registered(name: str, kind: str, fn: Callable, **declarations):
    """Context manager: ``fn`` registered as metric ``name`` inside the block, removed after it.

    Args:
        name, kind, declarations: as for :func:`register`.
        fn: the metric function.

    Returns:
        A context manager yielding the registered :class:`Metric`.
    """
    register(name, kind, **declarations)(fn)
    try:
        yield get(name)
    finally:
        unregister(name)


def available(kind: str | None = None) -> list[str]:
    """The registered metrics.

    Args:
        kind: only metrics of this kind (None: all).

    Returns:
        Their names in registration (= evaluation) order.
    """
    return [n for n, m in REGISTRY.items() if kind is None or m.kind == kind]


def get(name: str) -> Metric:
    """The registered :class:`Metric` ``name``; raises ``ValueError`` listing the names for an unknown one."""
    return REGISTRY.get(name)


def options() -> dict[str, object]:
    """Every option of every registered metric with its default."""
    out: dict[str, object] = {}
    for m in REGISTRY.values():
        for k, v in m.options.items():
            out.setdefault(k, v)
    return out


def select(include=None, exclude=()) -> list[Metric]:
    """The registered metrics to compute, in order: all, or the names in ``include``, minus ``exclude``."""
    for n in list(include or ()) + list(exclude or ()):
        get(n)  # unknown names raise
    keep = set(include) if include is not None else set(REGISTRY)
    return [m for n, m in REGISTRY.items() if n in keep and n not in set(exclude or ())]


def fingerprint() -> str:
    """Identifies the metrics registered from *outside* this package (name, kind, options and the
    source of their functions); '' when there are none. Part of the evaluation key (:mod:`coherent_itr.runs`),
    since the package's own metrics enter it through their files."""
    h = hashlib.sha256()
    outside = False
    for m in REGISTRY.values():
        module = getattr(m.fn, "__module__", "") or ""
        if module.startswith(__package__ + "."):
            continue
        outside = True
        try:
            src = inspect.getsource(m.fn)
        except (OSError, TypeError):
            src = getattr(m.fn, "__qualname__", repr(m.fn))
        h.update(f"{m.name}\0{m.kind}\0{sorted(m.options.items())!r}\0{module}\0{src}\0".encode())
    return h.hexdigest()[:16] if outside else ""
