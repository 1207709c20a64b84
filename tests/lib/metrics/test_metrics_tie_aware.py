"""Tie-aware metrics (coherent_itr/tie_aware.py): each equals the mean of the metric over every order of the
tied candidates (brute-force enumeration on small planted rankings), scikit-learn where the definitions
coincide, and the library's metric where there are no ties; tie groups follow the stated tolerance; and the
module moves no run key."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from sklearn.metrics import average_precision_score, ndcg_score

from coherent_itr import code_identity, metrics, runs
from coherent_itr import tie_aware as ta
from coherent_itr.config import Config


# --- brute force -------------------------------------------------------------------------------------------
def _groups(row: np.ndarray, tol: float) -> list[list[int]]:
    """The tie groups of one row by a plain loop: sorted decreasing, neighbours ≤ tol apart chained."""
    order = sorted(range(len(row)), key=lambda c: (-row[c], c))
    groups = [[order[0]]]
    for a, b in zip(order, order[1:]):
        if row[a] - row[b] <= tol:
            groups[-1].append(b)
        else:
            groups.append([b])
    return groups


def _orders(row: np.ndarray, tol: float):
    """Every ranking of the row that keeps its tie groups in place, each once."""
    for parts in itertools.product(*(itertools.permutations(g) for g in _groups(row, tol))):
        yield [c for part in parts for c in part]


def _single(order: list[int], pos: np.ndarray, gain: np.ndarray, ks) -> dict:
    """Every metric of one full ranking, by the textbook definitions."""
    hits = pos[order].astype(float)
    r = int(pos.sum())
    cum = np.cumsum(hits)
    prec = cum / np.arange(1, len(order) + 1)
    out = {
        "mapr": sum(prec[i] for i in range(r) if hits[i]) / r,
        "rprec": cum[r - 1] / r,
        "ap": sum(prec[i] for i in range(len(order)) if hits[i]) / r,
    }
    for k in ks:
        out[f"p{k}"] = cum[min(k, len(order)) - 1] / k
        out[f"r{k}"] = float(hits[:k].any())
    g = gain[order]
    disc = 1.0 / np.log2(np.arange(2, len(order) + 2))
    ideal = np.sort(gain)[::-1]
    for k in (*ks, None):
        kk = len(order) if k is None else min(k, len(order))
        out[("ndcg", k)] = (g[:kk] * disc[:kk]).sum() / (ideal[:kk] * disc[:kk]).sum()
    return out


def _brute(row, pos, gain, ks, tol) -> dict:
    vals = [_single(o, pos, gain, ks) for o in _orders(row, tol)]
    return {k: float(np.mean([v[k] for v in vals])) for k in vals[0]}


def _planted(seed: int, n: int = 7, levels: int = 3):
    """A block of queries whose scores take few values (many ties), with at least one positive each."""
    rng = np.random.default_rng(seed)
    scores = rng.integers(0, levels, size=(5, n)).astype(np.float64) / levels
    pos = rng.random((5, n)) < 0.4
    pos[:, rng.integers(0, n)] = True
    gains = rng.integers(0, 4, size=(5, n)).astype(np.float64)
    gains[:, 0] = np.maximum(gains[:, 0], 1.0)
    return scores, pos, gains


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("tol", [0.0, 0.4])
def test_every_metric_is_the_mean_over_all_orders_of_the_tied_candidates(seed, tol):
    scores, pos, gains = _planted(seed)
    ks = (1, 2, 3, 5, 9)
    m = ta.expected_positive_metrics(scores, pos, ks=ks, tol=tol)
    nd = ta.expected_ndcg(scores, gains, ks=(*ks, None), tol=tol)
    for q in range(scores.shape[0]):
        want = _brute(scores[q], pos[q], gains[q], ks, tol)
        for key in ("mapr", "rprec", "ap", *(f"{p}{k}" for k in ks for p in "pr")):
            assert m[key][1][q] and m[key][0][q] == pytest.approx(want[key], abs=1e-12), (q, key)
        for k in (*ks, None):
            assert nd[k][1][q] and nd[k][0][q] == pytest.approx(want[("ndcg", k)], abs=1e-12), (q, k)


def test_a_single_tie_group_spanning_the_list_and_a_lone_positive():
    # one group of 6 with 2 positives: P@1 = 2/6, R@3 = 1 − C(4, 3)/C(6, 3) = 1 − 4/20, AP by enumeration
    scores, pos = np.zeros((1, 6)), np.array([[True, False, False, True, False, False]])
    m = ta.expected_positive_metrics(scores, pos, ks=(1, 3))
    want = _brute(scores[0], pos[0], pos[0].astype(float), (1, 3), 0.0)
    assert m["p1"][0][0] == pytest.approx(2 / 6) and m["r3"][0][0] == pytest.approx(0.8)
    assert m["ap"][0][0] == pytest.approx(want["ap"]) and m["mapr"][0][0] == pytest.approx(want["mapr"])


def test_a_query_without_a_positive_is_undefined():
    m = ta.expected_positive_metrics(np.zeros((2, 3)), np.array([[False] * 3, [True, False, False]]))
    assert m["mapr"][1].tolist() == [False, True] and m["mapr"][0][0] == 0.0
    nd = ta.expected_ndcg(np.zeros((1, 3)), np.zeros((1, 3)))
    assert not nd[None][1][0]


# --- scikit-learn ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(4))
def test_ndcg_with_ties_is_scikit_learns_tie_averaged_ndcg(seed):
    scores, _, gains = _planted(seed, n=12)
    for k in (1, 3, 5, None):
        got = ta.expected_ndcg(scores, gains, ks=(k,), tol=0.0)[k][0]
        want = [ndcg_score(gains[q : q + 1], scores[q : q + 1], k=k, ignore_ties=False) for q in range(len(scores))]
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("seed", range(4))
def test_ap_without_ties_is_scikit_learns_average_precision(seed):
    rng = np.random.default_rng(seed)
    scores = rng.random((6, 15))
    pos = rng.random((6, 15)) < 0.3
    pos[:, 0] = True
    got = ta.expected_positive_metrics(scores, pos, tol=0.0)["ap"][0]
    want = [average_precision_score(pos[q], scores[q]) for q in range(len(scores))]
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_scikit_learns_ap_is_not_the_expectation_over_tied_orders():
    # one positive tied with one negative: the two orders give AP 1 and 1/2 (mean 0.75); scikit-learn's step
    # interpolation gives the precision of the whole group, 0.5 — so AP is checked by enumeration, not sklearn
    scores, pos = np.array([[1.0, 1.0, 0.5]]), np.array([[False, True, False]])
    assert ta.expected_positive_metrics(scores, pos)["ap"][0][0] == pytest.approx(0.75)
    assert average_precision_score(pos[0], scores[0]) == pytest.approx(0.5)


# --- the library's metrics without ties ----------------------------------------------------------------------
def test_without_ties_the_positive_set_metrics_are_the_librarys():
    rng = np.random.default_rng(5)
    n_img, cpi = 9, 4
    ioc = np.repeat(np.arange(n_img), cpi)
    sim = rng.random((n_img, n_img * cpi))
    pos = rng.random(sim.shape) < 0.25
    got = ta.positive_set_metrics(sim, pos, tol=0.0, chunk=4)
    want = metrics.positive_set_metrics(sim, ioc, pos)
    assert set(got) == set(want)
    for k in want:
        assert got[k] == pytest.approx(want[k], abs=1e-9), k


def test_without_ties_ndcg_is_the_librarys():
    rng = np.random.default_rng(6)
    n_img, cpi = 8, 3
    ioc = np.repeat(np.arange(n_img), cpi)
    sim, rel = rng.random((n_img, n_img * cpi)), rng.random((n_img, n_img * cpi))
    want = metrics.ndcg(sim, ioc, rel, ks=(5, None), directions=("i2t",))
    got = ta.expected_ndcg(sim, np.exp2(rel) - 1.0, ks=(5, None), tol=0.0)
    assert got[5][0].mean() == pytest.approx(want["ndcg5_i2t"], abs=1e-12)
    assert got[None][0].mean() == pytest.approx(want["ndcg_i2t"], abs=1e-12)


# --- the tolerance -------------------------------------------------------------------------------------------
def test_scores_that_differ_in_their_last_bits_form_the_same_groups():
    """An image's own captions at float32 relevance ≈ 1 that differ by a few ulps (as on another CPU) tie under
    the default tolerance, and give the metrics of exact ties; with tol = 0 they would not."""
    rng = np.random.default_rng(7)
    base = np.array([[1.0, 1.0, 1.0, 1.0, 1.0, 0.7, 0.5, 0.5, 0.2]])
    pos = np.array([[False, True, False, True, False, True, False, True, False]])
    exact = ta.expected_positive_metrics(base, pos, ks=(1, 3), tol=0.0)
    for _ in range(5):
        noisy = (base + rng.integers(-3, 4, size=base.shape) * 6e-8).astype(np.float32)  # a few float32 ulps
        for shift in (0.0, 1e-9):
            got = ta.expected_positive_metrics(noisy.astype(np.float64) + shift, pos, ks=(1, 3))
            for key, (v, _) in exact.items():
                assert v[0] == pytest.approx(got[key][0][0], abs=1e-12), key
    g = ta.tie_groups(np.array([[1.0, 1.0 - 4e-6, 1.0 - 8e-6, 0.9]]))  # chained: one group of 3 spanning 8e-6
    assert g.size[0].tolist() == [3, 3, 3, 1]
    assert ta.tie_groups(np.array([[1.0, 1.0 - 2e-5]])).size[0].tolist() == [1, 1]


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="2-D"):
        ta.tie_groups(np.zeros(3))
    with pytest.raises(ValueError, match="finite"):
        ta.tie_groups(np.array([[np.nan, 1.0]]))
    with pytest.raises(ValueError, match="tol"):
        ta.tie_groups(np.zeros((1, 2)), tol=-1.0)
    with pytest.raises(ValueError, match="boolean"):
        ta.expected_positive_metrics(np.zeros((1, 2)), np.ones((1, 2)))
    with pytest.raises(ValueError, match="shape"):
        ta.expected_ndcg(np.zeros((1, 2)), np.ones((1, 3)))


# --- run keys ------------------------------------------------------------------------------------------------
def test_the_module_is_in_no_run_keys_file_set_and_registers_no_metric():
    """tie_aware.py lies outside metrics/ (whose every file the evaluation key hashes) and outside every training
    file set, so adding or editing it moves no run key; it registers nothing the evaluation would run."""
    assert "tie_aware.py" not in runs.evaluation_files()
    assert code_identity.frozen_hash(tuple(runs.evaluation_files())) is not None
    for cfg in (
        Config(data="synthetic", data_scale="smoke", loss="triplet"),
        Config(data="synthetic", data_scale="smoke", loss="sndcg", relevance="sbert"),
    ):
        assert "tie_aware.py" not in runs.training_files(cfg)
    assert all(getattr(m.fn, "__module__", "") != ta.__name__ for m in metrics.registry.REGISTRY.values())
