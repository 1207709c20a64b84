"""What a primary row's seeds can decide: power at the paper's effect, the seeds a claim needs, bootstrap
stability and the flags beside a verdict (rules in ``reproduce/protocol/ledger.py``), each against a simulation or a
loop written from the definitions."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reproduce.spec import claims as registry
from reproduce.present import ledger_render
from reproduce.driver import ledger_files
from reproduce.protocol.claim_files import ClaimResult
from reproduce.protocol.ledger import (
    POWER,
    SEED_CAP,
    VERDICTS,
    decide,
    decide_codes,
    estimate,
    power_at,
    seeds_for_power,
    stability,
)


# --- power and the seeds a claim needs --------------------------------------------------------------
@pytest.mark.parametrize("seed_sd, query_var, n", [(5.0, 0.0, 5), (7.0, 3.0, 5), (2.0, 1.0, 12), (1.0, 4.0, 3)])
def test_power_at_against_a_simulation_of_the_interval(seed_sd, query_var, n):
    """Draw per-seed effects from the model (a common test-set shift + seed noise), build the interval as the
    ledger does by hand (mean, s/√n and the query variance, n − 1 df, t quantile) and count how often it lies
    above 0: the formula (at the true sd) is that share, with or without a test-set variance (within 1.5 points
    at 40 000 draws)."""
    effect, alpha, draws = 6.0, 0.05 / 7, 40_000
    rng = np.random.default_rng(n)
    e = effect + rng.normal(0, math.sqrt(query_var), (draws, 1)) + rng.normal(0, seed_sd, (draws, n))
    mean, seed_var = e.mean(axis=1), e.var(axis=1, ddof=1) / n
    se = np.sqrt(seed_var + query_var)
    simulated = np.mean(mean - stats.t.ppf(1 - alpha / 2, n - 1) * se > 0)
    assert power_at(effect, seed_sd, query_var, n, alpha) == pytest.approx(simulated, abs=0.015)


def test_power_in_closed_form_without_seed_noise_or_without_a_test_set_variance():
    # sd 0: se = √v_query exactly, and the interval takes t_{n − 1} → Φ(θ/√v − t_{1 − α/2, n − 1})
    got = power_at(3.0, 0.0, 1.0, 5, 0.05)
    assert got == pytest.approx(stats.norm.cdf(3.0 - stats.t.ppf(0.975, 4)))
    # v_query 0: Student's t test → the noncentral t's power
    for sd, n in ((5.0, 5), (1.0, 3), (4.0, 12)):
        want = stats.nct.sf(stats.t.ppf(1 - 0.01 / 2, n - 1), n - 1, 6.0 / (sd / math.sqrt(n)))
        assert power_at(6.0, sd, 0.0, n, 0.01) == pytest.approx(want, abs=1e-4)
    assert math.isnan(power_at(math.nan, 1.0, 0.0, 5, 0.05))


def test_seeds_for_power_is_the_first_count_that_reaches_it():
    n, why = seeds_for_power(5.0, 6.0, 0.5, 0.01)
    assert why == "" and 2 <= n <= SEED_CAP
    assert power_at(5.0, 6.0, 0.5, n, 0.01) >= POWER > power_at(5.0, 6.0, 0.5, n - 1, 0.01)
    # the test set's variance alone too large: θ/√v < z_{1 − α/2} + z_0.8 → no seed count reaches it
    n, why = seeds_for_power(5.0, 1.0, 4.0, 0.01)
    assert n is None and "not reachable" in why and 5.0 / 2.0 < stats.norm.ppf(0.995) + stats.norm.ppf(0.8)
    n, why = seeds_for_power(1.0, 50.0, 0.0, 0.01)
    assert n is None and f"cap of {SEED_CAP}" in why
    assert seeds_for_power(math.nan, 1.0, 0.0, 0.01) == (None, "no paper effect or no measured sd")


# --- the vectorised rule equals the scalar one ----------------------------------------------------
@pytest.mark.parametrize("kind", ["direction", "equivalence"])
def test_decide_codes_equal_decide(kind):
    rng = np.random.default_rng(3)
    delta, alpha = 4.0, 0.01
    seen = set()
    for _ in range(60):
        mu, sd = rng.choice([0.0, 1.0, 3.0, 9.0, -9.0]), rng.choice([0.0, 0.5, 2.0])
        e = estimate(rng.normal(mu, sd, 4), rng.choice([0.0, 0.5]))
        v, *_ = decide(kind, e, alpha=alpha, delta=delta)
        code = decide_codes(kind, np.array([e.effect]), np.array([e.se]), np.array([e.df]), alpha, delta)
        assert VERDICTS[int(code[0])] == v
        seen.add(v)
    assert len(seen) >= 3


# --- stability ------------------------------------------------------------------------------------
def test_stability_equals_a_brute_force_loop_over_resamples():
    """Same draws, decided one resample at a time by the scalar rule (estimate, decide)."""
    effects, qv, alpha, delta = [10.0, 2.0, 14.0, 7.0, 4.0], 1.0, 0.01, 3.0
    v = decide("direction", estimate(effects, qv), alpha=alpha, delta=delta)[0]
    n_boot = 300
    got = stability("direction", effects, qv, alpha, delta, v, n_boot=n_boot, seed=7)
    rng = np.random.default_rng(7)
    e = np.asarray(effects)
    draws = e[rng.integers(0, e.size, size=(n_boot, e.size))] + rng.normal(0.0, 1.0, size=(n_boot, 1))
    same = sum(decide("direction", estimate(d, qv), alpha=alpha, delta=delta)[0] == v for d in draws)
    assert got == pytest.approx(same / n_boot)


def test_planted_stable_and_unstable_rows():
    tight = [50.0, 51.0, 49.0, 50.5, 49.5]  # far above 0 with a tight spread: reproduced in every resample
    wide = [1.0, 12.0, -4.0, 15.0, 2.0]  # the interval's ends move across 0 and δ between resamples
    assert decide("direction", estimate(tight), alpha=0.01, delta=5.0)[0] == "reproduced"
    v = decide("direction", estimate(wide), alpha=0.05, delta=5.0)[0]
    assert stability("direction", tight, 0.0, 0.01, 5.0, "reproduced", n_boot=2000) == 1.0
    assert stability("direction", wide, 0.0, 0.05, 5.0, v, n_boot=2000) < 0.8  # fragile
    with pytest.raises(ValueError, match="at least 2"):
        stability("direction", [1.0], 0.0, 0.01, 5.0, "reproduced")


# --- the ledger's columns -------------------------------------------------------------------------
def _row(cid, arms, effects, data="synthetic"):
    return ClaimResult(cid, "BCLS", "T", "s", "rsum", data, arms, effects, notebook="01_bcls").row()


def test_ledger_columns_on_planted_rows(tmp_path):
    p = tmp_path / "bcls"
    p.mkdir()
    b1 = [60.0, 55.0, 62.0, 58.0, 61.0]  # ≈ 6.1 × the paper's 9.7: reproduced, larger than the paper
    b2 = [30.0, -20.0, 10.0, 40.0, -25.0]  # wide: inconclusive, and underpowered against the paper's 15.5
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", b1), _row("B2", "BCLS vs Triplet-SN", b2)]).to_csv(
        p / "claims_synthetic.csv", index=False
    )
    df = ledger_files.collect(tmp_path)
    prim = df[(df["role"] == "primary") & (df["dataset"] == "synthetic")].set_index("id")
    r1, r2 = prim.loc["B1"], prim.loc["B2"]
    alpha = 0.05 / 9  # BCLS: 9 claims decided by an interval
    assert r1["power"] == pytest.approx(power_at(9.7, np.std(b1, ddof=1), 0.0, 5, alpha))
    assert r1["verdict"] == "reproduced" and r1["larger_than_paper"] is True and r1["underpowered"] is False
    assert r1["ratio"] == pytest.approx(np.mean(b1) / 9.7) and r1["stability"] == 1.0 and r1["fragile"] is False
    assert r2["power"] == pytest.approx(power_at(15.5, np.std(b2, ddof=1), 0.0, 5, alpha))
    assert r2["verdict"] == "inconclusive" and r2["underpowered"] is True and r2["larger_than_paper"] is False
    n2, _ = seeds_for_power(15.5, np.std(b2, ddof=1), 0.0, alpha)
    assert "underpowered" in r2["reason"] and (f"{n2} seeds would give 80%" if n2 else "cap") in r2["reason"]
    untested = prim.loc["U1"]
    assert math.isnan(untested["power"]) and math.isnan(untested["stability"])
    csv = pd.read_csv(tmp_path / "claims.csv")
    for col in ("power", "seeds_for_power", "underpowered", "stability", "fragile", "larger_than_paper", "ratio"):
        assert col in csv.columns
    md = (tmp_path / "claims.md").read_text()
    assert "power at the paper's effect" in md and "stability" in md
    assert "**inconclusive** (underpowered)" in md
    assert "**reproduced** (larger than the paper — check the baseline)" in md
    # the cells read back from the CSV render the same way
    back = ledger_render.markdown(csv)
    assert "**inconclusive** (underpowered)" in back and "100%" in back
    power_md = (tmp_path / "power.md").read_text()
    assert sum(x.startswith("| B") for x in power_md.splitlines()) == 2


def test_rows_of_a_stale_claim_file_are_marked_in_the_markdown(tmp_path):
    (tmp_path / "bcls").mkdir()
    f = tmp_path / "bcls" / "claims_synthetic.csv"
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0, 58.0, 61.0])]).to_csv(f, index=False)
    fresh = ledger_render.markdown(ledger_files.collect(tmp_path))
    assert "*stale*" not in fresh and "primary rows are stale" not in fresh
    df = ledger_files.collect(tmp_path, stale={f: "written by 01_bcls.ipynb with other inputs"})
    b1 = df[(df["role"] == "primary") & (df["id"] == "B1") & (df["dataset"] == "synthetic")].iloc[0]
    assert b1["note"].startswith("STALE (written by 01_bcls.ipynb")
    md = (tmp_path / "claims.md").read_text()
    n_prim = int((df["role"] == "primary").sum())
    # B1's row, and the placeholders of the other BCLS claims on the synthetic world (their notebook's claim file
    # is the stale one: a current run may write them); BCLS on flickr8k did not run at all: not stale
    n_bcls = sum(c.notebook == "01_bcls" for c in registry.CLAIMS.values())
    assert n_bcls > 1
    assert f"**{n_bcls} of {n_prim} primary rows are stale**" in md
    line = next(x for x in md.splitlines() if x.startswith("| B1 |") and "| synthetic |" in x)
    verdict = f"**reproduced** (larger than the paper — check the baseline) — {ledger_render.STALE_MARK} |"
    assert line.endswith(verdict + " papers' size: Flickr8k only |")  # then the papers'-size column
    assert sum("*stale*" in x for x in md.splitlines() if x.startswith("| ")) == n_bcls
    b2 = df[(df["role"] == "primary") & (df["id"] == "B2")].set_index("dataset")["note"].fillna("")
    assert b2["synthetic"].startswith("STALE (its notebook's claim file") and b2["flickr8k"] == ""


def test_readme_shows_stale_rows_without_their_verdicts_and_counts_them_apart(tmp_path):
    (tmp_path / "bcls").mkdir()
    f = tmp_path / "bcls" / "claims_synthetic.csv"
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0, 58.0, 61.0])]).to_csv(f, index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{ledger_files.BEGIN}\nold\n{ledger_files.END}\n")
    fresh = ledger_files.collect(tmp_path)
    ledger_files.update_readme(fresh, "default", readme)
    text = readme.read_text()
    b1 = next(x for x in text.splitlines() if x.startswith("| B1 |"))
    assert "**reproduced**" in b1 and "await a run" not in text and ledger_render.STALE_CELL not in text
    assert ledger_render.summary_counts(fresh)[ledger_render.STALE].sum() == 0
    df = ledger_files.collect(tmp_path, stale={f: "written by 01_bcls.ipynb with other inputs"})
    counts = ledger_render.summary_counts(df)
    n_bcls = sum(c.notebook == "01_bcls" for c in registry.CLAIMS.values())
    assert counts.loc["synthetic", ledger_render.STALE] == n_bcls and counts.loc["synthetic", "reproduced"] == 0
    ledger_files.update_readme(df, "default", readme)
    text = readme.read_text()
    b1 = next(x for x in text.splitlines() if x.startswith("| B1 |"))
    assert ledger_render.STALE_CELL in b1 and "reproduced" not in b1 and "60" not in b1  # neither verdict nor effect
    assert f"**{n_bcls} of {int((df['role'] == 'primary').sum())} primary rows await a run" in text
    # B7, a device check, is counted apart from the data sets' tallies
    assert f"{n_bcls - 1} stale" in text[text.index("one measurement each, not counted) — ") :]
    short = text[text.index("**In short.**") : text.index("| id |")]
    assert f"{n_bcls - 1} stale" in short and "B7 stale" in short


# --- the plain summary ----------------------------------------------------------------------------
def _planted_ledger():
    rows = []
    # synthetic: 3 reproduced (2 larger than the paper, 1 fragile), 1 reversed, 1 ruled out,
    # 2 inconclusive of which 1 underpowered, 1 not testable; flickr8k: 1 reproduced, 2 underpowered
    plan = {
        "synthetic": [
            ("reproduced", 0.9, True, False),
            ("reproduced", 0.9, True, False),
            ("reproduced", 0.9, False, True),
            ("reversed", 0.9, None, False),
            ("ruled out", 0.9, None, False),
            ("inconclusive", 0.3, None, True),
            ("inconclusive", 0.9, None, False),
            ("not testable", math.nan, None, None),
        ],
        "flickr8k": [
            ("reproduced", 0.95, False, False),
            ("inconclusive", 0.1, None, False),
            ("inconclusive", 0.2, None, False),
        ],
    }
    for data, rs in plan.items():
        for i, (v, power, big, frag) in enumerate(rs):
            rows.append(
                {
                    "id": f"C{i}",
                    "role": "primary",
                    "dataset": data,
                    "verdict": v,
                    "power": power,
                    "underpowered": bool(power < 0.8) if np.isfinite(power) else None,
                    "larger_than_paper": big,
                    "fragile": frag,
                }
            )
    rows.append({"id": "C0", "role": "secondary", "dataset": "synthetic", "verdict": "inconclusive"})
    return pd.DataFrame(rows)


def test_summary_counts_by_brute_force():
    df = _planted_ledger()
    t = ledger_render.summary_counts(df)
    assert list(t.index) == ["synthetic", "flickr8k"]
    assert t.loc["synthetic"].to_dict() == {
        "reproduced": 3,
        "reversed": 1,
        "ruled out": 1,
        "inconclusive (underpowered)": 1,
        "inconclusive": 1,
        "not testable": 1,
        "stale": 0,
    }
    assert t.loc["flickr8k", "inconclusive (underpowered)"] == 2 and t.loc["flickr8k", "reproduced"] == 1
    # read back from a CSV (flags as text / empty) the counts are the same
    back = pd.read_csv(__import__("io").StringIO(df.to_csv(index=False)))
    assert ledger_render.summary_counts(back).equals(t)


def test_caveat_states_the_largest_share():
    df = _planted_ledger()
    # shares: larger than paper 2/4 reproduced = 0.5; fragile 1/6 decided; underpowered 3/10 with a power
    assert ledger_render.caveat(df) == (
        "Caveat: 2 of 4 reproduced effects are more than 5× the paper's (check the baseline before reading "
        "them as the method's gain)."
    )
    df.loc[df["larger_than_paper"].eq(True), "larger_than_paper"] = False
    assert ledger_render.caveat(df).startswith(
        "Caveat: 3 of 10 primary rows with a paper effect had less than 80% power"
    )
    text = ledger_render.plain_summary(df)
    assert "- **synthetic** (8 claims): 3 reproduced, 1 reversed, 1 ruled out, 1 inconclusive (underpowered)" in text
    assert "- **flickr8k** (3 claims): 1 reproduced, 0 reversed, 0 ruled out, 2 inconclusive (underpowered)" in text
    assert "not testable" not in text.split("\n")[3]  # flickr8k has none: not listed
    assert ledger_render.caveat(df[df["verdict"] == "ruled out"]) == ""


def test_smoke_tables_and_ledger_carry_the_pipeline_check_banner(tmp_path, monkeypatch):
    """Under the smoke profile's results folder every table and the ledger open with the banner; elsewhere not."""
    from reproduce.present import report
    from reproduce.spec import tables

    monkeypatch.setattr(tables, "ROOT", tmp_path)
    smoke = tmp_path / "results" / "smoke"
    (smoke / "bcls").mkdir(parents=True)
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", [1.0])]).to_csv(smoke / "bcls" / "claims_synthetic.csv")
    ledger_files.collect(smoke)
    report.save_table(pd.DataFrame({"a": [1.0]}), smoke, "bcls", "t", caption="c")
    report.save_table(pd.DataFrame({"a": [1.0]}), tmp_path / "results", "bcls", "t", caption="c")
    for f in (smoke / "claims.md", smoke / "power.md", smoke / "bcls" / "t.md"):
        assert f.read_text().startswith(tables.SMOKE_BANNER), f
    assert not (tmp_path / "results" / "bcls" / "t.md").read_text().startswith(">")
