"""Mathematical identities (claim U6 and BCLS Eqs. 10–11, 16), numerical robustness, permutation
equivariance, compositions, and the registry's / inputs' error paths for the part-A losses."""

from __future__ import annotations

import math

import pytest
import torch

from coherent_itr import losses

B = 8


def random_sim(seed: int, n: int = B, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.rand(n, n, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)


def random_rel(seed: int, n: int = B, dtype=torch.float64) -> torch.Tensor:
    g = torch.Generator().manual_seed(500 + seed)
    e = torch.nn.functional.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    r = (e @ e.T).clamp(-1, 1)
    r.fill_diagonal_(1.0)
    return r.to(dtype)


def grad_of(loss, sim, rel=None):
    s = sim.clone().requires_grad_(True)
    v = loss(s, rel)
    (g,) = torch.autograd.grad(v, s)
    return v.detach(), g


def hinge_arguments(S, margin):
    """s_ij − s_ii + m of the hardest negative per anchor and direction (for 'away from the kink' checks)."""
    off = ~torch.eye(S.shape[0], dtype=torch.bool)
    pos = S.diagonal()
    i2t = S.masked_fill(~off, -math.inf).amax(1) - pos + margin
    t2i = S.masked_fill(~off, -math.inf).amax(0) - pos + margin
    return torch.cat([i2t, t2i])


# ------------------------------------------------------------------ claim U6 identities


def test_unified_tends_to_triplet_hn():
    """Unified Eqs. 6, 21: 0 ≤ L_Unified − L_Triplet-HN ≤ 2·B·log(B)/γ, and → 0 with the gradients."""
    S = random_sim(0)
    assert hinge_arguments(S, 0.2).abs().min() > 1e-2  # the limit of the gradient needs no kink
    hn_val, hn_grad = grad_of(losses.build("triplet", margin=0.2), S)
    gaps = []
    for gamma in (10.0, 100.0, 1e3, 1e4, 1e5):
        u_val, u_grad = grad_of(losses.build("unified", margin=0.2, gamma=gamma), S)
        gap = float(u_val - hn_val)
        assert -1e-12 <= gap <= 2 * B * math.log(B) / gamma + 1e-12, (gamma, gap)
        gaps.append(gap)
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-3
    assert torch.allclose(u_grad, hn_grad, atol=1e-8)  # γ = 1e5


@pytest.mark.parametrize("gamma", [1.0, 10.0, 50.0, 100.0])
def test_gamma_times_unified_m0_equals_vlc(gamma):
    """Unified Eqs. 7, 23: L_VLC = γ · L_Unified(m = 0), values and gradients."""
    S = random_sim(1)
    for red, avg in [("sum", False), ("mean", True)]:
        u_val, u_grad = grad_of(
            losses.build("unified", margin=0.0, gamma=gamma, reduction=red, average_directions=avg), S
        )
        v_val, v_grad = grad_of(losses.build("vlc", gamma=gamma, reduction=red, average_directions=avg), S)
        assert torch.allclose(gamma * u_val, v_val, rtol=1e-12)
        assert torch.allclose(gamma * u_grad, v_grad, rtol=1e-10, atol=1e-12)
    # and with m > 0 it is not VLC (the identity test can fail)
    assert not torch.allclose(
        gamma * losses.build("unified", margin=0.2, gamma=gamma)(S), losses.build("vlc", gamma=gamma)(S)
    )


def test_triplet_sn_tends_to_triplet_hn():
    """BCLS Eq. 16: 0 ≤ L_T-SN − L_T-HN ≤ 2·B·log(B − 1)/γ; gradients converge too."""
    S = random_sim(2)
    assert hinge_arguments(S, 0.2).abs().min() > 1e-2
    for red in ("sum", "mean"):
        hn_val, hn_grad = grad_of(losses.build("triplet", margin=0.2, reduction=red), S)
        bound_scale = 1.0 if red == "sum" else 1.0 / B
        for gamma in (10.0, 50.0, 1e3, 1e4, 1e5):
            sn_val, sn_grad = grad_of(losses.build("triplet_sn", margin=0.2, gamma=gamma, reduction=red), S)
            gap = float(sn_val - hn_val)
            assert -1e-12 <= gap <= bound_scale * 2 * B * math.log(B - 1) / gamma + 1e-12, (red, gamma, gap)
        assert torch.allclose(sn_grad, hn_grad, atol=1e-8)


@pytest.mark.parametrize("alpha", [0.0, 0.2, 0.5])
def test_kendall_with_binary_labels_is_triplet_m0(alpha):
    """BCLS Eqs. 10–11: with binary labels (r_ii = 1, r_ij = 0 for j ≠ i) the only constrained (j, k)
    have j = i, so L_K = Σ_i Σ_{k: r_ik < 1} [s_ik − s_ii]_+ + (t2i) = L_T(m = 0), the all-negatives
    triplet loss with zero margin (any α < 1)."""
    S = random_sim(3)
    R = torch.eye(B, dtype=torch.float64)
    k_val, k_grad = grad_of(losses.build("kendall", alpha=alpha), S, R)
    t_val, t_grad = grad_of(losses.build("triplet", margin=0.0, max_violation=False), S)
    assert torch.allclose(k_val, t_val, rtol=1e-12)
    assert torch.allclose(k_grad, t_grad, atol=1e-12)


def test_kendall_restricted_to_j_equals_i_on_continuous_labels():
    """BCLS Eq. 11 on continuous labels: the j = i slice of Eq. 4 (α = 0; r_ii = 1 > r_ik) is L_T(m = 0).
    The j = i slice is isolated by subtracting Kendall on rel with the diagonal lowered below
    every other value (then the positive is the *least* relevant candidate and no (j = i, k) pair is
    constrained; all other (j, k) pairs keep their order) — a check that uses only public losses."""
    S = random_sim(4)
    R = random_rel(4)
    full = losses.build("kendall", alpha=0.0)(S, R)
    R_low = R.clone()
    R_low.fill_diagonal_(-2.0)
    off_slice = losses.build("kendall", alpha=0.0)(S, R_low)
    # the (j, k = i) pairs that R_low adds: Σ_i Σ_{j≠i} [s_ii − s_ij]_+ (+ t2i), the triplet with the roles swapped
    added = losses.build("triplet", margin=0.0, max_violation=False)(-S)  # [−s_ij + s_ii]_+
    j_eq_i = full - (off_slice - added)
    triplet_m0 = losses.build("triplet", margin=0.0, max_violation=False)(S)
    assert torch.allclose(j_eq_i, triplet_m0, rtol=1e-12)


def test_sw_hs_with_binary_labels_is_scaled_triplet_hn_m0():
    """With r ∈ {0, 1} (identity), window m has Pos = {i}, Neg = {k ≠ i} iff 0 < l_m ≤ 1 − α, i.e. the
    8 windows l = 0.1 … 0.8 of the 18 (α = 0.2, β = 0.1): L = (8/18) · Triplet-HN(m = 0)."""
    S = random_sim(5)
    R = torch.eye(B, dtype=torch.float64)
    k_val, k_grad = grad_of(losses.build("kendall_sw_hs"), S, R)
    t_val, t_grad = grad_of(losses.build("triplet", margin=0.0, max_violation=True), S)
    assert torch.allclose(k_val, 8 / 18 * t_val, rtol=1e-12)
    assert torch.allclose(k_grad, 8 / 18 * t_grad, atol=1e-12)


# ------------------------------------------------------------------ float32 robustness

SOFT = [("unified", {}), ("vlc", {}), ("triplet_sn", {}), ("triplet_sn", {"negatives": "relevance"})]


@pytest.mark.parametrize("name,extra", SOFT)
@pytest.mark.parametrize("gamma", [1.0, 50.0, 1e3, 1e4])
def test_float32_finite_for_large_gamma(name, extra, gamma):
    """Finite values and gradients in float32 up to γ = 1e4, for spread, collapsed (all equal) and
    extreme (±1) similarity matrices; the float32 value agrees with float64."""
    rel = random_rel(0, dtype=torch.float32)
    loss = losses.build(name, gamma=gamma, **extra)
    cases = [random_sim(7, dtype=torch.float32), torch.full((B, B), 0.7), torch.sign(random_sim(8)).float()]
    for S in cases:
        v, g = grad_of(loss, S, rel)
        assert torch.isfinite(v) and torch.isfinite(g).all(), (name, gamma, S[0, :3])
        v64 = loss(S.double(), rel.double())
        assert math.isclose(float(v), float(v64), rel_tol=1e-4, abs_tol=1e-4 * max(1.0, gamma) * 1e-3 + 1e-5)


@pytest.mark.parametrize("name", ["kendall", "kendall_sw_hs", "bcls", "triplet"])
def test_float32_finite_other_losses(name):
    for S in (random_sim(9, dtype=torch.float32), torch.full((B, B), 0.3)):
        v, g = grad_of(losses.build(name), S, random_rel(1, dtype=torch.float32))
        assert torch.isfinite(v) and torch.isfinite(g).all()


# ------------------------------------------------------------------ permutation equivariance

ALL_MINE = [
    ("triplet", {}),
    ("triplet", {"max_violation": False}),
    ("triplet_sn", {}),
    ("triplet_sn", {"negatives": "relevance"}),
    ("vlc", {}),
    ("unified", {}),
    ("unified", {"reduction": "mean", "average_directions": True}),
    ("kendall", {}),
    ("kendall", {"reduction": "pair_mean"}),
    ("kendall_sw_hs", {}),
    ("bcls", {}),
    ("vsepp", {}),
    ("weighted_sum", {"terms": [{"name": "unified", "weight": 0.5}, {"name": "kendall", "weight": 0.1}]}),
]


@pytest.mark.parametrize("name,params", ALL_MINE)
def test_permutation_equivariance(name, params):
    """Reordering the batch (same permutation of images and captions) leaves the loss unchanged and
    permutes its gradient."""
    S, R = random_sim(11), random_rel(11)
    p = torch.randperm(B, generator=torch.Generator().manual_seed(3))
    loss = losses.build(name, **params)
    v, g = grad_of(loss, S, R)
    vp, gp = grad_of(loss, S[p][:, p], R[p][:, p])
    assert torch.allclose(v, vp, rtol=1e-12)
    assert torch.allclose(g[p][:, p], gp, atol=1e-12)


# ------------------------------------------------------------------ compositions


def test_bcls_is_the_weighted_sum_of_its_terms():
    S, R = random_sim(12), random_rel(12)
    crit = losses.build(
        "bcls", weight_triplet=0.7, weight_kendall=2.0, triplet_params={"gamma": 30.0}, kendall_params={"beta": 0.05}
    )
    want = 0.7 * losses.build("triplet_sn", gamma=30.0)(S) + 2.0 * losses.build("kendall_sw_hs", beta=0.05)(S, R)
    assert torch.allclose(crit(S, R), want, rtol=1e-12)
    d = crit.diagnostics
    assert d["kendall_sw_hs/n_windows"] == 36.0 and "triplet_sn/active_fraction_i2t" in d
    assert math.isclose(d["triplet_sn/value"], float(losses.build("triplet_sn", gamma=30.0)(S)), rel_tol=1e-12)
    assert crit.requires_relevance


def test_bcls_ablations():
    S, R = random_sim(13), random_rel(13)
    no_k = losses.build("bcls", weight_kendall=0.0)
    assert not no_k.requires_relevance  # w/o K-SW-HS: no pseudo labels needed
    assert torch.allclose(no_k(S), losses.build("triplet_sn")(S))
    full = losses.build("bcls", kendall="kendall")  # w/o SW-HS: Eq. 17
    assert torch.allclose(full(S, R), losses.build("triplet_sn")(S) + losses.build("kendall")(S, R))
    hn = losses.build("bcls", triplet="triplet", weight_kendall=0.0)
    assert torch.allclose(hn(S), losses.build("triplet")(S))


def test_weighted_sum_nested_and_repeated_terms():
    S, R = random_sim(14), random_rel(14)
    crit = losses.build(
        "weighted_sum",
        terms=[
            {"name": "triplet", "weight": 1.0, "params": {"margin": 0.1}},
            {"name": "triplet", "weight": 0.5},
            {"name": "bcls", "weight": 0.25},
        ],
    )
    want = losses.build("triplet", margin=0.1)(S) + 0.5 * losses.build("triplet")(S) + 0.25 * losses.build("bcls")(S, R)
    assert torch.allclose(crit(S, R), want, rtol=1e-12)
    assert "triplet#2/value" in crit.diagnostics and "bcls/kendall_sw_hs/n_windows" in crit.diagnostics


def test_vsepp_is_triplet_hn():
    S = random_sim(15)
    assert torch.allclose(losses.build("vsepp")(S), losses.build("triplet", max_violation=True)(S))


def test_listwise_composition():
    """Listwise Eq. 22: mean-reduced Triplet-HN (Eqs. 1–3) + S-NDCG, when ``sndcg`` is registered;
    otherwise construction names the missing component."""
    S, R = random_sim(16), (random_rel(16) + 1) / 2
    if "sndcg" not in losses.available():
        with pytest.raises(ValueError, match="sndcg"):
            losses.build("listwise")
        return
    crit = losses.build("listwise")
    want = losses.build("triplet", reduction="mean")(S) + losses.build("sndcg")(S, R)
    assert torch.allclose(crit(S, R), want, rtol=1e-10)


def test_cvsepp_composition():
    if "ladder" not in losses.available():
        with pytest.raises(ValueError, match="ladder"):
            losses.build("cvsepp")
        return
    S, R = random_sim(17), random_rel(17)
    assert torch.allclose(losses.build("cvsepp")(S, R), losses.build("ladder")(S, R), rtol=1e-12)


# ------------------------------------------------------------------ errors


def test_registry_errors_list_valid_choices():
    with pytest.raises(ValueError, match="valid names:.*kendall_sw_hs.*unified"):
        losses.build("kendal")
    with pytest.raises(ValueError, match=r"valid parameters: margin=0\.2, gamma=50\.0"):
        losses.build("unified", temperature=0.01)
    with pytest.raises(ValueError, match="valid parameters: alpha=0.2, beta=0.1"):
        losses.build("kendall_sw_hs", stride=0.1)
    with pytest.raises(ValueError, match="terms"):
        losses.build("weighted_sum")


@pytest.mark.parametrize(
    "name,params,match",
    [
        ("unified", {"gamma": 0.0}, "gamma"),
        ("unified", {"gamma": float("inf")}, "gamma"),
        ("unified", {"margin": -0.1}, "margin"),
        ("unified", {"reduction": "avg"}, "reduction"),
        ("vlc", {"gamma": -1.0}, "gamma"),
        ("triplet_sn", {"gamma": 0.0}, "gamma"),
        ("triplet_sn", {"negatives": "all"}, "negatives"),
        ("kendall", {"alpha": -0.1}, "alpha"),
        ("kendall", {"reduction": "max"}, "reduction"),
        ("kendall_sw_hs", {"beta": 0.0}, "beta"),
        ("kendall_sw_hs", {"alpha": 2.0}, "alpha"),
        ("kendall_sw_hs", {"alpha": 1.5, "beta": 1.0}, "no window"),
        ("bcls", {"weight_kendall": -1.0}, "weight_kendall"),
        ("bcls", {"kendall": "ladder"}, "kendall"),
        ("bcls", {"kendall_params": {"gamma": 3}}, "unknown parameter"),
        ("bcls", {"weight_triplet": 0.0, "weight_kendall": 0.0}, "weight 0"),
        ("weighted_sum", {"terms": []}, "non-empty"),
        ("weighted_sum", {"terms": [{"weight": 1.0}]}, "name"),
        ("weighted_sum", {"terms": [{"name": "triplet", "wieght": 1.0}]}, "unknown key"),
        ("weighted_sum", {"terms": [{"name": "nope"}]}, "valid names"),
        ("weighted_sum", {"terms": [{"name": "triplet", "weight": float("nan")}]}, "weight"),
        ("weighted_sum", {"terms": [{"name": "triplet", "params": [0.2]}]}, "params"),
    ],
)
def test_bad_parameters_raise(name, params, match):
    with pytest.raises(ValueError, match=match):
        losses.build(name, **params)


@pytest.mark.parametrize("name", ["triplet_sn", "vlc", "unified", "kendall", "kendall_sw_hs", "bcls"])
def test_bad_shapes_raise(name):
    loss = losses.build(name)
    R = random_rel(0)
    with pytest.raises(ValueError, match="square"):
        loss(torch.zeros(4, 5, dtype=torch.float64), R[:4, :5])
    with pytest.raises(ValueError, match="square"):
        loss(torch.zeros(4, dtype=torch.float64), R[0, :4])
    with pytest.raises(ValueError, match="at least 2"):
        loss(torch.zeros(1, 1, dtype=torch.float64), R[:1, :1])
    if loss.requires_relevance:
        with pytest.raises(ValueError, match="relevance"):
            loss(random_sim(0))
        with pytest.raises(ValueError, match="rel shape"):
            loss(random_sim(0), R[:5, :5])
