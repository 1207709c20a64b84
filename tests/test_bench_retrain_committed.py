"""``benchmarks/bench_retrain_committed.py``: a cached rung is matched to its row of the committed tuning table, equal
and different numbers are counted as such, and an arm's survivors are compared (planted trials; no training)."""

from __future__ import annotations


import pytest

from helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_retrain_committed")


@pytest.mark.parametrize("shift", [0.0, 2.5])
def test_a_cached_rung_is_compared_with_its_committed_row(bench, monkeypatch, tmp_path, shift):
    from reproduce.protocol import tuning

    committed = bench.committed_table("flickr8k", "overview")
    row = committed.iloc[0]

    def rung_trials(arm, profile, cache, *a, **k):
        if arm.name != row.arm:
            return [], ["not cached"]
        trial = {"status": "ok", "collapsed": False, "lr": float(row.lr), "warmup_epochs": int(row.warmup_epochs)}
        return [{**trial, "val_rsum": float(row.rung_val_rsum) + shift}], []

    monkeypatch.setattr(tuning, "rung_trials", rung_trials)
    monkeypatch.setattr(tuning, "_load_record", lambda cache, config: None)
    monkeypatch.setattr(bench, "chosen_settings", lambda *a: bench.pd.DataFrame())  # its own test below
    df, s = bench.compare("flickr8k", cache_root=tmp_path)
    assert len(df) == 1 and df.arm[0] == row.arm and df.rung_committed[0] == row.rung_val_rsum
    assert s["rungs"] == 1 and s["rungs_equal"] == (shift == 0) and s["max_abs"] == pytest.approx(shift)
    assert s["arms_complete"] == 1 and s["full_runs"] == 0
    assert bench.readable(df).rung_diff[0] == pytest.approx(shift)


def test_an_empty_cache_gives_an_empty_comparison(bench, tmp_path):
    df, s = bench.compare("flickr8k", cache_root=tmp_path)
    assert df.empty and s["rungs"] == 0 and s["arms_complete"] == 0


def test_the_chosen_setting_is_compared_where_an_arms_tuning_is_complete(bench, monkeypatch):
    """Planted tuning tables: the overview's first arm chose the committed setting, the bcls paper's tuning is not
    complete (skipped), the others chose another learning rate."""
    from reproduce.protocol import tuning

    def table(profile, paper, cache):
        if paper == "bcls":
            raise tuning.TuningIncomplete("planted")
        t = bench.committed_table("flickr8k", paper)[["arm", "lr", "warmup_epochs", "val_rsum", "chosen"]].copy()
        if paper != "overview":
            t["lr"] = t["lr"] * 10
        return t

    monkeypatch.setattr(tuning, "tuning_table", table)
    out = bench.chosen_settings(None, None, "flickr8k")
    assert not (out.paper == "bcls").any() and out.arm.is_unique
    assert out[out.paper == "overview"].same.all() and not out[out.paper != "overview"].same.any()
