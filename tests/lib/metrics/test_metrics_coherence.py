"""CS@K (ladder Eq. 13) and Kendall τ (BCLS Eq. 2) against pair-counting loops written from the
equations, scipy.stats.kendalltau per query, and the ladder paper's own worked examples."""

import itertools

import numpy as np
import pytest
from scipy.stats import kendalltau

from coherent_itr.metrics import coherent_score, kendall_tau, one_caption_per_image
from coherent_itr.metrics.kendall import prefix_stats, tau_from_stats


def pair_counts(x, y):
    """P, Q, T (ties only in x), U (ties only in y), n0 — explicit loop over pairs i < j."""
    P = Q = T = U = 0
    for i, j in itertools.combinations(range(len(x)), 2):
        dx, dy = x[i] - x[j], y[i] - y[j]
        if dx == 0 and dy != 0:
            T += 1
        elif dy == 0 and dx != 0:
            U += 1
        elif dx * dy > 0:
            P += 1
        elif dx * dy < 0:
            Q += 1
    return P, Q, T, U, len(x) * (len(x) - 1) // 2


def tau_b_loop(x, y):
    P, Q, T, U, _ = pair_counts(x, y)
    den = np.sqrt((P + Q + T) * (P + Q + U))
    return None if den == 0 else (P - Q) / den


def tau_a_loop(x, y):
    P, Q, _, _, n0 = pair_counts(x, y)
    return None if n0 == 0 else (P - Q) / n0


def ranking(scores, rel):
    """The package's tie rule written plainly: score desc, then relevance asc, then index."""
    return sorted(range(len(scores)), key=lambda j: (-scores[j], rel[j], j))


def cs_loop(sim, rel, k, direction):
    S, R = (sim, rel) if direction == "i2t" else (sim.T, rel.T)
    vals = []
    for q in range(S.shape[0]):
        top = ranking(S[q], R[q])[:k]
        t = tau_b_loop(S[q, top], R[q, top])
        if t is not None:
            vals.append(t)
    return (np.mean(vals) if vals else 0.0), len(vals)


def tau_loop(sim, rel, direction, variant):
    S, R = (sim, rel) if direction == "i2t" else (sim.T, rel.T)
    f = tau_a_loop if variant == "a" else tau_b_loop
    vals = [v for v in (f(S[q], R[q]) for q in range(S.shape[0])) if v is not None]
    return (np.mean(vals) if vals else 0.0), len(vals)


def data(seed, n_img=7, cpi=3, ties=False):
    rng = np.random.default_rng(seed)
    n_cap = n_img * cpi
    if ties:  # few distinct values: ties in scores and in relevance, and tied top-K boundaries
        sim = rng.integers(0, 4, size=(n_img, n_cap)).astype(float)
        rel = rng.integers(0, 3, size=(n_img, n_cap)) / 2
    else:
        sim = rng.normal(size=(n_img, n_cap))
        rel = rng.random((n_img, n_cap))
    return sim, np.arange(n_cap) // cpi, rel


@pytest.mark.parametrize("ties", [False, True])
@pytest.mark.parametrize("seed", [0, 1])
def test_cs_matches_pair_loop(seed, ties):
    sim, img, rel = data(seed, ties=ties)
    ks = (2, 5, 7, 40)  # 7 = all images for t2i; 40 > every list: whole list
    res = coherent_score(sim, img, rel, ks=ks, chunk=3)
    for d in ("i2t", "t2i"):
        for k in ks:
            ref, n = cs_loop(sim, rel, k, d)
            assert res[f"cs{k}_{d}"] == pytest.approx(ref, abs=1e-12), (d, k)
            assert res[f"cs{k}_{d}_nq"] == n


@pytest.mark.parametrize("ties", [False, True])
def test_cs_matches_scipy_per_query_and_scipy_backend(ties):
    sim, img, rel = data(5, n_img=9, cpi=4, ties=ties)
    k = 11
    res = coherent_score(sim, img, rel, ks=(k,), directions=("i2t",))
    vals = []
    for q in range(sim.shape[0]):
        top = ranking(sim[q], rel[q])[:k]
        t = kendalltau(sim[q, top], rel[q, top]).statistic
        if np.isfinite(t):
            vals.append(t)
    assert res[f"cs{k}_i2t"] == pytest.approx(np.mean(vals), abs=1e-12)
    slow = coherent_score(sim, img, rel, ks=(k,), directions=("i2t",), backend="scipy")
    assert slow[f"cs{k}_i2t"] == pytest.approx(res[f"cs{k}_i2t"], abs=1e-12)


@pytest.mark.parametrize("variant", ["a", "b"])
@pytest.mark.parametrize("ties", [False, True])
def test_kendall_tau_over_all_candidates_matches_loop(variant, ties):
    sim, img, rel = data(3, ties=ties)
    res = kendall_tau(sim, img, rel, variant=variant, chunk=2)
    for d in ("i2t", "t2i"):
        ref, n = tau_loop(sim, rel, d, variant)
        assert res[f"tau_{d}"] == pytest.approx(ref, abs=1e-12)
        assert res[f"tau_{d}_nq"] == n


def test_ladder_paper_examples():
    # ladder Sec. III-D: ideal order h1..h5; the paper gives CS@5 for four model rankings.
    rel = np.array([[5.0, 4, 3, 2, 1]])  # relevance of h1..h5 (h1 most relevant)
    img = np.zeros(5, dtype=int)

    def cs5(order):  # order: the model's ranking, as h-indices 1..5
        sim = np.zeros((1, 5))
        for pos, h in enumerate(order):
            sim[0, h - 1] = 5 - pos
        return coherent_score(sim, img, rel, ks=(5,), directions=("i2t",))["cs5_i2t"]

    assert cs5([1, 5, 4, 3, 2]) == pytest.approx(-0.2)
    assert cs5([1, 2, 3, 4, 5]) == pytest.approx(1.0)
    assert cs5([2, 1, 3, 4, 5]) == pytest.approx(0.8)
    assert cs5([1, 3, 2, 4, 5]) == pytest.approx(0.8)


def test_hand_computed_tau_a_and_b_with_a_relevance_tie():
    # scores 3 > 2 > 1, relevance (1, 1, 0): pairs (0,1) tied in relevance, (0,2) and (1,2)
    # concordant. τ-a = 2/3; τ-b = 2 / sqrt((3 − 1)(3 − 0)) = 2/sqrt(6).
    sim, rel, img = np.array([[3.0, 2, 1]]), np.array([[1.0, 1, 0]]), np.zeros(3, dtype=int)
    assert kendall_tau(sim, img, rel, variant="a", directions=("i2t",))["tau_i2t"] == pytest.approx(2 / 3)
    assert kendall_tau(sim, img, rel, variant="b", directions=("i2t",))["tau_i2t"] == pytest.approx(2 / np.sqrt(6))


def test_top_k_boundary_tie_is_pessimistic():
    # four candidates, scores (2, 1, 1, 0), relevance (1, 0.9, 0.1, 0): the two tied at score 1
    # compete for the 2nd place of the top-2; the less relevant one (0.1) is ranked first.
    sim, rel, img = np.array([[2.0, 1, 1, 0]]), np.array([[1.0, 0.9, 0.1, 0]]), np.zeros(4, dtype=int)
    st = prefix_stats(np.array([[2.0, 1, 1, 0]]), np.array([[4, 2, 3, 1]]), [3])
    # top-3 in ranking order: (2, rel 1), (1, rel 0.1), (1, rel 0.9): pairs: (a,b) conc, (a,c) conc,
    # (b,c) tied in x only -> P=2, Q=0, T=1, U=0 -> τ-b = 2 / sqrt(3 * 2)
    assert tau_from_stats(st, "b")[0][0, 0] == pytest.approx(2 / np.sqrt(6))
    res = coherent_score(sim, img, rel, ks=(2,), directions=("i2t",))
    assert res["cs2_i2t"] == pytest.approx(1.0)  # top-2 = (score 2, rel 1), (score 1, rel 0.1)


def test_degenerate_cases_are_skipped_and_counted():
    img = np.arange(6) // 3
    # constant relevance: τ-b undefined for every query -> skipped, value 0.0, never NaN
    res = coherent_score(np.random.default_rng(0).normal(size=(2, 6)), img, np.ones((2, 6)), ks=(3,))
    assert res["cs3_i2t"] == 0.0 and res["cs3_i2t_nq"] == 0 and res["cs3_t2i_nq"] == 0
    # constant similarity: every score tied -> τ-b undefined as well
    res = coherent_score(np.zeros((2, 6)), img, np.random.default_rng(1).random((2, 6)), ks=(3,))
    assert res["cs3_i2t_nq"] == 0 and not any(np.isnan(v) for v in res.values())
    # K = 1 and single-candidate queries (t2i with one image): undefined, skipped
    res = coherent_score(
        np.random.default_rng(2).normal(size=(1, 4)),
        np.zeros(4, dtype=int),
        np.random.default_rng(3).random((1, 4)),
        ks=(1, 4),
    )
    assert res["cs1_i2t_nq"] == 0 and res["cs4_t2i_nq"] == 0 and res["cs4_i2t_nq"] == 1
    # τ-a is defined for constant relevance (C = D = 0)
    t = kendall_tau(np.random.default_rng(4).normal(size=(2, 6)), img, np.ones((2, 6)))
    assert t["tau_i2t"] == 0.0 and t["tau_i2t_nq"] == 2


def test_one_caption_per_image_candidates():
    sim, img, rel = data(7, n_img=6, cpi=5)
    cols = one_caption_per_image(img)
    np.testing.assert_array_equal(cols, np.arange(0, 30, 5))
    res = coherent_score(sim, img, rel, ks=(4,), candidates="one_per_image")
    for d in ("i2t", "t2i"):
        ref, n = cs_loop(sim[:, cols], rel[:, cols], 4, d)
        assert res[f"cs4_{d}"] == pytest.approx(ref, abs=1e-12)
        assert res[f"cs4_{d}_nq"] == n == 6


def test_float32_ties_and_torch_input():
    import torch

    rng = np.random.default_rng(11)
    sim = np.round(rng.normal(size=(8, 24)), 1).astype(np.float32)  # many ties in float32
    rel = np.round(rng.random((8, 24)), 1).astype(np.float32)
    img = np.arange(24) // 3
    res = coherent_score(torch.from_numpy(sim), torch.from_numpy(img), torch.from_numpy(rel), ks=(5, 24))
    for d in ("i2t", "t2i"):
        for k in (5, 24):
            ref, _ = cs_loop(sim.astype(np.float64), rel.astype(np.float64), k, d)
            assert res[f"cs{k}_{d}"] == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize(
    "bad, msg",
    [
        (dict(rel=np.zeros((2, 5))), "shape of sim"),
        (dict(rel=np.full((2, 6), np.nan)), "rel contains NaN"),
        (dict(ks=(0,)), "positive integers"),
        (dict(candidates="some"), "candidates must be one of"),
        (dict(backend="gpu"), "backend must be one of"),
    ],
)
def test_bad_inputs(bad, msg):
    args = dict(rel=np.zeros((2, 6)), ks=(3,), candidates="all", backend="fast")
    args.update(bad)
    with pytest.raises(ValueError, match=msg):
        coherent_score(
            np.zeros((2, 6)),
            np.arange(6) // 3,
            args["rel"],
            ks=args["ks"],
            candidates=args["candidates"],
            backend=args["backend"],
        )
    with pytest.raises(ValueError, match="variant"):
        kendall_tau(np.zeros((2, 6)), np.arange(6) // 3, np.zeros((2, 6)), variant="c")


@pytest.mark.parametrize("ties", [False, True])
def test_discordant_counters_match_pair_loop(ties):
    """Both compiled counters of discordant pairs (numba one-pass prefixes, scipy per prefix) give
    the explicit pair loop's Q on every top-K prefix, with ties in x, in y and in both."""
    from coherent_itr.metrics._blocks import tie_runs
    from coherent_itr.metrics.kendall import _discordant, _discordant_prefixes_numba

    rng = np.random.default_rng(7)
    n, ks = 40, [1, 2, 5, 17, 40]
    x = -np.sort(-(rng.integers(0, 8, (6, n)) if ties else rng.normal(size=(6, n))), axis=1)
    y = rng.integers(1, 6 if ties else 10 * n, (6, n))
    # the package's tie rule: within a run of tied x, y is non-decreasing
    order = np.lexsort((y, -x), axis=1)
    x, y = np.take_along_axis(x, order, 1), np.take_along_axis(y, order, 1)
    tr = tie_runs(x)
    assert (tr is not None) == ties
    expected = np.array([[pair_counts(x[r, :k], y[r, :k])[1] for k in ks] for r in range(6)])
    assert expected[:, -1].min() > 0
    assert _discordant_prefixes_numba is not None  # numba is pinned in requirements.txt: test the fast path
    for c in ("scipy", "numba"):
        np.testing.assert_array_equal(_discordant(y, ks, tr, counter=c), expected, err_msg=c)
