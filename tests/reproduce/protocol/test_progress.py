"""The driver's progress bar (``reproduce.protocol.progress``): the ETA formula on planted costs, one log line a run
without bars, each finished run priced, the exact plan taken once tuning chose, the estimate against the actual."""

from __future__ import annotations

import dataclasses

import pytest

from coherent_itr.config import Config
from reproduce.protocol import plan, progress


def test_eta_formula_on_planted_costs():
    k = progress.ETA_PRIOR_S
    # before any run: the estimate spread over the workers
    assert progress.eta_seconds(600.0, 0.0, 0.0, workers=2) == 300.0
    # finished runs estimated at 100 worker-s took 25 s of wall: the rate moves from 1/2 towards 25/100
    assert progress.eta_seconds(300.0, 100.0, 25.0, workers=2) == pytest.approx(300 * (25 + k / 2) / (100 + k))
    # far into the plan the measured rate rules: 10,000 estimated worker-s took 10,000 s → 300 left ≈ 300 s
    assert progress.eta_seconds(300.0, 1e4, 1e4, workers=2) == pytest.approx(300.0, rel=0.01)
    assert progress.eta_seconds(0.0, 100.0, 10.0, workers=2) == 0.0


def test_eta_does_not_jump_when_the_first_short_runs_pay_for_the_workers_start():
    """The smoke plan's first minute (planted from a real one: runs estimated at 0.8 worker-s each on 2 workers;
    the first took 6 s with the workers' start, then one a second): once a run has finished, the ETA never moves
    by more than 2× from one run to the next."""
    total, per, etas = 164 * 0.8, 0.8, []
    elapsed = [6.0 + i for i in range(40)]
    etas.append(progress.eta_seconds(total, 0.0, 0.0, workers=2))
    for i, t in enumerate(elapsed, start=1):
        etas.append(progress.eta_seconds(total - i * per, i * per, t, workers=2))
    assert all(0.5 <= b / a <= 2.0 for a, b in zip(etas, etas[1:]) if a > 0), etas


def _cfg(seed, **kw):
    return Config(data="synthetic", data_scale="default", epochs=3, seed=seed, **kw)


def test_without_bars_each_finished_run_is_one_log_line(monkeypatch, capsys):
    monkeypatch.setattr(plan, "run_estimate_s", lambda c, data, evaluated=True, trained=False: 60.0)
    est = plan.DataSetEstimate("synthetic", [_cfg(0), _cfg(1)], [_cfg(2)], 1, prepare_s=0.0)
    bar = progress.RunProgress({"synthetic": est}, workers=1, notebooks_s=0.0, enabled=False)
    bar.run_done(_cfg(0).to_dict())  # no phase open: nothing printed
    assert capsys.readouterr().out == ""
    bar.open("tuning [synthetic]")
    bar.run_done(_cfg(1).to_dict())
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("tuning [synthetic]: 2/3 runs done, ")
    assert "ETA ≈ " in lines[0]
    shown = progress.RunProgress({"synthetic": est}, workers=1, notebooks_s=0.0, enabled=True)
    shown.open("tuning [synthetic]")
    shown.run_done(_cfg(0).to_dict())
    shown.close()
    assert "runs done" not in capsys.readouterr().out  # with a bar, the bar says it


def test_the_bar_prices_each_finished_run_and_takes_the_exact_plan_after_tuning(monkeypatch):
    """Planted per-run costs: the ETA after one run uses the wall time that run took against its estimate;
    the total is the bound, then done + the exact final runs once tuning chose."""
    costs = {0: 10.0, 1: 20.0, 2: 30.0, 3: 40.0}
    monkeypatch.setattr(plan, "run_estimate_s", lambda c, data, evaluated=True, trained=False: costs[c.seed])
    tune, bound = [_cfg(0)], [_cfg(1), _cfg(2), _cfg(3)]
    est = plan.DataSetEstimate("synthetic", tune, bound, 3, prepare_s=5.0)
    clock = iter([100.0, 100.0, 104.0, 104.0, 104.0, 104.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(clock, 104.0))
    bar = progress.RunProgress({"synthetic": est}, workers=2, notebooks_s=7.0, enabled=False)
    assert bar.total == 4 and bar.remaining_est_s == 100.0
    assert bar.planned_s == pytest.approx(100.0 / 2 + 5.0 + 7.0)
    bar.open("runs")  # at t = 100
    bar.run_done(_cfg(0).to_dict())  # at t = 104: estimated 10 worker-s, took 4 s
    assert bar.done == 1 and bar.remaining_est_s == 90.0
    k = progress.ETA_PRIOR_S  # the measured 4 s per 10 estimated worker-s, mixed with the plan's 1/2 (eta_seconds)
    assert bar.eta_s() == pytest.approx(90.0 * (4.0 + k / 2) / (10.0 + k))
    bar.close()
    bar.final_known("synthetic", [_cfg(1), _cfg(3)])  # tuning chose: two final runs, not three
    assert bar.total == 3 and bar.remaining_est_s == 60.0
    assert bar.planned_s == pytest.approx(62.0)  # the estimate the end compares with is the one made first
    rec = progress.finish(bar, actual_s=31.0, runs_done=bar.done)
    assert rec["estimated_s"] == 62.0 and rec["actual_over_estimated"] == 0.5 and rec["runs_planned_at_most"] == 4


def test_runs_found_ready_take_the_place_of_their_stand_ins(monkeypatch):
    """One tuning problem at a time (``RunProgress.ready``): a final run of a problem that chose early replaces the
    bound's stand-in of its slot (same run, the bound's setting), so the total never counts it twice; a run with no
    stand-in left (a health check's other seeds) adds to it; a stand-in that is the run itself is kept once."""
    for module in (plan, progress):
        monkeypatch.setattr(module, "run_estimate_s", lambda c, data, evaluated=True, trained=False: 10.0)
    tune = [dataclasses.replace(_cfg(0, lr=1e-4), epochs=1)]  # a rung
    more = [_cfg(0, lr=2e-4), _cfg(0, lr=4e-4)]  # the survivors' stand-ins: the grid's largest lrs
    bound = [_cfg(s, lr=4e-4) for s in (0, 1, 2)]  # the final runs at the bound's setting
    est = plan.DataSetEstimate("synthetic", tune, bound, 3, prepare_s=0.0, tuning_more=more)
    bar = progress.RunProgress({"synthetic": est}, workers=2, notebooks_s=0.0, enabled=False)
    assert bar.total == 6
    bar.run_done(tune[0].to_dict())
    bar.ready("synthetic", [_cfg(0, lr=1e-4), _cfg(0, lr=2e-4)], [])  # the settings that went on
    assert bar.total == 6 and bar.remaining_est_s == 50.0
    assert ("tune", _cfg(0, lr=2e-4).key()) in bar._est and ("tune", _cfg(0, lr=4e-4).key()) not in bar._est
    bar.ready("synthetic", [], [_cfg(s, lr=1e-4) for s in (0, 1, 2)])  # chose 1e-4: the final runs
    assert bar.total == 6 and bar.remaining_est_s == 50.0
    bar.ready("synthetic", [], [_cfg(s, lr=1e-4) for s in (0, 1, 2)])  # asked again: nothing new
    assert bar.total == 6
    bar.ready("synthetic", [], [_cfg(1, lr=2e-4)])  # the health check: another seed at a setting with no stand-in
    assert bar.total == 7
    bar.run_done(_cfg(1, lr=1e-4).to_dict())
    assert (bar.done, bar.total) == (2, 7)
    bar.final_known("synthetic", [_cfg(0, lr=1e-4), _cfg(2, lr=1e-4), _cfg(1, lr=2e-4)])
    assert bar.total == 2 + 2 + 3  # done + the tuning runs still to do + the exact final runs
    bar.ready("synthetic", [], [_cfg(2, lr=2e-4)])  # after the choice every new run adds
    assert bar.total == 8
    # a stand-in that is itself ready is counted once, and takes no other stand-in's place
    est = plan.DataSetEstimate("synthetic", [], [_cfg(0, lr=4e-4), _cfg(1, lr=4e-4)], 2, prepare_s=0.0)
    bar = progress.RunProgress({"synthetic": est}, workers=2, notebooks_s=0.0, enabled=False)
    bar.ready("synthetic", [], [_cfg(0, lr=4e-4), _cfg(1, lr=1e-4)])
    assert bar.total == 2


def test_a_plan_with_no_run_to_do_opens_no_bar(capsys):
    """Reading imported runs: every phase of a plan with nothing to train leaves no empty "0/0 runs" bar in the log."""
    prog = progress.RunProgress({}, workers=2, notebooks_s=0.0, enabled=True)
    for phase in ("tuning (now synthetic)", "training runs (now flickr8k)"):
        prog.open(phase)
        assert prog._bar is None
        prog.close()
    said = capsys.readouterr()
    assert "0/0" not in said.err + said.out and said.err == ""
    assert prog.log_line().startswith("training runs (now flickr8k): 0/0 runs done")
