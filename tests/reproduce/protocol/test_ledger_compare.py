"""A rebuilt ledger against the committed one: verdict changes and the largest effect change per unit, on planted
ledgers."""

import pandas as pd

from reproduce.protocol import ledger_compare as lc


def ledger(rows):
    base = {"role": "primary", "metric": "rsum", "arms": "A − B", "statement": "A beats B", "unit": "RSUM points"}
    return pd.DataFrame([{**base, **r} for r in rows])


BEFORE = ledger(
    [
        {"id": "B1", "dataset": "synthetic", "effect": 1.0, "verdict": "inconclusive"},
        {"id": "B1", "dataset": "flickr8k", "effect": 3.25, "verdict": "inconclusive"},
        {"id": "L1", "dataset": "flickr8k", "effect": 0.02, "verdict": "reproduced", "metric": "cs", "unit": "CS"},
        {"id": "N6", "dataset": "synthetic", "effect": 8.56, "verdict": "reproduced", "role": "secondary"},
    ]
)


def test_the_same_ledger_has_equal_verdicts_and_no_change():
    change = lc.compare(BEFORE, BEFORE)
    assert change.same_verdicts and change.rows == 4
    assert change.largest == {
        "RSUM points": (0.0, "B1 synthetic", 1.0, 1.0),
        "CS": (0.0, "L1 flickr8k", 0.02, 0.02),
    }
    lines = lc.summary_lines(change)
    assert lines[0] == "ledger: every verdict equal to the committed ledger (4 rows)"
    assert lines[-1] == "ledger: every effect unchanged, in each of its 2 units"


def test_a_moved_effect_and_a_changed_verdict_are_named():
    after = BEFORE.copy()
    after.loc[1, "effect"], after.loc[1, "verdict"] = 3.5, "reproduced"
    after.loc[3, "effect"] = 9.27
    after.loc[2, "effect"] = 0.02 + 1e-9
    change = lc.compare(BEFORE, after)
    assert change.verdicts == [("B1 flickr8k", "inconclusive", "reproduced")]
    d, row, a, b = change.largest["RSUM points"]
    assert round(d, 6) == 0.71 and row == "N6 synthetic (secondary: rsum, A − B)" and (a, b) == (8.56, 9.27)
    assert abs(change.largest["CS"][0] - 1e-9) < 1e-15
    lines = lc.summary_lines(change)
    assert lines[0].startswith("ledger: 1 verdict(s) differ from the committed ledger (4 rows compared")
    assert lines[1] == "ledger:   B1 flickr8k: inconclusive → reproduced"
    assert "RSUM points 0.71 (N6 synthetic (secondary: rsum, A − B): 8.56 → 9.27)" in lines[-1]
    assert lines[-1].index("RSUM points") < lines[-1].index("CS 1e-09") and "unit(s) unchanged" not in lines[-1]
    assert change.as_dict()["verdicts_equal"] is False


def test_rows_in_one_ledger_only_are_reported_as_changes():
    after = pd.concat([BEFORE.iloc[:3], ledger([{"id": "X3", "dataset": "flickr8k", "effect": 0.1, "verdict": "x"}])])
    change = lc.compare(BEFORE, after)
    assert change.added == ["X3 flickr8k"] and change.removed == ["N6 synthetic (secondary: rsum, A − B)"]
    assert not change.same_verdicts and change.rows == 3


def test_the_committed_ledger_compared_with_itself_reads_equal():
    from helpers import ROOT

    committed = pd.read_csv(ROOT / "results" / "claims.csv")
    change = lc.compare(committed, committed)
    assert change.same_verdicts and change.rows > 0 and all(v[0] == 0 for v in change.largest.values())
