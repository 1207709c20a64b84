"""The figures' bootstrap band against seaborn's own bootstrap and percentile interval, and against a loop."""

import warnings

import numpy as np
import pandas as pd
import pytest
import seaborn as sns
from seaborn._statistics import EstimateAggregator

from reproduce.present.analyses import bands, plotting


def _interval(boots):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return tuple(float(v) for v in np.nanpercentile(boots, (2.5, 97.5)))


def seaborn_ci95(values):
    return _interval(sns.algorithms.bootstrap(np.asarray(values), func="mean", n_boot=bands.N_BOOT, seed=bands.SEED))


def loop_ci95(values):
    """The estimator written out: each resample's mean by itself, from the same draws."""
    a = np.asarray(values, dtype=float)
    idx = np.random.default_rng(bands.SEED).integers(0, len(a), (bands.N_BOOT, len(a)), dtype=np.intp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        f = np.nanmean if np.isnan(a).any() else np.mean
        return _interval([f(a[row]) for row in idx])


def samples(n):
    rng = np.random.default_rng(n)
    return rng.normal(50, 10, n), rng.integers(0, 3, n).astype(float), np.full(n, 0.1)


@pytest.mark.parametrize("n", [2, 3, 5, 7, 24, 29, 101])
def test_ci95_is_the_loop_over_resamples(n):
    for values in samples(n):
        assert bands.ci95(values) == pytest.approx(loop_ci95(values), rel=1e-12, abs=1e-12)


@pytest.mark.parametrize("n", [2, 4, 6, 24, 100])
def test_ci95_is_seaborns_interval_bit_for_bit_where_the_draws_coincide(n):
    for values in samples(n):
        assert bands.ci95(values) == seaborn_ci95(values)


@pytest.mark.parametrize("n", [3, 5, 29])
def test_ci95_is_an_equally_valid_draw_of_seaborns_interval_for_odd_sizes(n):
    values = samples(n)[0]
    ours, theirs = bands.ci95(values), seaborn_ci95(values)
    width = theirs[1] - theirs[0]
    assert abs(ours[0] - theirs[0]) < 0.1 * width and abs(ours[1] - theirs[1]) < 0.1 * width


def test_ci95_with_missing_values_is_nan_aware_and_silent():
    values = np.array([1.0, np.nan, 3.0, 4.5, np.nan, 2.0, 8.0, 5.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # seaborn's own bootstrap warns on an all-NaN resample
        expected = seaborn_ci95(values), seaborn_ci95([np.nan, np.nan])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = bands.ci95(values), bands.ci95([np.nan, np.nan])
    assert got[0] == expected[0] and all(np.isnan(got[1])) and all(np.isnan(expected[1]))


def test_the_band_seaborn_draws_with_the_callable():
    df = pd.DataFrame({"x": np.repeat([0, 1, 2], 10), "y": np.random.default_rng(3).normal(size=30)})
    ours = EstimateAggregator("mean", plotting.BANDS["errorbar"])
    theirs = EstimateAggregator("mean", ("ci", 95), n_boot=bands.N_BOOT, seed=bands.SEED)
    for _, g in df.groupby("x"):
        assert ours(g, "y").equals(theirs(g, "y"))
