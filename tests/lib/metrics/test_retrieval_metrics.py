"""Binary R@K / ranks against an explicit per-query loop written from the VSE++ definitions."""

import numpy as np
import pytest

from coherent_itr.metrics import fold_averaged_retrieval_metrics, i2t_ranks, retrieval_metrics, t2i_ranks


def brute_force(sim, img_of_cap):
    n_img, n_cap = sim.shape
    i2t = []
    for i in range(n_img):
        order = sorted(range(n_cap), key=lambda j: -sim[i, j])
        i2t.append(min(r for r, j in enumerate(order) if img_of_cap[j] == i))
    t2i = []
    for j in range(n_cap):
        order = sorted(range(n_img), key=lambda i: -sim[i, j])
        t2i.append(order.index(img_of_cap[j]))
    return np.array(i2t), np.array(t2i)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ranks_match_brute_force(seed):
    rng = np.random.default_rng(seed)
    sim = rng.normal(size=(30, 150))  # continuous: no ties
    img = np.arange(150) // 5
    bi, bt = brute_force(sim, img)
    np.testing.assert_array_equal(i2t_ranks(sim, img, chunk=7), bi)
    np.testing.assert_array_equal(t2i_ranks(sim, img, chunk=11), bt)
    m = retrieval_metrics(sim, img)
    for k in (1, 5, 10):
        assert m[f"i2t_r{k}"] == pytest.approx(100 * np.mean(bi < k))
        assert m[f"t2i_r{k}"] == pytest.approx(100 * np.mean(bt < k))
    assert m["rsum"] == pytest.approx(sum(m[f"{d}_r{k}"] for d in ("i2t", "t2i") for k in (1, 5, 10)))
    assert m["i2t_medr"] == np.floor(np.median(bi)) + 1
    assert m["t2i_meanr"] == pytest.approx(bt.mean() + 1)


def test_hand_computed_case():
    # 2 images, 2 captions each (captions 0,1 -> image 0; 2,3 -> image 1)
    sim = np.array([[0.9, 0.1, 0.5, 0.2], [0.8, 0.3, 0.4, 0.7]])
    img = np.array([0, 0, 1, 1])
    # image 0: best own caption 0.9 is rank 0; image 1: own best 0.7, beaten by 0.8 -> rank 1
    np.testing.assert_array_equal(i2t_ranks(sim, img), [0, 1])
    # caption 0 -> image 0 (0.9 > 0.8) rank 0; caption 1 -> image 0 (0.1 < 0.3) rank 1;
    # caption 2 -> image 1 (0.4 < 0.5) rank 1; caption 3 -> image 1 (0.7 > 0.2) rank 0
    np.testing.assert_array_equal(t2i_ranks(sim, img), [0, 1, 1, 0])
    m = retrieval_metrics(sim, img)
    assert m["i2t_r1"] == 50.0 and m["t2i_r1"] == 50.0 and m["t2i_r5"] == 100.0


def test_ties_are_pessimistic():
    sim = np.zeros((10, 50))
    m = retrieval_metrics(sim, np.arange(50) // 5)
    assert m["i2t_r1"] == 0.0 and m["t2i_r1"] == 0.0


def test_fold_averaging_is_mean_of_per_fold_metrics():
    rng = np.random.default_rng(3)
    sim = rng.normal(size=(40, 200))
    img = np.arange(200) // 5
    res = fold_averaged_retrieval_metrics(sim, img, fold_size=10)
    folds = [retrieval_metrics(sim[f * 10 : (f + 1) * 10, f * 50 : (f + 1) * 50], np.arange(50) // 5) for f in range(4)]
    assert res["n_folds"] == 4
    assert res["rsum"] == pytest.approx(np.mean([f["rsum"] for f in folds]))
    single = fold_averaged_retrieval_metrics(sim, img, fold_size=1000)
    assert single["n_folds"] == 1 and single["rsum"] == pytest.approx(retrieval_metrics(sim, img)["rsum"])


@pytest.mark.parametrize(
    "bad, msg",
    [
        (dict(sim=np.zeros(5)), "2-D"),
        (dict(img=np.arange(9)), "one entry per caption"),
        (dict(img=np.full(10, 7)), "values must be in"),
        (dict(sim=np.full((2, 10), np.nan)), "NaN"),
    ],
)
def test_bad_inputs(bad, msg):
    sim = bad.get("sim", np.zeros((2, 10)))
    img = bad.get("img", np.arange(10) // 5)
    with pytest.raises(ValueError, match=msg):
        retrieval_metrics(sim, img)
