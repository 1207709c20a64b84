"""What a primary row's budget can decide: minimum detectable effect, the decidable flag, bootstrap
stability and the larger-than-the-paper flag (rules in ``reproduce/ledger.py``)."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reproduce import claims as registry
from reproduce import ledger_io
from reproduce.ledger import (
    ALPHA,
    NOISE_K,
    POWER,
    VERDICTS,
    ClaimResult,
    adjusted_level,
    decide,
    decide_codes,
    estimate,
    holm,
    holm_step_alpha,
    min_detectable_effect,
    stability,
)


# --- minimum detectable effect ---------------------------------------------------------------------
def test_mde_with_infinite_df_is_the_normal_closed_form():
    # (z_{1 − α/2} + z_{0.8}) · se with z_{0.975} = 1.959964, z_{0.8} = 0.841621
    assert min_detectable_effect(2.0, math.inf, 0.05) == pytest.approx(2 * (1.959964 + 0.841621), abs=1e-5)
    # equivalence: (z_{1 − α} + z_{0.9}) · se with z_{0.95} = 1.644854, z_{0.9} = 1.281552
    assert min_detectable_effect(1.0, math.inf, 0.05, "equivalence") == pytest.approx(2.926405, abs=1e-5)
    assert math.isnan(min_detectable_effect(math.nan, 4, 0.05)) and math.isnan(min_detectable_effect(1.0, 4, 0.0))
    with pytest.raises(ValueError, match="identity"):
        min_detectable_effect(1.0, 4, 0.05, "identity")


@pytest.mark.parametrize("df", [4, 9, 30])
def test_mde_has_80_percent_power_by_monte_carlo(df):
    """Draw the t statistic of a true effect θ = MDE from its definition (normal mean, χ² sd): the test rejects
    θ = 0 in the claimed direction in 80% of draws (±1 point at 200 000 draws, 4 binomial sd). The
    t-approximation (t_{1 − α/2} + t_{0.8})·se falls short at 4 df (power ≈ 0.70) — why the noncentral t is used."""
    se, alpha = 1.7, ALPHA / 36
    mde = min_detectable_effect(se, df, alpha)
    rng = np.random.default_rng(df)
    z = rng.normal(mde / se, 1.0, 200_000)
    s = np.sqrt(rng.chisquare(df, 200_000) / df)
    crit = stats.t.ppf(1 - alpha / 2, df)
    assert np.mean(z / s > crit) == pytest.approx(POWER, abs=0.01)
    approx = (stats.t.ppf(1 - alpha / 2, df) + stats.t.ppf(POWER, df)) * se
    assert mde >= approx


def test_holm_step_alpha_by_hand():
    a = holm_step_alpha([0.04, math.nan, 0.001, 0.01])
    # ranks among the 3 finite p: 0.001 → 1 (α/3), 0.01 → 2 (α/2), 0.04 → 3 (α/1)
    assert a[2] == pytest.approx(ALPHA / 3) and a[3] == pytest.approx(ALPHA / 2) and a[0] == pytest.approx(ALPHA)
    assert math.isnan(a[1])


# --- the vectorised rule equals the scalar one ----------------------------------------------------
@pytest.mark.parametrize("kind", ["direction", "equivalence"])
def test_decide_codes_equal_decide(kind):
    rng = np.random.default_rng(3)
    m, thr = 30, 4.0
    rows = [rng.normal(rng.choice([0.0, 3.0, 9.0, -9.0]), rng.choice([0.0, 1.0, 4.0]), 4) for _ in range(m)]
    ests = [estimate(e, rng.choice([0.0, 0.5])) for e in rows]
    p = np.array([e.p_zero() if kind == "direction" else e.p_equivalent(thr) for e in ests])
    p_adj = holm(p)
    seen = set()
    for e, pr, pa in zip(ests, p, p_adj):
        level = adjusted_level(pr, pa, m)
        v, *_ = decide(kind, e, thr, p_adj=pa, level=level)
        code = decide_codes(kind, np.array([e.effect]), np.array([e.se]), np.array([e.df]), thr, [pa], [level])
        assert VERDICTS[int(code[0])] == v
        seen.add(v)
    assert len(seen) >= 2


# --- stability ------------------------------------------------------------------------------------
def _family(rows_effects, kinds, thr, query_vars):
    ests = [estimate(e, q) for e, q in zip(rows_effects, query_vars)]
    p = np.array([e.p_zero() if k == "direction" else e.p_equivalent(thr) for e, k in zip(ests, kinds)])
    p_adj = holm(p)
    verdicts = [
        decide(k, e, thr, p_adj=pa, level=adjusted_level(pr, pa, len(ests)))[0]
        for e, k, pr, pa in zip(ests, kinds, p, p_adj)
    ]
    return [
        {"kind": k, "effects": e, "query_var": q, "threshold": thr, "verdict": v}
        for e, k, q, v in zip(rows_effects, kinds, query_vars, verdicts)
    ]


def _holm_by_definition(p):
    """Holm's adjusted p from its definition: max over earlier ranks of min(1, (m − i) p_(i))."""
    order = sorted(range(len(p)), key=lambda i: p[i])
    out, running = [0.0] * len(p), 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (len(p) - rank) * p[i]))
        out[i] = running
    return np.array(out)


def test_stability_equals_a_brute_force_loop_over_resamples():
    """Same draws, decided one resample at a time by the scalar rule (estimate, Holm by definition, decide)."""
    fam = _family(
        [[10.0, 2.0, 14.0, 7.0, 4.0], [0.5, -1.0, 1.5, 0.0, 2.0], [1.0, 1.5, 0.8, 1.2, 1.1]],
        ["direction", "direction", "equivalence"],
        thr=3.0,
        query_vars=[1.0, 0.25, 0.0],
    )
    n_boot = 300
    got = stability(fam, n_boot=n_boot, seed=7)
    rng = np.random.default_rng(7)
    draws = []
    for r in fam:
        e = np.asarray(r["effects"])
        idx = rng.integers(0, e.size, size=(n_boot, e.size))
        q = rng.normal(0.0, math.sqrt(r["query_var"]), size=(n_boot, 1))
        draws.append(e[idx] + q)
    same = np.zeros(len(fam))
    for b in range(n_boot):
        ests = [estimate(d[b], r["query_var"]) for d, r in zip(draws, fam)]
        p = np.array([e.p_zero() if r["kind"] == "direction" else e.p_equivalent(3.0) for e, r in zip(ests, fam)])
        p_adj = _holm_by_definition(p)
        for j, (e, r) in enumerate(zip(ests, fam)):
            v, *_ = decide(r["kind"], e, 3.0, p_adj=p_adj[j], level=adjusted_level(p[j], p_adj[j], len(fam)))
            same[j] += v == r["verdict"]
    assert got == pytest.approx(same / n_boot)


def test_planted_stable_and_unstable_rows():
    fam = _family(
        [
            [50.0, 51.0, 49.0, 50.5, 49.5],  # far beyond T with a tight spread: reproduced in every resample
            [1.0, 12.0, -4.0, 15.0, 2.0],  # mean 5.2 near T = 5 with a wide spread: the verdict flips
        ],
        ["direction", "direction"],
        thr=5.0,
        query_vars=[0.0, 0.0],
    )
    assert [r["verdict"] for r in fam] == ["reproduced", "inconclusive"]
    s = stability(fam, n_boot=2000, seed=0)
    assert s[0] == 1.0
    assert s[1] < 0.8  # fragile
    with pytest.raises(ValueError, match="at least 2"):
        stability([{**fam[0], "effects": [1.0]}])


# --- the ledger's columns -------------------------------------------------------------------------
def _row(cid, arms, effects, data="synthetic"):
    return ClaimResult(cid, "BCLS", "T", "s", "rsum", data, arms, effects, notebook="01_bcls").row()


def test_ledger_columns_on_planted_rows(tmp_path):
    p = tmp_path / "bcls"
    p.mkdir()
    b1 = [60.0, 55.0, 62.0, 58.0, 61.0]  # ≈ 6.1 × the paper's 9.7: reproduced, larger than the paper
    b2 = [30.0, -20.0, 10.0, 40.0, -25.0]  # wide: inconclusive and not decidable against the paper's 15.5
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", b1), _row("B2", "BCLS vs Triplet-SN", b2)]).to_csv(
        p / "claims_synthetic.csv", index=False
    )
    df = ledger_io.collect(tmp_path)
    prim = df[(df["role"] == "primary") & (df["dataset"] == "synthetic")].set_index("id")
    r1, r2 = prim.loc["B1"], prim.loc["B2"]
    # closed form: seed-only se = sd/√5, df = 4; B1 has the smaller p → Holm step α/2, B2 → α/1
    se1 = np.std(b1, ddof=1) / math.sqrt(5)
    expect = min_detectable_effect(se1, 4, ALPHA / 2)
    assert r1["mde"] == pytest.approx(expect) and r1["mde_alpha"] == pytest.approx(ALPHA / 2)
    assert r1["decidable"] is True and r1["verdict"] == "reproduced" and r1["larger_than_paper"] is True
    assert r1["ratio"] == pytest.approx(np.mean(b1) / 9.7) and r1["stability"] == 1.0 and r1["fragile"] is False
    se2 = np.std(b2, ddof=1) / math.sqrt(5)
    assert r2["mde"] == pytest.approx(min_detectable_effect(se2, 4, ALPHA))
    assert r2["verdict"] == "inconclusive" and r2["decidable"] is False and r2["larger_than_paper"] is False
    assert "not decidable at this budget" in r2["reason"] and "15.5" in r2["reason"]
    untested = prim.loc["U1"]
    assert math.isnan(untested["mde"]) and math.isnan(untested["stability"])
    csv = pd.read_csv(tmp_path / "claims.csv")
    for col in ("mde", "decidable", "stability", "fragile", "larger_than_paper", "ratio"):
        assert col in csv.columns
    md = (tmp_path / "claims.md").read_text()
    assert "MDE (decidable?)" in md and "stability" in md
    assert "**inconclusive** (not decidable at this budget)" in md
    assert "**reproduced** (larger than the paper — check the baseline)" in md
    # the cells read back from the CSV render the same way
    back = ledger_io.markdown(csv)
    assert "**inconclusive** (not decidable at this budget)" in back and "100%" in back


def test_rows_of_a_stale_claim_file_are_marked_in_the_markdown(tmp_path):
    (tmp_path / "bcls").mkdir()
    f = tmp_path / "bcls" / "claims_synthetic.csv"
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0, 58.0, 61.0])]).to_csv(f, index=False)
    fresh = ledger_io.markdown(ledger_io.collect(tmp_path))
    assert "*stale*" not in fresh and "primary rows are stale" not in fresh
    df = ledger_io.collect(tmp_path, stale={f: "written by 01_bcls.ipynb with other inputs"})
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
    assert line.endswith(f"**reproduced** (larger than the paper — check the baseline) — {ledger_io.STALE_MARK} |")
    assert sum("*stale*" in x for x in md.splitlines() if x.startswith("| ")) == n_bcls
    b2 = df[(df["role"] == "primary") & (df["id"] == "B2")].set_index("dataset")["note"].fillna("")
    assert b2["synthetic"].startswith("STALE (its notebook's claim file") and b2["flickr8k"] == ""


def test_readme_shows_stale_rows_without_their_verdicts_and_counts_them_apart(tmp_path):
    (tmp_path / "bcls").mkdir()
    f = tmp_path / "bcls" / "claims_synthetic.csv"
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0, 58.0, 61.0])]).to_csv(f, index=False)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{ledger_io.BEGIN}\nold\n{ledger_io.END}\n")
    fresh = ledger_io.collect(tmp_path)
    ledger_io.update_readme(fresh, "default", readme)
    text = readme.read_text()
    b1 = next(x for x in text.splitlines() if x.startswith("| B1 |"))
    assert "**reproduced**" in b1 and "await a run" not in text and ledger_io.STALE_CELL not in text
    assert ledger_io.summary_counts(fresh)[ledger_io.STALE].sum() == 0
    df = ledger_io.collect(tmp_path, stale={f: "written by 01_bcls.ipynb with other inputs"})
    counts = ledger_io.summary_counts(df)
    n_bcls = sum(c.notebook == "01_bcls" for c in registry.CLAIMS.values())
    assert counts.loc["synthetic", ledger_io.STALE] == n_bcls and counts.loc["synthetic", "reproduced"] == 0
    ledger_io.update_readme(df, "default", readme)
    text = readme.read_text()
    b1 = next(x for x in text.splitlines() if x.startswith("| B1 |"))
    assert ledger_io.STALE_CELL in b1 and "reproduced" not in b1 and "60" not in b1  # neither verdict nor effect
    assert f"**{n_bcls} of {int((df['role'] == 'primary').sum())} primary rows await a run" in text
    assert f"{n_bcls} stale" in text[text.index("Primary rows — ") :]
    assert f"{n_bcls} stale" in text[text.index("**In short.**") : text.index("| id |")]


# --- the plain summary ----------------------------------------------------------------------------
def _planted_ledger():
    rows = []
    # synthetic: 3 reproduced (2 larger than the paper, 1 fragile), 1 not reproduced, 1 no effect,
    # 2 inconclusive of which 1 not decidable, 1 not testable; flickr8k: 1 reproduced, 2 not decidable
    plan = {
        "synthetic": [
            ("reproduced", True, True, False),
            ("reproduced", True, True, False),
            ("reproduced", True, False, True),
            ("not reproduced", True, None, False),
            ("no effect", True, None, False),
            ("inconclusive", False, None, True),
            ("inconclusive", True, None, False),
            ("not testable", None, None, None),
        ],
        "flickr8k": [
            ("reproduced", True, False, False),
            ("inconclusive", False, None, False),
            ("inconclusive", False, None, False),
        ],
    }
    for data, rs in plan.items():
        for i, (v, dec, big, frag) in enumerate(rs):
            rows.append(
                {
                    "id": f"C{i}",
                    "role": "primary",
                    "dataset": data,
                    "verdict": v,
                    "decidable": dec,
                    "larger_than_paper": big,
                    "fragile": frag,
                }
            )
    rows.append(
        {"id": "C0", "role": "secondary", "dataset": "synthetic", "verdict": "inconclusive", "decidable": False}
    )
    return pd.DataFrame(rows)


def test_summary_counts_by_brute_force():
    df = _planted_ledger()
    t = ledger_io.summary_counts(df)
    assert list(t.index) == ["synthetic", "flickr8k"]
    assert t.loc["synthetic"].to_dict() == {
        "reproduced": 3,
        "not reproduced": 1,
        "no effect": 1,
        "not decidable at this budget": 1,
        "inconclusive": 1,
        "not testable": 1,
        "stale": 0,
    }
    assert t.loc["flickr8k", "not decidable at this budget"] == 2 and t.loc["flickr8k", "reproduced"] == 1
    # read back from a CSV (flags as text / empty) the counts are the same
    back = pd.read_csv(__import__("io").StringIO(df.to_csv(index=False)))
    assert ledger_io.summary_counts(back).equals(t)


def test_caveat_states_the_largest_share():
    df = _planted_ledger()
    # shares: larger than paper 2/4 reproduced = 0.5; fragile 1/6 decided; not decidable 3/11 primary
    assert ledger_io.caveat(df) == (
        "Caveat: 2 of 4 reproduced effects are more than 5× the paper's (check the baseline before reading "
        "them as the method's gain)."
    )
    df.loc[df["larger_than_paper"].eq(True), "larger_than_paper"] = False
    assert ledger_io.caveat(df).startswith("Caveat: 3 of 11 primary rows are inconclusive and not decidable")
    text = ledger_io.plain_summary(df)
    assert "- **synthetic** (8 claims): 3 reproduced, 1 not reproduced, 1 no effect, 1 not decidable" in text
    assert "- **flickr8k** (3 claims): 1 reproduced, 0 not reproduced, 0 no effect, 2 not decidable" in text
    assert "not testable" not in text.split("\n")[3]  # flickr8k has none: not listed
    assert ledger_io.caveat(df[df["verdict"] == "no effect"]) == ""


def test_a_stale_rows_seed_effects_feed_no_noise_floor(tmp_path):
    """A stale claim file's per-seed effects are an earlier run's: the floor of the current rows is the one
    they would have without that file, and the stale row reads back no floor of its own making."""
    b1 = [60.0, 55.0, 62.0, 58.0, 61.0]
    (tmp_path / "bcls").mkdir()
    pd.DataFrame([_row("B1", "Triplet-SN vs Triplet-HN", b1)]).to_csv(
        tmp_path / "bcls" / "claims_synthetic.csv", index=False
    )
    alone = ledger_io.collect(tmp_path)
    floor = alone.query("id == 'B1' and role == 'primary' and dataset == 'synthetic'").iloc[0]["noise_floor"]
    assert floor == pytest.approx(NOISE_K * np.std(b1, ddof=1))
    (tmp_path / "unified").mkdir()
    wild = tmp_path / "unified" / "claims_synthetic.csv"
    pd.DataFrame([_row("B2", "BCLS vs Triplet-SN", [300.0, -200.0, 100.0, 400.0, -250.0])]).to_csv(wild, index=False)
    with_current = ledger_io.collect(tmp_path)
    grown = with_current.query("id == 'B1' and role == 'primary' and dataset == 'synthetic'").iloc[0]["noise_floor"]
    assert grown > 10 * floor  # the wild row, current, widens the pool …
    df = ledger_io.collect(tmp_path, stale={wild: "written by 04_unified.ipynb with other inputs"})
    b1_row = df.query("id == 'B1' and role == 'primary' and dataset == 'synthetic'").iloc[0]
    assert b1_row["noise_floor"] == pytest.approx(floor)  # … stale, it does not
    assert "B2" not in str(b1_row["noise_floor_source"])
