"""Pairwise losses against brute-force loops written directly from the papers' equations.

triplet (BCLS Eqs. 1, 12–13), triplet_sn (BCLS Eqs. 14–15), vlc (Unified Eqs. 3 and 4),
unified (Unified Eq. 5). Values and gradients (autograd through the loop vs through the
vectorised loss), float64, random inputs. The loops use plain ``exp``/``log`` and explicit
argmax — none of the vectorised code paths (logsumexp, masks) of the implementation.
"""

from __future__ import annotations

import math

import pytest
import torch

from coherent_itr import losses

B = 7


def random_sim(seed: int, n: int = B) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1


def relu(x):
    return x if x > 0 else x * 0.0


def value_and_grad(fn, sim, *args):
    s = sim.clone().requires_grad_(True)
    v = fn(s, *args)
    (g,) = torch.autograd.grad(v, s)
    return v.detach(), g


def assert_same(loss_fn, ref_fn, sim, *args, tol=1e-10):
    v1, g1 = value_and_grad(loss_fn, sim, *args)
    v2, g2 = value_and_grad(ref_fn, sim, *args)
    assert torch.allclose(v1, v2, rtol=tol, atol=tol), (float(v1), float(v2))
    assert torch.allclose(g1, g2, rtol=1e-8, atol=1e-9), (g1 - g2).abs().max()


def finish(per_i2t, per_t2i, reduction, n, average_directions=False):
    total = sum(per_i2t) + sum(per_t2i)
    if reduction == "mean":
        total = total / n
    if average_directions:
        total = total / 2
    return total


# ---------------------------------------------------------------- references (explicit loops)


def ref_triplet(S, margin, max_violation, reduction):
    """BCLS Eq. 1 (all negatives) or Eqs. 12–13 (hardest negative by explicit argmax)."""
    n = S.shape[0]
    per_i2t, per_t2i = [], []
    for i in range(n):
        if max_violation:
            j_hat = max((j for j in range(n) if j != i), key=lambda j: S.detach()[i, j].item())
            v_hat = max((j for j in range(n) if j != i), key=lambda j: S.detach()[j, i].item())
            per_i2t.append(relu(margin - S[i, i] + S[i, j_hat]))
            per_t2i.append(relu(margin - S[i, i] + S[v_hat, i]))
        else:
            per_i2t.append(sum(relu(S[i, j] - S[i, i] + margin) for j in range(n) if j != i))
            per_t2i.append(sum(relu(S[j, i] - S[i, i] + margin) for j in range(n) if j != i))
    return finish(per_i2t, per_t2i, reduction, n)


def ref_triplet_sn(S, margin, gamma, reduction, R=None):
    """BCLS Eqs. 14–15; negatives j ≠ i, and also r_ij < 1 (− 1e-6 tolerance) when R is given."""
    n = S.shape[0]
    per_i2t, per_t2i = [], []
    for i in range(n):
        neg_i2t = [j for j in range(n) if j != i and (R is None or float(R[i, j]) < 1.0 - 1e-6)]
        neg_t2i = [j for j in range(n) if j != i and (R is None or float(R[j, i]) < 1.0 - 1e-6)]
        if neg_i2t:
            s_v = torch.log(sum(torch.exp(gamma * S[i, j]) for j in neg_i2t)) / gamma
            per_i2t.append(relu(s_v - S[i, i] + margin))
        if neg_t2i:
            s_t = torch.log(sum(torch.exp(gamma * S[j, i]) for j in neg_t2i)) / gamma
            per_t2i.append(relu(s_t - S[i, i] + margin))
    return finish(per_i2t, per_t2i, reduction, n)


def ref_vlc_eq3(S, gamma, reduction, average_directions=False):
    """Unified Eq. 3: −Σ_i [log(e^{γ s_ii}/Σ_j e^{γ s_ij}) + log(e^{γ s_ii}/Σ_j e^{γ s_ji})]."""
    n = S.shape[0]
    per_i2t = [
        -torch.log(torch.exp(gamma * S[i, i]) / sum(torch.exp(gamma * S[i, j]) for j in range(n))) for i in range(n)
    ]
    per_t2i = [
        -torch.log(torch.exp(gamma * S[i, i]) / sum(torch.exp(gamma * S[j, i]) for j in range(n))) for i in range(n)
    ]
    return finish(per_i2t, per_t2i, reduction, n, average_directions)


def ref_vlc_eq4(S, gamma, reduction, average_directions=False):
    """Unified Eq. 4: Σ_i [log(1 + Σ_{j≠i} e^{γ(s_ij − s_ii)}) + log(1 + Σ_{j≠i} e^{γ(s_ji − s_ii)})]."""
    n = S.shape[0]
    per_i2t = [torch.log(1 + sum(torch.exp(gamma * (S[i, j] - S[i, i])) for j in range(n) if j != i)) for i in range(n)]
    per_t2i = [torch.log(1 + sum(torch.exp(gamma * (S[j, i] - S[i, i])) for j in range(n) if j != i)) for i in range(n)]
    return finish(per_i2t, per_t2i, reduction, n, average_directions)


def ref_unified(S, margin, gamma, reduction, average_directions=False):
    """Unified Eq. 5."""
    n = S.shape[0]
    per_i2t = [
        torch.log(1 + sum(torch.exp(gamma * (S[i, j] - S[i, i] + margin)) for j in range(n) if j != i)) / gamma
        for i in range(n)
    ]
    per_t2i = [
        torch.log(1 + sum(torch.exp(gamma * (S[j, i] - S[i, i] + margin)) for j in range(n) if j != i)) / gamma
        for i in range(n)
    ]
    return finish(per_i2t, per_t2i, reduction, n, average_directions)


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("max_violation", [True, False])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("seed", [0, 1])
def test_triplet_matches_loop(max_violation, reduction, seed):
    loss = losses.build("triplet", margin=0.2, max_violation=max_violation, reduction=reduction)
    assert_same(loss, lambda s: ref_triplet(s, 0.2, max_violation, reduction), random_sim(seed))


@pytest.mark.parametrize("reduction", ["sum", "mean"])
@pytest.mark.parametrize("gamma", [1.0, 10.0, 50.0])
def test_triplet_sn_matches_loop(reduction, gamma):
    loss = losses.build("triplet_sn", margin=0.2, gamma=gamma, reduction=reduction)
    assert_same(loss, lambda s: ref_triplet_sn(s, 0.2, gamma, reduction), random_sim(int(gamma)))


def test_triplet_sn_relevance_negatives_match_loop():
    """Eqs. 13/15 literally: negatives are {j : r_ij < 1}; duplicates (r = 1) are not negatives,
    and an anchor whose row (or column) has no r < 1 contributes nothing."""
    S = random_sim(5)
    R = torch.rand(B, B, generator=torch.Generator().manual_seed(6), dtype=torch.float64) * 1.6 - 0.8
    R.fill_diagonal_(1.0)
    R[0, 3] = R[3, 0] = 1.0  # a duplicate caption pair
    R[4, 5] = 0.99999994  # a float32 cosine of identical captions: also not a negative
    R[1, 1] = 0.99999994  # a float32 diagonal: the positive is never its own negative
    R[2, :] = 1.0  # image 2: every caption counts as positive → empty negative set
    loss = losses.build("triplet_sn", gamma=20.0, negatives="relevance")
    assert loss.requires_relevance
    assert_same(lambda s: loss(s, R), lambda s: ref_triplet_sn(s, 0.2, 20.0, "sum", R), S)
    assert loss.diagnostics["empty_negative_rows"] == 1.0
    # and it differs from the off-diagonal variant on this input (the test can fail)
    off = losses.build("triplet_sn", gamma=20.0)
    assert not torch.allclose(off(S), loss(S, R))


@pytest.mark.parametrize("reduction,average", [("sum", False), ("mean", False), ("mean", True)])
@pytest.mark.parametrize("gamma", [1.0, 10.0, 50.0])
def test_vlc_matches_eq3_and_eq4(reduction, average, gamma):
    S = random_sim(10 + int(gamma))
    loss = losses.build("vlc", gamma=gamma, reduction=reduction, average_directions=average)
    assert_same(loss, lambda s: ref_vlc_eq3(s, gamma, reduction, average), S)
    assert_same(loss, lambda s: ref_vlc_eq4(s, gamma, reduction, average), S)


def test_vlc_equals_symmetric_cross_entropy():
    """Eq. 3 is the CLIP/InfoNCE loss: cross-entropy of γ·sim against the diagonal, both directions."""
    S = random_sim(3)
    target = torch.arange(B)
    ce = torch.nn.functional.cross_entropy(20 * S, target, reduction="sum") + torch.nn.functional.cross_entropy(
        20 * S.T, target, reduction="sum"
    )
    assert torch.allclose(losses.build("vlc", gamma=20.0)(S), ce, rtol=1e-12)


@pytest.mark.parametrize("reduction,average", [("sum", False), ("mean", False), ("mean", True)])
@pytest.mark.parametrize("margin,gamma", [(0.2, 50.0), (0.0, 10.0), (0.5, 1.0), (0.2, 60.0)])
def test_unified_matches_loop(reduction, average, margin, gamma):
    S = random_sim(20 + int(gamma))
    loss = losses.build("unified", margin=margin, gamma=gamma, reduction=reduction, average_directions=average)
    assert_same(loss, lambda s: ref_unified(s, margin, gamma, reduction, average), S)


def test_unified_author_variant_is_a_quarter_over_b_of_paper_sum():
    """Author code: mean over anchors and (i2t + t2i)/2 → paper value / (2B)."""
    S = random_sim(4)
    paper = losses.build("unified")(S)
    author = losses.build("unified", reduction="mean", average_directions=True)(S)
    assert math.isclose(float(author), float(paper) / (2 * B), rel_tol=1e-12)


def test_finite_difference_gradients_of_soft_losses():
    """Independent of autograd: central finite differences of the scalar loss."""
    S = random_sim(8, n=5)
    for name, params in [("triplet_sn", {"gamma": 20.0}), ("unified", {"gamma": 20.0}), ("vlc", {"gamma": 5.0})]:
        loss = losses.build(name, **params)
        _, g = value_and_grad(loss, S)
        eps = 1e-6
        fd = torch.zeros_like(S)
        for a in range(5):
            for b in range(5):
                d = torch.zeros_like(S)
                d[a, b] = eps
                fd[a, b] = (loss(S + d) - loss(S - d)) / (2 * eps)
        assert torch.allclose(g, fd, atol=1e-6), (name, (g - fd).abs().max())


def test_hand_computed_tiny_case():
    """B = 2 by hand: s = [[0.5, 0.4], [0.1, 0.9]], m = 0.2.
    i2t: [0.4 − 0.5 + 0.2]_+ = 0.1, [0.1 − 0.9 + 0.2]_+ = 0;  t2i: [0.1 − 0.5 + 0.2]_+ = 0, [0.4 − 0.9 + 0.2]_+ = 0.
    With one negative, Triplet-SN equals Triplet-HN for any γ; Unified(γ=1) = Σ log(1 + e^{x})."""
    S = torch.tensor([[0.5, 0.4], [0.1, 0.9]], dtype=torch.float64)
    assert math.isclose(float(losses.build("triplet")(S)), 0.1, abs_tol=1e-12)
    assert math.isclose(float(losses.build("triplet_sn", gamma=3.0)(S)), 0.1, abs_tol=1e-12)
    xs = [0.1, -0.6, -0.2, -0.3]
    want = sum(math.log1p(math.exp(x)) for x in xs)
    assert math.isclose(float(losses.build("unified", gamma=1.0)(S)), want, rel_tol=1e-12)
