"""Training health (coherent_itr.health): chance RSUM, the health record, the one collapse rule."""

from __future__ import annotations

import math

import numpy as np
import pytest

from coherent_itr import health
from coherent_itr.metrics import retrieval_metrics


def _unit(x):
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _stats(img, cap, ioc):
    sim = img @ cap.T
    out = {"val_rsum": retrieval_metrics(sim, ioc)["rsum"], "val_rsum_chance": health.chance_rsum(ioc)}
    out.update(health.similarity_health(sim, ioc))
    return out


def test_chance_rsum_matches_closed_forms_and_simulation():
    ioc = np.repeat(np.arange(100), 5)
    # t2i: K/N; i2t: 1 − C(495, K)/C(500, K)
    i2t = sum(1 - math.comb(495, k) / math.comb(500, k) for k in (1, 5, 10))
    assert health.chance_rsum(ioc) == pytest.approx(100 * (i2t + (1 + 5 + 10) / 100), rel=1e-12)
    # uneven captions per image, against a Monte-Carlo of random rankings
    ioc2 = np.array([0, 0, 0, 1, 2, 2, 3, 3, 3, 3, 4, 5, 5, 6, 7, 7, 7, 8, 9, 9])
    rng = np.random.default_rng(0)
    sims = [retrieval_metrics(rng.random((10, len(ioc2))), ioc2)["rsum"] for _ in range(3000)]
    assert np.mean(sims) == pytest.approx(health.chance_rsum(ioc2), rel=0.02)


def test_similarity_health_against_a_loop():
    rng = np.random.default_rng(1)
    ioc = np.repeat(np.arange(6), 3)
    sim = rng.normal(size=(6, 18))
    h = health.similarity_health(sim, ioc)
    pos = np.mean([sim[ioc[j], j] for j in range(18)])
    hard = np.mean([max(sim[i, j] for j in range(18) if ioc[j] != i) for i in range(6)])
    assert h == pytest.approx({"val_pos_sim": pos, "val_hardneg_sim": hard})


@pytest.mark.parametrize("sigma", [0.001, 0.003, 0.01])
def test_planted_collapsed_embedding_is_collapsed(sigma):
    # one shared direction plus small noise: every embedding nearly the same point
    rng = np.random.default_rng(2)
    n, d = 100, 128
    ioc = np.repeat(np.arange(n), 5)
    mu = _unit(rng.normal(size=(1, d)))
    img, cap = _unit(mu + sigma * rng.normal(size=(n, d))), _unit(mu + sigma * rng.normal(size=(5 * n, d)))
    h = health.epoch_health(_stats(img, cap, ioc))
    collapsed, reason = health.is_collapsed(h)
    assert collapsed and reason.startswith("retrieval"), (h, reason)
    assert health.cone(h)[0]  # nearly one point: a narrow cone too, but the ranking is what decides


def test_a_squashed_embedding_that_still_ranks_is_a_narrow_cone_not_a_collapse():
    """The state hardest-negative training passes through (Unified Sec. 3.3): every cosine ≥ 0.99, but the
    ranking of a good embedding kept — retrieval far above chance, so never collapsed (the old geometric rule
    called this collapsed and threw away working settings)."""
    rng = np.random.default_rng(5)
    n, d = 1000, 128
    ioc = np.repeat(np.arange(n), 5)
    img = _unit(rng.normal(size=(n, d)))
    cap = _unit(img[ioc] + 0.5 * rng.normal(size=(5 * n, d)) / np.sqrt(d))
    mu = _unit(rng.normal(size=(1, d)))
    squash = lambda x: _unit(mu + 0.02 * x)  # a monotone map of cosines near 1: the ranking survives
    healthy, squashed = (
        health.epoch_health(_stats(img, cap, ioc)),
        health.epoch_health(_stats(squash(img), squash(cap), ioc)),
    )
    assert squashed["val_hardneg_sim"] >= health.CONE_COS and abs(squashed["val_gap"]) <= health.CONE_GAP
    assert squashed["val_rsum_over_chance"] > 10 and health.cone(squashed)[0]
    collapsed, reason = health.is_collapsed(squashed)
    assert not collapsed and "narrow cone" in reason, reason
    assert not health.is_collapsed(healthy)[0] and not health.cone(healthy)[0]


@pytest.mark.parametrize("ratio", [2.0001, 10.0, 150.0])
@pytest.mark.parametrize("cos", [0.2, 0.995, 0.99999])
def test_any_run_above_twice_chance_is_not_collapsed_whatever_its_geometry(ratio, cos):
    h = {"val_pos_sim": cos, "val_hardneg_sim": cos, "val_gap": 0.0, "val_rsum_over_chance": ratio}
    assert health.is_collapsed(h)[0] is False
    assert health.is_collapsed({**h, "val_rsum_over_chance": 2.0})[0] is True


def test_random_embedding_fails_on_retrieval():
    rng = np.random.default_rng(3)
    ioc = np.repeat(np.arange(100), 5)
    h = health.epoch_health(_stats(_unit(rng.normal(size=(100, 64))), _unit(rng.normal(size=(500, 64))), ioc))
    assert h["val_hardneg_sim"] < 0.9
    collapsed, reason = health.is_collapsed(h)
    assert collapsed and reason.startswith("retrieval")


def test_planted_healthy_embedding_is_not_collapsed():
    # captions = their image's vector plus moderate noise: retrieval far above chance, cosines spread
    rng = np.random.default_rng(4)
    ioc = np.repeat(np.arange(100), 5)
    img = _unit(rng.normal(size=(100, 64)))
    cap = _unit(img[ioc] + 0.6 * rng.normal(size=(500, 64)) / np.sqrt(64))
    h = health.epoch_health(_stats(img, cap, ioc))
    collapsed, reason = health.is_collapsed(h)
    assert not collapsed and reason.startswith("healthy"), (h, reason)
    assert h["val_rsum_over_chance"] > 10


def test_is_collapsed_reads_records_histories_and_rejects_garbage():
    good = {"val_rsum": 300.0, "val_rsum_chance": 30.0, "val_pos_sim": 0.5, "val_hardneg_sim": 0.6}
    bad = {"val_rsum": 40.0, "val_rsum_chance": 30.0, "val_pos_sim": 0.999, "val_hardneg_sim": 0.9995}
    history = [{**bad, "epoch": 1}, {**good, "epoch": 2}, {**bad, "epoch": 3}]
    assert health.is_collapsed(history)[0] is False  # the best-RSUM epoch is the one judged
    assert health.is_collapsed(history[:1])[0] is True
    record = {"health": health.epoch_health(bad)}
    assert health.is_collapsed(record)[0] is True
    assert health.is_collapsed(health.epoch_health({**good, "val_pos_sim": float("nan")}))[0] is True
    with pytest.raises(ValueError, match="expected a run record"):
        health.is_collapsed({"rsum": 3})
    with pytest.raises(KeyError, match="val_rsum_chance"):
        health.epoch_health({"val_rsum": 1.0, "val_pos_sim": 0.1, "val_hardneg_sim": 0.2})


def test_thresholds_are_the_documented_constants():
    assert (health.CONE_COS, health.CONE_GAP, health.COLLAPSE_RSUM_FACTOR) == (0.99, 0.01, 2.0)
    # boundary: exactly at the thresholds counts (narrow cone; collapsed at exactly 2× chance)
    at = {"val_pos_sim": 0.98, "val_hardneg_sim": 0.99, "val_gap": -0.01, "val_rsum_over_chance": 50.0}
    assert health.cone(at)[0] and not health.is_collapsed(at)[0]
    assert not health.cone({**at, "val_hardneg_sim": 0.9899, "val_gap": -0.0099})[0]
    assert health.is_collapsed({**at, "val_rsum_over_chance": 2.0})[0]
