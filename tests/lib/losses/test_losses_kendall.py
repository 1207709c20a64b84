"""Kendall ranking losses of BCLS against explicit loops over (i, j, k) written from the equations.

``kendall``: Eq. 17 (Eq. 4 for α = 0), both lines, all j, k. ``kendall_sw_hs``: Eqs. 18–20 with the
windows read as in ``coherent_itr.losses.kendall`` (window m = 1..M = ⌊(2 − α)/β⌋, lower edge
l_m = −1 + m·β, upper u_m = l_m + α, Pos = {r ≥ u_m}, Neg = {r < l_m}, both edges shifted by
−edge_tol), hardest pair by explicit argmin/argmax, averaged over the M windows.
Values and gradients (autograd through the loops) in float64.
"""

from __future__ import annotations

import math

import pytest
import torch

from coherent_itr import losses
from coherent_itr.losses import kendall as kendall_mod

B = 7


def random_sim(seed: int, n: int = B) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1


def random_rel(seed: int, n: int = B, dim: int = 3, quantize: float | None = None) -> torch.Tensor:
    """Cosine similarities of random 'caption embeddings' (spread over [−1, 1]), r_ii = 1."""
    g = torch.Generator().manual_seed(1000 + seed)
    e = torch.nn.functional.normalize(torch.randn(n, dim, generator=g, dtype=torch.float64), dim=1)
    r = (e @ e.T).clamp(-1, 1)
    if quantize:
        r = torch.round(r / quantize) * quantize  # many ties, values exactly on window edges
    r.fill_diagonal_(1.0)
    return r


def relu(x):
    return x if x > 0 else x * 0.0


def ref_kendall(S, R, alpha, margin=0.0, reduction="sum"):
    """BCLS Eq. 17: Σ_i Σ_j Σ_k 1(r_ij > r_ik + α)[s_ik − s_ij + m]_+ + Σ 1(r_ji > r_ki + α)[s_ki − s_ji + m]_+."""
    n = S.shape[0]
    r = R.tolist()
    terms, n_pairs = [], 0
    for i in range(n):
        for j in range(n):
            for k in range(n):
                if r[i][j] > r[i][k] + alpha:
                    terms.append(relu(S[i, k] - S[i, j] + margin))
                    n_pairs += 1
                if r[j][i] > r[k][i] + alpha:
                    terms.append(relu(S[k, i] - S[j, i] + margin))
                    n_pairs += 1
    total = torch.stack(terms).sum() if terms else S.sum() * 0
    if reduction == "mean":
        return total / n
    if reduction == "pair_mean":
        return total / max(n_pairs, 1)
    return total


def ref_sw_hs(S, R, alpha, beta, margin=0.0, reduction="sum", tol=1e-6):
    """BCLS Eqs. 18–20 with explicit windows, sets and argmin/argmax."""
    n = S.shape[0]
    M = int(math.floor((2 - alpha) / beta + 1e-9))
    r = R.tolist()
    s = S.detach().tolist()
    total = S.sum() * 0
    for m in range(1, M + 1):
        lo = round(-1 + m * beta, 12) - tol
        hi = lo + alpha
        for i in range(n):
            # image → text: anchor V_i, candidates T_j with r_ij
            pos = [j for j in range(n) if r[i][j] >= hi]
            neg = [k for k in range(n) if r[i][k] < lo]
            if pos and neg:
                jt = min(pos, key=lambda j: s[i][j])  # T~: furthest of the more relevant set
                kh = max(neg, key=lambda k: s[i][k])  # T^: closest of the less relevant set
                total = total + relu(S[i, kh] - S[i, jt] + margin) / M
            # text → image: anchor T_i, candidates V_j with r_ji (transposed relevance)
            pos = [j for j in range(n) if r[j][i] >= hi]
            neg = [k for k in range(n) if r[k][i] < lo]
            if pos and neg:
                jt = min(pos, key=lambda j: s[j][i])
                kh = max(neg, key=lambda k: s[k][i])
                total = total + relu(S[kh, i] - S[jt, i] + margin) / M
    return total / n if reduction == "mean" else total


def value_and_grad(fn, sim):
    s = sim.clone().requires_grad_(True)
    v = fn(s)
    (g,) = torch.autograd.grad(v, s)
    return v.detach(), g


def assert_same(f1, f2, sim):
    v1, g1 = value_and_grad(f1, sim)
    v2, g2 = value_and_grad(f2, sim)
    assert torch.allclose(v1, v2, rtol=1e-11, atol=1e-11), (float(v1), float(v2))
    assert torch.allclose(g1, g2, atol=1e-10), (g1 - g2).abs().max()


@pytest.mark.parametrize(
    "alpha,margin,reduction", [(0.2, 0.0, "sum"), (0.0, 0.0, "sum"), (0.5, 0.1, "mean"), (0.2, 0.0, "pair_mean")]
)
@pytest.mark.parametrize("seed", [0, 1])
def test_kendall_matches_triple_loop(alpha, margin, reduction, seed):
    S, R = random_sim(seed), random_rel(seed)
    loss = losses.build("kendall", alpha=alpha, margin=margin, reduction=reduction)
    assert_same(lambda s: loss(s, R), lambda s: ref_kendall(s, R, alpha, margin, reduction), S)


def test_kendall_with_tied_relevance_and_asymmetric_rel():
    """Quantised relevance (ties, differences exactly α) and a non-symmetric rel (so a wrong
    transpose in the text→image line would be caught)."""
    S = random_sim(3)
    R = random_rel(3, quantize=0.1)
    R = R + torch.triu(torch.full_like(R, 0.1), diagonal=1)  # asymmetric
    R = R.clamp(-1, 1)
    assert not torch.allclose(R, R.T)
    loss = losses.build("kendall", alpha=0.2)
    assert_same(lambda s: loss(s, R), lambda s: ref_kendall(s, R, 0.2), S)


def test_kendall_chunking_and_diagnostics(monkeypatch):
    """Many anchor chunks (forward and backward) give the same value, gradient and counts."""
    S, R = random_sim(4, n=9), random_rel(4, n=9)
    loss = losses.build("kendall", alpha=0.2)
    v_full, g_full = value_and_grad(lambda s: loss(s, R), S)
    d_full = dict(loss.diagnostics)
    monkeypatch.setattr(kendall_mod, "_CHUNK_ELEMENTS", 2 * 81)  # 2 anchors per chunk
    v_chunk, g_chunk = value_and_grad(lambda s: loss(s, R), S)
    assert torch.allclose(v_full, v_chunk, rtol=1e-13) and torch.allclose(g_full, g_chunk, atol=1e-13)
    assert loss.diagnostics == d_full
    # counts from explicit loops
    r, s = R.tolist(), S.tolist()
    constrained = active = 0
    for i in range(9):
        for j in range(9):
            for k in range(9):
                for rj, rk, sj, sk in ((r[i][j], r[i][k], s[i][j], s[i][k]), (r[j][i], r[k][i], s[j][i], s[k][i])):
                    if rj > rk + 0.2:
                        constrained += 1
                        active += sk - sj > 0
    assert d_full["constrained_triples"] == constrained and d_full["active_triples"] == active


def test_kendall_gradcheck_finite_differences():
    """The custom backward against torch's finite-difference gradcheck (independent of the loops)."""
    S, R = random_sim(6, n=5), random_rel(6, n=5)
    loss = losses.build("kendall", alpha=0.1, margin=0.05)
    assert torch.autograd.gradcheck(lambda s: loss(s, R), (S.clone().requires_grad_(True),), eps=1e-7, atol=1e-6)


@pytest.mark.parametrize(
    "alpha,beta,margin,reduction",
    [
        (0.2, 0.1, 0.0, "sum"),
        (0.2, 0.1, 0.0, "mean"),
        (0.3, 0.25, 0.05, "sum"),
        (0.0, 0.2, 0.0, "sum"),
        (0.4, 0.05, 0.0, "sum"),
    ],
)
@pytest.mark.parametrize("seed", [0, 1])
def test_sw_hs_matches_window_loop(alpha, beta, margin, reduction, seed):
    S, R = random_sim(10 + seed), random_rel(10 + seed)
    loss = losses.build("kendall_sw_hs", alpha=alpha, beta=beta, margin=margin, reduction=reduction)
    assert_same(lambda s: loss(s, R), lambda s: ref_sw_hs(s, R, alpha, beta, margin, reduction), S)


def test_sw_hs_quantised_asymmetric_float32_diagonal():
    """Relevance on the 0.1 grid (values exactly on window edges), asymmetric, and a diagonal of
    0.99999994 (a float32 cosine of a vector with itself) which must still count as r = 1."""
    S = random_sim(21)
    R = random_rel(21, quantize=0.1)
    R = (R + torch.triu(torch.full_like(R, 0.1), diagonal=1)).clamp(-1, 1)
    R.fill_diagonal_(float(torch.tensor(0.99999994, dtype=torch.float32)))
    loss = losses.build("kendall_sw_hs")
    assert_same(lambda s: loss(s, R), lambda s: ref_sw_hs(s, R, 0.2, 0.1), S)
    # the top window (l = 0.8, u = 1.0) keeps the positive pair in Pos for every anchor
    assert loss.diagnostics["valid_anchors_per_window_i2t"][-1] > 0


def test_sw_hs_window_layout_and_diagnostics():
    loss = losses.build("kendall_sw_hs", alpha=0.2, beta=0.1)
    assert loss.n_windows == 18  # M = (2 − α)/β
    S, R = random_sim(2), random_rel(2)
    loss(S, R)
    d = loss.diagnostics
    assert d["window_lower_edges"][0] == pytest.approx(-0.9) and d["window_lower_edges"][-1] == pytest.approx(0.8)
    # explicit per-window count of anchors with both sets non-empty (image → text)
    r = R.tolist()
    want = []
    for lo in d["window_lower_edges"]:
        lo_t, hi_t = lo - 1e-6, lo + 0.2 - 1e-6
        want.append(sum(1 for i in range(B) if any(x >= hi_t for x in r[i]) and any(x < lo_t for x in r[i])))
    assert d["valid_anchors_per_window_i2t"] == want
    assert d["windows_used_i2t"] == sum(1 for w in want if w > 0)
    assert d["valid_pairs"] == sum(want) + sum(d["valid_anchors_per_window_t2i"])
    assert 0 <= d["active_pairs"] <= d["valid_pairs"]


def test_sw_hs_hand_computed():
    """B = 2, α = 1.0, β = 0.5 → M = 2 windows: l = −0.5 (u = 0.5) and l = 0 (u = 1).
    rel = [[1, −0.8], [0.3, 1]], sim = [[0.2, 0.6], [0.1, 0.4]].
    i2t anchor 0: candidates r = (1, −0.8): both windows have Pos = {0}, Neg = {1} → 2 × [0.6 − 0.2]_+ = 0.8.
    i2t anchor 1: r = (0.3, 1): window 1: Neg = {r < −0.5} = ∅; window 2: Neg = {r < 0} = ∅ → 0.
    t2i anchor 0 (column 0): r = (1, 0.3), s = (0.2, 0.1): no r < 0 → 0.
    t2i anchor 1 (column 1): r = (−0.8, 1), s = (0.6, 0.4): both windows Pos = {1}, Neg = {0} → 2 × [0.6 − 0.4]_+ = 0.4.
    Total (1/M)·(0.8 + 0.4) = 0.6."""
    S = torch.tensor([[0.2, 0.6], [0.1, 0.4]], dtype=torch.float64)
    R = torch.tensor([[1.0, -0.8], [0.3, 1.0]], dtype=torch.float64)
    loss = losses.build("kendall_sw_hs", alpha=1.0, beta=0.5)
    assert loss.n_windows == 2
    assert float(loss(S, R)) == pytest.approx(0.6, abs=1e-12)


def test_sw_hs_rejects_relevance_outside_range():
    S = random_sim(0)
    with pytest.raises(ValueError, match=r"\[-1, 1\]"):
        losses.build("kendall_sw_hs")(S, random_rel(0) * 3)
    with pytest.raises(ValueError, match="NaN"):
        R = random_rel(0)
        R[0, 1] = float("nan")
        losses.build("kendall")(S, R)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_larger_batches_match_loops(seed):
    """B = 20 (many windows populated, mixed bucket occupancy) and B = 12 for the O(B³) loss."""
    S, R = random_sim(40 + seed, n=20), random_rel(40 + seed, n=20, dim=6)
    sw = losses.build("kendall_sw_hs", beta=0.05)
    assert_same(lambda s: sw(s, R), lambda s: ref_sw_hs(s, R, 0.2, 0.05), S)
    S, R = S[:12, :12].contiguous(), R[:12, :12].contiguous()
    full = losses.build("kendall", alpha=0.2)
    assert_same(lambda s: full(s, R), lambda s: ref_kendall(s, R, 0.2), S)
