"""Ladder θ calibration and SAM margin statistics (coherent_itr.data.relevance_stats) on planted batches."""

from __future__ import annotations

import numpy as np
import pytest

from coherent_itr.data import relevance_stats as rs
from reproduce.protocol import calibration


def test_scope_shares_follow_from_the_coco_1k_scope_of_interest():
    # top-100 / top-200 of 5,000 candidates minus the 5 ground-truth captions
    assert rs.SCOPE_SHARES == pytest.approx((95 / 4995, 195 / 4995))


def test_calibrated_theta_puts_the_share_above_it():
    rng = np.random.default_rng(0)
    v = rng.normal(0.2, 0.1, 100_000)
    for share in (0.019, 0.039, 0.3):
        t = rs.calibrated_theta(v, share)
        assert (v >= t).mean() == pytest.approx(share, abs=2e-4)
        assert t in v  # "higher" quantile: an observed value
    # planted: 1..100 → the top 5 % is 96..100
    assert rs.calibrated_theta(np.arange(1, 101), 0.05) == 96


def test_calibrated_theta_rejects_bad_input():
    with pytest.raises(ValueError, match="share"):
        rs.calibrated_theta(np.ones(5), 1.5)
    with pytest.raises(ValueError, match="finite"):
        rs.calibrated_theta(np.array([0.1, np.nan]), 0.1)


def test_theta_table_counts_pairs_and_empty_rows_by_loop():
    rng = np.random.default_rng(1)
    mats = []
    for _ in range(3):
        m = rng.uniform(-0.2, 0.8, (6, 6))
        np.fill_diagonal(m, 1.0)
        mats.append(m)
    tab = rs.theta_table(mats, [0.4, 0.7])
    for t, row in zip([0.4, 0.7], tab.itertuples()):
        pairs = [m[i, j] >= t for m in mats for i in range(6) for j in range(6) if i != j]
        empty = [not any(m[i, j] >= t for j in range(6) if j != i) for m in mats for i in range(6)]
        assert row.share_pairs_at_or_above == pytest.approx(np.mean(pairs))
        assert row.share_rows_empty_level1 == pytest.approx(np.mean(empty))


def test_training_batches_cover_distinct_captions_like_the_training_loop():
    b = list(rs.training_batches(20, 5, batch_size=8, n_batches=100, seed=0))
    assert len(b) == 12  # 100 captions → 12 full batches of 8
    caps = np.concatenate([c for _, c in b])
    assert len(set(caps.tolist())) == len(caps)
    for img, cap in b:
        assert np.array_equal(img, cap // 5)


def test_margin_distribution_against_a_loop():
    rng = np.random.default_rng(2)
    mats = [rng.uniform(0, 2, (5, 5)) + np.eye(5) * 2.5 for _ in range(4)]
    got = rs.margin_distribution(mats, tau=3.0)
    alphas = [(m[p, p] - m[p, j]) / 3.0 for m in mats for p in range(5) for j in range(5) if j != p]
    assert got["n"] == len(alphas) == 80
    assert got["median"] == pytest.approx(np.median(alphas))
    assert got["share_above_1"] == pytest.approx(np.mean(np.array(alphas) > 1))
    assert got["share_below_0"] == pytest.approx(np.mean(np.array(alphas) < 0))
    with pytest.raises(ValueError, match="tau"):
        rs.margin_distribution(mats, tau=0)
    with pytest.raises(ValueError, match="square"):
        rs.margin_distribution([np.ones((2, 3))], tau=1)


def test_the_study_reads_the_library_statistics():
    for name in calibration.__all__:
        if name != "measure":
            assert getattr(calibration, name) is getattr(rs, name), name
