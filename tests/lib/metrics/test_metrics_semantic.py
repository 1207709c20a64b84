"""NDCG, NCS, Semantic Recall, mAP@R / R-P / R@1 and AP against independent references:
sklearn.metrics.ndcg_score (2^r − 1 gains), sklearn average_precision_score, explicit rank loops
written from SAM Eqs. 4–5 and the ECCV Caption definitions, enumeration of every tie choice,
and hand-computed tiny cases."""

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, ndcg_score

from coherent_itr.metrics import i2t_map, ncs, ndcg, positive_set_metrics, semantic_recall


def ranking(scores, key):
    """The package's tie rule: score desc, then key (relevance / positive flag) asc, then index."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], key[j], j))


def views(sim, rel, img, direction):
    """Per query: (scores, relevance, ground-truth flags) over its candidates."""
    n_img, n_cap = sim.shape
    if direction == "i2t":
        return [(sim[i], rel[i], img == i) for i in range(n_img)]
    return [(sim[:, c], rel[:, c], np.arange(n_img) == img[c]) for c in range(n_cap)]


def data(seed, n_img=6, cpi=3, discrete=False):
    rng = np.random.default_rng(seed)
    n_cap = n_img * cpi
    sim = rng.normal(size=(n_img, n_cap))
    rel = rng.integers(0, 3, size=(n_img, n_cap)) / 2 if discrete else rng.random((n_img, n_cap))
    return sim, rel, np.arange(n_cap) // cpi


# ----------------------------------------------------------------------------------- NDCG


@pytest.mark.parametrize("seed", [0, 1])
def test_ndcg_matches_sklearn_with_exponential_gains(seed):
    sim, rel, img = data(seed)
    rel[rel == 0] = 0.01  # sklearn averages all-zero rows as 0: avoid
    res = ndcg(sim, img, rel, ks=(1, 3, 10, None), chunk=4)
    for d, (S, R) in (("i2t", (sim, rel)), ("t2i", (sim.T, rel.T))):
        for k in (1, 3, 10, None):
            ref = ndcg_score(np.exp2(R) - 1, S, k=k)
            assert res[f"ndcg{'' if k is None else k}_{d}"] == pytest.approx(ref, abs=1e-12), (d, k)


def test_ndcg_hand_case_and_tie_rule():
    # one query, two candidates scored equally, relevance (0, 1): the tie rule ranks the less
    # relevant first, so DCG = (2^0 − 1)/log2(2) + (2^1 − 1)/log2(3) = 1/log2(3); IDCG = 1.
    res = ndcg(np.array([[1.0, 1.0]]), np.array([0, 0]), np.array([[0.0, 1.0]]), ks=(None,), directions=("i2t",))
    assert res["ndcg_i2t"] == pytest.approx(1 / np.log2(3))
    # no relevance at all: undefined -> skipped
    res = ndcg(np.array([[1.0, 2.0]]), np.array([0, 0]), np.zeros((1, 2)), ks=(1,), directions=("i2t",))
    assert res["ndcg1_i2t"] == 0.0 and res["ndcg1_i2t_nq"] == 0


def test_ndcg_refuses_negative_relevance():
    with pytest.raises(ValueError, match=r"\(1 \+ s\)/2"):
        ndcg(np.zeros((2, 4)), np.arange(4) // 2, -np.ones((2, 4)))


# ----------------------------------------------------------------------------------- NCS


def ncs_loop(sim, rel, img, k, direction, remove_gt):
    vals = []
    for s, r, g in views(sim, rel, img, direction):
        keep = [j for j in ranking(s, r) if not (remove_gt and g[j])]
        ideal = sorted((r[j] for j in range(len(r)) if not (remove_gt and g[j])), reverse=True)
        den = sum(ideal[:k])
        if den > 0:
            vals.append(100 * sum(r[j] for j in keep[:k]) / den)
    return (np.mean(vals) if vals else 0.0), len(vals)


@pytest.mark.parametrize("discrete", [False, True])
@pytest.mark.parametrize("remove_gt", [False, True])
def test_ncs_matches_loop(remove_gt, discrete):
    sim, rel, img = data(2, discrete=discrete)
    if discrete:
        sim = np.round(sim)  # tied scores too
    res = ncs(sim, img, rel, ks=(1, 4, 30), remove_gt=remove_gt, chunk=4)
    tag = "ngt" if remove_gt else ""
    for d in ("i2t", "t2i"):
        for k in (1, 4, 30):
            ref, n = ncs_loop(sim, rel, img, k, d, remove_gt)
            assert res[f"ncs{k}{tag}_{d}"] == pytest.approx(ref, abs=1e-10), (d, k)
            assert res[f"ncs{k}{tag}_{d}_nq"] == n


def all_top_m_sets(r, eligible, m):
    """Every set of m most relevant eligible candidates (all choices among ties at the m-th value)."""
    el = [j for j in range(len(r)) if eligible[j]]
    m = min(m, len(el))
    if m == 0:
        return []
    thr = sorted((r[j] for j in el), reverse=True)[m - 1]
    above = [j for j in el if r[j] > thr]
    tied = [j for j in el if r[j] == thr]
    return [set(above) | set(c) for c in itertools.combinations(tied, m - len(above))]


def test_ncs_restricted_to_ideal_set_enumerates_ties():
    # SAM Eq. 5 read literally: numerator over j ∈ G̃ ∩ Q_K, G̃ the ideal top-K; with ties the
    # metric is the average over every admissible G̃ (enumerated here).
    sim, rel, img = data(4, discrete=True)
    res = ncs(sim, img, rel, ks=(2, 5), remove_gt=True, restrict_to_ideal=True, directions=("i2t",))
    for k in (2, 5):
        vals = []
        for s, r, g in views(sim, rel, img, "i2t"):
            el = ~g
            ideal = sorted(r[el], reverse=True)[:k]
            if sum(ideal) == 0:
                continue
            q = [j for j in ranking(s, r) if el[j]][:k]
            sets = all_top_m_sets(r, el, k)
            num = np.mean([sum(r[j] for j in q if j in G) for G in sets])
            vals.append(100 * num / sum(ideal))
        assert res[f"ncs{k}ngt_i2t"] == pytest.approx(np.mean(vals), abs=1e-10)


# ------------------------------------------------------------------------- Semantic Recall


@pytest.mark.parametrize("remove_gt", [True, False])
def test_semantic_recall_enumerates_every_tie_choice(remove_gt):
    sim, rel, img = data(5, n_img=5, cpi=3, discrete=True)
    ks, ms = (1, 3), (2, 4)
    res = semantic_recall(sim, img, rel, ks=ks, ms=ms, remove_gt=remove_gt, chunk=2)
    for d in ("i2t", "t2i"):
        for k, m in itertools.product(ks, ms):
            frac, hit = [], []
            for s, r, g in views(sim, rel, img, d):
                el = ~g if remove_gt else np.ones_like(g)
                sets = all_top_m_sets(r, el, m)
                if not sets:
                    continue
                q = set([j for j in ranking(s, r) if el[j]][:k])
                frac.append(100 * np.mean([len(G & q) / len(G) for G in sets]))  # SAM Eq. 4
                hit.append(100 * np.mean([len(G & q) > 0 for G in sets]))
            assert res[f"sr{k}m{m}_{d}"] == pytest.approx(np.mean(frac), abs=1e-10), (d, k, m)
            assert res[f"srhit{k}m{m}_{d}"] == pytest.approx(np.mean(hit), abs=1e-10), (d, k, m)
            assert res[f"sr{k}m{m}_{d}_nq"] == len(frac)


def test_semantic_recall_hand_case():
    # four candidates with relevance 0.9, 0.5, 0.5, 0.1 (ground truth kept). m = 2: G̃ = {0.9, one
    # of the two 0.5} (each with probability 1/2). The model's top-1 is the first 0.5 candidate:
    # E|G̃ ∩ Q| / m = 0.5 / 2 = 25 %; the hit has probability 1/2 = 50 %.
    sim = np.array([[1.0, 4.0, 3.0, 2.0]])
    rel = np.array([[0.9, 0.5, 0.5, 0.1]])
    img = np.zeros(4, dtype=int)
    res = semantic_recall(sim, img, rel, ks=(1,), ms=(2,), remove_gt=False, directions=("i2t",))
    assert res["sr1m2_i2t"] == pytest.approx(25.0)
    assert res["srhit1m2_i2t"] == pytest.approx(50.0)
    # top-2 = both 0.5 candidates: E|G̃ ∩ Q| = 1 -> 50 %, and a sure hit
    res = semantic_recall(sim, img, rel, ks=(2,), ms=(2,), remove_gt=False, directions=("i2t",))
    assert res["sr2m2_i2t"] == pytest.approx(50.0) and res["srhit2m2_i2t"] == pytest.approx(100.0)
    # m larger than the number of candidates: G̃ = all of them; the top-4 retrieves all of them
    res = semantic_recall(sim, img, rel, ks=(4,), ms=(10,), remove_gt=False, directions=("i2t",))
    assert res["sr4m10_i2t"] == pytest.approx(100.0)
    # ground truth removed and every candidate is ground truth: G̃ empty -> skipped
    res = semantic_recall(sim, img, rel, ks=(1,), ms=(2,), remove_gt=True, directions=("i2t",))
    assert res["sr1m2_i2t"] == 0.0 and res["sr1m2_i2t_nq"] == 0


# ------------------------------------------------------------------ mAP@R, R-P, R@1, AP


def eccv_loop(sim, pos, direction):
    """ECCV Caption definitions, explicit: ranked list, R = |P|, P@r = |top-r ∩ P| / r."""
    S, P = (sim, pos) if direction == "i2t" else (sim.T, pos.T)
    maps, rps, r1s = [], [], []
    for q in range(S.shape[0]):
        R = int(P[q].sum())
        if R == 0:
            continue
        order = ranking(S[q], P[q].astype(float))
        hits = [bool(P[q, j]) for j in order]
        prec = [sum(hits[:r]) / r for r in range(1, R + 1)]
        maps.append(100 * sum(prec[r - 1] for r in range(1, R + 1) if hits[r - 1]) / R)
        rps.append(100 * prec[R - 1])
        r1s.append(100 * hits[0])
    return {"mapr": np.mean(maps), "rprec": np.mean(rps), "r1": np.mean(r1s), "n": len(maps)}


@pytest.mark.parametrize("ties", [False, True])
def test_positive_set_metrics_match_loop(ties):
    rng = np.random.default_rng(8)
    sim = rng.normal(size=(7, 21))
    if ties:
        sim = np.round(sim)
    pos = rng.random((7, 21)) < 0.2
    pos[0] = False  # a query with no positive: skipped
    res = positive_set_metrics(sim, np.arange(21) // 3, pos, chunk=3)
    for d in ("i2t", "t2i"):
        ref = eccv_loop(sim, pos, d)
        for key in ("mapr", "rprec", "r1"):
            assert res[f"{key}_{d}"] == pytest.approx(ref[key], abs=1e-10), (d, key)
        assert res[f"mapr_{d}_nq"] == ref["n"]


def test_positive_set_hand_case():
    # ranking [pos, neg, pos], R = 2: mAP@R = (1/2)(1·1/1 + 0) = 50 %, R-P = 1/2 = 50 %, R@1 = 100 %,
    # AP over the whole list = (1/2)(1/1 + 2/3) = 5/6.
    sim = np.array([[3.0, 2.0, 1.0]])
    pos = np.array([[True, False, True]])
    res = positive_set_metrics(sim, np.zeros(3, dtype=int), pos, with_ap=True, directions=("i2t",))
    assert res["mapr_i2t"] == pytest.approx(50.0)
    assert res["rprec_i2t"] == pytest.approx(50.0)
    assert res["r1_i2t"] == pytest.approx(100.0)
    assert res["ap_i2t"] == pytest.approx(5 / 6)
    # tied scores: the negative is ranked before the positive (pessimistic)
    res = positive_set_metrics(
        np.array([[1.0, 1.0]]), np.zeros(2, dtype=int), np.array([[True, False]]), directions=("i2t",)
    )
    assert res["r1_i2t"] == 0.0 and res["mapr_i2t"] == 0.0
    # no positive anywhere: every query skipped, 0.0, never NaN
    res = positive_set_metrics(sim, np.zeros(3, dtype=int), np.zeros((1, 3), dtype=bool))
    assert res["mapr_i2t"] == 0.0 and res["mapr_i2t_nq"] == 0 and res["r1_t2i_nq"] == 0


def test_i2t_map_matches_sklearn_average_precision():
    rng = np.random.default_rng(9)
    sim = rng.normal(size=(12, 60))
    img = np.arange(60) // 5
    ref = np.mean([average_precision_score(img == i, sim[i]) for i in range(12)])
    assert i2t_map(sim, img, chunk=5) == pytest.approx(ref, abs=1e-12)
