"""The ledger's verdict rule on hand-made effects (computed by hand, not by the code under test)."""
import math

import pytest

from reproduce.ledger import ClaimResult, mean_ci, verdict


def test_mean_ci_by_hand():
    # values 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t_{0.975, 2} = 4.302652729749464
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    half = 4.302652729749464 / math.sqrt(3)
    assert m == 2.0 and lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)


@pytest.mark.parametrize("effects, expected", [
    ([1.0, 1.1, 0.9], "reproduced"),          # interval well above 0
    ([-1.0, -1.1, -0.9], "not reproduced"),   # well below 0
    ([1.0, -1.0, 0.5], "inconclusive"),       # straddles 0
    ([5.0], "inconclusive"),                  # one seed: no interval
    ([], "inconclusive"),
])
def test_direction_rule(effects, expected):
    assert verdict("direction", effects)[0] == expected


@pytest.mark.parametrize("effects, tol, expected", [
    ([0.01, -0.01, 0.0], 0.5, "reproduced"),
    ([3.0, 3.1, 2.9], 0.5, "not reproduced"),
    ([0.4, 0.6, 0.5], 0.5, "inconclusive"),
])
def test_equivalence_rule(effects, tol, expected):
    assert verdict("equivalence", effects, tol)[0] == expected


def test_identity_rule_and_errors():
    assert verdict("identity", [1e-9, -2e-9], 1e-6)[0] == "reproduced"
    assert verdict("identity", [1e-3], 1e-6)[0] == "not reproduced"
    assert verdict("identity", [math.nan], 1e-6)[0] == "not reproduced"
    with pytest.raises(ValueError, match="kind"):
        verdict("bigger", [1.0])
    with pytest.raises(ValueError, match="tolerance"):
        verdict("equivalence", [1.0, 2.0])


def test_claim_row():
    row = ClaimResult("B1", "BCLS", "Table VIII", "SN beats HN", "rsum", "synthetic", "triplet_sn vs triplet",
                      effects=[2.0, 3.0, 4.0]).row()
    assert row["verdict"] == "reproduced" and row["n_seeds"] == 3 and row["effect"] == 3.0


def test_manifest_keeps_the_last_training_invocation_across_cached_reruns(tmp_path):
    import json
    from reproduce.ledger_io import write_manifest
    write_manifest(tmp_path, "default", ["synthetic"], 1800.0, {"synthetic_train_s": 1700.0}, 2, runs_trained=150)
    first = json.loads((tmp_path / "manifest.json").read_text())
    assert first["last_training_invocation"]["runtime_s"] == 1800.0
    write_manifest(tmp_path, "default", ["synthetic"], 3.0, {"synthetic_train_s": 0.0}, 2, runs_trained=0)
    second = json.loads((tmp_path / "manifest.json").read_text())
    assert second["runtime_s"] == 3.0 and second["runs_trained"] == 0
    assert second["last_training_invocation"] == first["last_training_invocation"]
    write_manifest(tmp_path, "smoke", ["synthetic"], 3.0, {}, 2, runs_trained=0)   # other profile: not carried
    assert "last_training_invocation" not in json.loads((tmp_path / "manifest.json").read_text())
