"""``benchmarks/bench_packed_agreement.py``: two tiny arms on the toy data set trained by both engines give one row
per run with the report's columns and sections; the X1 arms' configs are the driver's at the profile's own lr; the
reference spreads are read from their committed reports."""

from __future__ import annotations

import numpy as np
import pytest

from coherent_itr.config import Config
from coherent_itr.data import make_toy_splits
from helpers import load_benchmark
from tiny_run import tiny


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_packed_agreement")


@pytest.fixture(scope="module")
def toy_runs(bench):
    splits = make_toy_splits(48, 12, 12, seed=0)
    base = Config(**tiny(epochs=2, batch_size=16))
    groups = [
        (name, loss, [base.replace(loss=loss, seed=s) for s in (0, 1)])
        for name, loss in (("VSE++ (Triplet-HN)", "triplet"), ("VLC (InfoNCE)", "vlc"))
    ]
    return bench.measure("toy", groups, splits, log=lambda *a: None), splits


def test_one_row_per_run_with_both_engines_numbers(bench, toy_runs):
    df, _ = toy_runs
    assert list(df.columns) == list(bench.RUN_COLUMNS)
    assert len(df) == 4 and list(df.seed) == [0, 1, 0, 1] and (df.world == "toy").all()
    np.testing.assert_allclose(df.val_diff, df.val_packed - df.val_solo)
    np.testing.assert_allclose(df.test_diff, df.test_packed - df.test_solo)
    assert (df.val_solo > 0).all() and (df.s_solo > 0).all() and (df.s_packed > 0).all()
    # on the toy runs the engines differ only by float rounding (tests/lib/test_packed.py)
    assert (df.val_diff == 0).all() and (df.best_epoch_solo == df.best_epoch_packed).all()


def test_the_summaries_and_the_report(bench, toy_runs):
    df, _ = toy_runs
    arms, rank, over = bench.arm_table(df), bench.ranking(df), bench.overall(df)
    assert list(arms.arm) == ["VSE++ (Triplet-HN)", "VLC (InfoNCE)"] and (arms.runs == 2).all()
    assert set(bench.DIFF_COLUMNS) <= set(arms.columns) and {"rank_solo", "rank_packed"} <= set(arms.columns)
    assert bool(rank.same_order[0]) and rank.kendall_tau[0] == pytest.approx(1.0) and rank.seeds[0] == 2
    assert list(over.scope) == ["toy"] and over.val_max[0] == 0 and over.best_epoch_equal[0] == 4
    world = {"seeds": 2, "lr": 2e-3, "epochs": 2, "patience": 0, "model": "8/16/16, batch 16", "not_run": ""}
    meta = {
        "command": "python benchmarks/bench_packed_agreement.py (test)",
        "worlds": [{**world, "world": "toy", "arms": 2, "train_images": 48, "dev_images": 12, "test_images": 12}],
        "cpu": "x/y",
        "processor": "cpu",
        "cores": 2,
        "torch": "t",
        "load_start": "1 / 1 / 1",
        "load_end": "1 / 1 / 1",
        "wall_min": 0.1,
    }
    text = bench.report(df, meta)
    for heading in ("## |packed − solo|", "## The arms' ranking", "## Wall time per run", "## Per arm"):
        assert heading in text
    assert "every run does: toy: VSE++ (Triplet-HN), VLC (InfoNCE)." in text
    assert "| toy | VLC (InfoNCE) |" in text and "CPU vs CPU" in text and "GPU vs CPU" in text


def test_the_x1_arms_are_the_drivers_configs_at_the_profiles_lr(bench):
    groups, setting = bench.world_groups("smoke", 2)
    assert len(groups) == 10 and setting == {"lr": 2e-3, "warmup_epochs": 0, "epochs": 2}
    cfgs = [c for _, _, cs in groups for c in cs]
    assert {c.seed for c in cfgs} == {0, 1} and all(c.grad_diag_every == 0 and c.lr == 2e-3 for c in cfgs)
    assert {c.data_scale for c in cfgs} == {"smoke"} and {c.epochs for c in cfgs} == {2}
    groups, setting = bench.world_groups("default", 1, arms=2)
    assert len(groups) == 2 and setting["epochs"] == 5 and groups[0][2][0].epochs == 5  # the tuning rung


def test_the_reference_spreads_are_read_from_their_reports(bench):
    ref = {r["reference"]: r for r in bench.references()}
    assert ref["CPU vs CPU"]["median"] == pytest.approx(1.70) and ref["CPU vs CPU"]["p90"] == pytest.approx(10.18)
    assert np.isfinite(ref["GPU vs CPU"]["max"])
