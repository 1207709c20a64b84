"""Per-query values of a registered metric: the numbers whose mean is a key of :func:`.evaluate.evaluate`.

``per_query(sim, image_of_caption, metric, rel=None, ...)`` returns, for every record key ``metric``
contributes, one value per query (image queries for ``i2t``, caption queries for ``t2i``), NaN where the
query is undefined (e.g. NCS with no relevance). ``np.nanmean`` of each array is the record's number:
the same ranking, tie rule and candidate set as ``evaluate``. A paired bootstrap over test queries or a
correlation across queries starts from these values::

    >>> import numpy as np
    >>> from coherent_itr import metrics
    >>> sim = np.array([[0.9, 0.1, 0.3, 0.2], [0.2, 0.8, 0.7, 0.1]])   # 2 images × 4 captions
    >>> image_of_caption = np.array([0, 0, 1, 1])
    >>> hits = metrics.per_query(sim, image_of_caption, "retrieval", ks=(1,))
    >>> hits["i2t_r1"], hits["t2i_r1"]
    (array([100.,   0.]), array([100.,   0., 100.,   0.]))
    >>> float(hits["t2i_r1"].mean()) == metrics.evaluate(sim, image_of_caption, ks=(1,))["t2i_r1"]
    True
    >>> rel = np.array([[1.0, 0.0, 0.5, 0.0], [0.0, 0.0, 1.0, 1.0]])
    >>> metrics.per_query(sim, image_of_caption, "ncs", rel, ncs_ks=(1,), ncs_remove_gt=(False,))["ncs1_i2t"]
    array([100.,   0.])

Metrics: ``retrieval`` (binary R@K hits ×100 under ``{d}_r{K}``, 1-based ranks under ``{d}_meanr``) and
every per-query metric of :mod:`.registry` (kinds ``relevance`` and ``positives``: ``coherence``,
``ndcg``, ``ncs``, ``semantic_recall``, ``map``, ``positive_sets``, …).
"""

from __future__ import annotations

import numpy as np

from . import registry
from ._blocks import (
    DIRECTIONS,
    Ranking,
    check_direction,
    check_image_of_caption,
    check_matrix,
    check_sim,
    default_chunk,
    query_slices,
)
from ._engine import GT, Plan, run
from .registry import Problem
from .retrieval import i2t_ranks, t2i_ranks

__all__ = ["per_query", "ranked_top"]

_NAME = "q"  # the name the relevance matrix / positive set carries inside the engine, stripped from the keys


def per_query(
    sim,
    image_of_caption,
    metric: str,
    rel=None,
    *,
    positives=None,
    directions=DIRECTIONS,
    chunk: int | None = None,
    **options,
) -> dict[str, np.ndarray]:
    """Per-query values of ``metric`` for every record key it contributes.

    Args:
        sim: (n_images, n_captions) similarities.
        image_of_caption: (n_captions,) image index of every caption.
        metric: ``"retrieval"`` or the name of a registered per-query metric (``metrics.available()``;
            kinds ``relevance`` and ``positives``).
        rel: (n_images, n_captions) relevance, required by the ``relevance`` metrics (NDCG and NCS need
            it ≥ 0).
        positives: for a ``positives`` metric, a boolean (n_images, n_captions) matrix or an
            ``(i2t, t2i)`` pair of them; None: the ground truth (the ``map`` metric).
        directions: ``"i2t"`` and / or ``"t2i"``.
        chunk: queries per block (default: about one million matrix entries per block).
        **options: the metric's options, as for ``evaluate`` (e.g. ``ks`` for ``retrieval``,
            ``ncs_ks`` / ``ncs_remove_gt`` for ``ncs``); the metric's defaults otherwise.

    Returns:
        ``{key: values}``, the keys of the ``evaluate`` record without the relevance / positive-set
        name (``ncs5_i2t``, ``i2t_r1``, ``mapr_t2i``, …), each a float64 array with one entry per
        query (n_images for ``i2t``, n_captions for ``t2i``), NaN where the query is undefined.

    Raises:
        ValueError: an unknown metric, a whole-matrix metric other than ``retrieval``, missing
            ``rel``, a metric option that needs another candidate set (CS@K over one caption per
            image), or inputs of the wrong shape.
        TypeError: an option the metric does not have.
    """
    sim = check_sim(sim)
    img = check_image_of_caption(image_of_caption, *sim.shape)
    directions = tuple(directions)
    for d in directions:
        check_direction(d)
    m = registry.get(metric)
    unknown = sorted(set(options) - set(m.options))
    if unknown:
        raise TypeError(f"per_query: metric {metric!r} has no option(s) {unknown}; its options: {sorted(m.options)}")
    opts = m.normalise(options)
    if metric == "retrieval":
        return _retrieval(sim, img, directions, chunk, **opts)
    if m.kind not in registry.PER_QUERY:
        per_query_names = [n for n in registry.available() if registry.get(n).kind in registry.PER_QUERY]
        raise ValueError(
            f"per_query: metric {metric!r} is a whole-matrix metric (kind {m.kind!r}); per-query values exist for "
            f"'retrieval' and {per_query_names}"
        )
    passes = m.passes(**opts) if m.passes else [(None, opts)]
    if any(columns is not None for columns, _ in passes):
        raise ValueError(
            f"per_query: metric {metric!r} with options {opts} ranks a subset of the candidates for some keys; "
            "per-query values are over all candidates (e.g. use cs_candidates='all')"
        )
    uses = tuple((m, o) for _, o in passes)
    if m.kind == "relevance":
        if rel is None:
            raise ValueError(f"per_query: metric {metric!r} needs rel, an (n_images, n_captions) relevance matrix")
        rel = check_matrix(rel, sim.shape, "rel")
        if m.validate is not None:
            m.validate(Problem(sim, img, {_NAME: rel}), **opts)
        plan = Plan(rels={_NAME: rel}, metrics=uses, directions=directions, chunk=chunk)
        name = _NAME
    else:
        name = GT if positives is None else _NAME
        if not m.applies(name):
            raise ValueError(
                f"per_query: metric {metric!r} "
                + ("needs positives (a boolean matrix)" if positives is None else "uses the ground truth only")
            )
        pair = (True, None) if positives is None else _positive_pair(positives, sim.shape)
        plan = Plan(positives={name: pair}, metrics=uses, directions=directions, chunk=chunk)
    out = {}
    for key, (values, defined) in run(sim, img, plan).items():
        out[_strip(key, name)] = np.where(defined, np.asarray(values, dtype=np.float64), np.nan)
    return out


def _retrieval(sim, img, directions, chunk, ks) -> dict[str, np.ndarray]:
    """``{d}_r{K}`` = 100 · [rank < K] and ``{d}_meanr`` = rank + 1 per query (ranks of
    :func:`.retrieval.i2t_ranks` / :func:`.retrieval.t2i_ranks`: pessimistic ties)."""
    out = {}
    for d in directions:
        ranks = i2t_ranks(sim, img, chunk) if d == "i2t" else t2i_ranks(sim, img, chunk)
        for k in ks:
            out[f"{d}_r{k}"] = 100.0 * (ranks < k)
        out[f"{d}_meanr"] = ranks + 1.0
    return out


def _positive_pair(positives, shape) -> tuple:
    pair = positives if isinstance(positives, tuple) else (positives, positives)
    if len(pair) != 2:
        raise ValueError("per_query: positives must be a boolean matrix or an (i2t, t2i) pair of them")
    return tuple(check_matrix(p, shape, "positives", dtype=bool) for p in pair)


def _strip(key: str, name: str) -> str:
    tag = f"_{name}"
    return key[: -len(tag)] if key.endswith(tag) else key


def ranked_top(scores, k: int, key=None) -> np.ndarray:
    """Each row's top ``k`` candidates, best first, under the package's tie rule (:mod:`._blocks`) for a metric of
    ``key``: decreasing score; among equal scores the smaller ``key`` (the less relevant) first, then the lower index.
    Rows are ranked in blocks of about a million entries::

        >>> import numpy as np
        >>> from coherent_itr import metrics
        >>> metrics.ranked_top(np.array([[0.5, 0.9, 0.5]]), 2, key=np.array([[1.0, 0.0, 0.0]]))
        array([[1, 2]])

    Args:
        scores: (n_rows, n_candidates) scores, e.g. the image queries of a similarity matrix.
        k: how many candidates per row (1 … n_candidates).
        key: (n_rows, n_candidates) finite numbers that order tied scores, e.g. a relevance or 0/1 ground-truth
            matrix; None: tied scores by index alone.

    Returns:
        (n_rows, k) int64 candidate indices, best first.
    """
    s = check_sim(scores)
    if not 1 <= k <= s.shape[1]:
        raise ValueError(f"k={k} must be between 1 and the number of candidates ({s.shape[1]})")
    key = None if key is None else check_matrix(key, s.shape, "key")
    out = np.empty((s.shape[0], k), dtype=np.int64)
    for a, b in query_slices(s.shape[0], default_chunk(s.shape[1])):
        rows_key = None if key is None else np.asarray(key[a:b], dtype=np.float64)
        out[a:b] = Ranking(np.asarray(s[a:b], dtype=np.float64)).order(rows_key)[:, :k]
    return out
