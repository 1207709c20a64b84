"""Item 8 of issue 15: the verdict rule on simulated claims (no true effect → few wrong verdicts;
planted large effects → detected), and the simulation's vectorised rule equals the ledger's."""

import math

import numpy as np
import pytest
from statsmodels.stats.multitest import multipletests

from reproduce.ledger import Estimate, adjusted_level, decide
from reproduce.verdict_simulation import decide_arrays, holm_rows, simulate, study_noise

STUDY_NOISE = study_noise()  # σ_d per data set from the committed ledger's RSUM noise floors

CODES = {0: "inconclusive", 1: "reproduced", 2: "not reproduced", 3: "no effect"}


@pytest.mark.parametrize("data", sorted(STUDY_NOISE))
def test_no_true_effect_gives_at_most_5_percent_wrong_verdicts(data):
    draws = 400  # 400 families × 36 rows at 3 seeds
    r = simulate(STUDY_NOISE[data], draws=draws, paper_effect=9.7, seed=11)
    assert r["wrong_row_rate"] <= 0.05
    # family-wise error under Holm: ≤ 5% up to sampling error of the simulation (+2.6 binomial sd)
    assert r["wrong_family_rate"] <= 0.05 + 2.6 * math.sqrt(0.05 * 0.95 / draws)


def test_large_planted_effects_are_detected_and_the_rule_can_fail():
    sd = STUDY_NOISE["flickr8k"]
    # at 3 seeds (df ≈ 2) Holm's first step over 36 rows needs |t| > t_{1 − 0.05/72, 2} = 26.8, i.e. a seed
    # sd below 40·√3/26.8 ≈ 2.6 σ_d for a 40 σ_d effect: P(χ²₂ > 13.3) ≈ 0.1% of draws miss it
    big = simulate(sd, sigma_q=0.5, draws=300, planted=40 * sd, paper_effect=9.7, seed=12)
    assert big["detect_rate"] >= 0.97
    opposite = simulate(sd, sigma_q=0.5, draws=300, planted=-40 * sd, paper_effect=9.7, seed=13)
    assert opposite["detect_rate"] == 0.0  # a wrong-way effect is never "reproduced"


def test_vectorised_holm_equals_statsmodels():
    p = np.random.default_rng(0).uniform(0, 0.2, (50, 12)) ** 2
    ref = np.stack([multipletests(row, method="holm")[1] for row in p])
    assert holm_rows(p) == pytest.approx(ref)


def test_simulation_rule_equals_the_ledger_rule():
    rng = np.random.default_rng(5)
    theta = rng.choice([0.0, 8.0, -8.0, 30.0], 36)
    eff = theta[:, None] + rng.normal(0, 5.0, (36, 3))
    qv = 2.0**2
    codes, d = decide_arrays(eff[None], qv, paper_effect=9.7)
    assert len(set(codes[0].tolist())) >= 3  # several verdicts are exercised
    for i in range(36):
        e = eff[i]
        seed_var = e.var(ddof=1) / 3
        est = Estimate(float(e.mean()), math.sqrt(seed_var + qv), 2 * ((seed_var + qv) / seed_var) ** 2, 3, qv)
        level = adjusted_level(est.p_zero(), float(d["p_adj"][0, i]), 36)
        v, *_ = decide("direction", est, float(d["thr"][0, i]), p_adj=float(d["p_adj"][0, i]), level=level)
        assert v == CODES[int(codes[0, i])], i


def test_study_noise_reads_the_ledgers_rsum_noise_floor(tmp_path):
    p = tmp_path / "claims.csv"
    p.write_text(
        "id,dataset,metric,noise_floor\nB1,synthetic,rsum,36.2\nB2,synthetic,rsum,36.2\n"
        "B4,synthetic,tau,0.1\nB1,flickr8k,rsum,10.0\nX1,flickr8k,rsum,\n"
    )
    assert study_noise(p) == {"flickr8k": pytest.approx(5.0), "synthetic": pytest.approx(18.1)}
    with pytest.raises(FileNotFoundError, match="nothing.csv"):
        study_noise(tmp_path / "nothing.csv")
    (tmp_path / "bad.csv").write_text("id,dataset\nB1,synthetic\n")
    with pytest.raises(ValueError, match="noise_floor"):
        study_noise(tmp_path / "bad.csv")
