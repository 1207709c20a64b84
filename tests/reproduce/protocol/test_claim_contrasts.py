"""Each contrast fix of the claims file on a planted record: the effect a contrast computes is checked
against a loop written from its definition, and the papers' effects against their tables."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reproduce.protocol import claim_rows, ledger_rows

from reproduce.spec import paper_numbers
from reproduce.spec import claims as registry
from reproduce.present.analyses import listwise as lw

SEEDS = (0, 1, 2, 3, 4)


def results(values: dict) -> pd.DataFrame:
    """Study.results-like rows: ``values = {arm: {metric: [per-seed values]}}``."""
    rows = []
    for arm, cols in values.items():
        for i, s in enumerate(SEEDS):
            rows.append({"arm": arm, "seed": s, **{m: v[i] for m, v in cols.items()}})
    return pd.DataFrame(rows)


def rng_values(seed: int, n: int = len(SEEDS), loc: float = 0.0, scale: float = 1.0) -> list[float]:
    return list(np.random.default_rng(seed).normal(loc, scale, n))


# --- B5: α = 0.2 beats each other α, RSUM and 100 × Kendall τ ---------------------------------------------
def b5_frame(alphas=("α=0", "α=0.1", "α=0.2", "α=0.3", "α=0.4")) -> pd.DataFrame:
    vals = {}
    for k, a in enumerate(alphas):
        vals[a] = {
            "rsum": rng_values(k, loc=400.0 + 3 * k, scale=2.0),
            "tau_i2t_sbert": rng_values(10 + k, loc=0.2, scale=0.02),
            "tau_t2i_sbert": rng_values(20 + k, loc=0.2, scale=0.02),
        }
    return results(vals)


def test_b5_effect_is_the_smallest_difference_over_each_alpha_and_both_metrics():
    df = b5_frame()
    row = claim_rows.primary_row("B5", "synthetic", df)
    want = []
    for i, s in enumerate(SEEDS):

        def at(arm, col, s=s):
            return float(df[(df.arm == arm) & (df.seed == s)][col].iloc[0])

        diffs = []
        for other in ("α=0", "α=0.1", "α=0.3", "α=0.4"):
            diffs.append(at("α=0.2", "rsum") - at(other, "rsum"))
            tau = (at("α=0.2", "tau_i2t_sbert") + at("α=0.2", "tau_t2i_sbert")) / 2
            tau_o = (at(other, "tau_i2t_sbert") + at(other, "tau_t2i_sbert")) / 2
            diffs.append(100.0 * (tau - tau_o))
        want.append(min(diffs))
    got = [float(x) for x in row["seed_effects"].split(";")]
    assert got == pytest.approx(want)
    # the old contrast (α = 0.2 minus the mean of α = 0 and 0.4 on RSUM) is a different number
    old = [
        float(df[(df.arm == "α=0.2") & (df.seed == s)].rsum.iloc[0])
        - np.mean([float(df[(df.arm == a) & (df.seed == s)].rsum.iloc[0]) for a in ("α=0", "α=0.4")])
        for s in SEEDS
    ]
    assert not np.allclose(got, old)
    assert row["arms"] == "α=0.2 − each of α=0, α=0.1, α=0.3, α=0.4" and "smallest difference" in row["note"]
    assert row["metric"] == "min(rsum, 100·mean(tau_i2t_sbert, tau_t2i_sbert))"


def test_b5_a_peak_beaten_on_tau_alone_is_not_a_peak():
    # α = 0.2 has the best RSUM by far but α = 0.3 has a higher τ: the co-primary makes every seed negative
    vals = {a: {"rsum": [400.0] * 5, "tau_i2t_sbert": [0.2] * 5, "tau_t2i_sbert": [0.2] * 5} for a in ("α=0", "α=0.4")}
    vals["α=0.2"] = {"rsum": [430.0] * 5, "tau_i2t_sbert": [0.25] * 5, "tau_t2i_sbert": [0.25] * 5}
    vals["α=0.3"] = {"rsum": [401.0] * 5, "tau_i2t_sbert": [0.27] * 5, "tau_t2i_sbert": [0.27] * 5}
    row = claim_rows.primary_row("B5", "synthetic", results(vals))
    assert [float(x) for x in row["seed_effects"].split(";")] == pytest.approx([-2.0] * 5)  # 100 × (0.25 − 0.27)


def test_each_leaves_out_arms_a_thinned_sweep_does_not_run():
    df = b5_frame(("α=0", "α=0.2", "α=0.4"))  # thinned: α = 0.1 and 0.3 not run
    row = claim_rows.primary_row("B5", "synthetic", df)
    assert "each of α=0, α=0.4" in row["note"] and row["n_seeds"] == len(SEEDS)
    with pytest.raises(KeyError, match="none of the arms"):
        claim_rows.primary_row("B5", "synthetic", df[df.arm == "α=0.2"])


# --- U4 / U5 ----------------------------------------------------------------------------------------------
def test_u4_compares_m02_with_the_best_other_m_per_seed():
    ms = {"m=0": 390.0, "m=0.1": 409.0, "m=0.2": 410.0, "m=0.3": 405.0, "m=0.4": 380.0}
    df = results({a: {"rsum": [v + 0.5 * s for s in SEEDS]} for a, v in ms.items()})
    row = claim_rows.primary_row("U4", "synthetic", df)
    assert [float(x) for x in row["seed_effects"].split(";")] == pytest.approx([1.0] * 5)  # vs m = 0.1, the best
    # the old contrast, m = 0.2 − m = 0.4, would have read +30
    assert registry.claim("U4").primary.arm_b == ("m=0", "m=0.1", "m=0.3", "m=0.4")


def test_u5_needs_both_sides_of_the_gamma_peak():
    rising_only = {"γ=20": 390.0, "γ=40": 400.0, "γ=60": 410.0, "γ=80": 415.0, "γ=100": 420.0}
    df = results({a: {"rsum": [v] * 5} for a, v in rising_only.items()})
    row = claim_rows.primary_row("U5", "synthetic", df)
    assert [float(x) for x in row["seed_effects"].split(";")] == pytest.approx([-10.0] * 5)  # 410 − 420: no fall
    peaked = {**rising_only, "γ=100": 401.0}
    row = claim_rows.primary_row("U5", "synthetic", results({a: {"rsum": [v] * 5} for a, v in peaked.items()}))
    assert [float(x) for x in row["seed_effects"].split(";")] == pytest.approx([9.0] * 5)  # min(410 − 390, 410 − 401)


# --- N7 / U3: after the warm-up, the same epochs for both arms ---------------------------------------------
def history(curves: dict, warm: dict) -> pd.DataFrame:
    """``curves = {arm: [val_rsum per epoch]}`` (same for every seed, shifted by the seed), ``warm = {arm:
    warm-up epochs}``."""
    rows = []
    for arm, ys in curves.items():
        for s in SEEDS:
            for e, y in enumerate(ys, start=1):
                rows.append({"arm": arm, "seed": s, "epoch": e, "warmup": e <= warm.get(arm, 0), "val_rsum": y + s})
    return pd.DataFrame(rows)


def test_n7_area_after_the_warmup_by_loop():
    both, trip = [10.0, 50.0, 80.0, 90.0], [40.0, 45.0, 70.0, 95.0]  # Triplet's epoch 1 is its warm-up
    hist = history({lw.BOTH: both, lw.TRIP: trip}, {lw.TRIP: 1})
    effects, area, window = lw.n7_effects(hist)
    assert window == "epochs 2–4"
    assert effects == pytest.approx([np.mean(both[1:]) - np.mean(trip[1:])] * 5)  # (220 − 210)/3
    # epoch 1 alone (the old reading) would say the opposite: 10 − 40 < 0
    assert area.set_index(["arm", "seed"]).loc[(lw.BOTH, 0), "val_rsum"] == pytest.approx(np.mean(both[1:]))


def test_window_ends_at_the_shortest_run_and_early_is_the_first_half():
    hist = history({"A": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], "B": [1.0] * 6}, {"A": 1})
    hist = hist[~((hist.arm == "B") & (hist.seed == 4) & (hist.epoch == 6))]  # one run stopped at epoch 5
    assert claim_rows.after_warmup_window(hist) == (2, 5)
    assert claim_rows.after_warmup_window(hist, early=True) == (2, 3)
    no_warm = hist.drop(columns="warmup")
    assert claim_rows.after_warmup_window(no_warm) == (1, 5)
    only_warm = history({"A": [1.0, 2.0]}, {"A": 2})
    first, last = claim_rows.after_warmup_window(only_warm)
    assert first > last and lw.n7_effects(only_warm.assign(arm=lw.BOTH))[0] == []


def test_both_cosines_is_near_one_only_when_both_are():
    f = pd.DataFrame({"val_pos_sim": [0.99, 0.99, 0.5], "val_hardneg_sim": [0.98, 0.3, 0.97]})
    assert list(claim_rows.both_cosines(f)) == [0.98, 0.3, 0.5]


# --- N3 at τ = 1e-3 -----------------------------------------------------------------------------------------
def test_n3_reads_the_errors_at_tau_1e3_of_the_trained_models():
    rows = []
    for tau, err in ((1e-1, 0.2), (1e-2, 0.011), (1e-3, 0.004), (1e-4, 0.001)):
        for src in ("trained seed 0", "random init"):
            for b in range(3):
                rows.append({"batch": b, "source": src, "τ": tau, "error": err + 0.001 * b + (src == "random init")})
    err = pd.DataFrame(rows)
    assert lw.N3_TAU == 1e-3 and "τ = 1e-3" in registry.claim("N3").primary.statement
    assert lw.n3_margins(err) == pytest.approx([0.01 - 0.004, 0.01 - 0.005, 0.01 - 0.006])
    assert lw.n3_margins(err, 1e-2) == pytest.approx([-0.001, -0.002, -0.003])  # the old τ: the bound just fails


# --- B3 / N4: a collapse of the arm predicted to fail decides the row ------------------------------------------
@pytest.mark.parametrize("cid", ["B3", "N4"])
def test_a_collapse_of_the_arm_predicted_to_fail_is_decided_on_its_numbers(tmp_path, cid):
    p = registry.claim(cid).primary
    assert p.predicted_to_fail == p.arm_b
    df = results({p.arm_a: {"rsum": [400.0 + s for s in SEEDS]}, p.arm_b: {"rsum": [60.0 + 2 * s for s in SEEDS]}})
    row = {**claim_rows.primary_row(cid, "synthetic", df), "_file": "claims_synthetic.csv"}
    collapsed = {("synthetic", p.arm_b): "validation RSUM at chance"}
    led = ledger_rows.build_ledger([row], datasets=("synthetic",), collapsed=collapsed)
    r = led[(led.id == cid) & (led.role == "primary")].iloc[0]
    assert r.verdict != "not testable" and r.effect == pytest.approx(340.0 - 1.0 * np.mean(SEEDS))
    led = ledger_rows.build_ledger([row], datasets=("synthetic",), collapsed={("synthetic", p.arm_a): "flat loss"})
    r = led[(led.id == cid) & (led.role == "primary")].iloc[0]
    assert r.verdict == "not testable" and p.arm_a in r.reason  # the other arm's collapse still sets it aside


def test_other_claims_predict_no_failure():
    assert {c.id for c in registry.CLAIMS.values() if c.primary.predicted_to_fail} == {"B3", "N4"}


# --- the papers' effects -----------------------------------------------------------------------------------
def test_s1_s3_effects_are_the_papers_tables():
    pe = registry.paper_effects()
    t2 = paper_numbers.table("sam", "table2")["paper Table 2: Flickr30K, CVSE"]
    assert pe.loc["S1", "paper_effect"] == pytest.approx(
        t2.loc["10% data, + SAM", "rsum"] - t2.loc["10% data, Triplet-HN", "rsum"]
    )
    assert pe.loc["S1", "paper_effect"] == pytest.approx(303.2 - 138.7)
    t3 = paper_numbers.table("sam", "table3")["paper Table 3: Flickr30K, CVSE"]
    assert pe.loc["S2", "paper_effect"] == pytest.approx(
        t3.loc["100% data, + SAM", "rsum"] - t3.loc["100% data, Triplet-HN", "rsum"]
    )
    t45 = paper_numbers.table("sam", "table45")["paper Tables 4 and 5: Flickr30K, CVSE"]
    cells = [(t, k) for t in (3, 10) for k in (True, False)]
    sn = np.mean([t45.loc[f"τ={t} SN keep={k}", "rsum"] for t, k in cells])
    hn = np.mean([t45.loc[f"τ={t} HN keep={k}", "rsum"] for t, k in cells])
    assert pe.loc["S3", "paper_effect"] == pytest.approx(sn - hn) and pe.loc["S3", "paper_effect"] == pytest.approx(
        27.05
    )
    for cid in ("S1", "S2", "S3"):
        assert registry.claim(cid).primary.paper_says


def test_bcls_table8_backbone_and_x1_name():
    pe = registry.paper_effects()
    for cid in ("B1", "B2", "B3"):
        assert pe.loc[cid, "backbone"].startswith("VSE++ (ResNet-152") and "BUTD" not in pe.loc[cid, "backbone"]
    assert "VSE++ premise" in registry.claim("X1").statement
    assert math.isnan(pe.loc["X1", "paper_effect"])


def test_every_fixed_contrast_quotes_the_paper():
    for cid in ("B3", "B5", "N3", "N4", "N7", "U2", "U3", "U4", "U5", "X1"):
        assert registry.claim(cid).primary.paper_says, cid
