"""The frozen code identity of the run keys (coherent_itr/code_identity.py) and its guard.

Every frozen file is as frozen or its edit is declared with a reason; a declared edit keeps the keys and an
undeclared one moves them (as every edit did before the freeze); and pinned tiny runs of every loss keep their
numbers bit for bit — the check that an edit declared neutral is neutral."""

from __future__ import annotations

import json

import numpy as np

import engine_pins
from coherent_itr import code_identity, runs
from coherent_itr.config import Config


def test_every_frozen_file_is_as_frozen_or_its_edit_is_declared_with_a_reason():
    changed = code_identity.changed_files()
    bad = {f: s for f, s in changed.items() if s != "declared"}
    assert not bad, (
        f"library files edited since the freeze without a declaration: {bad}. If every number of every run stays, "
        "add the file's new sha256 and why to 'neutral_edits' in src/coherent_itr/code_identity.json (the pins below "
        "check it); if numbers change, run `python -m reproduce.driver.code_identity --freeze FILE` and "
        "`python tests/engine_pins.py`: the runs of the sets holding FILE train again."
    )
    for rel, entry in code_identity.load().get("neutral_edits", {}).items():
        assert len(entry.get("why", "")) > 20, f"{rel}: a declared edit must say why the numbers are unchanged"


def test_a_frozen_set_of_unchanged_files_hashes_as_frozen():
    changed = code_identity.changed_files()
    sets = code_identity.load()["sets"]
    assert len(sets) >= 20
    for s in sets:
        files = tuple(s["files"])
        if not set(files) & set(changed):
            assert runs.hash_files(runs.PACKAGE_DIR, files) == s["hash"], files


def test_a_declared_edit_keeps_the_key_and_an_undeclared_one_moves_it(monkeypatch):
    cfg = Config(data="synthetic", data_scale="smoke", loss="triplet")
    files = tuple(runs.training_files(cfg))
    frozen = code_identity.frozen_hash(files)
    assert frozen is not None, "the study's triplet runs are frozen"

    def key_when(state):
        monkeypatch.setattr(code_identity, "_changed_now", lambda: {"train.py": state} if state else {})
        runs._files_hash.cache_clear()
        return runs._files_hash(files)

    try:
        assert key_when(None) == frozen
        assert key_when("declared") == frozen
        assert key_when("undeclared") == runs.hash_files(runs.PACKAGE_DIR, files)
        monkeypatch.setattr(code_identity, "_frozen_sets", lambda: {files: "0" * 16})  # as if train.py had changed
        assert key_when("declared") == "0" * 16 and key_when("undeclared") != "0" * 16
    finally:
        runs._files_hash.cache_clear()


def test_freezing_again_one_file_moves_only_the_sets_that_hold_it(monkeypatch):
    sets = [tuple(s["files"]) for s in code_identity.load()["sets"]]
    ident = code_identity.freeze(sets, lambda s: "live", only={"losses/sndcg.py"})
    moved = {tuple(s["files"]) for s in ident["sets"] if s["hash"] == "live"}
    assert moved and moved == {s for s in sets if "losses/sndcg.py" in s}
    assert "losses/sndcg.py" not in ident["neutral_edits"]


def _readable(pin: dict) -> dict:
    out = {f"last.{k}": v for k, v in pin["last"].items()}
    out.update({f"mean_abs.{k}": v for k, v in pin["mean_abs"].items()})
    if "rsum" in pin:
        out["rsum"] = pin["rsum"]
    return out


def test_pinned_tiny_runs_keep_every_number(tmp_path):
    """The guard: one tiny run per loss (and the synthetic world, and one test evaluation) — bit for bit on the CPU
    that pinned them, to a relative 1e-3 on another (its float32 sums round differently)."""
    pins = json.loads(engine_pins.PINS.read_text())
    exact = engine_pins.cpu_signature() == pins["machine"]
    got = engine_pins.compute(tmp_path)
    moved = {}
    for name, want in pins["runs"].items():
        have = got[name]
        if exact:
            diff = {k: (want[k], have.get(k)) for k in ("history", "test_img", "test_cap", "test") if k in want}
            diff = {k: v for k, v in diff.items() if v[0] != v[1]}
        else:
            w, h = _readable(want), _readable(have)
            diff = {k: (v, h.get(k)) for k, v in w.items() if not np.isclose(h.get(k, np.nan), v, rtol=1e-3, atol=1e-6)}
        if diff:
            w, h = _readable(want), _readable(have)
            moved[name] = {**diff, "readable (pinned, now)": {k: (v, h.get(k)) for k, v in w.items() if v != h.get(k)}}
    how = (
        "bit for bit"
        if exact
        else f"to 1e-3 (pinned on {pins['machine']['cpu']}, here {engine_pins.cpu_signature()['cpu']})"
    )
    assert not moved, f"numbers moved ({how}): {json.dumps(moved, indent=1)}"
