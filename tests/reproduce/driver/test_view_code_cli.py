"""``python -m reproduce.driver.code_identity --declare-view / --freeze-view``: the frozen code of the arrays a run
archive carries for the views (:mod:`reproduce.present.rankings`), and that this checkout declares every edit of it."""

from __future__ import annotations

import pytest

from reproduce.driver import code_identity as ci
from reproduce.driver import run_archive
from reproduce.present import rankings as rk


def test_every_stored_view_set_is_frozen_and_every_edit_of_its_code_declared():
    assert set(ci.VIEW_SETS) == {rk.Ranking.NAME, *run_archive.ARRAY_VIEWS}
    bad = {name: state for name, state in ci.view_states().items() if state not in ("frozen", "declared")}
    assert not bad, (
        f"{bad}: an edit that keeps every stored array: `python -m reproduce.driver.code_identity --declare-view NAME "
        f"WHY` (tests/reproduce/present/test_view_code.py checks the pins); one that changes them: --freeze-view NAME "
        f"and `python tests/view_pins.py`, then export the run archives again"
    )


@pytest.fixture
def view_file(tmp_path, monkeypatch):
    monkeypatch.setattr(rk, "VIEW_CODE_FILE", tmp_path / "view_code.json")
    rk.declared_codes.cache_clear()
    yield
    monkeypatch.undo()
    rk.declared_codes.cache_clear()


def test_freeze_declare_and_an_undeclared_edit(view_file, monkeypatch, capsys):
    def first():
        return 1

    def edited():
        return 2

    monkeypatch.setitem(ci.VIEW_SETS, "ranking", lambda: (first,))
    assert ci.view_states()["ranking"] == "not frozen"
    assert ci.main(["--declare-view", "ranking", "why"]) == 2  # nothing frozen to declare against
    assert ci.main(["--freeze-view", "ranking"]) == 0
    frozen = rk.code_hash(first)
    assert ci.view_states()["ranking"] == "frozen" and rk.frozen_code("ranking", first) == frozen

    monkeypatch.setitem(ci.VIEW_SETS, "ranking", lambda: (edited,))
    assert ci.view_states()["ranking"] == "undeclared"
    assert rk.frozen_code("ranking", edited) == rk.code_hash(edited)  # its sets are not the archives'
    assert ci.main([]) == 1  # the status exits 1 on an undeclared edit

    assert ci.main(["--declare-view", "ranking", "a clearer message"]) == 0
    assert ci.view_states()["ranking"] == "declared" and rk.frozen_code("ranking", edited) == frozen
    assert rk.declared_codes()["ranking"]["sources"][rk.code_hash(edited)] == "a clearer message"

    capsys.readouterr()
    assert ci.main(["--freeze-view", "ranking"]) == 0
    assert f"archives made under code {frozen} must be exported again" in capsys.readouterr().out
    assert rk.frozen_code("ranking", edited) == rk.code_hash(edited) and ci.view_states()["ranking"] == "frozen"

    assert ci.main(["--declare-view", "no-such-set", "why"]) == 2
    assert "not a stored view set" in capsys.readouterr().err
