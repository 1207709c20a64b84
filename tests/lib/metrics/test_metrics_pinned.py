"""The metric registry changed how metrics are wired, not what they compute: every output of the
seeded problems of ``pinned_evaluate`` equals, key for key, what the code before the registry produced
(``tests/data/pinned_values.json``, generated at commit 810033d on an AVX2 CPU) — bit for bit on that CPU, and to within
``MAX_ULP`` units in the last place elsewhere: numpy's vectorised sums take wider SIMD steps on AVX-512
CPUs and round differently in the last bit (e.g. ``ndcg10_i2t_cider`` of ``study_folds`` one
ulp off on an Intel Xeon with AVX-512 with the registry code untouched). Any change to what a metric
computes moves it by far more than a few ulps."""

import json

import numpy as np
import pytest
from pinned_evaluate import scenarios
from helpers import DATA

PINNED = json.loads((DATA / "pinned_values.json").read_text())["pinned"]


MAX_ULP = 4


def _ulps(a: float, b: float) -> int:
    """How many float64 values lie between ``a`` and ``b`` (0: bit-identical)."""
    if float(a).hex() == float(b).hex():
        return 0
    ia, ib = (int(np.array(x, dtype=np.float64).view(np.int64)) for x in (a, b))
    ia, ib = (i if i >= 0 else -(i & 0x7FFFFFFFFFFFFFFF) for i in (ia, ib))  # sign-magnitude → ordered ints
    return abs(ia - ib)


def test_ulp_distance():
    x = 0.2705409291319712
    assert _ulps(x, x) == 0 and _ulps(x, np.nextafter(x, 1)) == 1 and _ulps(x, np.nextafter(x, 0)) == 1
    assert _ulps(0.0, -0.0) == 0 and _ulps(np.nextafter(0, 1), np.nextafter(0, -1)) == 2
    assert _ulps(x, x * (1 + 1e-12)) > MAX_ULP


@pytest.fixture(scope="module")
def computed():
    return scenarios()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_outputs_are_bit_identical_to_the_pinned_ones(computed, name):
    got, want = computed[name], PINNED[name]
    assert sorted(got) == sorted(want), (sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    diff = {k: (got[k], want[k]) for k in want if _ulps(got[k], want[k]) > MAX_ULP}
    assert diff == {}
    assert all(type(v) is float for v in got.values())


def test_key_order_is_unchanged(computed):
    for name, want in PINNED.items():
        assert list(computed[name]) == list(want), name
