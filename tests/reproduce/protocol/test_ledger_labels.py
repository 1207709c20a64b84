"""The labels beside a verdict and the δ sensitivity, on planted ledgers whose intervals are known.

B2 (BCLS beats Triplet-SN on RSUM; paper effect 15.5, δ = 7.75) is decided in the BCLS family of 9 claims: with
10 seeds of per-seed sd ``SD`` its interval is mean ± t(1 − 0.05/18, 9) · SD/√10 (≈ mean ± 1.167 SD)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reproduce.present import ledger_render
from reproduce.protocol import ledger_rows
from reproduce.protocol.claim_files import ClaimResult
from reproduce.protocol.ledger import (
    REVERSAL,
    SMALLER,
    decide,
    estimate,
    reversal_not_excluded,
    scaled_delta,
    smaller_than_paper,
)
from reproduce.spec import baselines, claims as registry

N = 10
HALF = float(stats.t.ppf(1 - 0.05 / 9 / 2, N - 1)) / math.sqrt(N)  # half-width per unit of per-seed sd


def _effects(mean: float, sd: float) -> list[float]:
    z = np.arange(N) - (N - 1) / 2
    return list(mean + sd * z / z.std(ddof=1))


def _b2(mean: float, sd: float, data: str = "synthetic", baseline: tuple | None = None) -> pd.Series:
    """The primary B2 row of a ledger built from one planted claim-file row."""
    r = ClaimResult("B2", "BCLS", "T", "s", "rsum", data, "BCLS vs Triplet-SN", _effects(mean, sd)).row()
    r["_file"] = "planted.csv"
    df = ledger_rows.build_ledger([r], baselines={("B2", data): baseline} if baseline else None)
    return df[(df["id"] == "B2") & (df["dataset"] == data) & (df["role"] == "primary")].iloc[0]


@pytest.mark.parametrize(
    ("mean", "sd", "verdict", "reversal", "smaller"),
    [
        (-4.0, 4.0, "ruled out", True, True),  # [−8.67, 0.67]: below δ, and below −δ = −7.75
        (-2.0, 4.0, "ruled out", False, True),  # [−6.67, 2.67]: inside (−δ, δ)
        (3.0, 6.0, "inconclusive", False, True),  # [−4.0, 10.0]: reaches δ, below the paper's 15.5
        (6.0, 10.0, "inconclusive", False, False),  # [−5.67, 17.7]: reaches the paper's effect
        (-10.0, 2.0, "reversed", False, True),  # [−12.3, −7.67]
        (20.0, 2.0, "reproduced", False, False),  # [17.7, 22.3]: above the paper's effect
        (10.0, 2.0, "reproduced", False, True),  # [7.67, 12.3]: above 0, below the paper's effect
    ],
)
def test_labels_say_what_the_interval_says(mean, sd, verdict, reversal, smaller):
    row = _b2(mean, sd)
    assert row["ci_low"] == pytest.approx(mean - HALF * sd) and row["ci_high"] == pytest.approx(mean + HALF * sd)
    assert row["delta"] == pytest.approx(7.75) and row["verdict"] == verdict
    assert bool(row["reversal_not_excluded"]) is reversal and bool(row["smaller_than_paper"]) is smaller
    cell = ledger_render.verdict_cell(row.to_dict())
    assert (f"({REVERSAL})" in cell) is reversal and (f"({SMALLER})" in cell) is smaller
    assert (REVERSAL in row["reason"]) is reversal and (SMALLER in row["reason"]) is smaller


def test_no_ruled_out_row_reaching_below_minus_delta_goes_without_its_note():
    """By brute force over planted intervals: the tags follow their definitions, whatever the verdict."""
    for mean in np.linspace(-12, 20, 17):
        for sd in (1.0, 4.0, 9.0):
            est = estimate(_effects(mean, sd))
            v, why, lo, hi = decide("direction", est, alpha=0.05 / 9, delta=7.75, paper_effect=15.5)
            assert (REVERSAL in why) == (v == "ruled out" and lo < -7.75)
            assert (SMALLER in why) == (hi < 15.5)
    assert reversal_not_excluded(-8.0, 7.75) and not reversal_not_excluded(-7.0, 7.75)
    assert not reversal_not_excluded(-8.0, math.nan) and not smaller_than_paper(1.0, math.nan)
    assert smaller_than_paper(1.0, -2.0)  # against |paper effect|


def test_scaled_delta_flags_a_verdict_that_changes():
    """δ scaled to our baseline 226 of the paper's 400.1: 7.75 × 226/400.1 = 4.38. [−4.67, 4.67] is ruled out under
    the declared δ and inconclusive under the scaled one; [−6.67, 2.67] is ruled out under both."""
    assert scaled_delta(15.5, 226.0, 400.1) == pytest.approx(0.5 * 15.5 * 226.0 / 400.1)
    assert math.isnan(scaled_delta(15.5, math.nan, 400.1)) and math.isnan(scaled_delta(math.nan, 226.0, 400.1))
    flip = _b2(0.0, 4.0, baseline=(226.0, 400.1))
    assert flip["verdict"] == "ruled out" and flip["verdict_scaled"] == "inconclusive"
    assert flip["delta_scaled"] == pytest.approx(7.75 * 226.0 / 400.1) and flip["delta_sensitive"] is True
    assert "δ-sensitive: inconclusive under the scaled δ" in ledger_render.verdict_cell(flip.to_dict())
    assert ledger_render.scaled_delta_cell(flip.to_dict()) == "4.38 → **inconclusive**"
    same = _b2(-2.0, 4.0, baseline=(226.0, 400.1))
    assert same["verdict"] == same["verdict_scaled"] == "ruled out" and same["delta_sensitive"] is False
    assert "δ-sensitive" not in ledger_render.verdict_cell(same.to_dict())
    assert ledger_render.scaled_delta_cell(same.to_dict()) == "4.38 → ruled out"
    # without our baseline (no table) the cell is "—" and the note says why
    none = _b2(0.0, 4.0)
    assert math.isnan(none["delta_scaled"]) and none["delta_sensitive"] is None
    assert none["delta_scaled_note"] == "our baseline table is missing"
    assert ledger_render.scaled_delta_cell(none.to_dict()) == "—"


def test_claims_without_a_comparable_baseline_say_why():
    assert baselines.why_none("B4") == "not an RSUM claim: no baseline on a common scale"  # Kendall τ
    assert baselines.why_none("B5") == "no paper effect: no δ to scale"
    assert baselines.why_none("U6") == "no paper effect: no δ to scale"
    assert baselines.why_none("B1") == ""
    # every RSUM direction claim with a paper effect has a baseline declared, and nothing else has one
    rsum = {
        c.id
        for c in registry.CLAIMS.values()
        if c.primary.kind == "direction"
        and np.isfinite(float(c.paper_effect.get("paper_effect") or math.nan))
        and all(c.primary.metric_for(d) == "rsum" for d in registry.DATASETS)
    }
    assert rsum == set(baselines.BASELINES)


def test_paper_baselines_are_the_numbers_the_paper_effect_is_computed_from():
    for cid, b in baselines.BASELINES.items():
        value = baselines.paper_baseline(cid)
        text = registry.CLAIMS[cid].paper_effect["computation"]
        if len(b.paper_rows) == 1:
            assert f"{value:g}" in text, (cid, value, text)
    assert baselines.paper_baseline("S3") == pytest.approx((435.1 + 439.5 + 477.2 + 448.6) / 4)
    assert baselines.paper_baseline("B1") == pytest.approx(390.4) and math.isnan(baselines.paper_baseline("B4"))


def test_our_baseline_is_read_from_the_notebooks_table(tmp_path):
    (tmp_path / "flickr8k" / "bcls").mkdir(parents=True)
    pd.DataFrame({"arm": ["Triplet-HN", "Triplet-SN"], "rsum": [222.0, 226.0]}).to_csv(
        tmp_path / "flickr8k" / "bcls" / "table8_flickr8k.csv", index=False
    )
    assert baselines.our_baseline(tmp_path, "B1", "flickr8k") == pytest.approx(222.0)
    assert baselines.our_baseline(tmp_path, "B2", "flickr8k") == pytest.approx(226.0)
    assert math.isnan(baselines.our_baseline(tmp_path, "B1", "synthetic"))  # no table
    assert math.isnan(baselines.our_baseline(tmp_path, "B4", "flickr8k"))  # no declaration
    # a table indexed by its source: only our rows count, never the paper's row of the same arm
    (tmp_path / "sam").mkdir()
    pd.DataFrame(
        {"arm": ["100% data, Triplet-HN", "100% data, Triplet-HN"], "rsum": [478.0, 471.6]},
        index=["ours: synthetic, VSE++", "paper Table 3: Flickr30K, CVSE"],
    ).to_csv(tmp_path / "sam" / "table3_synthetic.csv")
    assert baselines.our_baseline(tmp_path, "S2", "synthetic") == pytest.approx(478.0)


def test_readme_counts_checks_once_and_says_what_delta_assumes():
    rows = []
    for data in ("synthetic", "flickr8k"):
        rows += [
            {"id": "B2", "role": "primary", "dataset": data, "kind": "direction", "verdict": "ruled out",
             "delta_scaled": 4.38, "verdict_scaled": "inconclusive", "delta_sensitive": data == "flickr8k"},
            {"id": "B7", "role": "primary", "dataset": data, "kind": "direction", "verdict": "reproduced"},
            {"id": "U6", "role": "primary", "dataset": data, "kind": "identity", "verdict": "reproduced"},
        ]  # fmt: skip
    df = pd.DataFrame(rows).assign(effect=1.0, ci_low=0.5, ci_high=1.5, ratio=math.nan, reason="")
    text = ledger_render.plain_summary(df)
    assert "- **synthetic** (1 claims besides the checks): 0 reproduced, 0 reversed, 1 ruled out" in text
    assert "B7 reproduced (a timing" in text and "U6 reproduced (an identity" in text
    assert ledger_render.DELTA_ASSUMES in text and "B2 flickr8k (ruled out → inconclusive)" in text
    assert "B2 synthetic" not in text
    tally = ledger_render.summary_markdown(df)
    assert "device and identity checks B7, U6: one measurement each, not counted" in tally
