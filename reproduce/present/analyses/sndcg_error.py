"""Listwise Fig. 7 (b): the S-NDCG approximation error |NDCG-hat − NDCG| on batches of a trained model's test
embeddings and of random ones (:func:`direct_errors`), read for every seed of the tuned ``Triplet + S-NDCG`` runs
(:func:`study_direct_errors`).

Apart from the notebook's other analyses (:mod:`reproduce.present.analyses.listwise`, which re-exports these
names) because a run archive computes it where the run was trained, for a run exported without its test
embeddings (:func:`error_arrays`, :mod:`reproduce.present.rankings`): on a GPU machine without the notebook stack.
Tested in ``tests/reproduce/present/analyses/test_analyses_listwise.py`` with the rest of Fig. 7.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import torch

from coherent_itr import data as data_mod
from coherent_itr import losses
from coherent_itr.runs import ImportedRunMissing, evaluation_code_hash

from reproduce.present import rankings

DIRECTIONS = ("i2t", "t2i")
TAUS = (1e-1, 1e-2, 1e-3, 1e-4)  # Fig. 7 / Figs. 8–9
# Fig. 7 (b)'s embedding sources: a trained model's test embeddings, random unit ones of the same size
SOURCES = ("trained Triplet + S-NDCG (test embeddings)", "random unit embeddings (untrained)")


def batch_errors(sources: dict, rel_batch, taus, batch_size: int, n_batches: int, rng, captions_per_image: int):
    """Fig. 7 (b): ``n_batches`` batches built like training batches (``batch_size`` distinct images drawn
    by ``rng``, one of their captions each: caption ``image·captions_per_image + k``, k drawn by ``rng``),
    relevance ``rel_batch(image_idx, caption_idx)`` (B×B in [0, 1], the training relevance), and for
    every embedding source ``{name: (image embeddings, caption embeddings)}`` (the same batches) and τ the
    S-NDCG module's |NDCG-hat − NDCG| (Eqs. 16–18 vs hard ranks) averaged over the two directions.
    Returns rows ``{batch, source, τ, error}``."""
    n_images = next(iter(sources.values()))[0].shape[0]
    rows = []
    for b in range(n_batches):
        idx = rng.choice(n_images, size=min(batch_size, n_images), replace=False)
        cap_idx = idx * captions_per_image + rng.integers(0, captions_per_image, size=len(idx))
        rel = torch.from_numpy(np.asarray(rel_batch(idx, cap_idx), dtype=np.float32))
        for source, (vi, vc) in sources.items():
            sim = torch.from_numpy(vi[idx] @ vc[cap_idx].T)
            for tau in taus:
                crit = losses.build("sndcg", tau=tau)
                with torch.no_grad():
                    crit(sim, rel)
                dg = crit.diagnostics
                err = float(np.mean([abs(dg[f"ndcg_hat_{k}"] - dg[f"ndcg_{k}"]) for k in DIRECTIONS]))
                rows.append({"batch": b, "source": source, "τ": tau, "error": err})
    return rows


def training_relevance(test):
    """``rel_batch(image_idx, caption_idx)`` of the relevance Triplet + S-NDCG trains with (Sentence-BERT, paired,
    unit scale) over the pairs of ``test``: the relevance of Fig. 7 (b)."""
    return data_mod.relevance_provider("sbert", test, mode="paired", scale="unit").batch


def seed_errors(seed: int, vi, vc, test, rel_batch, taus=TAUS, batch_size: int = 128, n_batches: int = 10) -> list:
    """Fig. 7 (b) for one trained model: :func:`batch_errors` on its test embeddings ``vi``, ``vc`` and on random
    unit embeddings of the same shape (an untrained model, :data:`SOURCES`), drawn — random embeddings first, then
    the batches — from ``numpy.random.default_rng(seed)``. Rows ``{batch, source, τ, error}`` in that order."""
    rng = np.random.default_rng(seed)
    d = vi.shape[1]
    rnd = rng.standard_normal((test.n_images, d)), rng.standard_normal((test.n_captions, d))
    sources = {
        SOURCES[0]: (vi.astype(np.float32), vc.astype(np.float32)),
        SOURCES[1]: tuple((x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32) for x in rnd),
    }
    return batch_errors(sources, rel_batch, taus, batch_size, n_batches, rng, test.captions_per_image)


def direct_errors(runs, test, rel_batch, taus=TAUS, batch_size: int = 128, n_batches: int = 10) -> pd.DataFrame:
    """Fig. 7 (b) over seeds: :func:`seed_errors` for every ``(seed, test image embeddings, test caption
    embeddings)`` in ``runs`` (a trained model's stored test embeddings). One row per (seed, batch, source, τ)."""
    rows = []
    for seed, vi, vc in runs:
        rows += [{"seed": seed, **r} for r in seed_errors(seed, vi, vc, test, rel_batch, taus, batch_size, n_batches)]
    return pd.DataFrame(rows)


def error_arrays(seed: int, vi, vc, test, rel_batch, taus=TAUS, batch_size: int = 128, n_batches: int = 10) -> dict:
    """:func:`seed_errors` as the stored set a run archive carries for a run imported without its test
    embeddings (:data:`FIG7B`): the errors as an (n_batches, sources, τ) array, with what they were computed for."""
    rows = seed_errors(seed, vi, vc, test, rel_batch, taus, batch_size, n_batches)
    order = [(b, s, t) for b in range(n_batches) for s in SOURCES for t in taus]
    if [(r["batch"], r["source"], r["τ"]) for r in rows] != order:
        raise AssertionError("seed_errors rows are not in (batch, source, τ) order")
    error = np.asarray([r["error"] for r in rows], dtype=np.float64).reshape(n_batches, len(SOURCES), len(taus))
    meta = {"tau": np.asarray(taus, dtype=np.float64), "batch_size": batch_size, "seed": seed}
    return rankings.stored(FIG7B, {"error": error, **meta}, fig7b_code())


def run_errors(res, seed: int, test, rel_batch, taus=TAUS, batch_size: int = 128, n_batches: int = 10, run="") -> list:
    """:func:`seed_errors` of a cached run: from its test embeddings, or from the errors its archive carried
    (:func:`error_arrays`; :class:`coherent_itr.runs.ImportedRunMissing` when it carried none, or for other τ, batch
    size or seed)."""
    if rankings.has_embeddings(res.arrays):
        return seed_errors(
            seed, res.arrays["test_img"], res.arrays["test_cap"], test, rel_batch, taus, batch_size, n_batches
        )
    run = run or getattr(res.arrays, "key", "?")
    got = rankings.read_stored(res.arrays, FIG7B, fig7b_code(), run)
    asked = (list(map(float, taus)), int(batch_size), int(n_batches), int(seed))
    have = (got["tau"].tolist(), int(got["batch_size"]), int(got["error"].shape[0]), int(got["seed"]))
    if asked != have:
        raise ImportedRunMissing(
            f"run {run}: its archive carried Fig. 7 (b) errors for (τ, batch size, batches, seed) = {have}, the view "
            f"asks for {asked}; {rankings.AGAIN}"
        )
    return [
        {"batch": b, "source": s, "τ": t, "error": float(got["error"][b, i, j])}
        for b in range(n_batches)
        for i, s in enumerate(SOURCES)
        for j, t in enumerate(taus)
    ]


def study_direct_errors(
    study, paper: str, group: str, arm: str, test, rel_batch, taus=TAUS, batch_size: int = 128, n_batches: int = 10
) -> pd.DataFrame:
    """Fig. 7 (b) of ``arm``'s runs as the tables use them (``study.configs``: the tuned setting, every seed),
    read from the run cache (:func:`run_errors`). One row per (seed, batch, source, τ), as :func:`direct_errors`."""
    a = next(x for x in study.arms(paper, group) if x.name == arm)
    rows = []
    for cfg in study.configs(a):
        res = study.cache.get_or_train(cfg, progress=False)
        rows += [
            {"seed": cfg.seed, **r} for r in run_errors(res, cfg.seed, test, rel_batch, taus, batch_size, n_batches)
        ]
    return pd.DataFrame(rows)


FIG7B = "fig7b"  # the stored set's name (reproduce.present.rankings)


def fig7b_sources() -> tuple:
    """The code that computes Fig. 7 (b)'s errors: these functions, the S-NDCG loss, and the evaluation code (the
    relevance they read; an imported run without embeddings is of no use under other evaluation code anyway)."""
    return batch_errors, seed_errors, error_arrays, training_relevance, losses.sndcg, evaluation_code_hash()


def fig7b_code() -> str:
    """The code Fig. 7 (b)'s stored errors name (:func:`reproduce.present.rankings.frozen_code`)."""
    return rankings.frozen_code(FIG7B, *fig7b_sources())
