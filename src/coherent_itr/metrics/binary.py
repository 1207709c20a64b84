"""The registry entry of the binary retrieval metrics (R@K, RSUM, median / mean rank).

They are computed by :func:`.retrieval.retrieval_metrics`; that module is part of every training
key (the validation R@K selects the checkpoint, see :mod:`coherent_itr.runs`), so its registration
lives here and editing the evaluation never retrains a run.
"""

from __future__ import annotations

from ._blocks import check_ks
from .registry import register
from .retrieval import KS, retrieval_metrics


@register("retrieval", "matrix", options={"ks": KS}, check=lambda ks: {"ks": check_ks(ks)})
def _retrieval_metric(problem, ks) -> dict[str, float]:
    """``{d}_r{K}``, ``rsum``, ``{d}_medr``, ``{d}_meanr``."""
    return retrieval_metrics(problem.sim, problem.image_of_caption, ks)
