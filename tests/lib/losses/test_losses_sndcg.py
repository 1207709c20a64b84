"""Smooth-NDCG (Listwise paper Eqs. 9–21) against explicit loops and sklearn's ndcg_score."""

from __future__ import annotations

import math

import pytest
import torch
from sklearn.metrics import ndcg_score

from coherent_itr import losses
from coherent_itr.losses.sndcg import chunk_rows_for, clamp_is_negligible, peak_bytes_per_element

DT = torch.float64


def batch(b: int, seed: int, dtype=DT, ties: bool = False):
    g = torch.Generator().manual_seed(seed)
    sim = (torch.rand(b, b, generator=g, dtype=torch.float64) * 1.6 - 0.6).to(dtype)
    rel = torch.rand(b, b, generator=g, dtype=torch.float64)  # asymmetric, in [0, 1)
    if ties:
        rel = (rel * 4).round() / 4  # many tied relevances
    rel.fill_diagonal_(1.0)
    return sim.requires_grad_(), rel.to(dtype)


def loop_direction(score, r, b, tau, clamp, idcg_mode, rows=None):
    """(1/N) Σ_i (1 − DCG-hat_i / IDCG_i) for one direction; score(i, j), r(i, j) accessors;
    ``rows`` restricts the sum (the mean is still over all N queries)."""
    total = torch.zeros((), dtype=DT)
    for i in range(b) if rows is None else rows:
        dcg = torch.zeros((), dtype=DT)
        for j in range(b):
            rank = torch.ones((), dtype=DT)  # Eq. 16 (sign of Eq. 10)
            for k in range(b):
                if k != j:
                    rank = rank + torch.sigmoid(torch.clamp((score(i, k) - score(i, j)) / tau, -clamp, clamp))
            dcg = dcg + (2.0 ** r(i, j) - 1.0) / torch.log2(1.0 + rank)
        gains = [2.0 ** r(i, j) - 1.0 for j in range(b)]
        if idcg_mode == "paper":  # Eqs. 12–13: ties share the best rank
            ideal = sum(
                gains[j] / math.log2(1 + 1 + sum(1 for k in range(b) if k != j and r(i, j) < r(i, k))) for j in range(b)
            )
        else:
            ideal = sum(g / math.log2(1 + p) for p, g in enumerate(sorted(gains, reverse=True), start=1))
        total = total + (1.0 - dcg / ideal)
    return total / b


def loop_sndcg(sim, rel, tau=0.01, clamp=50.0, idcg="paper", t2i_rel="transposed"):
    b = sim.shape[0]
    rv = rel.tolist()
    i2t = loop_direction(lambda i, j: sim[i, j], lambda i, j: rv[i][j], b, tau, clamp, idcg)
    # text→image: caption i ranks images j by s(V_j, T_i) with relevance r(V_j, T_i)
    r_t2i = (lambda i, j: rv[j][i]) if t2i_rel == "transposed" else (lambda i, j: rv[i][j])
    t2i = loop_direction(lambda i, j: sim[j, i], r_t2i, b, tau, clamp, idcg)
    return i2t + t2i  # Eq. 19


def value_and_grad(fn, sim):
    sim = sim.detach().clone().requires_grad_()
    v = fn(sim)
    (g,) = torch.autograd.grad(v, sim)
    return v.detach(), g


@pytest.mark.parametrize(
    "params",
    [{}, {"tau": 0.1}, {"idcg": "sorted", "tau": 0.05}, {"t2i_rel": "untransposed"}, {"clamp": 2.0, "tau": 0.02}],
)
@pytest.mark.parametrize("ties", [False, True])
def test_sndcg_equals_loop(params, ties):
    sim, rel = batch(6, seed=1, ties=ties)
    crit = losses.build("sndcg", **params)
    v, g = value_and_grad(lambda s: crit(s, rel), sim)
    v_ref, g_ref = value_and_grad(lambda s: loop_sndcg(s, rel, **params), sim)
    torch.testing.assert_close(v, v_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-8, atol=1e-12)
    assert g.abs().sum() > 0


def test_transposed_relevance_matters_and_ties_change_idcg():
    sim, rel = batch(6, seed=2, ties=True)
    a = losses.build("sndcg")(sim, rel)
    assert not torch.isclose(a, losses.build("sndcg", t2i_rel="untransposed")(sim, rel))
    assert not torch.isclose(a, losses.build("sndcg", idcg="sorted")(sim, rel))
    sym = (rel + rel.T) / 2  # with symmetric r the code's bug is harmless
    torch.testing.assert_close(losses.build("sndcg")(sim, sym), losses.build("sndcg", t2i_rel="untransposed")(sim, sym))


@pytest.mark.parametrize("idcg", ["paper", "sorted"])
def test_ndcg_hat_tends_to_true_ndcg_checked_with_sklearn(idcg):
    """NDCG-hat → NDCG as τ → 0 on untied scores (claim U6); the hard NDCG equals sklearn's
    ndcg_score with gains 2^r − 1 (untied relevance, so both IDCG conventions agree)."""
    _, r = batch(24, seed=3)
    g = torch.Generator().manual_seed(3)
    # untied scores: a random Latin square on a grid of step 0.003 (rows and columns are
    # permutations of the grid), jittered by < 0.0002
    a, b = torch.randperm(24, generator=g), torch.randperm(24, generator=g)
    s = ((a.view(-1, 1) + b.view(1, -1)) % 24).to(DT) * 0.003 - 0.03
    s = s + (torch.rand(24, 24, generator=g, dtype=DT) - 0.5) * 4e-4
    gains = (2.0**r - 1.0).numpy()
    ref_i2t = ndcg_score(gains, s.numpy())
    ref_t2i = ndcg_score(gains.T, s.T.numpy())
    gaps = []
    for tau in (1e-1, 1e-2, 1e-3, 1e-4):
        crit = losses.build("sndcg", tau=tau, idcg=idcg)
        v = crit(s, r)
        d = crit.diagnostics
        assert d["ndcg_i2t"] == pytest.approx(ref_i2t, abs=1e-12) and d["ndcg_t2i"] == pytest.approx(ref_t2i, abs=1e-12)
        assert float(v) == pytest.approx(2 - d["ndcg_hat_i2t"] - d["ndcg_hat_t2i"], abs=1e-12)
        gaps.append(abs(d["ndcg_hat_i2t"] - ref_i2t) + abs(d["ndcg_hat_t2i"] - ref_t2i))
    assert all(a > b for a, b in zip(gaps, gaps[1:])), gaps
    off = ~torch.eye(24, dtype=torch.bool).expand(24, 24, 24)
    for m in (s, s.T):  # untied: pairs separated by > 20 τ_min
        assert (m.unsqueeze(1) - m.unsqueeze(2)).abs()[off].min() > 20 * 1e-4
    assert gaps[-1] < 1e-6


@pytest.mark.parametrize("tau", [1e-2, 1e-3, 1e-4])
def test_float32_finite_values_and_gradients_for_small_tau(tau):
    sim, rel = batch(48, seed=4, dtype=torch.float32)
    with torch.no_grad():
        sim[:, 5] = sim[:, 6]  # exact ties in the scores too
    crit = losses.build("sndcg", tau=tau)
    v, g = value_and_grad(lambda s: crit(s, rel), sim)
    assert v.dtype == torch.float32 and torch.isfinite(v) and torch.isfinite(g).all()
    assert 0 <= float(v) <= 2


def test_float32_fast_path_matches_exact_float64():
    """float32 with clamp 50 skips the clamp (a no-op to within eps²); float64 applies it exactly.
    Many pairs are beyond the clamp here (τ = 1e-3, score gaps up to 1.4)."""
    assert clamp_is_negligible(50.0, torch.float32) and not clamp_is_negligible(50.0, torch.float64)
    assert not clamp_is_negligible(20.0, torch.float32)
    sim, rel = batch(32, seed=8)
    crit = losses.build("sndcg", tau=1e-3)
    v64, g64 = value_and_grad(lambda s: crit(s, rel), sim)
    v32, g32 = value_and_grad(lambda s: crit(s, rel.float()), sim.detach().float())
    assert float(v32) == pytest.approx(float(v64), rel=1e-5)
    torch.testing.assert_close(g32.double(), g64, rtol=1e-3, atol=1e-4 * float(g64.abs().max()))


def test_chunked_equals_unchunked():
    sim, rel = batch(40, seed=5)
    whole = losses.build("sndcg", tau=0.05)
    b = 40
    small_mb = 7.5 * b * b * peak_bytes_per_element(DT) / 2**20  # room for 7 rows per chunk
    chunked = losses.build("sndcg", tau=0.05, max_chunk_mb=small_mb)
    v1, g1 = value_and_grad(lambda s: whole(s, rel), sim)
    v2, g2 = value_and_grad(lambda s: chunked(s, rel), sim)
    assert whole.diagnostics["n_chunks"] == 1
    assert chunked.diagnostics["chunk_rows"] == 7 and chunked.diagnostics["n_chunks"] == 6
    torch.testing.assert_close(v1, v2, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-13)
    one = losses.build("sndcg", tau=0.05, max_chunk_mb=1e-6)  # one row per chunk
    v3, g3 = value_and_grad(lambda s: one(s, rel), sim)
    assert one.diagnostics["chunk_rows"] == 1
    torch.testing.assert_close(v1, v3, rtol=1e-13, atol=1e-13)
    torch.testing.assert_close(g1, g3, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_b512_fits_in_one_gigabyte(dtype):
    """The B×B×B work is bounded by chunk_rows · B² · (bytes alive per element) — 4 values of the
    dtype (difference, sigmoid, its derivative, mask) — plus O(B²) matrices; ≤ 1 GiB at B = 512."""
    b = 512
    rows = chunk_rows_for(b, dtype, losses.parameters("sndcg")["max_chunk_mb"])
    item = torch.finfo(dtype).bits // 8
    assert peak_bytes_per_element(dtype) == 4 * item
    chunk_bytes = rows * b * b * peak_bytes_per_element(dtype)
    matrices = 16 * b * b * item  # sim, rel, gains, grads, ranks, … (generous)
    assert 1 <= rows < b and chunk_bytes + matrices <= 2**30
    assert rows == {torch.float32: 64, torch.float64: 32}[dtype]


def test_zero_gain_rows_and_permutation_equivariance():
    sim, rel = batch(8, seed=6)
    rel = rel.clone()
    rel[3, :] = 0.0  # image 3: no gain anywhere (IDCG = 0) → contributes 0
    crit = losses.build("sndcg")
    v, g = value_and_grad(lambda s: crit(s, rel), sim)
    rv = rel.tolist()
    v_ref, g_ref = value_and_grad(
        lambda s: (
            loop_direction(
                lambda i, j: s[i, j], lambda i, j: rv[i][j], 8, 0.01, 50.0, "paper", rows=[0, 1, 2, 4, 5, 6, 7]
            )
            + loop_direction(lambda i, j: s[j, i], lambda i, j: rv[j][i], 8, 0.01, 50.0, "paper")
        ),
        sim,
    )
    torch.testing.assert_close(v, v_ref, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-8, atol=1e-12)
    perm = torch.randperm(8, generator=torch.Generator().manual_seed(0))
    torch.testing.assert_close(v, crit(sim[perm][:, perm], rel[perm][:, perm]).detach(), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"tau": 0.0}, "tau=0.0 out of range"),
        ({"clamp": -1.0}, "clamp=-1.0"),
        ({"idcg": "ideal"}, "idcg='ideal'"),
        ({"t2i_rel": "same"}, "t2i_rel='same'"),
        ({"max_chunk_mb": 0}, "max_chunk_mb=0"),
    ],
)
def test_rejects_bad_parameters(params, msg):
    with pytest.raises(ValueError, match=msg):
        losses.build("sndcg", **params)


def test_relevance_outside_unit_interval_is_an_error():
    sim, rel = batch(5, seed=7)
    with pytest.raises(ValueError, match=r"in \[0, 1\]"):
        losses.build("sndcg")(sim, rel * 2 - 1)  # raw cosine in [−1, 1]
    with pytest.raises(ValueError, match="needs a relevance matrix"):
        losses.build("sndcg")(sim)
