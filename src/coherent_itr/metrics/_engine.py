"""One chunked pass over the queries that computes every requested per-query metric.

A :class:`Plan` says which metrics to compute against which relevance matrices and positive
sets; :func:`run` ranks each block of queries once (the sort is shared by all metrics and all
relevance matrices) and returns, per metric key, the per-query values and whether each is
defined; :func:`reduce` turns that into the flat record (mean over defined queries, and the
number of those queries under ``<key>_nq``).

Per-query keys (``d`` = i2t / t2i, ``name`` = relevance or positive-set name):
``cs{K}_{d}_{name}``, ``tau_{d}_{name}``, ``ndcg{K}_{d}_{name}`` (``ndcg_…`` for the whole list),
``ncs{K}_{d}_{name}`` (ground truth kept), ``ncs{K}ngt_{d}_{name}`` (removed),
``sr{K}m{m}_{d}_{name}``, ``srhit{K}m{m}_{d}_{name}``, ``mapr_/rprec_/r1_/ap_{d}_{name}``.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

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

GT = "gt"  # reserved positive-set name: the ground-truth pairs given by image_of_caption


@dataclass
class Plan:
    rels: dict = field(default_factory=dict)  # name -> (n_images, n_captions) relevance
    positives: dict = field(default_factory=dict)  # name -> (P for i2t, P for t2i): bool matrices, None
    #                                                   (skip that direction), or for name GT any non-None
    directions: tuple = DIRECTIONS
    cs_ks: tuple = ()
    tau_variant: str | None = None  # "a" / "b" / None (no τ over the whole list)
    ndcg_ks: tuple = ()
    ncs_ks: tuple = ()
    ncs_remove_gt: tuple = (False, True)
    ncs_restrict_to_ideal: bool = False
    sr_ks: tuple = ()
    sr_ms: tuple = ()
    sr_remove_gt: bool = True
    ap_for: tuple = ()  # positive-set names that also get full-list AP
    kendall_backend: str = "fast"
    chunk: int | None = None


def _relevance_metrics(plan: Plan, rr: RankedRelevance, d: str, name: str, acc) -> None:
    from .kendall import prefix_stats, tau_from_stats
    from .semantic import ncs_block, ndcg_block, sr_block

    sfx = f"_{d}_{name}"
    if plan.cs_ks or plan.tau_variant:
        ks = list(plan.cs_ks) + ([rr.n] if plan.tau_variant else [])
        st = prefix_stats(
            rr.scores, rr.y_rank(), ks, ties=rr.ranking.ties, y_sorted=rr.rel_asc, backend=plan.kendall_backend
        )
        if plan.cs_ks:
            tb, vb = tau_from_stats(st, "b")
            for j, k in enumerate(plan.cs_ks):
                acc[f"cs{k}{sfx}"].append((tb[:, j], vb[:, j]))
        if plan.tau_variant:
            ta, va = tau_from_stats(st, plan.tau_variant)
            acc[f"tau{sfx}"].append((ta[:, -1], va[:, -1]))
    if plan.ndcg_ks:
        for k, v in ndcg_block(rr, plan.ndcg_ks).items():
            acc[f"ndcg{'' if k is None else k}{sfx}"].append(v)
    if plan.ncs_ks:
        for remove in plan.ncs_remove_gt:
            for k, v in ncs_block(rr, plan.ncs_ks, remove, plan.ncs_restrict_to_ideal).items():
                acc[f"ncs{k}{'ngt' if remove else ''}{sfx}"].append(v)
    if plan.sr_ks and plan.sr_ms:
        for (kind, k, m), v in sr_block(rr, plan.sr_ks, plan.sr_ms, plan.sr_remove_gt).items():
            acc[f"{'sr' if kind == 'fraction' else 'srhit'}{k}m{m}{sfx}"].append(v)


def run(sim: np.ndarray, image_of_caption: np.ndarray, plan: Plan) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Per-query (values, defined) for every key of the plan, queries in their natural order."""
    from .semantic import positive_block

    n_img = sim.shape[0]
    acc: dict[str, list] = defaultdict(list)
    for d in plan.directions:
        check_direction(d)
        chunk = plan.chunk or default_chunk(n_candidates(sim.shape, d))
        for s, e in query_slices(n_queries(sim.shape, d), chunk):
            ranking = Ranking(block(sim, d, s, e))
            gt = gt_block(image_of_caption, n_img, d, s, e)
            if plan.rels:
                gt_rows, gt_cols = gt_pairs(image_of_caption, d, s, e)
            for name, rel in plan.rels.items():
                rr = RankedRelevance(ranking, block(rel, d, s, e), gt, gt_rows, gt_cols)
                _relevance_metrics(plan, rr, d, name, acc)
            for name, pair in plan.positives.items():
                p = pair[0] if d == "i2t" else pair[1]
                if p is None:
                    continue
                pos = gt if name == GT else positives_block(p, d, s, e)
                for key, v in positive_block(ranking, pos, with_ap=name in plan.ap_for).items():
                    acc[f"{key}_{d}_{name}"].append(v)
    return {
        k: (np.concatenate([v for v, _ in parts]), np.concatenate([ok for _, ok in parts])) for k, parts in acc.items()
    }


def reduce(per_query: dict[str, tuple[np.ndarray, np.ndarray]]) -> dict[str, float]:
    """Mean over defined queries (0.0 if none) and the number of defined queries (``<key>_nq``)."""
    out: dict[str, float] = {}
    for k, (v, ok) in per_query.items():
        mean, n = masked_mean(v, ok)
        out[k] = mean
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
