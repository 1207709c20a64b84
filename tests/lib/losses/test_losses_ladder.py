"""Ladder loss (Ladder paper Eqs. 5–8) and adaptive ladder loss (Eqs. 9–12) against brute-force
loops written from the equations, sklearn, and the identities of claim U6."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch
from sklearn.cluster import KMeans
from sklearn.metrics import silhouette_score

from coherent_itr import losses
from coherent_itr.losses import ladder as ladder_mod
from coherent_itr.losses.adaptive_ladder import (
    adaptive_levels_sklearn,
    adaptive_levels_torch,
    exact_kmeans_1d_sorted,
    labels_from_starts,
    silhouette_1d_sorted,
)

DT = torch.float64
PAPER_ALPHA = [0.2, 0.01, 0.01, 0.01]  # Ladder Sec. IV-A
PAPER_BETA = [1.0, 1 / 4, 1 / 8, 1 / 16]  # β_1 = 1, β_i = 1/2^i


# ----------------------------------------------------------------------------- brute force
def loop_levels_thresholds(rel: list[list[float]], thresholds: list[float]) -> list[list[int]]:
    """Level of candidate j for query q: l such that θ_l ≤ r < θ_{l−1} (θ_0 = +∞, θ_L = −∞); 0 for j = q."""
    b = len(rel)
    bounds = [float("inf")] + list(thresholds) + [float("-inf")]
    out = [[0] * b for _ in range(b)]
    for q in range(b):
        for j in range(b):
            if j != q:
                out[q][j] = next(l for l in range(1, len(bounds)) if bounds[l] <= rel[q][j] < bounds[l - 1])
    return out


def loop_ladder(score, level, alpha, beta, hard: bool) -> torch.Tensor:
    """Σ_q Σ_l β_l L^l(q) (Eqs. 6–8) by explicit loops; ``score(q, i)`` = s(query q, candidate i)."""
    b = len(level)
    total = torch.zeros((), dtype=DT)
    for q in range(b):
        for l in range(1, len(alpha) + 1):
            more = [i for i in range(b) if level[q][i] == l - 1]
            less = [j for j in range(b) if level[q][j] >= l]
            if not more or not less:
                continue  # an empty set contributes nothing
            if hard:  # Eq. 8
                i_star = min(more, key=lambda i: float(score(q, i).detach()))
                j_star = max(less, key=lambda j: float(score(q, j).detach()))
                total = total + beta[l - 1] * torch.clamp(alpha[l - 1] - score(q, i_star) + score(q, j_star), min=0)
            else:  # Eq. 7
                for i in more:
                    for j in less:
                        total = total + beta[l - 1] * torch.clamp(alpha[l - 1] - score(q, i) + score(q, j), min=0)
    return total


def loop_full_ladder(sim, level_i2t, level_t2i, alpha, beta, hard):
    """Both directions: image q vs captions (s = sim[q, i]); caption q vs images (s = sim[i, q])."""
    return loop_ladder(lambda q, i: sim[q, i], level_i2t, alpha, beta, hard) + loop_ladder(
        lambda q, i: sim[i, q], level_t2i, alpha, beta, hard
    )


def loop_silhouette(x: list[float], labels: list[int]) -> float:
    """Mean silhouette, Ladder Eqs. 10–12, by explicit loops."""
    sil = []
    for i, xi in enumerate(x):
        own = [j for j in range(len(x)) if labels[j] == labels[i]]
        if len(own) == 1:
            sil.append(0.0)
            continue
        a = sum(abs(xi - x[j]) for j in own if j != i) / (len(own) - 1)
        b = min(
            sum(abs(xi - x[j]) for j in range(len(x)) if labels[j] == c) / labels.count(c)
            for c in set(labels)
            if c != labels[i]
        )
        sil.append((b - a) / max(a, b))
    return sum(sil) / len(sil)


def loop_kmeans_1d(x: list[float], k: int):
    """Best k-partition by enumerating every contiguous partition of the sorted values (optimal
    1-D k-means clusters are contiguous); cuts only between distinct values. Labels: 0 = lowest."""
    order = sorted(range(len(x)), key=lambda i: x[i])
    xs = [x[i] for i in order]
    best, best_lab = float("inf"), None
    for cuts in itertools.combinations(range(1, len(xs)), k - 1):
        if any(xs[c] == xs[c - 1] for c in cuts):
            continue
        bounds = [0, *cuts, len(xs)]
        sse = 0.0
        for a, b in zip(bounds, bounds[1:]):
            m = sum(xs[a:b]) / (b - a)
            sse += sum((v - m) ** 2 for v in xs[a:b])
        if sse < best:
            lab = [0] * len(x)
            for c, (a, b) in enumerate(zip(bounds, bounds[1:])):
                for p in range(a, b):
                    lab[order[p]] = c
            best, best_lab = sse, lab
    return best_lab


def loop_adaptive_levels(rel: list[list[float]], l_min: int, l_max: int):
    """Eq. 9: per query, the k in [l_min, l_max] with the highest mean silhouette; clusters by
    decreasing centroid are levels 1, 2, …; returns (level matrix, chosen k per query)."""
    b = len(rel)
    level = [[0] * b for _ in range(b)]
    chosen = []
    for q in range(b):
        cand = [j for j in range(b) if j != q]
        x = [rel[q][j] for j in cand]
        best_k, best_s, best_lab = None, -float("inf"), None
        for k in range(l_min, l_max + 1):
            lab = loop_kmeans_1d(x, k)
            s = loop_silhouette(x, lab)
            if s > best_s:
                best_k, best_s, best_lab = k, s, lab
        # ascending cluster index c (0 = lowest values) → level k − c
        for j, c in zip(cand, best_lab):
            level[q][j] = best_k - c
        chosen.append(best_k)
    return level, chosen


def realistic_rel(b: int, seed: int, max_over_5: bool = False) -> torch.Tensor:
    """Relevance shaped like Sentence-BERT caption cosines of a real batch (measured on Flickr8k:
    off-diagonal quantiles 5/50/95/99% ≈ −0.10/0.06/0.33/0.48, a few up to ~0.9): captions are
    noisy mixtures of a shared direction and a long-tailed topic; ``max_over_5`` mimics the
    authors' max over an image's 5 captions (asymmetric)."""
    rng = np.random.default_rng(seed)
    d, n_topics = 64, 40
    topics = rng.normal(size=(n_topics, d))
    topics /= np.linalg.norm(topics, axis=1, keepdims=True)
    shared = rng.normal(size=d)
    shared /= np.linalg.norm(shared)
    p = 1.0 / np.arange(1, n_topics + 1)
    t = rng.choice(n_topics, size=b, p=p / p.sum())
    e = 0.3 * shared + 0.6 * topics[t][:, None, :] + rng.normal(size=(b, 5, d)) / np.sqrt(d)
    e /= np.linalg.norm(e, axis=-1, keepdims=True)
    rel = np.einsum("ikd,jd->ijk", e, e[:, 0]).max(-1) if max_over_5 else e[:, 0] @ e[:, 0].T
    return torch.tensor(rel, dtype=DT)


def random_batch(b: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    sim = (torch.rand(b, b, generator=g, dtype=DT) * 1.2 - 0.4).requires_grad_()
    rel = torch.rand(b, b, generator=g, dtype=DT) * 1.1 - 0.2  # asymmetric, in [−0.2, 0.9]
    return sim, rel


def value_and_grad(fn, sim):
    sim = sim.detach().clone().requires_grad_()
    v = fn(sim)
    (g,) = torch.autograd.grad(v, sim)
    return v.detach(), g


# ----------------------------------------------------------------------------- ladder
@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("thresholds", [(0.40,), (0.5, 0.2)])
def test_ladder_equals_loop_values_and_gradients(hard, thresholds):
    sim, rel = random_batch(8, seed=1)
    rel[0, 1:] = -0.1  # image 0 (i2t): every caption in the last level → N_1 empty
    rel[1:, 0] = 0.95  # caption 0 (t2i): every image in level 1 → N_{2:L} empty
    crit = losses.build("ladder", thresholds=thresholds, hard_contrastive=hard)
    r = rel.tolist()
    lv_i2t = loop_levels_thresholds(r, list(thresholds))
    lv_t2i = loop_levels_thresholds([list(c) for c in zip(*r)], list(thresholds))
    n = len(thresholds) + 1
    alpha, beta = PAPER_ALPHA[:n], [1.0, 0.25, 0.125][:n]
    v, g = value_and_grad(lambda s: crit(s, rel), sim)
    v_ref, g_ref = value_and_grad(lambda s: loop_full_ladder(s, lv_i2t, lv_t2i, alpha, beta, hard), sim)
    torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-12, atol=1e-12)
    d = crit.diagnostics
    assert d["empty_fraction_i2t"] > 0 and d["empty_fraction_t2i"] > 0
    assert all(sum(row) == 7 for row in d["level_sizes_i2t"])
    assert 0 < d["active_fraction_i2t"] <= 1


def dense_pairs_hinge_sum(sim, more, less, alpha):
    """Eq. 7 family over an explicit [q, i, j] tensor (the B³ form the sorted version replaces)."""
    pair = more.unsqueeze(2) & less.unsqueeze(1)
    hinge = torch.where(pair, (alpha - sim.unsqueeze(2) + sim.unsqueeze(1)).clamp(min=0), 0.0)
    return hinge.sum(dim=(1, 2)), int((hinge > 0).sum())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_levels_from_thresholds_at_and_beside_each_threshold(dtype):
    """Level 1 + #{l : rel < θ_l} (θ rounded to rel's dtype, as the relevance itself is) entry by entry, with
    values exactly at each threshold and at its neighbours in that dtype: a value equal to θ_l is not below it."""
    thresholds = (0.7, 0.4, 0.1 + 0.2)
    g = torch.Generator().manual_seed(0)
    rel = torch.rand(12, 12, generator=g, dtype=torch.float64).to(dtype)
    flat = rel.view(-1)
    for k, t in enumerate(thresholds):
        at = torch.tensor(t, dtype=dtype)
        flat[13 * k + 1] = at
        flat[13 * k + 2] = torch.nextafter(at, torch.tensor(1.0, dtype=dtype))
        flat[13 * k + 3] = torch.nextafter(at, torch.tensor(0.0, dtype=dtype))
    level = ladder_mod.levels_from_thresholds(rel, thresholds)
    assert level.dtype == torch.int64
    for q in range(12):
        for j in range(12):
            want = 0 if q == j else 1 + sum(rel[q, j].item() < np.asarray(t, dtype=str(dtype)[6:]) for t in thresholds)
            assert level[q, j].item() == want, (q, j, rel[q, j].item())


@pytest.mark.parametrize("dtype, tol", [(torch.float64, 1e-10), (torch.float32, 2e-4)])
@pytest.mark.parametrize("ties", [False, True])
def test_all_pairs_hinge_sum_equals_the_dense_sum(dtype, tol, ties):
    """The O(B² log B) all-pairs family (warm-up, Eq. 7) against the B³ sum: value, gradient and
    the active-pair count, at B = 64 with random set memberships (some rows with an empty set) and,
    with ``ties``, similarities on a coarse grid so many pairs share values."""
    g = torch.Generator().manual_seed(7)
    b = 64
    sim = torch.rand(b, b, generator=g, dtype=torch.float64) * 1.4 - 0.4
    if ties:
        sim = (sim * 8).round() / 8 + 0.03  # steps of 1/8; α = 0.2 keeps hinges off exact zeros
    sim = sim.to(dtype)
    level = torch.randint(0, 3, (b, b), generator=g)
    more, less = level == 1, level == 2
    more[0], less[1] = False, False  # an empty more-relevant set and an empty less-relevant set
    for alpha in (0.2, 0.01):
        v, g1 = value_and_grad(lambda x: ladder_mod.all_pairs_hinge_sum(x, more, less, alpha)[0].sum(), sim)
        v_ref, g_ref = value_and_grad(lambda x: dense_pairs_hinge_sum(x, more, less, alpha)[0].sum(), sim)
        torch.testing.assert_close(v, v_ref, rtol=tol, atol=tol)
        torch.testing.assert_close(g1, g_ref, rtol=0, atol=0)  # gradients are integer counts
        n_active = ladder_mod.all_pairs_hinge_sum(sim, more, less, alpha)[1]
        assert n_active == dense_pairs_hinge_sum(sim, more, less, alpha)[1] > 0
    per_row, _ = ladder_mod.all_pairs_hinge_sum(sim, more, less, 0.2)
    assert per_row[0] == 0 and per_row[1] == 0 and (per_row[2:] > 0).all()


def test_empty_sets_contribute_nothing():
    """All negatives below θ (N_1 empty) or all above (N_2 empty): only L^1 remains, so the ladder
    loss equals the triplet loss even with β_2 = 0.25. The reference code's spurious hinge
    [α_2 − s + 0]_+ would add to it."""
    sim, _ = random_batch(6, seed=2)
    trip = losses.build("triplet", margin=0.2, max_violation=True)(sim)
    for fill in (-0.5, 0.9):
        rel = torch.full((6, 6), fill, dtype=DT)
        rel.fill_diagonal_(1.0)
        crit = losses.build("ladder", thresholds=(0.4,), beta=(1.0, 0.25))
        torch.testing.assert_close(crit(sim, rel), trip, rtol=1e-12, atol=1e-12)
        assert crit.diagnostics["empty_fraction_i2t"] == 0.5  # the level-2 family of every row
    # a row with an empty more-relevant set still gets its level-1 (triplet) term
    rel = torch.full((6, 6), -0.5, dtype=DT)
    rel[1:, 1:] = 0.9
    assert torch.isfinite(losses.build("ladder")(sim, rel))


@pytest.mark.parametrize("hard", [True, False])
@pytest.mark.parametrize("reduction", ["sum", "mean"])
def test_ladder_beta2_zero_equals_triplet(hard, reduction):
    """Claim U6 / Ladder Sec. III-B: with β_2 = 0 the ladder loss is the triplet loss."""
    sim, rel = random_batch(10, seed=3)
    lad = losses.build("ladder", beta=(1.0, 0.0), hard_contrastive=hard, reduction=reduction)
    tri = losses.build("triplet", margin=0.2, max_violation=hard, reduction=reduction)
    v1, g1 = value_and_grad(lambda s: lad(s, rel), sim)
    v2, g2 = value_and_grad(lambda s: tri(s), sim)
    torch.testing.assert_close(v1, v2, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g1, g2, rtol=1e-12, atol=1e-12)
    assert lad.diagnostics["active_fraction_i2t"] > 0
    # and β_2 > 0 does change it on this batch (the identity is not vacuous)
    assert not torch.isclose(losses.build("ladder", hard_contrastive=hard, reduction=reduction)(sim, rel), v2)


@pytest.mark.parametrize(
    "name, params", [("ladder", {}), ("ladder", {"hard_contrastive": False}), ("adaptive_ladder", {})]
)
def test_permutation_equivariance(name, params):
    sim, rel = random_batch(12, seed=4)
    perm = torch.randperm(12, generator=torch.Generator().manual_seed(0))
    crit = losses.build(name, **params)
    torch.testing.assert_close(crit(sim, rel), crit(sim[perm][:, perm], rel[perm][:, perm]), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"thresholds": (0.2, 0.4)}, "strictly decreasing"),
        ({"alpha": (0.2,)}, "alpha has 1 entries"),
        ({"beta": (1.0, -0.5)}, "beta entry=-0.5 out of range"),
        ({"reduction": "max"}, "reduction='max'"),
    ],
)
def test_ladder_rejects_bad_parameters(params, msg):
    with pytest.raises(ValueError, match=msg):
        losses.build("ladder", **params)


@pytest.mark.parametrize(
    "params, msg",
    [
        ({"l_min": 1, "l_max": 3}, "no silhouette"),
        ({"l_min": 3, "l_max": 2}, "l_max=2 out of range"),
        ({"backend": "faiss"}, "backend='faiss'"),
        ({"alpha": (0.2, 0.01)}, "alpha has 2 entries"),
        ({"l_min": 2.5}, "parameter l_min expects int"),
    ],
)
def test_adaptive_rejects_bad_parameters(params, msg):
    with pytest.raises(ValueError, match=msg):
        losses.build("adaptive_ladder", **params)


def test_missing_or_misshapen_relevance_is_an_error():
    sim, rel = random_batch(5, seed=5)
    for name in ("ladder", "adaptive_ladder"):
        with pytest.raises(ValueError, match="needs a relevance matrix"):
            losses.build(name)(sim)
        with pytest.raises(ValueError, match="rel shape"):
            losses.build(name)(sim, rel[:4, :4])


# ----------------------------------------------------------------------------- adaptive ladder
def clustered_rel(b: int, seed: int) -> torch.Tensor:
    """Rows drawn from 2–4 well-separated groups, so different rows choose different k."""
    rng = np.random.default_rng(seed)
    rel = np.empty((b, b))
    for q in range(b):
        k = rng.integers(2, 5)
        centres = rng.choice(np.linspace(-0.2, 0.9, 8), size=k, replace=False)
        rel[q] = rng.choice(centres, size=b) + rng.normal(scale=0.03, size=b)
    return torch.tensor(rel, dtype=DT)


@pytest.mark.parametrize("backend", ["torch", "sklearn"])
def test_adaptive_ladder_equals_loop(backend):
    b = 9
    sim, _ = random_batch(b, seed=6)
    rel = clustered_rel(b, seed=7)  # asymmetric: t2i clusters the columns
    crit = losses.build("adaptive_ladder", backend=backend)
    r = rel.tolist()
    lv_i2t, k_i2t = loop_adaptive_levels(r, 2, 4)
    lv_t2i, k_t2i = loop_adaptive_levels([list(c) for c in zip(*r)], 2, 4)
    assert len(set(k_i2t + k_t2i)) >= 2  # the selection is exercised
    v, g = value_and_grad(lambda s: crit(s, rel), sim)
    v_ref, g_ref = value_and_grad(lambda s: loop_full_ladder(s, lv_i2t, lv_t2i, PAPER_ALPHA, PAPER_BETA, True), sim)
    assert crit.diagnostics["levels_per_row_i2t"] == k_i2t
    assert crit.diagnostics["levels_per_row_t2i"] == k_t2i
    torch.testing.assert_close(v, v_ref, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(g, g_ref, rtol=1e-12, atol=1e-12)
    hist = crit.diagnostics["levels_histogram_i2t"]
    assert sum(hist.values()) == b and hist == {k: k_i2t.count(k) for k in range(1, 5)}


def test_loop_silhouette_matches_sklearn():
    """The loop reference of Eqs. 10–12 is Rousseeuw's silhouette as sklearn computes it."""
    rng = np.random.default_rng(8)
    for _ in range(5):
        x = list(rng.random(11))
        lab = loop_kmeans_1d(x, 3)
        assert loop_silhouette(x, lab) == pytest.approx(silhouette_score(np.array(x)[:, None], lab), abs=1e-12)


def test_exact_kmeans_and_vectorised_silhouette_against_enumeration_and_sklearn():
    """Torch DP partition = the enumerated optimum (same SSE) and its prefix-sum silhouette =
    sklearn's silhouette_score, on rows with and without tied values."""
    rng = np.random.default_rng(11)
    rows = [np.round(rng.random(9), 1) for _ in range(10)] + [rng.random(9) for _ in range(10)]
    rows += [np.repeat([0.1, 0.5, 0.9], 3), np.array([0.2] * 5 + [0.7] * 4), np.repeat([0.3, 0.4, 0.6], [2, 3, 4])]
    xs = torch.tensor(np.sort(np.stack(rows), axis=1))
    starts, ok = exact_kmeans_1d_sorted(xs, 4)
    assert not bool(ok[3][-3]) and not bool(ok[2][-2]) and bool(ok[2][-1])  # < k distinct values
    for r, x in enumerate(xs.tolist()):
        for k in (2, 3, 4):
            lab_ref = loop_kmeans_1d(x, k)
            assert bool(ok[k - 1][r]) == (lab_ref is not None)
            if lab_ref is None:
                continue
            lab = labels_from_starts(starts[k - 1][r : r + 1], 9)[0].tolist()
            sse = lambda lb: sum(
                (v - np.mean([x[i] for i in range(9) if lb[i] == lb[j]])) ** 2 for j, v in enumerate(x)
            )
            assert sse(lab) == pytest.approx(sse(lab_ref), abs=1e-12)
            sil = float(silhouette_1d_sorted(xs[r : r + 1], starts[k - 1][r : r + 1])[0])
            assert sil == pytest.approx(silhouette_score(np.array(x)[:, None], lab), abs=1e-12)


def test_exact_kmeans_is_never_worse_than_sklearn():
    """The torch back-end's partition has SSE ≤ sklearn KMeans' inertia for every row and k:
    where the back-ends disagree it is sklearn's Lloyd that stopped at a local optimum."""
    vals = realistic_rel(64, seed=9)[~torch.eye(64, dtype=torch.bool)].view(64, 63)[:16]
    xs, _ = vals.sort(dim=1)
    starts, _ = exact_kmeans_1d_sorted(xs, 4)
    for k in (2, 3, 4):
        bounds = torch.cat([starts[k - 1], torch.full((16, 1), 63)], dim=1)
        for r in range(16):
            seg = [xs[r, a:b] for a, b in zip(bounds[r, :-1], bounds[r, 1:])]
            sse = float(sum(((s - s.mean()) ** 2).sum() for s in seg))
            km = KMeans(n_clusters=k, n_init=3, random_state=0).fit(vals[r].numpy()[:, None])
            assert sse <= km.inertia_ + 1e-9


def test_torch_and_sklearn_backends_agree_on_realistic_batches():
    """Same number of levels on ≥ 98% of the rows of realistic B = 128 batches
    (a symmetric paired-caption batch and the image→text rows of an asymmetric max-over-5 batch)."""
    rows = []
    for seed, max5 in ((0, False), (1, True)):
        rel = realistic_rel(128, seed, max5)
        rows.append(rel[~torch.eye(128, dtype=torch.bool)].view(128, 127))
    vals = torch.cat(rows)
    lt, kt = adaptive_levels_torch(vals, 2, 4)
    ls, ks = adaptive_levels_sklearn(vals, 2, 4, n_init=10, random_state=0)
    agreement = float((kt == ks).double().mean())
    assert agreement >= 0.98, f"torch/sklearn level-count agreement {agreement:.3f} < 0.98"
    assert len(set(kt.tolist())) >= 2
    same = kt == ks
    assert float((lt[same] == ls[same]).all(dim=1).double().mean()) > 0.8  # mostly the same partition


def test_the_levels_do_not_depend_on_the_dp_chunk(monkeypatch):
    """Rows are independent: the levels, the level counts and the loss are bit-equal whether the DP runs one row a
    chunk, in the CPU's cache-sized chunks or all rows at once (``DP_CHUNK_ELEMENTS_CUDA``, a CUDA device's), on
    realistic B = 128 batches (both directions, as a captured step clusters them) with ties planted."""
    from coherent_itr.losses import adaptive_ladder as al

    rel = realistic_rel(128, 2, True)
    rel[:, :40] = rel[:, :40].round(decimals=2)  # ties
    both = torch.cat([rel, rel.T])
    vals = both[~torch.eye(128, dtype=torch.bool).repeat(2, 1)].view(256, 127)
    sim = torch.randn(128, 128, dtype=DT, generator=torch.Generator().manual_seed(3))
    got = {}
    for chunk in (128 * 128, al.DP_CHUNK_ELEMENTS, al.DP_CHUNK_ELEMENTS_CUDA):
        monkeypatch.setattr(al, "DP_CHUNK_ELEMENTS", chunk)
        level, k = adaptive_levels_torch(vals, 2, 4)
        got[chunk] = (level, k, losses.build("adaptive_ladder")(sim, rel))
    (l0, k0, v0), *others = got.values()
    assert len(set(k0.tolist())) >= 2
    for level, k, v in others:
        assert torch.equal(level, l0) and torch.equal(k, k0) and torch.equal(v, v0)


def test_adaptive_minmax_one_is_triplet_and_fixed_k():
    sim, rel = random_batch(8, seed=10)
    v = losses.build("adaptive_ladder", l_min=1, l_max=1)(sim, rel)
    torch.testing.assert_close(v, losses.build("triplet")(sim), rtol=1e-12, atol=1e-12)
    crit = losses.build("adaptive_ladder", l_min=3, l_max=3)
    crit(sim, rel)
    assert set(crit.diagnostics["levels_per_row_i2t"]) == {3}
    assert all(all(s > 0 for s in row) for row in crit.diagnostics["level_sizes_i2t"])
