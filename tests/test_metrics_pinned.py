"""The metric registry changed how metrics are wired, not what they compute: every output of the
seeded problems of ``pinned_evaluate`` equals, bit for bit and key for key, what the code before the
registry produced (``pinned_values``, generated at commit 810033d)."""

import pytest
from pinned_evaluate import scenarios
from pinned_values import PINNED


@pytest.fixture(scope="module")
def computed():
    return scenarios()


@pytest.mark.parametrize("name", sorted(PINNED))
def test_outputs_are_bit_identical_to_the_pinned_ones(computed, name):
    got, want = computed[name], PINNED[name]
    assert sorted(got) == sorted(want), (sorted(set(got) - set(want)), sorted(set(want) - set(got)))
    diff = {k: (got[k], want[k]) for k in want if float(got[k]).hex() != float(want[k]).hex()}
    assert diff == {}
    assert all(type(v) is float for v in got.values())


def test_key_order_is_unchanged(computed):
    for name, want in PINNED.items():
        assert list(computed[name]) == list(want), name
