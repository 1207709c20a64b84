"""The verdict rule under simulation (``reproduce.protocol.verdict_simulation``): the rule it applies is the
ledger's, its error rates match the design, and its report reads the ledger's measured noise."""

import math

import numpy as np
import pandas as pd
import pytest

from reproduce.protocol.ledger import ALPHA, VERDICTS, decide, estimate, power_at
from reproduce.protocol.verdict_simulation import family_null_rate, report, simulate_row, study_rows


def test_simulated_rows_are_decided_as_the_ledger_decides_them():
    rng = np.random.default_rng(5)
    codes = simulate_row(2.0, 3.0, 0.0, 4, 0.01, 1.0, draws=50, rng=rng)
    rng = np.random.default_rng(5)
    e = 2.0 + rng.normal(0, 0.0, (50, 1)) + rng.normal(0, 3.0, (50, 4))
    by_hand = [decide("direction", estimate(x), alpha=0.01, delta=1.0)[0] for x in e]
    assert [VERDICTS[c] for c in codes] == by_hand


def test_without_a_test_set_variance_the_family_wise_error_is_at_most_alpha():
    """Seeds only: each row's t interval is exact at ALPHA/m, so a family of m null rows has at most ALPHA
    (here 5 rows; 20 000 families, 3 binomial sd ≈ 0.5 points)."""
    rows = pd.DataFrame({"seed_sd": [1.0, 5.0, 0.2, 3.0, 8.0], "query_var": 0.0, "n_seeds": 5, "family_size": 5})
    assert family_null_rate(rows, draws=20_000) <= ALPHA + 0.005


@pytest.mark.parametrize("ratio", [0.05, 0.12, 0.3, 1.0])
def test_with_a_test_set_variance_a_row_holds_its_level(ratio):
    """5 seeds, a family of 9 (the level BCLS's rows are decided at), a test-set variance of ``ratio`` × the seed
    part s²/n (0.02–0.15 on the measured Flickr8k rows): under no effect the row is wrongly decided in at most its
    level's share of draws. (Welch–Satterthwaite's df would give 1.4–2.2× the level here.)"""
    alpha, draws = ALPHA / 9, 200_000
    codes = simulate_row(0.0, 1.0, ratio / 5, 5, alpha, math.nan, draws, np.random.default_rng(11))
    wrong = np.isin(codes, [VERDICTS.index("reproduced"), VERDICTS.index("reversed")]).mean()
    assert wrong <= alpha + 3 * math.sqrt(alpha / draws)


def test_power_at_1x_and_rule_outs_at_half_the_effect():
    rng = np.random.default_rng(0)
    codes = simulate_row(6.0, 2.0, 0.0, 8, 0.01, 3.0, draws=20_000, rng=rng)
    assert np.mean(codes == VERDICTS.index("reproduced")) == pytest.approx(power_at(6.0, 2.0, 0.0, 8, 0.01), abs=0.015)
    # a true effect of exactly δ is wrongly ruled out with probability ≤ α/2 (the interval's upper end below δ)
    codes = simulate_row(3.0, 2.0, 0.0, 8, 0.01, 3.0, draws=20_000, rng=rng)
    assert np.mean(codes == VERDICTS.index("ruled out")) <= 0.005 + 0.003


def test_report_reads_the_ledgers_rows(tmp_path):
    path = tmp_path / "claims.csv"
    cols = "id,role,dataset,kind,family,family_size,seed_sd,query_var,n_seeds,paper_effect,seeds_for_power\n"
    path.write_text(
        cols + "B1,primary,synthetic,direction,BCLS,9,1.2,0.6,5,9.7,2\n"
        "B5,primary,synthetic,direction,BCLS,9,4.0,0.0,5,,\n"
        "U6,primary,synthetic,identity,,,,,30,,\n"
        "B1,secondary,synthetic,direction,,,2.0,0.0,5,,\n"
    )
    rows = study_rows(path)
    assert list(rows["id"]) == ["B1", "B5"]
    text = report(path, draws=200)
    assert "| synthetic | BCLS | 2 | 9 |" in text and text.count("\n| B1 | synthetic | 9.7 |") == 1
    bad = tmp_path / "bad.csv"
    bad.write_text("id,dataset\nB1,synthetic\n")
    with pytest.raises(ValueError, match="missing"):
        study_rows(bad)
    with pytest.raises(FileNotFoundError, match="make reproduce"):
        study_rows(tmp_path / "none.csv")
    assert math.isfinite(float(rows["seed_sd"].iloc[0]))
