"""Retrieval evaluation: binary recall, coherence, semantic and human-relevance metrics.

``evaluate(sim, image_of_caption, rel=…, true_rel=…, human=…)`` returns every metric as one flat
record; the modules hold the single metrics:

* :mod:`.retrieval` — binary R@K, RSUM, ranks, COCO-1K folds, image→text mAP (ladder Table XI);
* :mod:`.coherence` — CS@K (ladder Eq. 13), Kendall τ (BCLS Eq. 2 / Table VI);
* :mod:`.semantic` — NDCG@K, NCS@K and Semantic Recall@K (SAM Eqs. 3–5), mAP@R / R-P / R@1;
* :mod:`.human` — agreement with human judgements, human-judged positives;
* :mod:`.eccv` — adapter to the ``eccv-caption`` package;
* :mod:`.queries` — ``per_query``: the per-query values whose means are the record's numbers.

All ranking metrics share one tie rule and one rule for undefined queries (see :mod:`._blocks`).

Every metric of ``evaluate`` is registered by name (:mod:`.registry`, as losses are): importing
this package imports its metric modules (``binary``, ``coherence``, ``semantic``, ``human``, then
every other module, so a new module with a ``@register`` joins the evaluation); ``register`` from
user code adds a metric without touching the package, ``available()`` lists them in record order.
"""

import importlib as _importlib
import pkgutil as _pkgutil

from . import _builtin  # noqa: F401 - first: the package's metrics, in record order
from .coherence import coherent_score, kendall_tau, one_caption_per_image
from .eccv import positive_matrices as eccv_positive_matrices
from .eccv import ranked_ids as eccv_ranked_ids
from .eccv import run_eccv_caption
from .evaluate import evaluate
from .human import (
    EXPERT_POSITIVE_THRESHOLD,
    HumanJudgements,
    agreement,
    agreement_at_pairs,
    positive_matrix,
    provider_agreement,
)
from .queries import per_query, ranked_top
from .retrieval import (
    fold_averaged_retrieval_metrics,
    i2t_map,
    i2t_ranks,
    recall_from_ranks,
    retrieval_metrics,
    t2i_ranks,
)
from .registry import Problem, available, register, registered, unregister
from .semantic import ncs, ndcg, positive_set_metrics, semantic_recall

for _info in sorted(_pkgutil.iter_modules(__path__), key=lambda m: m.name):  # metric modules added later
    _importlib.import_module(f"{__name__}.{_info.name}")

__all__ = [
    "EXPERT_POSITIVE_THRESHOLD",
    "HumanJudgements",
    "Problem",
    "agreement",
    "agreement_at_pairs",
    "available",
    "coherent_score",
    "eccv_positive_matrices",
    "eccv_ranked_ids",
    "evaluate",
    "fold_averaged_retrieval_metrics",
    "i2t_map",
    "i2t_ranks",
    "kendall_tau",
    "ncs",
    "ndcg",
    "one_caption_per_image",
    "per_query",
    "positive_matrix",
    "positive_set_metrics",
    "provider_agreement",
    "ranked_top",
    "recall_from_ranks",
    "register",
    "registered",
    "retrieval_metrics",
    "run_eccv_caption",
    "semantic_recall",
    "t2i_ranks",
    "unregister",
]
