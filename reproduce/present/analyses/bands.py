"""The 95 % bootstrap band of every figure: seaborn's interval, without seaborn's per-resample Python loop.

``seaborn``'s ``errorbar=("ci", 95)`` calls ``seaborn.algorithms.bootstrap``, which draws each of its 1,000
resamples with one call of the generator and averages it with one ``np.mean`` call: the 2,680 bands of Unified's
Fig. 4 cost ≈ 5.4 M calls and ≈ 100 s of a notebook. :func:`ci95` is the same estimator (1,000 resamples of the
values with replacement, their means, the 2.5 and 97.5 percentiles, a seeded generator) with every resample drawn
in one call and the means taken in one reduction. One call draws the same integers as seaborn's per-resample calls
whenever a resample's size is even (numpy's bounded draws use 32-bit halves of 64-bit words, and a call discards an
unused half), so its bands are seaborn's bit for bit there and an equally valid draw of them otherwise
(``tests/reproduce/present/analyses/test_bands.py``). seaborn calls it as a callable ``errorbar`` for every group of
more than one value.
"""

from __future__ import annotations

import warnings

import numpy as np

#: seaborn's default number of resamples, and the seed of every band (the same results draw the same pixels)
N_BOOT = 1000
SEED = 0
LEVEL = 95.0


def ci95(values, n_boot: int = N_BOOT, seed: int = SEED) -> tuple[float, float]:
    """``(low, high)``: the 95 % percentile interval of the mean over ``n_boot`` resamples of ``values`` with
    replacement (one ``integers(0, n, (n_boot, n))`` call of ``np.random.default_rng(seed)``; ``nanmean`` when a
    value is NaN, as seaborn's bootstrap), cut as seaborn's ``_percentile_interval`` cuts them (``np.nanpercentile``
    at 2.5 and 97.5)."""
    a = np.asarray(values)
    idx = np.random.default_rng(seed).integers(0, len(a), (int(n_boot), len(a)), dtype=np.intp)
    mean = np.nanmean if np.isnan(np.sum(a)) else np.mean
    edge = (100.0 - LEVEL) / 2
    with warnings.catch_warnings():  # a resample of NaNs only has no mean: seaborn's band skips it too
        warnings.simplefilter("ignore", RuntimeWarning)
        boots = mean(a[idx], axis=1)
        low, high = np.nanpercentile(boots, (edge, 100.0 - edge))
    return float(low), float(high)
