"""SAM as the authors coded it (``sam_authors``) against a per-anchor loop written from its definition
(reference-implementations notes: "soft" = 2nd-largest of s_qj − s_qq over the row, margin crossed and
clamped at 1, weight 5), and how it differs from SAM as written (``sam``)."""

from __future__ import annotations

import pytest
import torch

from coherent_itr import losses

DT = torch.float64


def batch(b: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    sim = torch.rand(b, b, generator=g, dtype=DT) * 1.4 - 0.5
    phi = torch.rand(b, b, generator=g, dtype=DT) * 2.0 + torch.eye(b, dtype=DT) * 2.5
    return sim, phi


def rank_pick(row: list[float], sampling: str) -> int:
    """Position of the 2nd-largest ("SN", the code's "soft") or 2nd-smallest ("HN", its "hard") value."""
    order = sorted(range(len(row)), key=lambda j: row[j], reverse=(sampling == "SN"))
    return order[1]


def loop_authors(sim, phi, tau=3.0, sampling="SN", keep_triplet=True, weight=5.0, margin_max=1.0, triplet_margin=0.2):
    b = sim.shape[0]
    total = torch.zeros((), dtype=DT)
    for q in range(b):
        d_row = [float((sim[q, j] - sim[q, q]).detach()) for j in range(b)]  # image q → captions j
        e_row = [float((sim[q, j] - sim[j, j]).detach()) for j in range(b)]  # caption j's negative image q
        m, n = rank_pick(d_row, sampling), rank_pick(e_row, sampling)
        a_i2t = min(float(phi[q, q] - phi[q, n]) / tau, margin_max)  # crossed: t2i sample's margin
        a_t2i = min(float(phi[q, q] - phi[q, m]) / tau, margin_max)
        total = total + weight * (
            torch.clamp(sim[q, m] - sim[q, q] + a_i2t, min=0) + torch.clamp(sim[q, n] - sim[n, n] + a_t2i, min=0)
        )
        if keep_triplet:
            total = total + max(torch.clamp(triplet_margin + sim[q, j] - sim[q, q], min=0) for j in range(b) if j != q)
            total = total + max(torch.clamp(triplet_margin + sim[j, q] - sim[q, q], min=0) for j in range(b) if j != q)
    return total


@pytest.mark.parametrize("sampling", ["SN", "HN"])
@pytest.mark.parametrize("keep", [True, False])
@pytest.mark.parametrize("tau", [1.0, 3.0, 10.0])
def test_authors_variant_matches_the_loop(sampling, keep, tau):
    for seed in range(3):
        sim, phi = batch(9, seed)
        crit = losses.build("sam_authors", tau=tau, sampling=sampling, keep_triplet=keep)
        got = crit(sim.clone().requires_grad_(), phi)
        want = loop_authors(sim, phi, tau=tau, sampling=sampling, keep_triplet=keep)
        assert torch.allclose(got, want, atol=1e-10), (float(got), float(want))


def test_authors_gradient_matches_the_loop():
    sim, phi = batch(7, 5)
    a = sim.clone().requires_grad_()
    b = sim.clone().requires_grad_()
    losses.build("sam_authors")(a, phi).backward()
    loop_authors(b, phi).backward()
    assert torch.allclose(a.grad, b.grad, atol=1e-10)


def test_soft_is_near_hardest_and_can_pick_the_anchor_itself():
    # row 0: positive ranked first → "soft" = the hardest negative; row 1: a negative violates → 2nd-largest
    # is the positive itself (d = 0), whose hinge is [0 + 0]_+ = 0
    sim = torch.tensor([[0.9, 0.5, 0.1], [0.8, 0.3, 0.0], [0.0, 0.2, 0.7]], dtype=DT)
    phi = torch.full((3, 3), 1.0, dtype=DT) + 2 * torch.eye(3, dtype=DT)
    crit = losses.build("sam_authors", keep_triplet=False)
    crit(sim, phi)
    assert crit.diagnostics["negatives_i2t"][0] == 1  # hardest negative of image 0
    assert crit.diagnostics["negatives_i2t"][1] == 1  # image 1's own caption: 2nd largest of (0.5, 0, -0.3)
    assert crit.diagnostics["self_sampled_fraction"] > 0
    # the paper's SN picks the furthest negative instead
    paper = losses.build("sam", keep_triplet=False, sampling="SN")
    paper(sim, phi)
    assert paper.diagnostics["negatives_i2t"][0] == 2


def test_margin_clamp_at_one_and_weight():
    sim, phi = batch(6, 1)
    phi = phi * 4  # margins far above 1 at τ = 3
    crit = losses.build("sam_authors", keep_triplet=False, weight=1.0)
    crit(sim, phi)
    assert crit.diagnostics["margin_mean_i2t"] <= 1.0 + 1e-12
    assert crit.diagnostics["margin_clamped_fraction"] > 0.5
    w5 = losses.build("sam_authors", keep_triplet=False)(sim, phi)  # default weight 5
    w1 = losses.build("sam_authors", keep_triplet=False, weight=1.0)(sim, phi)
    assert torch.allclose(w5, 5 * w1)
    unclamped = losses.build("sam_authors", keep_triplet=False, weight=1.0, margin_max=1e9)(sim, phi)
    assert unclamped > w1


def test_bad_parameters_are_rejected():
    with pytest.raises(ValueError, match="sampling"):
        losses.build("sam_authors", sampling="soft")
    with pytest.raises(ValueError, match="tau"):
        losses.build("sam_authors", tau=0)
