"""``metrics.per_query``: per-query values against loops written from the definitions, and their
means against the ``evaluate`` record (same ranking, tie rule and candidates)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import kendalltau

from coherent_itr import metrics


@pytest.fixture
def problem():
    rng = np.random.default_rng(11)
    ioc = np.repeat(np.arange(7), 3)
    sim = rng.normal(size=(7, 21))
    sim[2, 5] = sim[2, 6]  # a planted tie (pessimistic: the wrong one counts as above)
    rel = rng.random((7, 21))
    rel[4] = 0.0  # an undefined query for NDCG / NCS
    return sim, ioc, rel


def _rank_i2t(sim, ioc, q):
    best = sim[q, ioc == q].max()
    return int(((sim[q] >= best) & (ioc != q)).sum())


def _rank_t2i(sim, ioc, c):
    return int((sim[:, c] >= sim[ioc[c], c]).sum() - 1)


def test_retrieval_hits_and_ranks_match_loops(problem):
    sim, ioc, _ = problem
    sim = sim.copy()
    sim[3, ioc == 3] = sim[3].max()  # another tie, at the top
    pq = metrics.per_query(sim, ioc, "retrieval", ks=(1, 5))
    for q in range(sim.shape[0]):
        r = _rank_i2t(sim, ioc, q)
        assert pq["i2t_r1"][q] == 100.0 * (r < 1) and pq["i2t_r5"][q] == 100.0 * (r < 5)
        assert pq["i2t_meanr"][q] == r + 1
    for c in range(sim.shape[1]):
        r = _rank_t2i(sim, ioc, c)
        assert pq["t2i_r1"][c] == 100.0 * (r < 1) and pq["t2i_meanr"][c] == r + 1
    rec = metrics.evaluate(sim, ioc, ks=(1, 5))
    for key, values in pq.items():
        assert values.mean() == pytest.approx(rec[key])
    assert set(metrics.per_query(sim, ioc, "retrieval", directions=("t2i",))) == {
        "t2i_r1",
        "t2i_r5",
        "t2i_r10",
        "t2i_meanr",
    }


def test_ncs_and_ndcg_match_loops(problem):
    sim, ioc, rel = problem
    pq = metrics.per_query(sim, ioc, "ncs", rel, ncs_ks=(5,), ncs_remove_gt=(False, True))
    nd = metrics.per_query(sim, ioc, "ndcg", rel, ndcg_ks=(3,), directions=("i2t",))
    assert set(nd) == {"ndcg3_i2t"}
    for q in range(sim.shape[0]):
        order = np.argsort(-sim[q], kind="stable")
        ideal = np.sort(rel[q])[::-1]
        keep = order[ioc[order] != q]
        ideal_ngt = np.sort(rel[q, ioc != q])[::-1]
        gains = 2.0 ** rel[q] - 1
        dcg = sum(gains[order[i]] / np.log2(2 + i) for i in range(3))
        idcg = sum((2.0 ** ideal[i] - 1) / np.log2(2 + i) for i in range(3))
        if q == 4:
            assert np.isnan(pq["ncs5_i2t"][q]) and np.isnan(pq["ncs5ngt_i2t"][q]) and np.isnan(nd["ndcg3_i2t"][q])
            continue
        assert pq["ncs5_i2t"][q] == pytest.approx(100 * rel[q, order[:5]].sum() / ideal[:5].sum())
        assert pq["ncs5ngt_i2t"][q] == pytest.approx(100 * rel[q, keep[:5]].sum() / ideal_ngt[:5].sum())
        assert nd["ndcg3_i2t"][q] == pytest.approx(dcg / idcg)
    for c in range(sim.shape[1]):
        order = np.argsort(-sim[:, c], kind="stable")
        want = 100 * rel[order[:5], c].sum() / np.sort(rel[:, c])[::-1][:5].sum()
        assert pq["ncs5_t2i"][c] == pytest.approx(want)


def test_coherent_score_matches_scipy_tau_b_over_the_top_k(problem):
    sim, ioc, rel = problem
    pq = metrics.per_query(sim, ioc, "coherence", rel, cs_ks=(6,), tau_variant=None, directions=("i2t",))
    assert set(pq) == {"cs6_i2t"}
    for q in range(sim.shape[0]):
        top = np.argsort(-sim[q], kind="stable")[:6]
        want = kendalltau(sim[q, top], rel[q, top]).statistic
        if np.isnan(want):
            assert np.isnan(pq["cs6_i2t"][q])
        else:
            assert pq["cs6_i2t"][q] == pytest.approx(want)


def test_positive_set_metrics_and_ground_truth_ap_match_loops(problem):
    sim, ioc, rel = problem
    pos = rel > 0.7
    pq = metrics.per_query(sim, ioc, "positive_sets", positives=pos, directions=("i2t",))
    ap = metrics.per_query(sim, ioc, "map")
    assert set(ap) == {"i2t_map"}  # the ground truth has no t2i positive set for AP, as in evaluate
    for q in range(sim.shape[0]):
        order = np.argsort(-sim[q], kind="stable")
        hit = pos[q, order]
        n_pos = int(pos[q].sum())
        if n_pos == 0:
            assert np.isnan(pq["mapr_i2t"][q])
            continue
        prec = np.cumsum(hit) / np.arange(1, len(hit) + 1)
        assert pq["mapr_i2t"][q] == pytest.approx(100 * (hit[:n_pos] * prec[:n_pos]).sum() / n_pos)
        assert pq["rprec_i2t"][q] == pytest.approx(100 * hit[:n_pos].mean())
        assert pq["r1_i2t"][q] == 100.0 * hit[0]
        gt = ioc[order] == q
        gt_prec = np.cumsum(gt) / np.arange(1, len(gt) + 1)
        assert ap["i2t_map"][q] == pytest.approx((gt * gt_prec).sum() / gt.sum())


def test_means_are_the_evaluate_record(problem):
    sim, ioc, rel = problem
    rec = metrics.evaluate(sim, ioc, rel=rel, positives={"p": rel > 0.7})
    checked = 0
    for name in ("coherence", "ndcg", "ncs", "semantic_recall"):
        for key, values in metrics.per_query(sim, ioc, name, rel).items():
            assert np.nanmean(values) == pytest.approx(rec[f"{key}_pseudo"], abs=1e-12), key
            assert np.isfinite(values).sum() == rec[f"{key}_pseudo_nq"], key
            checked += 1
    for key, values in metrics.per_query(sim, ioc, "positive_sets", positives=rel > 0.7).items():
        assert np.nanmean(values) == pytest.approx(rec[f"{key}_p"]), key
        checked += 1
    assert np.mean(metrics.per_query(sim, ioc, "map")["i2t_map"]) == pytest.approx(rec["i2t_map"])
    assert checked > 20


def test_errors_name_what_is_wrong(problem):
    sim, ioc, rel = problem
    with pytest.raises(TypeError, match=r"metric 'ncs' has no option\(s\) \['ks'\]"):
        metrics.per_query(sim, ioc, "ncs", rel, ks=(5,))
    with pytest.raises(ValueError, match="whole-matrix metric"):
        metrics.per_query(sim, ioc, "human_agreement")
    with pytest.raises(ValueError, match="needs rel"):
        metrics.per_query(sim, ioc, "ncs")
    with pytest.raises(ValueError, match="unknown metric 'nope'"):
        metrics.per_query(sim, ioc, "nope")
    with pytest.raises(ValueError, match="subset of the candidates"):
        metrics.per_query(sim, ioc, "coherence", rel, cs_candidates="one_per_image")
    with pytest.raises(ValueError, match="relevance ≥ 0"):
        metrics.per_query(sim, ioc, "ncs", rel - 0.5)
    with pytest.raises(ValueError, match="rel must have the shape of sim"):
        metrics.per_query(sim, ioc, "ndcg", rel[:, :3])
    with pytest.raises(ValueError, match="needs positives"):
        metrics.per_query(sim, ioc, "positive_sets")


def test_ranked_top_is_the_tie_rule_written_as_a_loop():
    """Decreasing score; among equal scores the smaller key (the less relevant) first, then the lower index — over
    several blocks of rows, with and without a key."""
    rng = np.random.default_rng(3)
    scores = np.round(rng.normal(size=(300, 4000)), 0)  # integer scores: long tie runs; 300 rows = 2 blocks
    key = rng.integers(0, 3, size=scores.shape).astype(float)
    got, plain = metrics.ranked_top(scores, 6, key=key), metrics.ranked_top(scores, 6)
    for q in range(0, 300, 7):
        assert got[q].tolist() == sorted(range(4000), key=lambda c: (-scores[q, c], key[q, c], c))[:6]
        assert plain[q].tolist() == sorted(range(4000), key=lambda c: (-scores[q, c], c))[:6]


def test_ranked_top_names_bad_input():
    with pytest.raises(ValueError, match=r"k=0 must be between 1 and the number of candidates \(3\)"):
        metrics.ranked_top(np.zeros((2, 3)), 0)
    with pytest.raises(ValueError, match=r"key must have the shape of sim \(2, 3\)"):
        metrics.ranked_top(np.zeros((2, 3)), 1, key=np.zeros((3, 2)))
    with pytest.raises(ValueError, match=r"key contains NaN or infinite values \(first at \[0, 0\] = nan\)"):
        metrics.ranked_top(np.zeros((2, 3)), 1, key=np.full((2, 3), np.nan))
