"""Per-query R@K hits of stored test embeddings, equal bit for bit to the test records of
:func:`coherent_itr.evaluation.evaluate_embeddings` (the same float32 similarity and tie rule).

A module of its own beside :mod:`coherent_itr.evaluation`, outside ``metrics/`` and ``evaluation.py``: those files
are hashed into the evaluation keys of the committed runs (:func:`coherent_itr.runs.evaluation_files`), and this
reader of stored embeddings is in no key's file set.
"""

from __future__ import annotations

import numpy as np
from threadpoolctl import threadpool_limits

from . import metrics
from .runs import default_threads


def per_query_recall(img_emb, cap_emb, image_of_caption, ks=(1, 5, 10)) -> dict[str, np.ndarray]:
    """Per-query hits ×100 for R@K: ``{"i2t": (n_images, len(ks)), "t2i": (n_captions, len(ks))}``.

    The columns are :func:`coherent_itr.metrics.per_query` ``(sim, image_of_caption, "retrieval")``'s
    ``{d}_r{K}`` (cosine = dot product of the stored,
    L2-normalised embeddings; pessimistic ties): the column means are ``i2t_r1 …`` and their sum
    over both directions is RSUM (checked in the tests against ``retrieval_metrics``). The similarity
    is computed in float32, as :func:`coherent_itr.evaluation.evaluate_embeddings` computes the test
    records: in float64 two similarities that float32 rounds to a tie can be told apart, and one flipped
    rank moves RSUM away from the record. The product runs with the run's BLAS thread count
    (``coherent_itr.runs.default_threads``, as the cache evaluates a run): OpenBLAS splits the sums
    differently with 2 threads, and on the cold-run cache that flipped one text→image rank of N1's
    Triplet (mean) seed 2 (RSUM 236.06 vs the record's 235.96)."""
    with threadpool_limits(limits=default_threads(), user_api="blas"):
        sim = np.asarray(img_emb, dtype=np.float32) @ np.asarray(cap_emb, dtype=np.float32).T
    hits = metrics.per_query(sim, image_of_caption, "retrieval", ks=tuple(ks))
    return {d: np.stack([hits[f"{d}_r{k}"] for k in ks], axis=1) for d in ("i2t", "t2i")}
