"""Mathematical identities (claim U6 and BCLS Eqs. 10–11, 16), numerical robustness, permutation
equivariance, compositions, and the registry's / inputs' error paths for the part-A losses."""

from __future__ import annotations

import math

import pytest
import torch

from coherent_itr import losses
from coherent_itr.losses import identities as ident

B = 8


def random_sim(seed: int, n: int = B, dtype=torch.float64) -> torch.Tensor:
    return ident.random_sim(seed, n, dtype)


def random_rel(seed: int, n: int = B, dtype=torch.float64) -> torch.Tensor:
    """Relevance from random 4-d unit embeddings (a PSD cosine matrix), r_ii = 1 — another distribution than
    :func:`coherent_itr.losses.identities.random_rel`, for the robustness and equivariance tests."""
    g = torch.Generator().manual_seed(500 + seed)
    e = torch.nn.functional.normalize(torch.randn(n, 4, generator=g, dtype=torch.float64), dim=1)
    r = (e @ e.T).clamp(-1, 1)
    r.fill_diagonal_(1.0)
    return r.to(dtype)


def grad_of(loss, sim, rel=None):
    return ident.value_and_grad(lambda s: loss(s, rel), sim)


def hinge_arguments(S, margin):
    """s_ij − s_ii + m of the hardest negative per anchor and direction (for 'away from the kink' checks)."""
    off = ~torch.eye(S.shape[0], dtype=torch.bool)
    pos = S.diagonal()
    i2t = S.masked_fill(~off, -math.inf).amax(1) - pos + margin
    t2i = S.masked_fill(~off, -math.inf).amax(0) - pos + margin
    return torch.cat([i2t, t2i])


# ------------------------------------------------------------------ loops written from the equations
# Values only (python floats), both directions, sum over anchors; the checks of
# coherent_itr.losses.identities are compared with these, not only with each other.


def _log1p_sum_exp(xs):
    """log(1 + Σ e^x), stable for large γ·x (max-shifted)."""
    mx = max([0.0, *xs])
    return mx + math.log(math.exp(-mx) + sum(math.exp(x - mx) for x in xs))


def _both(S, per_anchor):
    """Σ_i per_anchor(row i of S, i) + Σ_i per_anchor(column i of S, i)."""
    s = S.tolist()
    n = len(s)
    cols = [[s[j][i] for j in range(n)] for i in range(n)]
    return sum(per_anchor(s[i], i) for i in range(n)) + sum(per_anchor(cols[i], i) for i in range(n))


def loop_triplet(S, m, hard):
    """BCLS Eq. 1 (all negatives: Σ_{j≠i} [m + s_ij − s_ii]_+) or Eqs. 12–13 (hardest negative: max_{j≠i})."""

    def anchor(row, i):
        hinges = [max(0.0, m + row[j] - row[i]) for j in range(len(row)) if j != i]
        return max(hinges) if hard else sum(hinges)

    return _both(S, anchor)


def loop_unified(S, m, gamma):
    """Unified Eq. 5: (1/γ) Σ_i log(1 + Σ_{j≠i} e^{γ(s_ij − s_ii + m)}) (+ text→image)."""
    return _both(
        S, lambda row, i: _log1p_sum_exp([gamma * (row[j] - row[i] + m) for j in range(len(row)) if j != i]) / gamma
    )


def loop_vlc_eq3(S, gamma):
    """Unified Eq. 3: −Σ_i log(e^{γ s_ii} / Σ_j e^{γ s_ij}) (+ text→image)."""
    return _both(S, lambda row, i: -math.log(math.exp(gamma * row[i]) / sum(math.exp(gamma * x) for x in row)))


def loop_triplet_sn(S, m, gamma):
    """BCLS Eq. 14: Σ_i [(1/γ) log Σ_{j≠i} e^{γ s_ij} − s_ii + m]_+ (+ text→image)."""

    def anchor(row, i):
        neg = [gamma * row[j] for j in range(len(row)) if j != i]
        mx = max(neg)
        soft = (mx + math.log(sum(math.exp(x - mx) for x in neg))) / gamma
        return max(0.0, soft - row[i] + m)

    return _both(S, anchor)


def loop_kendall(S, R, alpha, j_eq_i_only=False):
    """BCLS Eq. 17 (Eq. 4 at α = 0): Σ_i Σ_j Σ_k 1(r_ij > r_ik + α)[s_ik − s_ij]_+ (+ text→image);
    ``j_eq_i_only``: the j = i slice (Eqs. 10–11)."""
    s, r = S.tolist(), R.tolist()
    n, total = len(s), 0.0
    for i in range(n):
        for j in [i] if j_eq_i_only else range(n):
            for k in range(n):
                if r[i][j] > r[i][k] + alpha:
                    total += max(0.0, s[i][k] - s[i][j])
                if r[j][i] > r[k][i] + alpha:
                    total += max(0.0, s[k][i] - s[j][i])
    return total


def test_loops_match_the_library_losses():
    """The loops above are the losses of the library (so comparing the identity checks with them is a
    comparison with the equations)."""
    S, R = random_sim(20), ident.random_rel(20, B)
    pairs = [
        (loop_triplet(S, 0.2, True), losses.build("triplet", margin=0.2)(S)),
        (loop_triplet(S, 0.0, False), losses.build("triplet", margin=0.0, max_violation=False)(S)),
        (loop_unified(S, 0.2, 60.0), losses.build("unified", margin=0.2, gamma=60.0)(S)),
        (loop_vlc_eq3(S, 10.0), losses.build("vlc", gamma=10.0)(S)),
        (loop_triplet_sn(S, 0.2, 50.0), losses.build("triplet_sn", margin=0.2, gamma=50.0)(S)),
        (loop_kendall(S, R, 0.0), losses.build("kendall", alpha=0.0)(S, R)),
    ]
    for want, got in pairs:
        assert math.isclose(float(got), want, rel_tol=1e-12), (float(got), want)


# ------------------------------------------------------------------ the shared helpers


def test_random_matrices_and_deviations_are_what_they_say():
    S, R = ident.random_sim(3, 32), ident.random_rel(3, 32)
    assert S.dtype == torch.float64 and S.shape == (32, 32) and S.min() >= -1 and S.max() <= 1 and S.std() > 0.4
    off = R[~torch.eye(32, dtype=torch.bool)]
    assert (R.diagonal() == 1).all() and off.min() >= -0.2 and off.max() <= 0.9
    assert not torch.equal(ident.random_sim(3, 32), ident.random_sim(4, 32))
    assert ident.rel_dev(1.01, 1.0) == abs(1.01 - 1.0) / 1.0 and ident.rel_dev(0.0, 0.0) == 0.0
    ga, gb = torch.tensor([[1.0, -3.0]]), torch.tensor([[1.5, -2.0]])
    assert ident.grad_dev(ga, gb) == 1.0 / 2.0  # max|ga − gb| = 1, max|gb| = 2


def test_compare_reports_a_planted_difference():
    """A check is able to fail: b = 1.01·a gives value and gradient deviations of 0.01/1.01."""
    S = random_sim(21)
    a = losses.build("unified", margin=0.2, gamma=10.0)
    row = ident.compare("planted", lambda s: a(s), lambda s: 1.01 * a(s), S, gamma=10.0)
    assert row["identity"] == "planted" and row["gamma"] == 10.0
    assert math.isclose(row["gap"], -0.01 * loop_unified(S, 0.2, 10.0), rel_tol=1e-9)
    assert math.isclose(row["value_dev"], 0.01 / 1.01, rel_tol=1e-9)
    assert math.isclose(row["grad_dev"], 0.01 / 1.01, rel_tol=1e-9)


# ------------------------------------------------------------------ claim U6 identities


def test_unified_tends_to_triplet_hn():
    """Unified Eqs. 6, 21: 0 ≤ L_Unified − L_Triplet-HN ≤ 2·B·log(B)/γ, and → 0 with the gradients."""
    S = random_sim(0)
    assert hinge_arguments(S, 0.2).abs().min() > 1e-2  # the limit of the gradient needs no kink
    hn_val, hn_grad = grad_of(losses.build("triplet", margin=0.2), S)
    gaps = []
    for gamma in (10.0, 100.0, 1e3, 1e4, 1e5):
        row = ident.unified_vs_triplet_hn(S, gamma)
        want = loop_unified(S, 0.2, gamma) - loop_triplet(S, 0.2, hard=True)
        assert math.isclose(row["gap"], want, rel_tol=1e-9, abs_tol=1e-11), (gamma, row["gap"], want)
        assert row["bound"] == 2 * B * math.log(B) / gamma and row["identity"] == "Unified(m=0.2, γ) → Triplet-HN"
        assert -1e-12 <= row["gap"] <= row["bound"] + 1e-12, (gamma, row["gap"])
        gaps.append(row["gap"])
    assert gaps == sorted(gaps, reverse=True) and gaps[-1] < 1e-3
    u_val, u_grad = grad_of(losses.build("unified", margin=0.2, gamma=1e5), S)
    assert torch.allclose(u_grad, hn_grad, atol=1e-8)
    assert row["grad_dev"] < 1e-7 and math.isclose(row["value_dev"], row["gap"] / float(hn_val), rel_tol=1e-9)


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
    # the equations themselves: γ · Eq. 5 (m = 0) = Eq. 3
    assert math.isclose(gamma * loop_unified(S, 0.0, gamma), loop_vlc_eq3(S, gamma), rel_tol=1e-12)
    row = ident.gamma_unified_m0_vs_vlc(S, gamma)
    assert abs(row["gap"]) <= 1e-12 * loop_vlc_eq3(S, gamma) and row["gamma"] == gamma
    assert row["value_dev"] < 1e-12 and row["grad_dev"] < 1e-10
    # and with m > 0 it is not VLC (the identity test can fail)
    assert not torch.allclose(
        gamma * losses.build("unified", margin=0.2, gamma=gamma)(S), losses.build("vlc", gamma=gamma)(S)
    )
    wrong = ident.compare(
        "m=0.2",
        lambda s: gamma * losses.build("unified", margin=0.2, gamma=gamma)(s),
        losses.build("vlc", gamma=gamma),
        S,
    )
    assert math.isclose(wrong["gap"], gamma * loop_unified(S, 0.2, gamma) - loop_vlc_eq3(S, gamma), rel_tol=1e-9)
    assert wrong["value_dev"] > 1e-3


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
    for gamma in (10.0, 50.0, 1e3, 1e5):
        row = ident.triplet_sn_vs_triplet_hn(S, gamma)
        want = loop_triplet_sn(S, 0.2, gamma) - loop_triplet(S, 0.2, hard=True)
        assert math.isclose(row["gap"], want, rel_tol=1e-9, abs_tol=1e-11), (gamma, row["gap"], want)
        assert row["bound"] == 2 * B * math.log(B - 1) / gamma and 0 <= row["gap"] <= row["bound"]


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
    assert math.isclose(loop_kendall(S, R, alpha), loop_triplet(S, 0.0, hard=False), rel_tol=1e-12)
    row = ident.kendall_binary_vs_triplet_m0(S, alpha)
    assert row["identity"] == f"Kendall(binary r, α={alpha:g}) = Triplet(all neg., m=0)"
    assert abs(row["gap"]) < 1e-12 * loop_triplet(S, 0.0, hard=False) and row["grad_dev"] < 1e-12


def test_kendall_restricted_to_j_equals_i_on_continuous_labels():
    """BCLS Eq. 11 on continuous labels: the j = i slice of Eq. 4 (α = 0; r_ii = 1 > r_ik) is L_T(m = 0).
    The shared check isolates the slice from public losses only (Kendall on rel with the diagonal lowered
    below every other value, see :func:`coherent_itr.losses.identities.kendall_j_eq_i`); here it is compared
    with the j = i terms of Eq. 4 written out as a loop."""
    for R in (random_rel(4), ident.random_rel(4, B)):
        S = random_sim(4)
        j_eq_i = float(ident.kendall_j_eq_i(S, R))
        assert math.isclose(j_eq_i, loop_kendall(S, R, 0.0, j_eq_i_only=True), rel_tol=1e-12)
        assert math.isclose(j_eq_i, loop_triplet(S, 0.0, hard=False), rel_tol=1e-12)
        row = ident.kendall_slice_vs_triplet_m0(S, R)
        assert row["value_dev"] < 1e-12 and row["grad_dev"] < 1e-12
    # the slice is not the whole loss on continuous labels (the isolation does something)
    assert loop_kendall(S, R, 0.0) > loop_kendall(S, R, 0.0, j_eq_i_only=True) + 1.0


@pytest.mark.parametrize("hard", [True, False])
def test_ladder_with_beta2_zero_is_the_triplet_loss(hard):
    """Ladder Sec. III-B: β₂ = 0 leaves L¹ (Eq. 7 / HC Eq. 8), the triplet loss; the control (β₂ = 0.25)
    differs from the triplet loss written as a loop."""
    S, R = random_sim(6), ident.random_rel(6, B)
    row = ident.ladder_beta2_0_vs_triplet(S, R, hard)
    assert row["value_dev"] < 1e-12 and row["grad_dev"] < 1e-12
    ladder_default = float(losses.build("ladder", hard_contrastive=hard)(S, R))
    assert math.isclose(row["control_dev"], ident.rel_dev(ladder_default, loop_triplet(S, 0.2, hard)), rel_tol=1e-9)
    assert row["control_dev"] > 1e-3


def test_all_checks_rows_in_order():
    rows = ident.all_checks(n=6, seeds=[0, 1], gammas=(1e2, 1e4), vlc_gammas=(10.0,))
    names = [r["identity"] for r in rows if r["seed"] == 0]
    assert names == [
        "Unified(m=0.2, γ) → Triplet-HN",
        "Triplet-SN(γ) → Triplet-HN",
        "Unified(m=0.2, γ) → Triplet-HN",
        "Triplet-SN(γ) → Triplet-HN",
        "γ·Unified(m=0) = VLC",
        "Kendall j=i slice (continuous r) = Triplet(all neg., m=0)",
        "Kendall(binary r, α=0) = Triplet(all neg., m=0)",
        "Kendall(binary r, α=0.2) = Triplet(all neg., m=0)",
        "Ladder(β₂=0, HC) = Triplet-HN",
        "Ladder(β₂=0, all pairs) = Triplet(all neg.)",
    ]
    assert [r["seed"] for r in rows] == [0] * 10 + [1] * 10
    S = ident.random_sim(1, 6)
    want = loop_unified(S, 0.2, 1e2) - loop_triplet(S, 0.2, hard=True)
    assert math.isclose(rows[10]["gap"], want, rel_tol=1e-9) and rows[10]["gamma"] == 1e2


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
