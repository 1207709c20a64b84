"""``benchmarks/bench_cpu_vs_gpu.py``: a rung both machines hold is compared once however many arms share its config,
and an arm's survivors are compared only where both machines hold its every rung (planted trials; no training)."""

from __future__ import annotations

import pytest

from helpers import load_benchmark

SHARED = ("VSE++ (Triplet-HN)", "Triplet-HN")  # the overview's and BCLS's names of one config
GPU = {"torch": "2.11.0+cu130", "device": "cuda:sm90", "tf32_matmul": False, "tf32_cudnn": True, "step": "eager"}


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_cpu_vs_gpu")


def _plant(monkeypatch, gpu_value):
    """Trials for the two names of VSE++ on both machines (``gpu_value(i, cpu_value)`` on the GPU), every other arm
    missing on both."""
    from reproduce.protocol import tuning

    def rung_trials(arm, profile, cache, *a, **k):
        grid, gpu = tuning.grid(arm, profile), cache.machine_name is not None
        if arm.name not in SHARED:
            return [tuning.failed_trial(s, "missing") for s in grid], ["missing"] * len(grid)
        trials = []
        for i, s in enumerate(grid):
            cpu = 100.0 + 10 * i
            trial = {"status": "ok", "collapsed": False, "lr": s["lr"], "warmup_epochs": s.get("warmup_epochs", 0)}
            trials.append({**trial, "val_rsum": gpu_value(i, cpu) if gpu else cpu})
        return trials, []

    monkeypatch.setattr(tuning, "rung_trials", rung_trials)


def test_a_shared_rung_is_one_row_and_equal_rankings_keep_the_survivors(bench, monkeypatch, tmp_path):
    from coherent_itr import runs

    machine = runs.save_machine(tmp_path, GPU)
    _plant(monkeypatch, lambda i, cpu: cpu + 1.5)
    df, arms = bench.compare(machine, "flickr8k", cache_root=tmp_path)
    assert len(df) == 8 and (df.arm == " = ".join(SHARED)).all() and df.paper.iloc[0] == "overview, bcls"
    assert df["diff"].tolist() == pytest.approx([1.5] * 8)
    assert len(arms) == 1 and bool(arms.same.iloc[0]) and arms.settings.iloc[0] == 8
    lines = bench.summary_lines(df, arms)
    assert "**8** runs" in lines[0] and "median +1.50" in lines[1] and "in 1 of them" in lines[2]


def test_another_ranking_on_the_gpu_moves_the_survivors(bench, monkeypatch, tmp_path):
    from coherent_itr import runs

    machine = runs.save_machine(tmp_path, GPU)
    _plant(monkeypatch, lambda i, cpu: 200.0 - cpu)  # the GPU ranks the grid the other way round
    df, arms = bench.compare(machine, "flickr8k", cache_root=tmp_path)
    assert not bool(arms.same.iloc[0]) and arms.survivors_cpu.iloc[0] != arms.survivors_gpu.iloc[0]
    assert (df["diff"] == df.rung_gpu - df.rung_cpu).all()


def test_no_shared_rung_gives_empty_tables_and_says_so(bench, tmp_path):
    from coherent_itr import runs

    machine = runs.save_machine(tmp_path, GPU)
    df, arms = bench.compare(machine, "flickr8k", cache_root=tmp_path)
    assert df.empty and arms.empty
    assert bench.summary_lines(df, arms) == ["- no rung is in the cache under both machines' keys"]


def test_an_unknown_machine_is_named(bench, tmp_path):
    with pytest.raises(ValueError, match="no imported machine of that name"):
        bench.compare("cuda-nothing", "flickr8k", cache_root=tmp_path)
