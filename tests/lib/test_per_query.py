"""``coherent_itr.per_query.per_query_recall``: the per-query R@K hits of stored test embeddings against loops of
their definition, against the test records of ``coherent_itr.evaluation`` bit for bit, and outside every run key's
file set."""

from __future__ import annotations

import types

import numpy as np
import pytest

from coherent_itr import code_identity, evaluation, losses, runs
from coherent_itr.config import Config
from coherent_itr.metrics.retrieval import retrieval_metrics
from coherent_itr.per_query import per_query_recall

KS = (1, 5, 10)


def _embeddings(rng, n_img=40, per=5, dim=16, noise=1.0):
    """Unit image and caption embeddings of one test split, in float32."""
    img = rng.normal(size=(n_img, dim))
    cap = np.repeat(img, per, axis=0) + noise * rng.normal(size=(n_img * per, dim))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    cap /= np.linalg.norm(cap, axis=1, keepdims=True)
    return img.astype(np.float32), cap.astype(np.float32), np.repeat(np.arange(n_img), per)


def _planted_embeddings(seed: int):
    """Unit rows of a few images (1–5 captions each); every third seed coarse (rounded to 0.1): many tied scores."""
    rng = np.random.default_rng(seed)
    n_img, cpi = int(rng.integers(3, 30)), int(rng.integers(1, 6))
    ioc = np.repeat(np.arange(n_img), cpi)
    img = rng.normal(size=(n_img, 8))
    cap = img[ioc] + rng.normal(scale=1.5, size=(n_img * cpi, 8))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    cap /= np.linalg.norm(cap, axis=1, keepdims=True)
    if seed % 3 == 0:
        img, cap = np.round(img, 1), np.round(cap, 1)
    return img, cap, ioc


def test_per_query_recall_matches_retrieval_metrics():
    img, cap, ioc = _embeddings(np.random.default_rng(1))
    pq = per_query_recall(img, cap, ioc)
    ref = retrieval_metrics(img.astype(np.float64) @ cap.astype(np.float64).T, ioc)
    for j, k in enumerate(KS):
        assert pq["i2t"][:, j].mean() == pytest.approx(ref[f"i2t_r{k}"])
        assert pq["t2i"][:, j].mean() == pytest.approx(ref[f"t2i_r{k}"])
    assert pq["i2t"].mean(axis=0).sum() + pq["t2i"].mean(axis=0).sum() == pytest.approx(ref["rsum"])


@pytest.mark.parametrize("seed", range(12))
def test_per_query_hits_give_the_evaluation_records_bit_for_bit(seed, monkeypatch):
    """The hits, reduced as the record reduces them (100 · the share of queries hit, RSUM the six in order), are
    :func:`coherent_itr.evaluation.evaluate_embeddings`' R@K and RSUM to the last bit, ties (coarse seeds) included.
    The yardsticks are left out: the recalls read none."""
    monkeypatch.setattr(evaluation, "yardsticks", lambda split, cache_dir=None: ({}, None, None))
    img, cap, ioc = _planted_embeddings(seed)
    rec = evaluation.evaluate_embeddings(img, cap, types.SimpleNamespace(image_of_caption=ioc))
    pq = per_query_recall(img, cap, ioc)
    got = {f"{d}_r{k}": 100.0 * float(np.mean(pq[d][:, j] > 0)) for d in ("i2t", "t2i") for j, k in enumerate(KS)}
    assert got == {key: rec[key] for key in got}
    assert sum(got[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in KS) == rec["rsum"]
    assert set(np.unique(np.concatenate([pq["i2t"].ravel(), pq["t2i"].ravel()]))) <= {0.0, 100.0}


@pytest.mark.parametrize("seed", range(8))
def test_per_query_recall_is_a_loop_of_hits_with_ties_against_the_query(seed):
    """Per-query R@K hits from the definition, in float32 as the test records: an image query hits at K when fewer
    than K captions of other images score at least its best own caption; a caption query when fewer than K other
    images score at least its own image (a tie counts against the query)."""
    img, cap, ioc = _planted_embeddings(seed)
    sim = img.astype(np.float32) @ cap.astype(np.float32).T
    pq = per_query_recall(img, cap, ioc)
    for i in range(sim.shape[0]):
        above = int(np.sum(sim[i, ioc != i] >= sim[i, ioc == i].max()))
        assert pq["i2t"][i].tolist() == [100.0 * (above < k) for k in KS], (seed, "i2t", i)
    for c in range(sim.shape[1]):
        above = int(np.sum(np.delete(sim[:, c], ioc[c]) >= sim[ioc[c], c]))
        assert pq["t2i"][c].tolist() == [100.0 * (above < k) for k in KS], (seed, "t2i", c)


def test_per_query_recall_ranks_the_float32_similarity_of_the_test_records():
    # image 0's caption beats the other image's caption by 1e-8 in float64, a tie in float32 (lost: pessimistic)
    img = np.array([[1.0, 1e-4], [0.0, 1.0]], dtype=np.float32)
    cap = np.array([[1.0, 1e-4], [0.0, 1.0], [1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    ioc = np.array([0, 1, 1, 1])
    pq = per_query_recall(img, cap, ioc, ks=(1,))
    rec = retrieval_metrics(img @ cap.T, ioc, ks=(1,))  # what evaluate_embeddings records (float32 sim)
    assert rec["i2t_r1"] == pq["i2t"][:, 0].mean() == 50.0
    assert retrieval_metrics(img.astype(np.float64) @ cap.astype(np.float64).T, ioc, ks=(1,))["i2t_r1"] == 100.0


def test_the_module_is_in_no_run_keys_file_set():
    """per_query.py lies outside metrics/ and evaluation.py (whose files the evaluation key hashes) and outside every
    training file set (every loss × data source × relevance), so adding or editing it moves no run key."""
    assert "per_query.py" not in runs.evaluation_files()
    assert "per_query.py" not in code_identity.load().get("files", {})
    configs = [
        Config(data=data, data_scale="smoke", loss=loss, relevance=rel)
        for loss in losses.available()
        if loss != "weighted_sum"  # needs its terms; its files are those of its terms' losses
        for data in runs.DATA_SOURCE_FILES
        for rel in runs.RELEVANCE_FILES
    ]
    assert len(configs) >= 100
    for cfg in configs:
        assert "per_query.py" not in runs.training_files(cfg), cfg
