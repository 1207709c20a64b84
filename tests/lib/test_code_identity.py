"""The code lock of the run keys (coherent_itr/code_identity.py) and its guard.

Every locked file is as frozen or its edit is accepted, with a reason in the log; an accepted edit keeps the keys
and one not accepted moves them (as every edit did before the freeze); and pinned tiny runs of every loss keep
their numbers bit for bit (:mod:`reproduce.driver.pins`) — the check that an accepted edit is neutral."""

from __future__ import annotations

import json

from coherent_itr import code_identity, runs
from coherent_itr.config import Config
from coherent_itr.runs import identity

from reproduce.driver import pins


def test_every_frozen_file_is_as_frozen_or_its_edit_is_declared_with_a_reason():
    changed = code_identity.changed_files()
    bad = {f: s for f, s in changed.items() if not s.startswith("declared")}
    assert not bad, (
        f"library files edited since the freeze and not accepted: {bad}. If every number of every run stays: "
        "`python -m reproduce.driver.code_identity --accept FILE WHY` (it runs the pins first); if numbers change: "
        "`--bump FILE --why WHY` and `python -m reproduce.driver.pins`: the runs of the sets holding FILE train again."
    )


def test_every_accepted_edit_says_why_in_the_log():
    logged = {(e.get("file"), e.get("sha256")): e for e in code_identity.read_log() if e.get("verb") == "accept"}
    for rel, entry in code_identity.load().get("neutral_edits", {}).items():
        event = logged.get((rel, entry["sha256"]))
        assert event is not None, f"{rel}: its accepted content {entry['sha256'][:12]} has no line in the log"
        assert len(event.get("why", "")) > 20, f"{rel}: an accepted edit must say why the numbers are unchanged"
        assert event.get("devices") == entry.get("devices"), rel
    views = {(e["view"], e["source"]) for e in code_identity.read_log() if e.get("verb") == "accept-view"}
    for name, entry in code_identity.load().get("views", {}).items():
        for source in entry["sources"]:
            assert source == entry["code"] or (name, source) in views, f"view set {name}: {source} not in the log"


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
        identity._files_hash.cache_clear()
        return identity._files_hash(files)

    try:
        assert key_when(None) == frozen
        assert key_when("declared") == frozen
        assert key_when("undeclared") == runs.hash_files(runs.PACKAGE_DIR, files)
        monkeypatch.setattr(code_identity, "_frozen_sets", lambda: {files: "0" * 16})  # as if train.py had changed
        assert key_when("declared") == "0" * 16 and key_when("undeclared") != "0" * 16
    finally:
        identity._files_hash.cache_clear()


def test_an_edit_declared_for_the_cpu_keeps_cpu_keys_and_moves_cuda_keys(monkeypatch):
    """A declaration with ``devices: ["cpu"]`` (an edit of a CUDA-only path) keeps the frozen hash of a CPU run and
    gives a CUDA run the live hash, in the file set and in the run key (planted CUDA machine); one without
    ``devices`` keeps both."""
    cfg = Config(data="synthetic", data_scale="smoke", loss="adaptive_ladder", relevance="true")
    files = tuple(runs.training_files(cfg))
    assert "losses/adaptive_ladder.py" in files
    cuda = {"torch": "2.11.0+cu130", "device": "cuda:sm90", "tf32_matmul": False, "tf32_cudnn": True, "step": "x"}
    live = runs.hash_files(runs.PACKAGE_DIR, files)

    def when(state):
        monkeypatch.setattr(code_identity, "_changed_now", lambda: {"losses/adaptive_ladder.py": state})
        identity._files_hash.cache_clear()
        return (
            identity._files_hash(files, "cpu"),
            identity._files_hash(files, "cuda"),
            runs.run_key(cfg),
            runs.run_key(cfg, 1, cuda),
        )

    try:
        monkeypatch.setattr(code_identity, "_frozen_sets", lambda: {files: "0" * 16})
        everywhere, cpu_only = when("declared"), when("declared:cpu")
        assert everywhere[:2] == ("0" * 16, "0" * 16) and cpu_only[:2] == ("0" * 16, live)
        assert cpu_only[2] == everywhere[2] and cpu_only[3] != everywhere[3]
        assert when("declared:cpu,cuda")[:2] == ("0" * 16, "0" * 16) and when("undeclared")[:2] == (live, live)
    finally:
        identity._files_hash.cache_clear()
    assert code_identity.holds(None, "cuda") and code_identity.holds("declared", "cuda")
    assert code_identity.holds("declared:cpu", "cpu") and not code_identity.holds("declared:cpu", "cuda")
    assert not code_identity.holds("undeclared", "cpu") and not code_identity.holds("missing", "cpu")


def test_a_declaration_names_its_devices_in_the_files_state(tmp_path, monkeypatch):
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "b.py").write_text("y = 1\n")
    sha = code_identity.file_sha256("a.py", tmp_path)
    ident = {
        "files": {"a.py": "0" * 64, "b.py": "0" * 64},
        "neutral_edits": {"a.py": {"sha256": sha, "why": "w", "devices": ["cpu"]}, "b.py": {"sha256": "1", "why": "w"}},
    }
    monkeypatch.setattr(code_identity, "load", lambda: ident)
    assert code_identity.changed_files(tmp_path) == {"a.py": "declared:cpu", "b.py": "undeclared"}


def test_freezing_again_one_file_moves_only_the_sets_that_hold_it(monkeypatch):
    sets = [tuple(s["files"]) for s in code_identity.load()["sets"]]
    ident = code_identity.freeze(sets, lambda s: "live", only={"losses/sndcg.py"})
    moved = {tuple(s["files"]) for s in ident["sets"] if s["hash"] == "live"}
    assert moved and moved == {s for s in sets if "losses/sndcg.py" in s}
    assert "losses/sndcg.py" not in ident["neutral_edits"]


def test_pinned_tiny_runs_keep_every_number_and_hash_every_file_they_run(tmp_path):
    """The guard: one tiny run per loss with the relevance its arms train with (and the synthetic world, and one
    test evaluation) — bit for bit on a CPU that pinned them; on a CPU with no pins of its own, to a relative 1e-3 on
    the closest pinned CPU (its float32 sums round differently). The same runs, profiled: every library file each
    one calls into is in its training key's file set."""
    executed: dict[str, set[str]] = {}
    moved, how = pins.check_engine(None, tmp_path, executed=executed)
    assert not moved, f"numbers moved ({how}): {json.dumps(moved, indent=1)}"
    configs = pins.configs()
    assert set(executed) == set(configs) and all(executed.values()), "the profiler saw no package code"
    unhashed = {n: sorted(files - set(runs.training_files(configs[n]))) for n, files in executed.items()}
    assert not any(unhashed.values()), f"executed but not in the training key: {unhashed}"
