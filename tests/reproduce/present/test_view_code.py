"""The frozen code of the arrays a run archive carries for the views (:func:`reproduce.present.rankings.frozen_code`):
a source recorded for a stored set names its frozen code, any other source its live hash, and the pinned arrays
(``tests/view_pins.py``) catch an edit declared to keep them that moves one."""

from __future__ import annotations

import json

import numpy as np
import view_pins

from reproduce.present import rankings as rk


def test_a_recorded_source_names_the_frozen_code_and_any_other_source_its_live_hash(monkeypatch):
    def first():
        return 1

    def edited():
        return 2

    live = rk.code_hash(first)
    monkeypatch.setattr(rk, "declared_codes", lambda: {"demo": {"code": "c" * 16, "sources": {live: "frozen"}}})
    assert rk.frozen_code("demo", first) == "c" * 16
    assert rk.frozen_code("demo", edited) == rk.code_hash(edited) != "c" * 16  # undeclared: never the frozen code
    assert rk.frozen_code("not-frozen", first) == live


def test_the_checkout_names_the_codes_it_records():
    assert rk.RANKING_CODE == rk.frozen_code(rk.Ranking.NAME, *rk.RANKING_SOURCES)
    assert rk.RANKING_CODE == rk.declared_codes()[rk.Ranking.NAME]["code"]


def test_the_stored_view_arrays_are_as_pinned():
    pins, got = json.loads(view_pins.PINS.read_text()), view_pins.compute()
    for name in pins:
        assert got[name]["code"] == pins[name]["code"], (
            f"{name}: the checkout's code {got[name]['code']} is not the pinned {pins[name]['code']}: after "
            f"`python -m reproduce.driver.code_identity --freeze-view {name}` pin again: `python tests/view_pins.py`"
        )
    assert got["ranking"]["sha256"] == pins["ranking"]["sha256"], (
        "the stored ranking moved under the same code: the edit declared to keep every stored array does not; "
        "freeze it again (--freeze-view ranking) and pin again"
    )
    np.testing.assert_allclose(
        got["fig7b"]["error"],
        pins["fig7b"]["error"],
        rtol=1e-3,
        atol=1e-6,
        err_msg="Fig. 7 (b)'s stored errors moved under the same code: freeze it again (--freeze-view fig7b)",
    )


def test_the_ranking_pin_sees_a_change_of_the_tie_rule(monkeypatch):
    pinned = view_pins.digest(view_pins.ranking_arrays())

    def ties_last(sim, k=5, query="image"):  # ties by the higher candidate index
        s = rk._oriented(np.asarray(sim), query)
        return s.shape[1] - 1 - np.argsort(-s[:, ::-1], axis=1, kind="stable")[:, :k]

    monkeypatch.setattr(rk, "top_k_indices", ties_last)
    assert view_pins.digest(view_pins.ranking_arrays()) != pinned


def test_the_fig7b_pin_sees_another_batch_draw(monkeypatch):
    from reproduce.present.analyses import sndcg_error

    pinned = json.loads(view_pins.PINS.read_text())["fig7b"]["error"]
    real = sndcg_error.error_arrays
    monkeypatch.setattr(sndcg_error, "error_arrays", lambda seed, *a, **k: real(seed + 1, *a, **k))
    assert not np.allclose(view_pins.compute()["fig7b"]["error"], pinned, rtol=1e-3, atol=1e-6)
