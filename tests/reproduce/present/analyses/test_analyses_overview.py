"""X1–X3 helpers of 00_overview against explicit per-seed loops on a planted results frame."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from reproduce.present.analyses import overview as ov

ARMS = [("VSE++ (Triplet-HN)", False), ("Triplet-SN", False), ("BCLS", True), ("Ladder", True)]


@pytest.fixture
def df():
    rng = np.random.default_rng(0)
    rows = []
    for arm, rel in ARMS:
        for seed in (0, 1, 2):
            rows.append(
                dict(
                    arm=arm,
                    seed=seed,
                    uses_relevance=rel,
                    rsum=rng.normal(400, 5),
                    cs1000_i2t_sbert=rng.normal(0.3, 0.01),
                    cs1000_i2t_true=rng.normal(0.2, 0.01),
                    time_train_s_per_epoch=rng.uniform(2, 3),
                    i2t_r1=rng.normal(40, 1),
                )
            )
    return pd.DataFrame(rows)


def test_x1_columns_keeps_only_present_keys_in_order(df):
    b, p, y = ov.x1_columns(df, "true")
    assert b == ["i2t_r1", "rsum"] and p == ["cs1000_i2t_sbert"] and y == ["cs1000_i2t_true"]


def test_x2_metrics_falls_back_to_what_the_data_set_has(df):
    assert ov.x2_metrics(df, "true") == ("cs1000_i2t_sbert", "cs1000_i2t_true")
    f8k = df.drop(columns="cs1000_i2t_true").assign(expert_kendall_nongt=0.1)
    assert ov.x2_metrics(f8k, "expert") == ("cs1000_i2t_sbert", "expert_kendall_nongt")
    with pytest.raises(KeyError, match="yardstick"):
        ov.x2_metrics(df.drop(columns="cs1000_i2t_true"), "true")


def test_continuous_arms_by_attribute_not_by_name(df):
    assert ov.continuous_arms(df) == ["BCLS", "Ladder"]
    renamed = df.replace({"arm": {"BCLS": "Something else"}})
    assert ov.continuous_arms(renamed) == ["Something else", "Ladder"]


def test_x2_table_equals_a_per_seed_loop(df):
    tab, eff = ov.x2_table(df, ["BCLS", "Ladder"], "cs1000_i2t_sbert", "cs1000_i2t_true")
    for arm in ("BCLS", "Ladder"):
        want = []
        for s in (0, 1, 2):
            a = df[(df.arm == arm) & (df.seed == s)]["cs1000_i2t_true"].item()
            b = df[(df.arm == ov.BASE) & (df.seed == s)]["cs1000_i2t_true"].item()
            want.append(a - b)
        assert eff[arm] == pytest.approx(want)
        assert tab.loc[arm, "Δ cs1000_i2t_true"] == pytest.approx(np.mean(want))


def test_x3_cost_ratio_and_margin_effects(df):
    cost, eff = ov.x3_cost(df)
    base = df[df.arm == ov.BASE].set_index("seed")["time_train_s_per_epoch"]
    t = df[df.arm == "BCLS"].set_index("seed")["time_train_s_per_epoch"]
    assert cost.loc["BCLS", "× VSE++"] == pytest.approx((t / base).mean())
    assert eff["BCLS"] == pytest.approx(list(0.15 - (t / base - 1)))
    assert ov.BASE not in eff and cost.loc[ov.BASE, "× VSE++"] == pytest.approx(1.0)


def test_x3_cost_leaves_out_an_arm_that_is_the_base_itself(df):
    """An arm whose runs are VSE++'s own (the warm-up variant the tuning chose) has a ratio of exactly 1 on every
    seed: it compares VSE++ with itself and gets no X3 row; the cost table still lists it."""
    same = df[df.arm == ov.BASE].assign(arm="VSE++ without warm-up")
    cost, eff = ov.x3_cost(pd.concat([df, same], ignore_index=True))
    assert "VSE++ without warm-up" not in eff and cost.loc["VSE++ without warm-up", "× VSE++"] == pytest.approx(1.0)
    assert set(eff) == {a for a, _ in ARMS} - {ov.BASE}
