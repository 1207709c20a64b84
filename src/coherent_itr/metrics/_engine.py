"""One chunked pass over the queries that computes every requested per-query metric.

A :class:`Plan` says which per-query metrics (:mod:`.registry` kinds ``relevance`` and
``positives``, each with its options) to compute against which relevance matrices and positive
sets; :func:`run` ranks each block of queries once (the sort is shared by all metrics and all
relevance matrices) and returns, per metric key, the per-query values and whether each is
defined; :func:`reduce` turns that into the flat record (mean over defined queries, and the
number of those queries under ``<key>_nq``).

Within a direction the sets are visited in the order: the ground truth (``gt``), the relevance
matrices, the other positive sets; within a set, the metrics in the plan's order. This module
knows no metric: they come with the plan (it imports no metric module, none needs to import it
lazily).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from . import registry
from ._blocks import (
    DIRECTIONS,
    RankedRelevance,
    Ranking,
    block,
    check_direction,
    default_chunk,
    gt_block,
    gt_pairs,
    masked_mean,
    n_candidates,
    n_queries,
    positives_block,
    query_slices,
)
from ._orders import ORDER_CACHE_MAX_ELEMENTS, OrderedRelevance, relevance_order
from .registry import GT

__all__ = ["GT", "Plan", "PerQuery", "reduce", "run", "strip_name"]


@dataclass
class Plan:
    rels: dict = field(default_factory=dict)  # name -> (n_images, n_captions) relevance
    positives: dict = field(default_factory=dict)  # name -> (P for i2t, P for t2i): bool matrices, None
    #                                                   (skip that direction), or for name GT any non-None
    metrics: tuple = ()  # ((registry.Metric, options), ...): the per-query metrics, in order
    directions: tuple = DIRECTIONS
    chunk: int | None = None
    reuse_orders: bool = True  # sort each relevance matrix once and keep it (``_orders.relevance_order``)
    ap_for: tuple = ()  # positive-set names that also get full-list AP (``ap_{d}_{name}``): the form
    #                     ``retrieval.i2t_map`` uses (that module is part of every training key: it stays)

    def uses(self) -> list[tuple[registry.Metric, dict]]:
        out = [(m, dict(o)) for m, o in self.metrics]
        if self.ap_for:
            names = frozenset(self.ap_for)
            ap = dataclasses.replace(
                registry.get("map"), name="ap", targets=names.__contains__, key=registry._default_key, count=True
            )
            out.append((ap, {}))
        return out


class PerQuery(dict):
    """key -> (per-query values, defined); ``uncounted``: keys reported without ``_nq``."""

    uncounted: frozenset = frozenset()


def run(sim: np.ndarray, image_of_caption: np.ndarray, plan: Plan) -> PerQuery:
    """Per-query (values, defined) for every key of the plan, queries in their natural order."""
    uses = plan.uses()
    rel_uses = [(m, o) for m, o in uses if m.kind == "relevance"]
    pos_uses = [(m, o) for m, o in uses if m.kind == "positives"]
    bad = [m.name for m, _ in uses if m.kind not in registry.PER_QUERY]
    if bad:
        raise ValueError(f"metric(s) {bad} are not per-query metrics (kinds {list(registry.PER_QUERY)})")
    n_img = sim.shape[0]
    acc: dict[str, list] = defaultdict(list)
    uncounted = set()

    def add(m, values: dict, d: str, name: str) -> None:
        for stem, v in values.items():
            key = m.key(stem, d, name)
            acc[key].append(v)
            if not m.count:
                uncounted.add(key)

    def positives(d, name, ranking, gt, s, e):
        p = plan.positives[name][0 if d == "i2t" else 1]
        todo = [(m, o) for m, o in pos_uses if m.applies(name)]
        if p is None or not todo:
            return
        pos = gt if name == GT else positives_block(p, d, s, e)
        for m, o in todo:
            add(m, m.fn(ranking, pos, **o), d, name)

    # the model-independent sort of each relevance matrix, once per matrix content (not per run)
    orders = {
        name: relevance_order(rel)
        for name, rel in plan.rels.items()
        if plan.reuse_orders and rel_uses and rel.size <= ORDER_CACHE_MAX_ELEMENTS
    }
    for d in plan.directions:
        check_direction(d)
        chunk = plan.chunk or default_chunk(n_candidates(sim.shape, d))
        for s, e in query_slices(n_queries(sim.shape, d), chunk):
            ranking = Ranking(block(sim, d, s, e))
            gt = gt_block(image_of_caption, n_img, d, s, e)
            if GT in plan.positives:
                positives(d, GT, ranking, gt, s, e)
            if plan.rels and rel_uses:
                gt_rows, gt_cols = gt_pairs(image_of_caption, d, s, e)
            for name, rel in plan.rels.items():
                todo = [(m, o) for m, o in rel_uses if m.applies(name)]
                if not todo:
                    continue
                rel_b = block(rel, d, s, e)
                if name in orders:
                    rr = OrderedRelevance(ranking, rel_b, gt, gt_rows, gt_cols, orders[name].block(d, s, e))
                else:
                    rr = RankedRelevance(ranking, rel_b, gt, gt_rows, gt_cols)
                for m, o in todo:
                    add(m, m.fn(rr, **o), d, name)
            for name in plan.positives:
                if name != GT:
                    positives(d, name, ranking, gt, s, e)
    out = PerQuery()
    for k, parts in acc.items():
        out[k] = (np.concatenate([v for v, _ in parts]), np.concatenate([ok for _, ok in parts]))
    out.uncounted = frozenset(uncounted)
    return out


def reduce(per_query: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Mean over defined queries (0.0 if none) and the number of defined queries (``<key>_nq``;
    not for the keys of metrics registered with ``count=False``)."""
    uncounted = getattr(per_query, "uncounted", frozenset())
    out: dict[str, float] = {}
    for k, (v, ok) in per_query.items():
        mean, n = masked_mean(v, ok)
        out[k] = mean
        if k not in uncounted:
            out[f"{k}_nq"] = float(n)
    return out


def strip_name(record: dict[str, float], name: str) -> dict[str, float]:
    """Drop the ``_{name}`` part of every key (for single-matrix public functions)."""
    tag = f"_{name}"
    out = {}
    for k, v in record.items():
        if k.endswith(tag):
            k = k[: -len(tag)]
        elif k.endswith(tag + "_nq"):
            k = k[: -len(tag) - 3] + "_nq"
        out[k] = v
    return out
