"""``evaluate``: one flat record; its values equal the independent references of the other metric
tests; chunked results equal the full-matrix results; degenerate inputs never give NaN."""

import numpy as np
import pytest
from scipy.stats import pearsonr
from sklearn.metrics import average_precision_score, ndcg_score
from test_metrics_coherence import cs_loop, tau_loop
from test_metrics_semantic import eccv_loop, ncs_loop

from coherent_itr.metrics import HumanJudgements, evaluate, positive_matrix


def world(seed=0, n_img=12, cpi=5, float32=False):
    rng = np.random.default_rng(seed)
    n_cap = n_img * cpi
    img = np.arange(n_cap) // cpi
    z = rng.normal(size=(n_img, 6))
    cap = z[img] + 0.7 * rng.normal(size=(n_cap, 6))
    sim = (z + 0.3 * rng.normal(size=z.shape)) @ cap.T / 6
    pseudo = np.clip((np.tanh(z @ cap.T / 6) + 1) / 2 + 0.05 * rng.normal(size=sim.shape), 0, 1)
    true = np.round(np.clip((np.tanh(z @ z[img].T / 6) + 1) / 2, 0, 1) * 4) / 4  # discrete: ties
    k = 80
    ii, cc = rng.integers(0, n_img, k), rng.integers(0, n_cap, k)
    h = HumanJudgements.expert(ii, cc, rng.integers(1, 5, k).astype(float))
    if float32:
        sim, pseudo, true = (np.round(a, 2).astype(np.float32) for a in (sim, pseudo, true))
    return sim, img, pseudo, true, h


def test_record_is_flat_named_and_finite():
    sim, img, pseudo, true, h = world()
    res = evaluate(sim, img, pseudo, true, h)
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in res.items())
    assert all(np.isfinite(v) for v in res.values())
    for key in (
        "i2t_r1",
        "t2i_r10",
        "rsum",
        "i2t_map",
        "cs100_i2t_pseudo",
        "cs1000_t2i_true",
        "tau_i2t_pseudo",
        "ndcg10_t2i_true",
        "ndcg_i2t_pseudo",
        "ncs5_i2t_true",
        "ncs5ngt_t2i_pseudo",
        "nsum_true",
        "nsumngt_pseudo",
        "sr5m10_i2t_true",
        "srhit5m20_t2i_pseudo",
        "mapr_i2t_expert",
        "rprec_t2i_expert",
        "r1_i2t_expert",
        "expert_pearson_all",
        "expert_kendall_nongt",
        "expert_n_all",
        "cs100_i2t_pseudo_nq",
    ):
        assert key in res, key


def test_values_equal_independent_references():
    sim, img, pseudo, true, h = world(1)
    res = evaluate(sim, img, pseudo, true, h, cs_ks=(5, 20), ndcg_ks=(10,), ncs_ks=(5,), sr_ks=(5,), sr_ms=(5,))
    # binary recall: explicit rank loop
    r1 = np.mean(
        [min(np.argsort(-sim[i]).tolist().index(c) for c in np.flatnonzero(img == i)) < 1 for i in range(sim.shape[0])]
    )
    assert res["i2t_r1"] == pytest.approx(100 * r1)
    assert res["i2t_map"] == pytest.approx(
        np.mean([average_precision_score(img == i, sim[i]) for i in range(sim.shape[0])])
    )
    for d in ("i2t", "t2i"):
        assert res[f"cs5_{d}_pseudo"] == pytest.approx(cs_loop(sim, pseudo, 5, d)[0], abs=1e-12)
        assert res[f"cs20_{d}_true"] == pytest.approx(cs_loop(sim, true, 20, d)[0], abs=1e-12)
        assert res[f"tau_{d}_true"] == pytest.approx(tau_loop(sim, true, d, "a")[0], abs=1e-12)
        assert res[f"ncs5ngt_{d}_pseudo"] == pytest.approx(ncs_loop(sim, pseudo, img, 5, d, True)[0], abs=1e-10)
        assert res[f"ncs5_{d}_true"] == pytest.approx(ncs_loop(sim, true, img, 5, d, False)[0], abs=1e-10)
        pos = positive_matrix(h, sim.shape)
        ref = eccv_loop(sim, pos, d)
        assert res[f"mapr_{d}_expert"] == pytest.approx(ref["mapr"], abs=1e-10)
        assert res[f"r1_{d}_expert_nq"] == ref["n"]
    assert res["ndcg10_i2t_pseudo"] == pytest.approx(ndcg_score(np.exp2(pseudo) - 1, sim, k=10))
    assert res["expert_pearson_all"] == pytest.approx(pearsonr(sim[h.image_idx, h.caption_idx], h.score).statistic)
    assert res["nsum_pseudo"] == pytest.approx(res["ncs5_i2t_pseudo"] + res["ncs5_t2i_pseudo"])


def test_chunked_equals_full_matrix():
    sim, img, pseudo, true, h = world(2, n_img=15, float32=True)  # float32 with many ties
    pos = np.random.default_rng(3).random(sim.shape) < 0.1
    kw = dict(cs_ks=(10, 40), positives={"extra": pos}, true_positive_threshold=0.75)
    full = evaluate(sim, img, pseudo, true, h, chunk=10**6, **kw)
    for chunk in (1, 4):
        part = evaluate(sim, img, pseudo, true, h, chunk=chunk, **kw)
        assert part.keys() == full.keys()
        for k in full:
            assert part[k] == pytest.approx(full[k], abs=1e-12), (chunk, k)
    assert "mapr_t2i_extra" in full and "rprec_i2t_true" in full


def test_one_caption_per_image_candidates():
    sim, img, pseudo, _, _ = world(4)
    res = evaluate(sim, img, pseudo, cs_ks=(6,), cs_candidates="one_per_image")
    cols = np.arange(0, sim.shape[1], 5)
    for d in ("i2t", "t2i"):
        assert res[f"cs6_{d}_pseudo"] == pytest.approx(cs_loop(sim[:, cols], pseudo[:, cols], 6, d)[0], abs=1e-12)
    assert res["cs6_t2i_pseudo_nq"] == 12  # one text query per image
    # BCLS τ still uses every candidate
    assert res["tau_t2i_pseudo_nq"] == sim.shape[1]


def test_fold_averaging():
    sim, img, pseudo, true, h = world(5, n_img=20)
    res = evaluate(sim, img, pseudo, true, h, fold_size=10, cs_ks=(7,))
    folds = []
    for f in range(2):
        rows, cols = np.arange(f * 10, f * 10 + 10), np.arange(f * 50, f * 50 + 50)
        keep = np.isin(h.image_idx, rows) & np.isin(h.caption_idx, cols)
        hf = HumanJudgements.expert(h.image_idx[keep] - f * 10, h.caption_idx[keep] - f * 50, h.score[keep])
        sub = np.ix_(rows, cols)
        folds.append(evaluate(sim[sub], img[cols] - f * 10, pseudo[sub], true[sub], hf, cs_ks=(7,)))
    assert res["n_folds"] == 2
    for k in ("rsum", "cs7_i2t_pseudo", "ncs5ngt_t2i_true", "expert_pearson_all"):
        assert res[k] == pytest.approx(np.mean([f[k] for f in folds])), k
    assert res["cs7_i2t_pseudo_nq"] == sum(f["cs7_i2t_pseudo_nq"] for f in folds)
    assert res["expert_n_all"] == sum(f["expert_n_all"] for f in folds)


def test_degenerate_world_never_nan():
    # constant similarity, constant relevance, no human positive, a single image
    n_cap = 5
    img = np.zeros(n_cap, dtype=int)
    h = HumanJudgements.expert([0, 0], [0, 1], [1.0, 1.0])
    res = evaluate(np.zeros((1, n_cap)), img, np.ones((1, n_cap)), np.zeros((1, n_cap)), h)
    assert all(np.isfinite(v) for v in res.values())
    assert res["cs100_i2t_pseudo_nq"] == 0 and res["ndcg10_i2t_true_nq"] == 0
    assert res["cs100_t2i_pseudo_nq"] == 0  # one candidate per text query
    assert res["mapr_i2t_expert_nq"] == 0 and res["expert_pearson_all"] == 0.0
    assert res["i2t_r1"] == 100.0  # every candidate is ground truth


@pytest.mark.parametrize(
    "kwargs, msg",
    [
        (dict(rel=-np.ones((4, 20))), r"NDCG/NCS needs relevance ≥ 0"),
        (dict(true_positive_threshold=0.5), "needs true_rel"),
        (dict(cs_candidates="first"), "cs_candidates"),
        (dict(tau_variant="c"), "tau_variant"),
        (dict(positives={"gt": np.zeros((4, 20), dtype=bool)}), "reserved"),
        (dict(positives={"x": np.zeros((4, 20))}), "boolean"),
        (dict(rel=np.zeros((4, 19))), "shape of sim"),
        (dict(human=(np.array([0]), np.array([25]), np.array([3.0]))), "out of range"),
    ],
)
def test_bad_inputs(kwargs, msg):
    with pytest.raises(ValueError, match=msg):
        evaluate(np.zeros((4, 20)), np.arange(20) // 5, **kwargs)


def test_relevance_sorted_once_per_matrix_gives_the_same_numbers(monkeypatch):
    """The engine sorts each relevance matrix once and reuses it for every model (``relevance_order``):
    every metric equal to the per-block sort, for two models on the same matrices (the second a cache hit),
    with heavy ties in both similarity and relevance; an edited matrix is a miss, not a stale hit."""
    from coherent_itr.metrics import _engine, _orders

    rng = np.random.default_rng(3)
    n_img, cpi = 30, 5
    ioc = np.repeat(np.arange(n_img), cpi)
    rel = {"a": np.round(rng.random((n_img, n_img * cpi)) * 4) / 4, "b": rng.random((n_img, n_img * cpi))}
    true = np.round(rng.random((n_img, n_img * cpi)) * 8) / 8
    _orders._ORDERS.clear()
    for seed in (0, 1):
        sim = np.round(np.random.default_rng(seed).standard_normal((n_img, n_img * cpi)), 1).astype(np.float32)
        kw = dict(rel=rel, true_rel=true, true_positive_threshold=0.75)
        fast = evaluate(sim, ioc, **kw)
        with monkeypatch.context() as m:
            m.setattr(_engine, "ORDER_CACHE_MAX_ELEMENTS", 0)  # the per-block sort, as before
            slow = evaluate(sim, ioc, **kw)
        assert fast.keys() == slow.keys() and any("ndcg" in k for k in fast) and any("tau" in k for k in fast)
        assert fast == slow
    assert len(_orders._ORDERS) == 3  # three matrices, each sorted once for both models
    edited = rel["a"].copy()
    edited[0, :5] = 1.0
    assert _orders.relevance_order(edited) is not _orders.relevance_order(rel["a"])
    assert len(_orders._ORDERS) == 4
