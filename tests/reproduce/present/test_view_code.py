"""The frozen code of the arrays a run archive carries for the views (:func:`reproduce.present.rankings.frozen_code`):
a source recorded for a stored set names its frozen code, any other source its live hash, and the pinned arrays
(:mod:`reproduce.driver.pins`) catch an edit accepted as keeping them that moves one."""

from __future__ import annotations

import numpy as np

from reproduce.driver import pins
from reproduce.present import rankings as rk


def test_a_recorded_source_names_the_frozen_code_and_any_other_source_its_live_hash(monkeypatch):
    def first():
        return 1

    def edited():
        return 2

    live = rk.code_hash(first)
    monkeypatch.setattr(rk, "declared_codes", lambda: {"demo": {"code": "c" * 16, "sources": [live]}})
    assert rk.frozen_code("demo", first) == "c" * 16
    assert rk.frozen_code("demo", edited) == rk.code_hash(edited) != "c" * 16  # undeclared: never the frozen code
    assert rk.frozen_code("not-frozen", first) == live


def test_the_checkout_names_the_codes_it_records():
    assert rk.RANKING_CODE == rk.frozen_code(rk.Ranking.NAME, *rk.RANKING_SOURCES)
    assert rk.RANKING_CODE == rk.declared_codes()[rk.Ranking.NAME]["code"]


def test_the_stored_view_arrays_are_as_pinned():
    pinned, got = pins.load()["views"], pins.compute_views()
    assert set(pinned) == set(got) == set(pins.VIEW_ARRAYS)
    for name in pinned:
        assert got[name]["code"] == pinned[name]["code"], (
            f"{name}: the checkout's code {got[name]['code']} is not the pinned {pinned[name]['code']}: after "
            f"`python -m reproduce.driver.code_identity --bump-view {name}` pin again: "
            "`python -m reproduce.driver.pins`"
        )
    assert not pins.views_moved(pinned, got), (
        f"stored view arrays moved under the same code: {pins.views_moved(pinned, got)}; the edit accepted as keeping "
        "every stored array does not: bump it (--bump-view NAME) and pin again"
    )


def test_the_ranking_pin_sees_a_change_of_the_tie_rule(monkeypatch):
    pinned = pins.digest(pins.ranking_arrays())

    def ties_last(sim, k=5, query="image"):  # ties by the higher candidate index
        s = rk._oriented(np.asarray(sim), query)
        return s.shape[1] - 1 - np.argsort(-s[:, ::-1], axis=1, kind="stable")[:, :k]

    monkeypatch.setattr(rk, "top_k_indices", ties_last)
    assert pins.digest(pins.ranking_arrays()) != pinned
    assert pins.views_moved(pins.load()["views"], pins.compute_views(["ranking"]))


def test_the_fig7b_pin_sees_another_batch_draw(monkeypatch):
    from reproduce.present.analyses import sndcg_error

    pinned = pins.load()["views"]["fig7b"]["error"]
    real = sndcg_error.error_arrays
    monkeypatch.setattr(sndcg_error, "error_arrays", lambda seed, *a, **k: real(seed + 1, *a, **k))
    assert not np.allclose(pins.compute_views()["fig7b"]["error"], pinned, rtol=1e-3, atol=1e-6)
