"""``python -m reproduce.driver.code_identity --accept / --bump``: the code lock's two verbs.

An acceptance runs the pins of the runs that execute the file and is refused, with nothing written, when one moves;
a bump gives new labels to exactly the sets holding the file, so exactly their runs train again; each appends why
to the log."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from coherent_itr import code_identity, runs
from coherent_itr.runs import identity
from coherent_itr.losses import triplet

from reproduce.driver import code_identity as ci
from reproduce.driver import pins
from reproduce.spec import experiments
from reproduce.spec.profiles import profile_for

REL = "losses/triplet.py"


@pytest.fixture
def lock(tmp_path, monkeypatch):
    """The lock and its log copied to a temporary folder, every cache of them forgotten before and after."""
    monkeypatch.setattr(code_identity, "IDENTITY_FILE", tmp_path / "code_identity.json")
    monkeypatch.setattr(code_identity, "LOG_FILE", tmp_path / "code_identity.log")
    shutil.copy(code_identity.PACKAGE_DIR / "code_identity.json", code_identity.IDENTITY_FILE)
    shutil.copy(code_identity.PACKAGE_DIR / "code_identity.log", code_identity.LOG_FILE)

    def forget():
        for f in (code_identity.load, code_identity._changed_now, code_identity._frozen_sets, identity._files_hash):
            f.cache_clear()

    forget()
    yield tmp_path
    monkeypatch.undo()
    forget()


@pytest.fixture
def edited(monkeypatch):
    """``losses/triplet.py`` as if edited (another sha256), its content unchanged; only ``toy/triplet`` pinned on
    this CPU, at this checkout's numbers (so the check is exact whatever CPU runs the test)."""
    real = code_identity.file_sha256
    monkeypatch.setattr(code_identity, "file_sha256", lambda rel, *a: "e" * 64 if rel == REL else real(rel, *a))
    monkeypatch.setattr(pins, "engine_pins_for", lambda rel: ["toy/triplet"])
    with tempfile.TemporaryDirectory() as d:
        baseline = pins.compute(d, ["toy/triplet"])
    here = pins.cpu_signature()
    monkeypatch.setattr(pins, "load", lambda *a: {"machines": [{"machine": here, "runs": baseline}], "views": {}})


def test_the_pins_of_a_file_are_the_runs_that_execute_it():
    for_triplet = pins.engine_pins_for(REL)
    assert "toy/triplet" in for_triplet and "synthetic/triplet" in for_triplet and "toy/sndcg" not in for_triplet
    assert set(pins.engine_pins_for("train.py")) == set(pins.configs())  # every run executes the loop
    assert pins.engine_pins_for("metrics/human.py") == [pins.EVALUATED]  # evaluation code: the evaluated run
    assert pins.engine_pins_for("packed.py") == []  # in no run's file set


def test_an_acceptance_the_pins_refute_is_refused_and_writes_nothing(lock, edited, monkeypatch, capsys):
    real = triplet.TripletLoss.forward
    monkeypatch.setattr(triplet.TripletLoss, "forward", lambda self, *a, **k: 1.001 * real(self, *a, **k))
    before = (code_identity.IDENTITY_FILE.read_bytes(), code_identity.LOG_FILE.read_bytes())
    assert ci.main(["--accept", REL, "a clearer message, no number changes"]) == 1
    assert "not accepted — numbers moved" in capsys.readouterr().err
    assert (code_identity.IDENTITY_FILE.read_bytes(), code_identity.LOG_FILE.read_bytes()) == before


def test_an_acceptance_the_pins_confirm_is_recorded_with_its_reason_in_the_log(lock, edited, capsys):
    lines = code_identity.LOG_FILE.read_text().splitlines()
    assert ci.main(["--accept", REL, "a clearer message, no number changes", "--devices", "cpu"]) == 0
    assert code_identity.load()["neutral_edits"][REL] == {"sha256": "e" * 64, "devices": ["cpu"]}
    now = code_identity.LOG_FILE.read_text().splitlines()
    assert now[: len(lines)] == lines and len(now) == len(lines) + 1  # appended, nothing rewritten
    events = code_identity.read_log()
    last = events[-1]
    assert (last["verb"], last["file"], last["sha256"], last["pins"]) == ("accept", REL, "e" * 64, ["toy/triplet"])
    assert last["why"] == "a clearer message, no number changes" and last["devices"] == ["cpu"]


def test_an_acceptance_no_pin_can_check_is_refused(lock, monkeypatch, capsys):
    monkeypatch.setattr(pins, "engine_pins_for", lambda rel: [])
    real = code_identity.file_sha256
    monkeypatch.setattr(code_identity, "file_sha256", lambda rel, *a: "e" * 64 if rel == REL else real(rel, *a))
    assert ci.main(["--accept", REL, "why it keeps every number"]) == 1
    assert "no pin executes it" in capsys.readouterr().err
    assert ci.main(["--accept", "no/such.py", "why"]) == 2


def test_a_bump_moves_exactly_the_keys_of_the_runs_that_execute_the_file(lock, capsys):
    configs = [c for data in ("synthetic", "flickr8k") for c in experiments.plan(profile_for("smoke", data))]
    before = {c.key(): runs.run_key(c) for c in configs}
    n = len(code_identity.read_log())
    assert ci.main(["--bump", "losses/sndcg.py", "--why", "the S-NDCG temperature's rounding changes"]) == 0
    identity._files_hash.cache_clear()
    after = {c.key(): runs.run_key(c) for c in configs}
    holding = {c.key() for c in configs if "losses/sndcg.py" in runs.training_files(c)}
    assert holding and holding != set(before)
    assert {k for k in before if before[k] != after[k]} == holding
    assert "losses/sndcg.py" not in code_identity.load()["neutral_edits"]
    last = code_identity.read_log()[-1]
    assert len(code_identity.read_log()) == n + 1 and last["verb"] == "bump" and last["files"] == ["losses/sndcg.py"]
