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
    from reproduce.protocol import trials, tuning

    committed = bench.committed_table("flickr8k", "overview")
    row = committed.iloc[0]

    def rung_trials(arm, profile, cache, *a, **k):
        if arm.name != row.arm:
            return [], ["not cached"]
        trial = {"status": "ok", "collapsed": False, "lr": float(row.lr), "warmup_epochs": int(row.warmup_epochs)}
        return [{**trial, "val_rsum": float(row.rung_val_rsum) + shift}], []

    monkeypatch.setattr(tuning, "rung_trials", rung_trials)
    monkeypatch.setattr(trials, "load_record", lambda cache, config: None)
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


def test_an_arm_whose_every_final_run_is_here_is_compared_with_its_committed_row(bench, monkeypatch, tmp_path):
    """Two tiny runs stand in for the seeds of the overview's VSE++ arm: their mean test RSUM against the committed
    X1 table's row; an arm with a run missing and an arm whose tuning is not complete are left out."""
    from types import SimpleNamespace

    from coherent_itr.config import Config
    from coherent_itr.runs import RunCache
    from reproduce.protocol import study as study_mod
    from reproduce.protocol.tuning import TuningIncomplete
    from tiny_run import TINY

    seeds = [Config(**TINY, seed=s) for s in (0, 1)]
    cache = RunCache(tmp_path)
    got = [cache.get_or_train(c, progress=False).record["test"]["rsum"] for c in seeds]
    arms = {"VSE++ (Triplet-HN)": seeds, "Triplet-SN": [*seeds, Config(**TINY, seed=2)], "Unified": None}

    class Planted:
        def __init__(self, *a, **k):
            pass

        def arms(self, paper):
            return [SimpleNamespace(name=n) for n in arms] if paper == "overview" else []

        def configs(self, arm, train_missing=True):
            if arms[arm.name] is None:
                raise TuningIncomplete("planted")
            return arms[arm.name]

    monkeypatch.setattr(study_mod, "Study", Planted)
    out = bench.final_arms("default", "flickr8k", cache_root=tmp_path)
    assert list(out.arm) == ["VSE++ (Triplet-HN)"]
    r = out.iloc[0]
    assert r.committed_table == "x1_flickr8k.csv"
    x1 = bench.pd.read_csv(bench.ROOT / "results/flickr8k/overview/x1_flickr8k.csv").set_index("arm")
    assert r.seeds_here == 2 and r.rsum_here == pytest.approx(sum(got) / 2, abs=0.005)
    assert r.rsum_committed == pytest.approx(x1.loc["VSE++ (Triplet-HN)", "rsum"], abs=0.005)
    assert r["diff"] == pytest.approx(r.rsum_here - r.rsum_committed, abs=0.011)


def test_a_table_that_holds_the_papers_rows_too_gives_ours(bench):
    """SAM's Table 2 holds our rows and the paper's for one arm name: ours are read."""
    mean, sd, n, source = bench.committed_arm_rsum("flickr8k", "sam", "10% data, Triplet-HN")
    t = bench.pd.read_csv(bench.ROOT / "results/flickr8k/sam/table2_flickr8k.csv")
    ours = t[(t.arm == "10% data, Triplet-HN") & t.iloc[:, 0].astype(str).str.startswith("ours")]
    assert source == "table2_flickr8k.csv" and len(ours) == 1 and mean == pytest.approx(float(ours.rsum.iloc[0]))
    assert bench.committed_arm_rsum("flickr8k", "sam", "no such arm")[3] == ""
