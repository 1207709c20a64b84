"""Agreement with sparse human judgements (Pearson, Kendall; all and non-GT pairs) against
scipy.stats on pairs gathered by an explicit loop; human-judged positives; degenerate cases."""

import numpy as np
import pytest
from scipy.stats import kendalltau, pearsonr

from coherent_itr.metrics import (
    EXPERT_POSITIVE_THRESHOLD,
    HumanJudgements,
    agreement,
    positive_matrix,
    positive_set_metrics,
    provider_agreement,
)


@pytest.fixture
def judged():
    rng = np.random.default_rng(0)
    n_img, n_cap = 8, 40
    img = np.arange(n_cap) // 5
    sim = rng.normal(size=(n_img, n_cap))
    k = 120
    ii = rng.integers(0, n_img, k)
    cc = rng.integers(0, n_cap, k)
    cc[:20] = ii[:20] * 5 + rng.integers(0, 5, 20)  # some ground-truth pairs
    score = rng.integers(1, 5, k) + rng.integers(0, 3, k) / 3  # mean of 3 experts on 1–4
    return sim, img, HumanJudgements.expert(ii, cc, score)


def test_agreement_matches_scipy_on_looped_pairs(judged):
    sim, img, h = judged
    xs, ys, xn, yn = [], [], [], []
    for i, c, s in zip(h.image_idx, h.caption_idx, h.score):
        xs.append(sim[i, c])
        ys.append(s)
        if img[c] != i:
            xn.append(sim[i, c])
            yn.append(s)
    res = agreement(sim, h, img)
    assert res["pearson_all"] == pytest.approx(pearsonr(xs, ys).statistic)
    assert res["kendall_all"] == pytest.approx(kendalltau(xs, ys).statistic)
    assert res["pearson_nongt"] == pytest.approx(pearsonr(xn, yn).statistic)
    assert res["kendall_nongt"] == pytest.approx(kendalltau(xn, yn).statistic)
    assert res["n_all"] == len(xs) and res["n_nongt"] == len(xn) < len(xs)


def test_hand_computed_agreement_and_binary_provider():
    # 3 judged pairs: values (1, 2, 3), scores (1, 2, 4): Kendall τ = 1 (all 3 pairs concordant).
    # Pairs 0 and 1 are ground truth; on the single non-GT pair correlations are undefined -> 0.0.
    img = np.array([0, 1, 0])  # caption 0 -> image 0, caption 1 -> image 1, caption 2 -> image 0
    vals = np.array([[1.0, 0.0, 0.0], [0.0, 2.0, 3.0]])
    h = HumanJudgements([0, 1, 1], [0, 1, 2], [1.0, 2.0, 4.0], "expert", 3.0)
    res = agreement(vals, h, img)
    assert res["kendall_all"] == pytest.approx(1.0)
    assert res["pearson_all"] == pytest.approx(np.corrcoef([1, 2, 3], [1, 2, 4])[0, 1])
    assert res["n_nongt"] == 1 and res["pearson_nongt"] == 0.0 and res["kendall_nongt"] == 0.0
    # SAM Table 1's "binary relevance (GT)": the GT indicator (1, 1, 0) against the scores
    pa = provider_agreement({"model": vals}, h, img)
    assert pa["expert_binary_pearson_all"] == pytest.approx(np.corrcoef([1, 1, 0], [1, 2, 4])[0, 1])
    assert pa["expert_binary_pearson_nongt"] == 0.0  # constant on non-GT pairs
    assert pa["expert_model_kendall_all"] == pytest.approx(1.0)


def test_constant_inputs_give_zero_not_nan():
    h = HumanJudgements([0, 0, 0], [0, 1, 2], [2.0, 2.0, 2.0])
    res = agreement(np.random.default_rng(1).normal(size=(1, 3)), h, np.zeros(3, dtype=int))
    assert all(v == 0.0 for k, v in res.items() if not k.startswith("n_"))


def test_positive_matrix_threshold_duplicates_and_gt():
    assert EXPERT_POSITIVE_THRESHOLD == 3.0
    # pair (0, 1) judged twice: 4 and 2 -> mean 3 ≥ 3 -> positive; (1, 2) scored 2.9 -> not
    h = HumanJudgements.expert([0, 0, 1, 1], [1, 1, 2, 0], [4.0, 2.0, 2.9, 3.5])
    p = positive_matrix(h, (2, 4))
    expect = np.zeros((2, 4), dtype=bool)
    expect[0, 1] = expect[1, 0] = True
    np.testing.assert_array_equal(p, expect)
    img = np.array([0, 0, 1, 1])
    p2 = positive_matrix(h, (2, 4), img, include_gt=True)
    assert p2[0, 0] and p2[1, 3] and p2[0, 1]
    with pytest.raises(ValueError, match="no positive threshold"):
        positive_matrix(HumanJudgements.crowd([0], [0], [0.5]), (1, 1))


def test_human_positives_in_semantic_metrics(judged):
    sim, img, h = judged
    pos = np.zeros(sim.shape, dtype=bool)  # built by a loop from the definition
    sums, counts = {}, {}
    for i, c, s in zip(h.image_idx, h.caption_idx, h.score):
        sums[(i, c)] = sums.get((i, c), 0.0) + s
        counts[(i, c)] = counts.get((i, c), 0) + 1
    for (i, c), s in sums.items():
        pos[i, c] = s / counts[(i, c)] >= 3
    np.testing.assert_array_equal(positive_matrix(h, sim.shape), pos)
    res = positive_set_metrics(sim, img, pos)
    # only queries with ≥ 1 judged positive are evaluated
    assert res["mapr_i2t_nq"] == (pos.sum(axis=1) > 0).sum()
    assert res["mapr_t2i_nq"] == (pos.sum(axis=0) > 0).sum()


@pytest.mark.parametrize(
    "args, msg",
    [
        (([0, 1], [0], [1.0, 2.0]), "one entry per judged pair"),
        (([0, -1], [0, 1], [1.0, 2.0]), "non-negative integer"),
        (([0, 1], [0, 1], [1.0, np.nan]), "not finite"),
    ],
)
def test_bad_judgements(args, msg):
    with pytest.raises(ValueError, match=msg):
        HumanJudgements(*args)


def test_out_of_range_judgements():
    h = HumanJudgements([0, 5], [0, 1], [1.0, 2.0])
    with pytest.raises(ValueError, match="out of range"):
        agreement(np.zeros((2, 4)), h, np.array([0, 0, 1, 1]))


def test_dataframes_as_stored_by_the_flickr8k_loader(judged):
    import pandas as pd

    from coherent_itr.metrics import evaluate

    sim, img, h = judged
    expert = pd.DataFrame(
        {
            "image_idx": h.image_idx,
            "caption_idx": h.caption_idx,
            "score": h.score,
            "is_gt": img[h.caption_idx] == h.image_idx,
            "name": "x",
        }
    )
    crowd = expert.assign(score=expert["score"] / 4)
    res = evaluate(sim, img, human={"expert": expert, "crowd": crowd}, cs_ks=(), ndcg_ks=(), ncs_ks=(), sr_ks=())
    ref = agreement(sim, h, img)
    assert res["expert_pearson_all"] == pytest.approx(ref["pearson_all"])
    assert res["crowd_kendall_nongt"] == pytest.approx(ref["kendall_nongt"])  # scaling keeps ranks
    assert "mapr_i2t_expert" in res and "mapr_i2t_crowd" not in res  # crowd: no threshold
    with pytest.raises(ValueError, match="columns"):
        evaluate(sim, img, human={"expert": expert.drop(columns="score")})
