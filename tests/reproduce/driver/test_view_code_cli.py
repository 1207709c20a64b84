"""``python -m reproduce.driver.code_identity --accept-view / --bump-view``: the frozen code of the arrays a run
archive carries for the views (:mod:`reproduce.present.rankings`), and that this checkout accepts every edit of it."""

from __future__ import annotations

import numpy as np
import pytest

from coherent_itr import code_identity

from reproduce.driver import code_identity as ci
from reproduce.driver import run_archive
from reproduce.present import rankings as rk


def test_every_stored_view_set_is_frozen_and_every_edit_of_its_code_declared():
    assert set(ci.VIEW_SETS) == {rk.Ranking.NAME, *run_archive.ARRAY_VIEWS}
    bad = {name: state for name, state in ci.view_states().items() if state not in ("frozen", "declared")}
    assert not bad, (
        f"{bad}: an edit that keeps every stored array: `python -m reproduce.driver.code_identity --accept-view NAME "
        f"WHY` (it checks the pinned arrays first); one that changes them: --bump-view NAME and "
        f"`python -m reproduce.driver.pins`, then export the run archives again"
    )


@pytest.fixture
def view_file(tmp_path, monkeypatch):
    """A lock with no view set frozen and an empty log, in a temporary folder."""
    ident = {k: v for k, v in code_identity.load().items() if k != "views"}
    monkeypatch.setattr(code_identity, "IDENTITY_FILE", tmp_path / "code_identity.json")
    monkeypatch.setattr(code_identity, "LOG_FILE", tmp_path / "code_identity.log")
    code_identity.write(ident)
    yield
    monkeypatch.undo()
    code_identity.load.cache_clear()


def test_freeze_declare_and_an_undeclared_edit(view_file, monkeypatch, capsys):
    def first():
        return 1

    def edited():
        return 2

    monkeypatch.setitem(ci.VIEW_SETS, "ranking", lambda: (first,))
    assert ci.view_states()["ranking"] == "not frozen"
    assert ci.main(["--accept-view", "ranking", "why"]) == 2  # nothing frozen to accept against
    assert ci.main(["--bump-view", "ranking"]) == 0
    frozen = rk.code_hash(first)
    assert ci.view_states()["ranking"] == "frozen" and rk.frozen_code("ranking", first) == frozen

    monkeypatch.setitem(ci.VIEW_SETS, "ranking", lambda: (edited,))
    assert ci.view_states()["ranking"] == "undeclared"
    assert rk.frozen_code("ranking", edited) == rk.code_hash(edited)  # its sets are not the archives'
    assert ci.main([]) == 1  # the status exits 1 on an undeclared edit

    assert ci.main(["--accept-view", "ranking", "a clearer message"]) == 0  # the pinned ranking is unchanged
    assert ci.view_states()["ranking"] == "declared" and rk.frozen_code("ranking", edited) == frozen
    assert rk.code_hash(edited) in rk.declared_codes()["ranking"]["sources"]
    last = code_identity.read_log()[-1]
    assert (last["verb"], last["view"], last["source"], last["why"]) == (
        "accept-view",
        "ranking",
        rk.code_hash(edited),
        "a clearer message",
    )

    capsys.readouterr()
    assert ci.main(["--bump-view", "ranking"]) == 0
    assert f"archives made under code {frozen} must be exported again" in capsys.readouterr().out
    assert rk.frozen_code("ranking", edited) == rk.code_hash(edited) and ci.view_states()["ranking"] == "frozen"

    assert ci.main(["--accept-view", "no-such-set", "why"]) == 2
    assert "not a stored view set" in capsys.readouterr().err


def test_an_accepted_view_edit_that_moves_the_pinned_arrays_is_refused(view_file, monkeypatch, capsys):
    def edited():
        return 2

    assert ci.main(["--bump-view", "ranking"]) == 0
    monkeypatch.setitem(ci.VIEW_SETS, "ranking", lambda: (edited,))

    def ties_last(sim, k=5, query="image"):  # ties by the higher candidate index: another ranking
        s = rk._oriented(np.asarray(sim), query)
        return s.shape[1] - 1 - np.argsort(-s[:, ::-1], axis=1, kind="stable")[:, :k]

    monkeypatch.setattr(rk, "top_k_indices", ties_last)
    before = code_identity.IDENTITY_FILE.read_bytes()
    assert ci.main(["--accept-view", "ranking", "a clearer message"]) == 1
    assert "not accepted" in capsys.readouterr().err and code_identity.IDENTITY_FILE.read_bytes() == before
