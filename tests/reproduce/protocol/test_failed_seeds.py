"""The failed-seed rule on planted runs: an arm's failed seeds (collapsed runs) are counted on the primary row,
the row is decided on all its seeds, and beside it on the seeds without a failure; the arm a claim predicts to fail
is never counted; a claim file without its seeds keeps the earlier rule (``not testable``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reproduce.driver import ledger_files
from reproduce.protocol import claim_rows, ledger_rows
from reproduce.protocol.ledger import decide, estimate, family_alpha, smallest_effect
from reproduce.spec import claims as registry


def _results(arms: dict, failed: dict | None = None, seeds=range(8)) -> pd.DataFrame:
    """Study.results-like rows: ``arms = {arm: mean RSUM}``, seed noise fixed; ``failed = {arm: seeds}`` collapse."""
    rng = np.random.default_rng(0)
    rows = []
    for arm, mean in arms.items():
        for s in seeds:
            bad = s in (failed or {}).get(arm, ())
            rsum = 3.0 if bad else mean + rng.normal(0.0, 2.0)
            rows.append({"arm": arm, "seed": s, "rsum": rsum, "collapsed": bad, "collapse_reason": "planted"})
    return pd.DataFrame(rows)


def _ledger(tmp_path, rows: list[dict], collapsed=None) -> pd.DataFrame:
    ledger_rows.write_claims(rows, tmp_path, "bcls", "synthetic")
    df = ledger_files.collect(tmp_path, collapsed=collapsed)
    return df[(df["role"] == "primary") & (df["dataset"] == "synthetic")].set_index("id")


def test_failed_seeds_are_counted_per_arm_and_the_predicted_failure_is_not():
    df = _results(
        {"Triplet-HN": 390.0, "Kendall SW-HS alone": 360.0}, {"Triplet-HN": (2, 5), "Kendall SW-HS alone": (1,)}
    )
    row = claim_rows.primary_row("B3", "synthetic", df)  # Triplet-HN − Kendall SW-HS alone, which B3 predicts fails
    assert registry.claim("B3").primary.predicted_to_fail == "Kendall SW-HS alone"
    assert row["seeds"] == "0;1;2;3;4;5;6;7" and row["failed_seeds"] == "2;5"
    assert row["failures"] == "Triplet-HN failed 2 of 8 seeds (2, 5)"
    healthy = claim_rows.primary_row("B1", "synthetic", _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}))
    assert healthy["failed_seeds"] == "" and healthy["failures"] == ""
    no_health = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}).drop(columns=["collapsed"])
    assert claim_rows.failed_seeds(no_health, ["Triplet-SN"], [0, 1]) == (None, "")
    assert "failed_seeds" not in claim_rows.primary_row("B1", "synthetic", no_health)  # health unknown: not claimed


def test_a_row_with_failed_seeds_is_decided_on_all_seeds_and_again_without_them(tmp_path):
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}, {"Triplet-HN": (3,), "Triplet-SN": (6,)})
    row = claim_rows.primary_row("B1", "synthetic", df)
    got = _ledger(tmp_path, [row]).loc["B1"]
    effects = [float(x) for x in row["seed_effects"].split(";")]
    alpha = family_alpha(int(got["family_size"]))
    delta = smallest_effect(got["paper_effect"])
    all_seeds = decide("direction", estimate(effects), alpha, delta, got["paper_effect"])
    assert got["verdict"] == all_seeds[0] and got["ci_low"] == pytest.approx(all_seeds[2])  # failures included
    kept = [e for s, e in enumerate(effects) if s not in (3, 6)]
    v, _, lo, hi = decide("direction", estimate(kept), alpha, delta, got["paper_effect"])
    assert got["without_failures"] == f"{v} [{lo:.3g}, {hi:.3g}] on 6 seeds"
    assert got["failures"] == "Triplet-SN failed 1 of 8 seeds (6); Triplet-HN failed 1 of 8 seeds (3)"
    assert f"; {got['failures']}; without them: {got['without_failures']}" in got["reason"]
    assert np.isfinite(got["p_adj"]) and got["family"] == "BCLS"  # in its family, as any decided row


def test_an_arm_that_failed_every_seed_is_measured_and_has_no_second_verdict(tmp_path):
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}, {"Triplet-SN": tuple(range(8))})
    got = _ledger(tmp_path, [claim_rows.primary_row("B1", "synthetic", df)]).loc["B1"]
    assert got["verdict"] == "reversed" and got["without_failures"] == "no seed without a failure"


def test_the_collapsed_mapping_decides_only_rows_without_their_seeds(tmp_path):
    """A claim file written before the failure rate (no ``seeds``) keeps the earlier rule: an arm the cache says
    collapsed makes its primary row ``not testable``; a row that names its seeds carries its own failures."""
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0})
    row = claim_rows.primary_row("B1", "synthetic", df)
    mapping = {("synthetic", "Triplet-HN"): "seed 3: planted"}
    assert _ledger(tmp_path / "new", [row], mapping).loc["B1", "verdict"] != "not testable"
    old = {k: v for k, v in row.items() if k not in ("failed_seeds", "failures")}
    got = _ledger(tmp_path / "old", [old], mapping).loc["B1"]
    assert got["verdict"] == "not testable" and "Triplet-HN: seed 3" in got["reason"] and math.isnan(got["p_adj"])


def test_a_seed_list_that_is_not_numbers_is_named():
    with pytest.raises(ValueError, match=r"claim B1 \(synthetic\): failed_seeds 'x;2'"):
        ledger_rows._seed_list({"id": "B1", "dataset": "synthetic", "failed_seeds": "x;2"}, "failed_seeds")
    assert ledger_rows._seed_list({"seeds": float("nan")}, "seeds") == ()
    assert ledger_rows._seed_list({}, "seeds") is None
