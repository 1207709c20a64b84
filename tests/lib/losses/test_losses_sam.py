"""SAM (SAM paper Eq. 7, sampling of Sec. 5.4) against an explicit per-anchor loop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from coherent_itr import losses

DT = torch.float64


def batch(b: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    sim = (torch.rand(b, b, generator=g, dtype=DT) * 1.4 - 0.5).requires_grad_()
    phi = torch.rand(b, b, generator=g, dtype=DT) * 2.0  # CIDEr-D-like, asymmetric
    phi += torch.eye(b, dtype=DT) * 2.5  # positives score high
    return sim, phi


def loop_negative(score, b: int, q: int, sampling: str) -> int:
    """Paper Sec. 5.4: HN = the negative closest to the anchor, SN = the furthest one."""
    cand = [j for j in range(b) if j != q]
    if sampling == "HN":
        return max(cand, key=lambda j: float(score(j).detach()))
    return min(cand, key=lambda j: float(score(j).detach()))


def loop_sam(
    sim,
    phi,
    *,
    tau=3.0,
    sampling="SN",
    keep_triplet=True,
    weight=1.0,
    margin_min=None,
    margin_max=None,
    margin_pairing="matched",
    t2i_phi="anchor_refs",
    triplet_margin=0.2,
    negatives=None,
):
    """Eq. 7 per positive pair p, summed over p; ``negatives`` = (m per p, l per p) overrides sampling."""
    b = sim.shape[0]
    total = torch.zeros((), dtype=DT)
    for p in range(b):
        if negatives is None:
            m = loop_negative(lambda j: sim[p, j], b, p, sampling)  # negative caption of image p
            l = loop_negative(lambda j: sim[j, p], b, p, sampling)  # negative image of caption p
        else:
            m, l = negatives[0][p], negatives[1][p]
        alpha_m = (phi[p, p] - phi[p, m]) / tau  # φ(G_p, c_p) − φ(G_p, c_m)
        alpha_l = ((phi[p, p] - phi[p, l]) if t2i_phi == "anchor_refs" else (phi[p, p] - phi[l, p])) / tau
        a_i2t, a_t2i = (alpha_m, alpha_l) if margin_pairing == "matched" else (alpha_l, alpha_m)
        if margin_min is not None:
            a_i2t, a_t2i = (
                max(a_i2t, torch.tensor(margin_min, dtype=DT)),
                max(a_t2i, torch.tensor(margin_min, dtype=DT)),
            )
        if margin_max is not None:
            a_i2t, a_t2i = (
                min(a_i2t, torch.tensor(margin_max, dtype=DT)),
                min(a_t2i, torch.tensor(margin_max, dtype=DT)),
            )
        total = total + weight * (
            torch.clamp(a_i2t + sim[p, m] - sim[p, p], min=0) + torch.clamp(a_t2i + sim[l, p] - sim[p, p], min=0)
        )
        if keep_triplet:  # Eq. 6 with hardest negatives
            total = total + max(torch.clamp(triplet_margin + sim[p, j] - sim[p, p], min=0) for j in range(b) if j != p)
            total = total + max(torch.clamp(triplet_margin + sim[j, p] - sim[p, p], min=0) for j in range(b) if j != p)
    return total


def value_and_grad(fn, sim):
    sim = sim.detach().clone().requires_grad_()
    v = fn(sim)
    (g,) = torch.autograd.grad(v, sim)
    return v.detach(), g


@pytest.mark.parametrize("sampling", ["HN", "SN"])
@pytest.mark.parametrize(
    "options",
    [
        {},
        {"keep_triplet": False, "weight": 5.0, "tau": 5.0},
        {"margin_pairing": "crossed"},
        {"t2i_phi": "candidate_refs", "tau": 10.0},
        {"margin_max": 1.0, "tau": 1.0},
    ],
)
def test_sam_equals_loop(sampling, options):
    sim, phi = batch(7, seed=1)
    crit = losses.build("sam", sampling=sampling, **options)
    v, g = value_and_grad(lambda s: crit(s, phi), sim)
    v_ref, g_ref = value_and_grad(lambda s: loop_sam(s, phi, sampling=sampling, **options), sim)
    torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-12, atol=1e-12)
    assert 0 < crit.diagnostics["active_fraction_i2t"] <= 1


def test_options_change_the_value():
    """Each option reaches the computation (no silently ignored flag)."""
    sim, phi = batch(7, seed=2)
    base = losses.build("sam", keep_triplet=False)(sim, phi)
    for opt in (
        {"margin_pairing": "crossed"},
        {"t2i_phi": "candidate_refs"},
        {"tau": 10.0},
        {"margin_max": 0.1},
        {"sampling": "HN"},
        {"weight": 2.0},
    ):
        assert not torch.isclose(losses.build("sam", keep_triplet=False, **opt)(sim, phi), base), opt


def test_paper_sampling_definitions_on_a_hand_example():
    """Image 0's captions have similarities (0.9 positive, 0.5, −0.3, 0.1): HN = caption 1 (closest),
    SN = caption 2 (furthest) — the paper's definitions, not the authors' code's inverted names."""
    sim = torch.tensor(
        [[0.9, 0.5, -0.3, 0.1], [0.2, 0.8, 0.0, 0.3], [0.4, -0.2, 0.7, 0.6], [0.1, 0.3, 0.5, 0.9]], dtype=DT
    )
    phi = torch.ones(4, 4, dtype=DT)
    hn, sn = losses.build("sam", sampling="HN"), losses.build("sam", sampling="SN")
    hn(sim, phi), sn(sim, phi)
    assert hn.diagnostics["negatives_i2t"] == [1, 3, 3, 2]
    assert sn.diagnostics["negatives_i2t"] == [2, 2, 1, 0]
    assert hn.diagnostics["negatives_t2i"] == [2, 0, 3, 2]  # columns: caption q vs images
    assert sn.diagnostics["negatives_t2i"] == [3, 2, 0, 0]


def test_random_sampling_is_seeded_uniform_and_matches_loop():
    sim, phi = batch(6, seed=3)
    a = losses.build("sam", sampling="RS", seed=11)
    b = losses.build("sam", sampling="RS", seed=11)
    c = losses.build("sam", sampling="RS", generator=torch.Generator().manual_seed(11))
    va, vb, vc = a(sim, phi), b(sim, phi), c(sim, phi)
    assert va == vb == vc and a.diagnostics["negatives_i2t"] == c.diagnostics["negatives_i2t"]
    # the loss is Eq. 7 with the drawn negatives
    neg = (a.diagnostics["negatives_i2t"], a.diagnostics["negatives_t2i"])
    v2 = a(sim, phi)  # next draw from the same generator
    neg2 = (a.diagnostics["negatives_i2t"], a.diagnostics["negatives_t2i"])
    torch.testing.assert_close(va, loop_sam(sim, phi, negatives=neg), rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(v2, loop_sam(sim, phi, negatives=neg2), rtol=1e-12, atol=1e-12)
    assert neg2 != neg
    d = losses.build("sam", sampling="RS", seed=12)
    d(sim, phi)
    assert d.diagnostics["negatives_i2t"] != a.diagnostics["negatives_i2t"] or d.diagnostics["negatives_t2i"] != neg[1]
    # uniform over the B − 1 negatives, never the positive
    counts = np.zeros((6, 6))
    crit = losses.build("sam", sampling="RS", seed=0, keep_triplet=False)
    for _ in range(600):
        crit(sim.detach(), phi)
        for q, j in enumerate(crit.diagnostics["negatives_i2t"]):
            counts[q, j] += 1
    assert np.all(np.diag(counts) == 0)
    for q in range(6):
        assert chisquare(np.delete(counts[q], q)).pvalue > 1e-3


def test_margin_clamps():
    """A negative whose φ exceeds the positive's gives a negative margin (the code has no lower
    clamp); margin_min=0 clamps it; margin_max=1 is the authors' code's upper clamp."""
    sim, phi = batch(6, seed=4)
    phi = phi.clone()
    phi[0, :] = 5.0  # every negative of image 0 beats its positive
    phi[0, 0] = 1.0
    free = losses.build("sam", keep_triplet=False)
    free(sim, phi)
    assert free.diagnostics["negative_margin_fraction"] > 0
    for kw in ({"margin_min": 0.0}, {"margin_min": 0.0, "margin_max": 1.0}, {"margin_max": 0.5, "tau": 0.5}):
        crit = losses.build("sam", keep_triplet=False, **kw)
        v, g = value_and_grad(lambda s: crit(s, phi), sim)
        v_ref, g_ref = value_and_grad(lambda s: loop_sam(s, phi, keep_triplet=False, **kw), sim)
        torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(g, g_ref, rtol=1e-12, atol=1e-12)
        assert crit.diagnostics["negative_margin_fraction"] == 0 or "margin_min" not in kw
    # with the hardest negative of image 0 above its positive, the clamp turns a zero hinge on
    sim = sim.detach().clone()
    sim[0, :] = 0.5
    sim[0, 0] = 0.4
    hn_free, hn_clamped = (losses.build("sam", sampling="HN", keep_triplet=False, margin_min=m) for m in (None, 0.0))
    assert hn_clamped(sim, phi) - hn_free(sim, phi) == pytest.approx(0.1, abs=1e-12)


def test_keep_triplet_adds_the_triplet_loss():
    sim, phi = batch(8, seed=5)
    for reduction in ("sum", "mean"):
        with_t = losses.build("sam", keep_triplet=True, reduction=reduction)(sim, phi)
        without = losses.build("sam", keep_triplet=False, reduction=reduction)(sim, phi)
        trip = losses.build("triplet", margin=0.2, max_violation=True, reduction=reduction)(sim)
        torch.testing.assert_close(with_t - without, trip, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sampling", ["HN", "SN"])
def test_permutation_equivariance(sampling):
    sim, phi = batch(9, seed=6)
    perm = torch.randperm(9, generator=torch.Generator().manual_seed(1))
    crit = losses.build("sam", sampling=sampling)
    torch.testing.assert_close(crit(sim, phi), crit(sim[perm][:, perm], phi[perm][:, perm]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"tau": 0.0}, "tau=0.0 out of range"),
        ({"sampling": "soft"}, "sampling='soft'"),
        ({"margin_min": 0.5, "margin_max": 0.1}, "margin_min=0.5 > margin_max=0.1"),
        ({"margin_pairing": "x"}, "margin_pairing='x'"),
        ({"t2i_phi": "x"}, "t2i_phi='x'"),
        ({"weight": -1.0}, "weight=-1.0"),
        ({"generator": 3}, "must be a torch.Generator"),
    ],
)
def test_rejects_bad_parameters(params, msg):
    with pytest.raises(ValueError, match=msg):
        losses.build("sam", **params)


def test_bad_relevance_is_an_error():
    sim, phi = batch(4, seed=7)
    with pytest.raises(ValueError, match="needs a relevance matrix"):
        losses.build("sam")(sim)
    phi[1, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN or infinite"):
        losses.build("sam")(sim, phi)
