"""The ledger's verdict rule on hand-made effects (numbers computed by hand or by scipy, not by the code under
test), the test images' variance of per-query hits, and the ledger files (the per-query hits themselves:
``tests/lib/test_per_query.py``)."""

import math
import re

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from coherent_itr.per_query import per_query_recall

from reproduce.spec import claims as registry
from reproduce.protocol import claim_files, ledger_decision
from reproduce.present import ledger_render
from reproduce.driver import ledger_files
from reproduce.spec import tables
from reproduce.protocol.claim_files import ClaimResult, mean_ci, verdict
from reproduce.protocol.ledger import (
    ALPHA,
    Estimate,
    bonferroni,
    decide,
    estimate,
    estimate_from_interval,
    family_alpha,
    paired_estimate,
    per_image_effects,
    rsum_of,
    smallest_effect,
    image_variance,
)

T2 = 4.302652729749464  # t_{0.975, 2}


def test_mean_ci_by_hand():
    # values 1, 2, 3: mean 2, sd 1, se 1/sqrt(3), t_{0.975, 2} = 4.302652729749464
    m, lo, hi = mean_ci([1.0, 2.0, 3.0])
    half = T2 / math.sqrt(3)
    assert m == 2.0 and lo == pytest.approx(2 - half) and hi == pytest.approx(2 + half)


@pytest.mark.parametrize(
    "effects, expected",
    [
        ([1.0, 1.1, 0.9], "reproduced"),
        ([-1.0, -1.1, -0.9], "reversed"),
        ([1.0, -1.0, 0.5], "inconclusive"),
        ([5.0], "inconclusive"),
        ([], "inconclusive"),
    ],
)
def test_notebook_preliminary_rule(effects, expected):
    assert verdict("direction", effects)[0] == expected


def test_claim_row_keeps_the_per_seed_effects():
    row = ClaimResult(
        "B1", "BCLS", "Table VIII", "SN beats HN", "rsum", "synthetic", "a vs b", effects=[2.0, 3.0, 4.0]
    ).row()
    assert row["verdict"] == "reproduced" and row["n_seeds"] == 3 and row["effect"] == 3.0
    assert [float(x) for x in row["seed_effects"].split(";")] == [2.0, 3.0, 4.0]


def test_estimate_seed_only_and_with_query_variance_by_hand():
    e = estimate([1.0, 2.0, 3.0])
    assert e.se == pytest.approx(1 / math.sqrt(3)) and e.df == 2
    assert e.interval() == pytest.approx((2 - T2 / math.sqrt(3), 2 + T2 / math.sqrt(3)))
    assert e.p_zero() == pytest.approx(2 * stats.t.sf(2 * math.sqrt(3), 2))
    q = estimate([1.0, 2.0, 3.0], query_var=1 / 3)  # seed var of the mean 1/3 + query 1/3
    assert q.se == pytest.approx(math.sqrt(2 / 3)) and q.df == 2  # the seed part's df (conservative)
    assert q.seed_sd == pytest.approx(1.0) and e.seed_sd == pytest.approx(1.0)  # the sd of 1, 2, 3


def test_estimate_from_interval_inverts_mean_ci():
    vals = [0.3, 1.7, 2.2, 0.9]
    m, lo, hi = mean_ci(vals)
    e, ref = estimate_from_interval(m, lo, hi, 4), estimate(vals)
    assert e.se == pytest.approx(ref.se) and e.df == ref.df and e.effect == pytest.approx(ref.effect)


def _est(mean, se, n=3):
    return Estimate(mean, se, n - 1, n)


Q = stats.t.ppf(1 - 0.01 / 2, 2)  # the half-width factor of a 99% interval with 2 df (≈ 9.92)


@pytest.mark.parametrize(
    "est, delta, expected, reason",
    [
        (_est(10.0, 0.5), 2.0, "reproduced", "interval above 0"),  # [5.0, 15.0]
        (_est(-10.0, 0.5), 2.0, "reversed", "interval below 0"),
        (_est(0.1, 0.1), 2.0, "ruled out", "lies below δ = 2"),  # [−0.89, 1.09] contains 0, below 2
        (_est(0.1, 0.2), 2.0, "inconclusive", "reaches δ = 2"),  # [−1.88, 2.08] reaches 2
        (_est(3.0, 2.0), 2.0, "inconclusive", "reaches δ"),
        (_est(0.1, 0.1), math.nan, "inconclusive", "direction alone"),  # no δ: never ruled out
        (_est(1.0, 0.05), 20.0, "reproduced", "interval above 0"),  # significant and far below δ: still reproduced
        (_est(-1.0, 0.05), 20.0, "reversed", "interval below 0"),  # significant the other way: never "ruled out"
        (Estimate(10.0, math.nan, math.nan, 1), 2.0, "inconclusive", "1 seed(s)"),
    ],
)
def test_direction_verdicts_by_hand(est, delta, expected, reason):
    v, why, lo, hi = decide("direction", est, alpha=0.01, delta=delta)
    assert v == expected and reason in why, why
    if est.n >= 2:
        assert (lo, hi) == pytest.approx((est.effect - Q * est.se, est.effect + Q * est.se))


def test_smaller_than_the_paper_beside_a_reproduced_verdict():
    v, why, lo, hi = decide("direction", _est(1.0, 0.05), alpha=0.01, delta=5.0, paper_effect=10.0)
    assert v == "reproduced" and hi < 10.0 and "smaller than the paper" in why
    v, why, _, _ = decide("direction", _est(10.0, 0.5), alpha=0.01, delta=2.0, paper_effect=4.0)
    assert v == "reproduced" and "smaller" not in why  # the interval [5, 15] reaches the paper's 4


def test_a_row_whose_interval_excludes_0_is_only_reproduced_or_reversed_and_none_is_ruled_out_with_delta_inside():
    rng = np.random.default_rng(0)
    for _ in range(2000):
        est = _est(rng.normal(0, 3), abs(rng.normal(0, 1)) + 1e-3)
        delta = abs(rng.normal(0, 3)) + 1e-3
        v, _, lo, hi = decide("direction", est, alpha=0.01, delta=delta)
        if lo > 0 or hi < 0:
            assert v in ("reproduced", "reversed")
        if lo <= delta <= hi:
            assert v != "ruled out"


def test_collapse_and_identity_and_equivalence():
    assert decide("direction", _est(50.0, 1.0), collapsed=True, collapse_reason="VSE++ gap 0.001")[:2] == (
        "not testable",
        "collapsed arm: VSE++ gap 0.001",
    )
    assert decide("identity", Estimate(1e-12, math.nan, math.nan, 5), tolerance=1e-10)[0] == "reproduced"
    assert decide("identity", Estimate(1e-3, math.nan, math.nan, 5), tolerance=1e-10)[0] == "ruled out"
    # equivalence at alpha 0.05: the 90% interval (t 2.92 with 2 df) inside / outside ±δ
    assert decide("equivalence", _est(0.1, 0.1), alpha=0.05, delta=2.0)[0] == "reproduced"
    assert decide("equivalence", _est(10.0, 0.2), alpha=0.05, delta=2.0)[0] == "ruled out"
    assert decide("equivalence", _est(1.8, 0.5), alpha=0.05, delta=2.0)[0] == "inconclusive"
    with pytest.raises(ValueError, match="kind"):
        decide("bigger", _est(0.1, 0.1))
    with pytest.raises(ValueError, match="tolerance"):
        decide("identity", _est(0.1, 0.1))
    with pytest.raises(ValueError, match="tolerance"):
        decide("equivalence", _est(0.1, 0.1), delta=math.nan)


def test_tost_p_value_by_hand():
    e = _est(0.5, 0.4)  # df 2
    by_hand = max(stats.t.sf((0.5 + 2) / 0.4, 2), stats.t.cdf((0.5 - 2) / 0.4, 2))
    assert e.p_equivalent(2.0) == pytest.approx(by_hand)


def test_smallest_effect_and_family_level_by_hand():
    assert smallest_effect(9.7) == pytest.approx(4.85) and smallest_effect(-3.0) == 1.5
    assert all(math.isnan(smallest_effect(x)) for x in (math.nan, None, 0))
    assert smallest_effect(None, tolerance=3.0, kind="equivalence") == 3.0
    assert family_alpha(5) == pytest.approx(0.01) and family_alpha(1) == ALPHA
    with pytest.raises(ValueError, match="at least one claim"):
        family_alpha(0)
    assert bonferroni(0.01, 9) == pytest.approx(0.09) and bonferroni(0.2, 9) == 1.0
    assert math.isnan(bonferroni(math.nan, 3))


def test_bonferroni_interval_excludes_zero_exactly_when_the_adjusted_p_is_below_alpha():
    rng = np.random.default_rng(0)
    m = 7
    for mu in rng.choice([0.0, 0.5, 3.0, 8.0], 60):
        e = estimate(rng.normal(mu, 1.0, 4))
        lo, hi = e.interval(1 - family_alpha(m))
        assert (lo > 0 or hi < 0) == (bonferroni(e.p_zero(), m) < ALPHA)


def test_family_sizes_are_the_registrys_interval_claims_per_paper():
    sizes = ledger_decision.family_sizes()
    by_hand: dict = {}
    for c in registry.CLAIMS.values():
        if c.primary.kind != "identity":
            by_hand[c.paper or "Across papers"] = by_hand.get(c.paper or "Across papers", 0) + 1
    assert sizes == by_hand and sum(sizes.values()) == len(registry.CLAIMS) - sum(
        c.primary.kind == "identity" for c in registry.CLAIMS.values()
    )


def _embeddings(rng, n_img=40, per=5, dim=16, noise=1.0, images=None):
    """Unit image and caption embeddings of one test split (``images``: the generator of the images, if not
    ``rng``: one test set that several seeds share)."""
    img = (images or rng).normal(size=(n_img, dim))
    cap = np.repeat(img, per, axis=0) + noise * rng.normal(size=(n_img * per, dim))
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    cap /= np.linalg.norm(cap, axis=1, keepdims=True)
    return img.astype(np.float32), cap.astype(np.float32), np.repeat(np.arange(n_img), per)


def test_image_variance_is_the_covariance_two_seeds_share():
    """The images' own variance σ_b² is what two seeds' per-image effects share (the seed × image interaction is
    independent between seeds): their covariance across images (numpy's), averaged over the pairs of seeds, / I.
    The ANOVA's max(0, MS_image − MS_resid) / (n·I) is the same number on a balanced table."""
    rng = np.random.default_rng(4)
    g = rng.normal(size=(4, 1)) + rng.normal(0, 2.0, size=(1, 30)) + rng.normal(0, 1.5, size=(4, 30))
    n, units = g.shape
    cov = np.cov(g)
    shared = [cov[s, t] for s in range(n) for t in range(n) if s != t]
    assert image_variance(g) == pytest.approx(np.mean(shared) / units, rel=1e-12)
    assert image_variance(np.ones((3, 5))) == 0.0  # no image effect: nothing beyond the seeds
    assert image_variance(np.stack([g[0], -g[0]])) == 0.0  # negative shared covariance: truncated at 0
    assert image_variance(g[:1]) == pytest.approx(g[0].var(ddof=1) / units)  # one seed: all of it
    with pytest.raises(ValueError, match="seeds × units"):
        image_variance(np.ones(5))


def test_seed_and_image_variance_add_up_to_the_variance_of_the_mean_under_crossed_effects():
    """Simulated seeds × images tables g = θ + a_s + b_i + c_si (σ_a = 1, σ_b = 2, σ_c = 6: an interaction as
    large against the rest as in the real tables): se² = s_seed²/n + v_query is unbiased for Var(θ̂) =
    σ_a²/n + σ_b²/I + σ_c²/(nI); the query variance of seed-averaged differences alone (what a bootstrap over
    queries gives) adds the interaction a second time."""
    rng = np.random.default_rng(5)
    n, units, reps = 5, 200, 8000
    g = rng.normal(0, 1.0, (reps, n, 1)) + rng.normal(0, 2.0, (reps, 1, units)) + rng.normal(0, 6.0, (reps, n, units))
    true_var = 1.0 / n + 4.0 / units + 36.0 / (n * units)
    theta = g.mean(axis=(1, 2))
    assert theta.var(ddof=1) == pytest.approx(true_var, rel=0.08)  # the model's variance, checked on the draws
    seed_part = g.mean(axis=2).var(axis=1, ddof=1) / n
    new = seed_part + np.array([image_variance(x) for x in g])
    old = seed_part + g.mean(axis=1).var(axis=1, ddof=1) / units
    assert new.mean() == pytest.approx(true_var, rel=0.03)
    assert (old - new).mean() == pytest.approx(36.0 / (n * units), rel=0.02)  # the interaction, once more


def test_per_image_effects_by_a_loop_over_images_and_their_captions():
    ioc = np.array([0, 0, 1, 2, 2, 2])  # 3 images with 2, 1 and 3 captions
    rng = np.random.default_rng(6)

    def pq():
        return {"i2t": rng.integers(0, 2, (3, 3)) * 100.0, "t2i": rng.integers(0, 2, (6, 3)) * 100.0}

    a, b = [pq(), pq()], [pq(), pq()]
    g = per_image_effects(a, b, ioc)
    for s in range(2):
        for i in range(3):
            caps = [c for c in range(6) if ioc[c] == i]
            want = (a[s]["i2t"][i].sum() - b[s]["i2t"][i].sum()) + 3 / 6 * sum(
                a[s]["t2i"][c].sum() - b[s]["t2i"][c].sum() for c in caps
            )
            assert g[s, i] == pytest.approx(want)
        assert g[s].mean() == pytest.approx(rsum_of(a[s]) - rsum_of(b[s]))  # a row's mean is the seed's effect
    with pytest.raises(ValueError, match="same seeds"):
        per_image_effects(a, b[:1], ioc)
    with pytest.raises(ValueError, match="arm A, seed #0: 3 image and 6 caption queries, but the test split has 5"):
        per_image_effects(a, b, ioc[:5])
    with pytest.raises(ValueError, match="image_of_caption"):
        per_image_effects(a, b, ioc.astype(float))


def test_paired_estimate_combines_seed_and_test_set_variation():
    a = [per_query_recall(*_embeddings(np.random.default_rng(10 + s), noise=0.8)) for s in range(3)]
    b = [per_query_recall(*_embeddings(np.random.default_rng(10 + s), noise=1.4)) for s in range(3)]
    ioc = _embeddings(np.random.default_rng(10), noise=0.8)[2]
    est = paired_estimate(a, b, ioc)
    seed_only = estimate([rsum_of(x) - rsum_of(y) for x, y in zip(a, b)])
    assert est.effect == pytest.approx(seed_only.effect) and est.se >= seed_only.se
    assert est.query_var == pytest.approx(image_variance(per_image_effects(a, b, ioc)))


# --- the ledger files ------------------------------------------------------------------------------
def _write(tmp_path, sub, data, rows):
    p = tmp_path / sub
    p.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows).to_csv(p / f"claims_{data}.csv", index=False)


def _row(cid, metric, arms, effects, data="synthetic", statement="s", kind="direction", notebook="01_bcls"):
    r = ClaimResult(cid, "BCLS", "T", statement, metric, data, arms, effects, kind=kind, notebook=notebook).row()
    return r


def test_collect_one_primary_row_per_claim_and_data_set(tmp_path):
    _write(
        tmp_path,
        "bcls",
        "synthetic",
        [
            _row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0]),  # the primary
            _row("B1", "mean val_rsum, epochs 1..1", "Triplet-SN vs Triplet-HN", [300.0, 310.0, 320.0]),
            _row("B2", "rsum", "BCLS vs Triplet-SN", [1.0, -2.0, 0.5]),
        ],
    )
    df = ledger_files.collect(tmp_path)
    prim = df[df["role"] == "primary"]
    assert len(prim) == len(registry.CLAIMS) * 2 and not prim.duplicated(["id", "dataset"]).any()
    b1 = prim[(prim["id"] == "B1") & (prim["dataset"] == "synthetic")].iloc[0]
    assert b1["n_seeds"] == 3 and b1["effect"] == pytest.approx(59.0) and b1["paper_effect"] == pytest.approx(9.7)
    assert b1["ratio"] == pytest.approx(59.0 / 9.7) and b1["verdict"] in ("reproduced", "inconclusive")
    assert np.isfinite(b1["p_adj"]) and b1["p_adj"] >= b1["p_unadj"]
    sec = df[(df["role"] == "secondary") & (df["id"] == "B1")]
    assert len(sec) == 1 and math.isnan(sec["p_adj"].iloc[0])
    # B1's family is BCLS's claims on the synthetic world: Bonferroni at 0.05 / 9 (9 interval claims)
    assert b1["family"] == "BCLS" and b1["family_size"] == 9 and b1["level"] == pytest.approx(1 - 0.05 / 9)
    assert b1["p_adj"] == pytest.approx(min(1.0, 9 * b1["p_unadj"])) and b1["delta"] == pytest.approx(4.85)
    half = stats.t.ppf(1 - 0.05 / 18, 2) * np.std([60.0, 55.0, 62.0], ddof=1) / math.sqrt(3)
    assert (b1["ci_low"], b1["ci_high"]) == pytest.approx((59.0 - half, 59.0 + half))
    assert b1["seed_sd"] == pytest.approx(np.std([60.0, 55.0, 62.0], ddof=1)) and np.isfinite(b1["power"])
    untested = prim[(prim["id"] == "U1") & (prim["dataset"] == "flickr8k")].iloc[0]
    assert untested["verdict"] == "inconclusive" and "not tested in this run" in untested["reason"]
    md = (tmp_path / "claims.md").read_text()
    # no NaN, no empty interval, no Python scientific notation (statements may quote the papers' "1e-2")
    assert not re.search(r"\bnan\b", md.lower()) and "[, ]" not in md and not re.search(r"\d\.\d*e[+-]\d\d", md)
    assert md.index("## Primary rows") < md.index("## Secondary rows") < md.index("## Legend")
    for v in ("reproduced", "reversed", "ruled out", "inconclusive", "not testable"):
        assert f"**{v}**" in md
    assert "# Power at the papers' effects" in (tmp_path / "power.md").read_text()
    csv = pd.read_csv(tmp_path / "claims.csv")
    for col in [
        "id",
        "paper",
        "role",
        "dataset",
        "statement",
        "metric",
        "unit",
        "direction",
        "arms",
        "n_seeds",
        "test_images",
        "effect",
        "ci_low",
        "ci_high",
        "p_unadj",
        "p_adj",
        "family",
        "family_size",
        "level",
        "delta",
        "paper_effect",
        "ratio",
        "power",
        "seeds_for_power",
        "underpowered",
        "verdict",
        "reason",
        "notebook",
    ]:
        assert col in csv.columns


def test_collapsed_arm_makes_the_primary_row_not_testable(tmp_path):
    _write(tmp_path, "bcls", "synthetic", [_row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0])])
    df = ledger_files.collect(tmp_path, collapsed={("synthetic", "Triplet-HN"): "gap 0.0003 at the selected epoch"})
    r = df[(df["id"] == "B1") & (df["role"] == "primary") & (df["dataset"] == "synthetic")].iloc[0]
    assert r["verdict"] == "not testable" and "Triplet-HN" in r["reason"] and math.isnan(r["p_adj"])


def test_a_row_stated_the_other_way_round_is_flipped(tmp_path):
    _write(
        tmp_path,
        "overview",
        "synthetic",
        [
            _row(
                "X1",
                "rsum",
                "Triplet (all negatives) vs VSE++ (Triplet-HN)",
                [-5.0, -7.0, -6.0],
                notebook="00_overview",
            )
        ],
    )
    df = ledger_files.collect(tmp_path)
    r = df[(df["id"] == "X1") & (df["role"] == "primary") & (df["dataset"] == "synthetic")].iloc[0]
    assert r["effect"] == pytest.approx(6.0) and r["arms"].startswith("VSE++")


def test_two_rows_matching_one_primary_is_an_error(tmp_path):
    row = _row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0])
    _write(tmp_path, "bcls", "synthetic", [row, row])
    with pytest.raises(ValueError, match="two rows match the primary contrast of B1"):
        ledger_files.collect(tmp_path)


def test_old_claim_files_without_per_seed_effects_still_read(tmp_path):
    m, lo, hi = mean_ci([60.0, 55.0, 62.0])
    _write(
        tmp_path,
        "bcls",
        "synthetic",
        [
            {
                "id": "B1",
                "paper": "BCLS",
                "statement": "s",
                "metric": "rsum",
                "dataset": "synthetic",
                "arms": "Triplet-SN vs Triplet-HN",
                "n_seeds": 3,
                "effect": m,
                "ci_low": lo,
                "ci_high": hi,
                "kind": "direction",
            }
        ],
    )
    r = ledger_files.collect(tmp_path).query("id == 'B1' and role == 'primary' and dataset == 'synthetic'").iloc[0]
    assert r["ci95_low"] == pytest.approx(lo) and r["ci95_high"] == pytest.approx(hi)


def test_notebook_summary_must_agree_with_the_ledger(tmp_path):
    _write(tmp_path, "bcls", "synthetic", [_row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0])])
    df = ledger_files.collect(tmp_path)
    truth = df.query("id == 'B1' and role == 'primary' and dataset == 'synthetic'")["verdict"].iloc[0]
    good = pd.DataFrame([{"id": "B1", "dataset": "synthetic", "verdict": truth}])
    assert ledger_render.check_notebook_summary(good, df) == []
    bad = pd.DataFrame(
        [
            {"id": "B1", "dataset": "synthetic", "verdict": "mixed"},
            {"id": "B99", "dataset": "synthetic", "verdict": "reproduced"},
        ]
    )
    msgs = ledger_render.check_notebook_summary(bad, df)
    assert len(msgs) == 2 and "mixed" in msgs[0] and "B99" in msgs[1]
    with pytest.raises(AssertionError, match="disagrees"):
        ledger_render.assert_notebook_agrees(bad, df)


def test_readme_table_counts_primary_rows_only(tmp_path):
    _write(
        tmp_path,
        "bcls",
        "synthetic",
        [
            _row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0]),
            _row("B1", "other", "x vs y", [1.0, 1.1, 0.9]),
        ],
    )
    df = ledger_files.collect(tmp_path)
    readme = tmp_path / "README.md"
    readme.write_text(f"intro\n{ledger_files.BEGIN}\nold\n{ledger_files.END}\nrest\n")
    ledger_files.update_readme(df, "default", readme)
    text = readme.read_text()
    table = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| id")]
    assert len(table) == len(registry.CLAIMS) and text.endswith("rest\n") and "old" not in text
    n_prim = (df["role"] == "primary").sum()
    tally = text[text.index("Primary rows (device and identity checks B7, U6: one measurement each, not counted) — ") :]
    counts = re.findall(r"(\d+) (?:reproduced|not reproduced|no effect|inconclusive|not testable)", tally)
    n_checks = int(ledger_render.check_rows(df).sum())  # B7 and U6 on each data set
    assert n_checks == 2 * len(set(df["dataset"])) and sum(int(c) for c in counts) == n_prim - n_checks
    # the plain summary opens the block, and no verdict goes without its ratio column
    assert text.index("**In short.**") < text.index("| id |") and "synthetic: ratio to paper" in text
    b1 = next(ln for ln in table if ln.startswith("| B1 |"))
    assert f"| {tables.fmt_num(59.0 / 9.7, 2)} |" in b1


def test_fmt_num_never_scientific():
    assert tables.fmt_num(1.2e-12) == "1.2 × 10⁻¹²" and tables.fmt_num(12345.6) == "12346"
    assert tables.fmt_num(-3.456e-5) == "-3.46 × 10⁻⁵" and tables.fmt_num(2.5e-4) == "0.00025"
    assert tables.fmt_num(math.nan) == "—" and tables.fmt_num(0.0) == "0" and tables.fmt_num(-0.02594) == "-0.0259"


def test_manifest_keeps_the_last_training_invocation_across_cached_reruns(tmp_path):
    import json
    from reproduce.driver.ledger_files import write_manifest

    write_manifest(tmp_path, "default", ["synthetic"], 1800.0, {"synthetic_train_s": 1700.0}, 2, runs_trained=150)
    first = json.loads((tmp_path / "manifest.json").read_text())
    assert first["last_training_invocation"]["runtime_s"] == 1800.0
    from coherent_itr.runs import cpu_identity

    assert first["machine"]["cpu"] == cpu_identity()  # the CPU the numbers came from (its key names it)
    write_manifest(tmp_path, "default", ["synthetic"], 3.0, {"synthetic_train_s": 0.0}, 2, runs_trained=0)
    second = json.loads((tmp_path / "manifest.json").read_text())
    assert second["runtime_s"] == 3.0 and second["runs_trained"] == 0
    assert second["last_training_invocation"] == first["last_training_invocation"]
    write_manifest(tmp_path, "smoke", ["synthetic"], 3.0, {}, 2, runs_trained=0)  # other profile: not carried
    assert "last_training_invocation" not in json.loads((tmp_path / "manifest.json").read_text())


# --- primary rows computed by claim id from the runs ---------------------------------------------------
IOC = np.repeat(np.arange(40), 5)  # the test split of _embeddings: 40 images, 5 captions each


def _shared_images():
    """The generator of the one test set the fake runs share."""
    return np.random.default_rng(99)


def _by_seed(pq: dict, n: int | None = None) -> dict:
    """``{arm: {seed: per-query data}}`` from lists in seed order (the first ``n`` seeds)."""
    return {arm: dict(enumerate(qs[:n])) for arm, qs in pq.items()}


def _fake_runs():
    """Two arms × 3 seeds on one test set with per-query data whose RSUM equals the results' RSUM."""
    rows, pq = [], {"Triplet-SN": [], "Triplet-HN": []}
    for s in range(3):
        for arm, noise in (("Triplet-SN", 0.8), ("Triplet-HN", 1.3)):
            q = per_query_recall(*_embeddings(np.random.default_rng(100 + s), noise=noise, images=_shared_images()))
            pq[arm].append(q)
            rows.append({"arm": arm, "seed": s, "rsum": rsum_of(q)})
    return pd.DataFrame(rows), pq


def test_an_arm_with_more_seeds_is_paired_on_the_seeds_both_arms_have():
    """Triplet-SN with 2 seeds more than Triplet-HN (seeds a power analysis asked of one arm only): the row's
    effects and its query bootstrap use seeds 0–2, the ones both arms have, keyed by seed."""
    from reproduce.protocol.claim_rows import primary_row

    df, pq = _fake_runs()
    extra = []
    for s in (3, 4):
        q = per_query_recall(*_embeddings(np.random.default_rng(200 + s), noise=0.8, images=_shared_images()))
        extra.append({"arm": "Triplet-SN", "seed": s, "rsum": rsum_of(q)})
        pq["Triplet-SN"].append(q)
    more = pd.concat([df, pd.DataFrame(extra)], ignore_index=True)
    by_seed = _by_seed(pq)
    row = primary_row("B1", "synthetic", more, per_query=by_seed, image_of_caption=IOC)
    same = primary_row("B1", "synthetic", df, per_query=_by_seed(pq, 3), image_of_caption=IOC)
    assert row["n_seeds"] == 3 and row["seed_effects"] == same["seed_effects"]
    assert row["query_var"] == pytest.approx(same["query_var"])


def test_primary_row_by_claim_id_with_the_query_bootstrap(tmp_path):
    from reproduce.protocol.claim_rows import primary_row

    df, pq = _fake_runs()
    row = primary_row("B1", "synthetic", df, per_query=_by_seed(pq), image_of_caption=IOC)
    by_seed = df.pivot(index="seed", columns="arm", values="rsum")
    expected = (by_seed["Triplet-SN"] - by_seed["Triplet-HN"]).tolist()
    assert [float(x) for x in row["seed_effects"].split(";")] == pytest.approx(expected)
    assert row["role"] == "primary" and row["test_images"] == IOC.max() + 1 and row["query_var"] > 0
    seed_only = primary_row("B1", "synthetic", df)
    assert seed_only["query_var"] == 0 and seed_only["test_images"] == 0
    with pytest.raises(ValueError, match="image_of_caption"):
        primary_row("B1", "synthetic", df, per_query=_by_seed(pq))
    with pytest.raises(TypeError, match="seed"):
        primary_row("B1", "synthetic", df, per_query=pq, image_of_caption=IOC)
    # a secondary row that would match the legacy matcher stays secondary next to a declared primary
    legacy = _row("B1", "rsum", "Triplet-SN vs Triplet-HN", [1.0, 2.0, 3.0])
    claim_files.write_claims(
        [
            row,
            ClaimResult(
                **{k: legacy[k] for k in ("id", "paper", "source", "statement", "metric", "dataset", "arms")},
                effects=[1.0, 2.0, 3.0],
            ),
        ],
        tmp_path,
        "bcls",
        "synthetic",
    )
    out = ledger_files.collect(tmp_path).query("id == 'B1' and dataset == 'synthetic'")
    prim, sec = out[out["role"] == "primary"].iloc[0], out[out["role"] == "secondary"]
    assert prim["test_images"] == IOC.max() + 1 and prim["effect"] == pytest.approx(np.mean(expected)) and len(sec) == 1
    wider = estimate(expected, row["query_var"]).interval(0.95)
    assert prim["ci95_high"] - prim["ci95_low"] == pytest.approx(wider[1] - wider[0])
    with pytest.raises(ValueError, match="measured in the notebook"):
        primary_row("B7", "synthetic", df)
    with pytest.raises(KeyError, match="metric column"):
        primary_row("B4", "synthetic", df)


def test_collapsed_arms_from_cached_records():
    from types import SimpleNamespace

    from reproduce.protocol.claim_rows import collapsed_arms

    class Cache:
        def load(self, cfg):
            return SimpleNamespace(record={"seed": cfg.seed})

    arm = SimpleNamespace(name="Triplet-HN", configs=lambda prof: [SimpleNamespace(seed=0), SimpleNamespace(seed=1)])
    other = SimpleNamespace(name="Triplet-SN", configs=lambda prof: [SimpleNamespace(seed=0)])
    study = SimpleNamespace(
        data="flickr8k",
        profile=None,
        cache=Cache(),
        arms=lambda paper: [arm, other] if paper == "bcls" else [],
        configs=lambda a, train_missing=True: a.configs(None),
    )
    out = collapsed_arms(study, is_collapsed=lambda rec: (rec["seed"] == 1, "gap 0.0004 < 0.01"))
    assert out == {("flickr8k", "Triplet-HN"): "seed 1: gap 0.0004 < 0.01"}


def test_collapsed_column_in_a_claim_file_and_a_false_primary_declaration(tmp_path):
    row = {
        **_row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0]),
        "collapsed": True,
        "collapse_reason": "Triplet-HN: gap 0.001",
    }
    _write(tmp_path, "bcls", "synthetic", [row])
    b1 = ledger_files.collect(tmp_path).query("id == 'B1' and role == 'primary' and dataset == 'synthetic'").iloc[0]
    assert b1["verdict"] == "not testable" and "gap 0.001" in b1["reason"]
    _write(tmp_path, "bcls", "synthetic", [{**_row("B1", "other", "x vs y", [1.0, 2.0, 3.0]), "role": "primary"}])
    with pytest.raises(ValueError, match="not the registry's primary"):
        ledger_files.collect(tmp_path)
    # the same file written by older code (stale): a secondary row marked STALE, and a placeholder primary
    [f] = list(tmp_path.rglob("claims_synthetic.csv"))
    df = ledger_files.collect(tmp_path, stale={f: "written with other inputs"}).query("id == 'B1'")
    old = df[df.metric == "other"].iloc[0]
    assert old["role"] != "primary" and str(old["note"]).startswith("STALE (written with other inputs)")
    assert ((df.role == "primary") & (df.dataset == "synthetic")).sum() == 1


def test_ledger_says_when_training_health_was_not_evaluated(tmp_path):
    _write(tmp_path, "bcls", "synthetic", [_row("B1", "rsum", "Triplet-SN vs Triplet-HN", [60.0, 55.0, 62.0])])
    ledger_files.collect(tmp_path)
    assert "Training health was not evaluated" in (tmp_path / "claims.md").read_text()
    ledger_files.collect(tmp_path, collapsed={})
    assert "Training health was not evaluated" not in (tmp_path / "claims.md").read_text()


def test_manifest_keeps_each_data_sets_last_training(tmp_path):
    """Training one data set, then the other, then a cached rerun: the manifest still says what each
    data set's training cost and how many runs it trained and evaluated."""
    import json
    from reproduce.driver.ledger_files import write_manifest

    def man():
        return json.loads((tmp_path / "manifest.json").read_text())

    write_manifest(
        tmp_path,
        "default",
        ["synthetic"],
        900.0,
        {"synthetic_train_s": 800.0},
        2,
        runs_trained=194,
        runs_evaluated=194,
        by_data={"synthetic": {"runs_trained": 194, "runs_evaluated": 194}},
    )
    write_manifest(
        tmp_path,
        "default",
        ["flickr8k"],
        5000.0,
        {"flickr8k_train_s": 4000.0, "flickr8k_prepare_s": 700.0},
        2,
        runs_trained=200,
        runs_evaluated=150,
        by_data={"flickr8k": {"runs_trained": 200, "runs_evaluated": 150}},
    )
    # a rerun that only evaluates (e.g. a metric changed): trains nothing, so the records stay
    write_manifest(
        tmp_path,
        "default",
        ["synthetic", "flickr8k"],
        60.0,
        {},
        2,
        runs_trained=0,
        runs_evaluated=40,
        by_data={"synthetic": {"runs_trained": 0, "runs_evaluated": 40}},
    )
    m = man()
    assert m["runs_trained"] == 0 and m["runs_evaluated"] == 40
    per = m["last_training_by_data"]
    assert per["synthetic"]["runs_trained"] == 194 and per["synthetic"]["phases_s"] == {"synthetic_train_s": 800.0}
    assert per["flickr8k"]["runs_evaluated"] == 150
    assert per["flickr8k"]["phases_s"] == {"flickr8k_train_s": 4000.0, "flickr8k_prepare_s": 700.0}
    write_manifest(tmp_path, "smoke", ["synthetic"], 3.0, {}, 2)  # another profile: nothing carried over
    assert "last_training_by_data" not in man()


def test_a_rows_verdict_does_not_depend_on_another_arms_noise(tmp_path):
    """The rule's threshold comes from the claim: an unstable contrast on the same metric (a collapsed seed,
    sd ≈ 90) changes nothing in B1's interval, δ or verdict; S3, measured in the notebook from SAM's grid, is
    decided in SAM's family with δ = half its paper effect."""
    b1 = [6.0, 5.5, 6.2, 5.8, 6.1]
    s3 = registry.CLAIMS["S3"].primary
    _write(tmp_path, "bcls", "synthetic", [_row("B1", "rsum", "Triplet-SN vs Triplet-HN", b1)])
    alone = ledger_files.collect(tmp_path)
    wild = _row("X1", "rsum", "VSE++ without warm-up vs VSE++", [1.0, -200.0, 3.0, 2.0, 0.0], notebook="00_overview")
    s3_eff = [-38.0, -42.0, -40.0, -41.0, -39.0]
    s3_row = _row("S3", "rsum", "SAM SN vs HN, mean over 4 cells", s3_eff, statement=s3.statement)
    _write(tmp_path, "overview", "synthetic", [wild])
    _write(tmp_path, "sam", "synthetic", [{**s3_row, "notebook": "03_sam", "role": "primary"}])
    both = ledger_files.collect(tmp_path)
    cols = ["ci_low", "ci_high", "delta", "verdict", "power", "p_adj"]
    key = "id == 'B1' and role == 'primary' and dataset == 'synthetic'"
    pd.testing.assert_series_equal(alone.query(key).iloc[0][cols], both.query(key).iloc[0][cols])
    r = both.query("id == 'S3' and role == 'primary' and dataset == 'synthetic'").iloc[0]
    assert r["family"] == "SAM" and r["delta"] == pytest.approx(0.5 * 27.05) and r["verdict"] == "reversed"


def test_an_older_claim_files_bootstrap_variance_is_named_in_the_reason(tmp_path):
    """A claim file written before the test images' variance (its ``n_boot`` column: a bootstrap over queries)
    is read as it is, and the reason says that its interval counts the interaction twice."""
    df, pq = _fake_runs()
    row = _primary_row_b1(df, pq)
    claim_files.write_claims([row], tmp_path, "bcls", "synthetic")
    (path,) = tmp_path.rglob("*.csv")
    pd.read_csv(path).rename(columns={"test_images": "n_boot"}).assign(n_boot=1000).to_csv(path, index=False)
    prim = ledger_files.collect(tmp_path).query("id == 'B1' and dataset == 'synthetic' and role == 'primary'").iloc[0]
    assert prim["test_images"] == 0 and prim["query_var"] == pytest.approx(row["query_var"])
    assert "older claim file's bootstrap over queries" in prim["reason"]


def _primary_row_b1(df, pq) -> dict:
    from reproduce.protocol.claim_rows import primary_row

    return primary_row("B1", "synthetic", df, per_query=_by_seed(pq), image_of_caption=IOC)
