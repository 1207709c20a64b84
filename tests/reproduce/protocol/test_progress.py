"""The driver's plan, bar and estimate (``reproduce.protocol.progress``): the plan's run counts bound what the
protocol then trains, the ETA formula on planted costs, the cost scaling, the paper profile's line."""

from __future__ import annotations

import dataclasses
import re

import pytest

from coherent_itr.config import Config
from reproduce.spec import experiments
from reproduce.protocol import progress, tuning
from reproduce.spec.profiles import COSTS_MODEL, COSTS, TuningGrid, get_profile, run_seconds
from test_tuning import FakeCache, FakeExecutor, fake_is_collapsed, planted, record


class EvaluatingCache(FakeCache):
    """:class:`test_tuning.FakeCache` that tells training from evaluation, as ``RunCache`` does: tuning runs are
    trained only, so a chosen one is still to evaluate among the final runs."""

    def __init__(self, score, collapsed=lambda c: False):
        super().__init__(score, collapsed)
        self.evaluated: set[str] = set()

    def has_training(self, cfg):
        return cfg.key() in self.store

    def has(self, cfg):
        return cfg.key() in self.evaluated

    def get_or_train(self, cfg, progress=False, evaluate=True):
        if not self.has_training(cfg):
            self.trained.append(cfg)
            r = self.score(cfg)
            self.store[cfg.key()] = record(cfg.lr, cfg.warmup_epochs, [r - 10, r], self.collapsed(cfg), cfg.loss)
        if evaluate:
            self.evaluated.add(cfg.key())
        return self.load(cfg)


def _drive(prof, papers, cache, rounds: int = 8) -> tuple[int, list[int]]:
    """What the driver does, on a planted cache: train the tuning runs, then the final plan, then again
    while the health check moves a family. Returns (tuning runs trained, final runs trained per round)."""
    tune = [c for c in tuning.tuning_configs(prof, papers) if not cache.has_training(c)]
    FakeExecutor().run(tune, cache, evaluate=False)
    per_round = []
    for _ in range(rounds):
        todo = [c for c in tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed) if not cache.has(c)]
        if not todo:
            return len(tune), per_round
        per_round.append(len(todo))
        FakeExecutor().run(todo, cache)
    raise AssertionError("no fixed point")


def test_the_smoke_plan_counts_exactly_the_runs_the_protocol_then_trains():
    """The smoke profile (a one-point grid): the plan's tuning and final counts are what is trained."""
    prof = get_profile("smoke")
    cache = EvaluatingCache(planted)
    tune = tuning.tuning_configs(prof)
    final, every = progress.final_run_bounds(prof, None, cache)
    n_tune, rounds = _drive(prof, None, cache)
    assert n_tune == len(tune) and rounds == [len(final)] and every == len(final)
    # the driver used to announce the tuning runs only: the plan now counts the final runs too (the chosen
    # tuning runs among them: trained, still to evaluate)
    assert len(final) > 3 * len(tune) and {c.key() for c in tune} <= {c.key() for c in final}


def test_the_bound_holds_when_tuning_chooses_and_the_health_check_moves_families():
    """A full grid with three seeds: tuning picks settings (not the grid's first), and a setting that
    collapses on seed 1 moves VSE++ to its next one. The first round's final runs are within the bound; all
    final runs trained (every round) are within the whole-grid bound; and the bound's cost matches the plan."""
    prof = dataclasses.replace(get_profile("smoke"), tuning=TuningGrid(), seeds=(0, 1, 2))
    papers = ["unified", "bcls"]
    cache = EvaluatingCache(
        planted, collapsed=lambda c: c.lr == 2e-3 or (c.seed == 1 and (c.lr, c.warmup_epochs) == (6e-4, 1))
    )
    final, every = progress.final_run_bounds(prof, papers, cache)
    n_tune, rounds = _drive(prof, papers, cache)
    assert n_tune == len(tuning.tuning_configs(prof, papers))
    assert len(rounds) >= 2  # the health check did move a family
    assert rounds[0] <= len(final) and sum(rounds) <= every
    # the bound is reached by some choice: the family with the most runs has as many at every setting
    assert len(final) == len({c.key() for c in final})


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
    monkeypatch.setattr(progress, "run_estimate_s", lambda c, data, evaluated=True, trained=False: 60.0)
    est = progress.DataSetEstimate("synthetic", [_cfg(0), _cfg(1)], [_cfg(2)], 1, prepare_s=0.0)
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
    monkeypatch.setattr(progress, "run_estimate_s", lambda c, data, evaluated=True, trained=False: costs[c.seed])
    tune, bound = [_cfg(0)], [_cfg(1), _cfg(2), _cfg(3)]
    est = progress.DataSetEstimate("synthetic", tune, bound, 3, prepare_s=5.0)
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


def test_run_estimate_is_run_seconds_for_the_measured_model_and_smaller_for_smoke():
    default = get_profile("default")
    for data in ("synthetic", "flickr8k"):
        prof = dataclasses.replace(default, data=data) if data == "synthetic" else default
        c = experiments.arms("bcls", prof)[0].config(prof, 0)
        c = c.replace(data=data, **COSTS_MODEL)  # the model the costs were measured with: no scaling
        assert progress.run_estimate_s(c, data) == pytest.approx(run_seconds(c, data))
        assert progress.run_estimate_s(c, data, evaluated=False) == pytest.approx(run_seconds(c, data, evaluated=False))
        assert progress.run_estimate_s(c, data, trained=True) == pytest.approx(
            COSTS[data]["fixed_s"] + COSTS[data]["eval_s"]
        )
    smoke = get_profile("smoke")
    s = experiments.arms("bcls", smoke)[0].config(smoke, 0)
    d = experiments.arms("bcls", default)[0].config(default, 0)
    assert progress.run_estimate_s(s, "synthetic") < progress.run_estimate_s(d, "synthetic") / 3


def test_step_flop_is_the_benchmark_arithmetic():
    """The default model's Flickr8k step (batch 128, GRU-64 over 64-d words into 128-d, Σ tokens 1768): the
    0.41 GFLOP that results/benchmarks/run_profile_flickr8k.md records; written out from its terms."""
    b, f, d, w, h, tokens = 128, 1280, 128, 64, 64, 1768
    hand = 3 * (6 * h * (w + h) * tokens + 2 * f * d * b + 2 * b * b * d + 2 * h * d * b)
    assert progress.step_flop(b, d, w, h, tokens / b) == pytest.approx(hand)
    assert round(hand / 1e9, 2) == 0.41


def test_flickr8k_preparation_is_priced_by_the_images_the_runs_use():
    sub = [Config(data="flickr8k", train_fraction=0.1, seed=0)]
    whole = [Config(data="flickr8k")]
    assert progress.prepare_estimate_s("flickr8k", whole) == pytest.approx(COSTS["flickr8k"]["prepare_s"])
    saved = progress.FEATURE_S_PER_IMAGE * (6000 - 600)
    assert progress.prepare_estimate_s("flickr8k", sub) == pytest.approx(COSTS["flickr8k"]["prepare_s"] - saved)
    assert progress.prepare_estimate_s("synthetic", []) == 0.0


def test_plan_lines_give_tuning_and_final_counts_and_an_estimate():
    prof = get_profile("smoke")
    cache = FakeCache(planted)
    tune = tuning.tuning_configs(prof)
    est = progress.plan_data_set(prof, "synthetic", None, tune, tune, cache)
    bar = progress.RunProgress({"synthetic": est}, workers=2, notebooks_s=0.0, enabled=False)
    lines = progress.plan_lines("smoke", bar, skip_notebooks=True)
    m = re.search(r"(\d+) tuning run\(s\) \+ ≤ (\d+) final run\(s\)", lines[0])
    assert m and int(m[1]) == len(tune) and int(m[2]) == len(progress.final_run_bounds(prof, None, cache)[0])
    assert f"≤ {len(tune) + int(m[2])} run(s) in all" in lines[-1] and "estimated wall time" in lines[-1]


def test_the_paper_profile_says_its_cost_on_this_device_is_an_estimate():
    prof = get_profile("paper")
    lines = progress.paper_cost_lines(prof, "flickr8k", ["bcls"], workers=2, device="cpu")
    assert len(lines) == 2 and all("ESTIMATE" in x and "on cpu" in x for x in lines)
    m = prof.model
    flop = progress.step_flop(m["batch_size"], m["embed_dim"], m["word_dim"], m["text_hidden"], 1768 / 128)
    assert f"{flop / 1e9:.1f} GFLOP" in lines[0]
    c, r = COSTS["flickr8k"], COSTS_MODEL  # the step the costs were measured at, priced by its FLOP
    ref_step_s = (c["epoch_s"] - c["val_s"]) / c["steps"]
    ref_flop = progress.step_flop(r["batch_size"], r["embed_dim"], r["word_dim"], r["text_hidden"], 1768 / 128)
    ref_rate = ref_flop / ref_step_s
    assert f"≈ {flop / ref_rate:.2f} s a training step" in lines[0]


def test_on_cuda_the_paper_step_is_priced_at_the_devices_measured_matmul_rate(monkeypatch):
    import torch

    monkeypatch.setattr(progress, "matmul_gflops", lambda device, seconds=0.3: 1000.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Planted GPU")
    prof = get_profile("paper")
    lines = progress.paper_cost_lines(prof, "flickr8k", ["bcls"], workers=2, device="cuda")
    m = prof.model
    flop = progress.step_flop(m["batch_size"], m["embed_dim"], m["word_dim"], m["text_hidden"], 1768 / 128)
    assert f"≈ {flop / 1e12:.2f} s a training step" in lines[0] and "Planted GPU" in lines[0]
    assert "1 in parallel" in lines[1] and "ESTIMATE" in lines[1]


def test_preparation_featurises_the_later_final_runs_of_its_own_data_sets_only(monkeypatch):
    """``prepare(todo, later=bound)``: the final runs' subsets (other seeds) are loaded with the tuning runs';
    a later run of a data set not being prepared now is left to its own preparation."""
    from reproduce.protocol import prepare as prep

    seen = {}
    real_check = Config.check_train_size
    monkeypatch.setattr(Config, "check_train_size", lambda self, n, cpi: real_check(self, 6000, cpi))

    def fake_load(data, configs, **kw):
        seen[data] = [c.seed for c in configs]
        from coherent_itr.data.toy import make_toy_splits

        return make_toy_splits(20, 5, 5, seed=0)

    monkeypatch.setattr(prep, "load_for", fake_load)
    monkeypatch.setattr(prep, "embed_captions", lambda captions, progress=True: None)
    todo = [Config(data="flickr8k", train_fraction=0.1, seed=0)]
    later = [Config(data="flickr8k", train_fraction=0.1, seed=s) for s in (1, 2)] + [Config(seed=9)]
    prep.prepare(todo, progress=False, later=later)
    assert seen == {"flickr8k": [0, 1, 2]}


def test_the_data_card_alone_plans_no_run():
    est = progress.plan_data_set(get_profile("smoke"), "synthetic", [], [], [], EvaluatingCache(planted))
    assert est.runs == 0 and est.prepare_s == 0.0
    assert progress.paper_cost_lines(get_profile("paper"), "flickr8k", [], workers=2, device="cpu") == []


def test_the_cost_command_takes_flags_and_names_a_bad_one(capsys):
    """``python -m reproduce.protocol.progress --help`` once failed with "unknown profile '--help'"."""
    with pytest.raises(SystemExit) as e:
        progress.main(["--help"])
    assert e.value.code == 0 and "--workers" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        progress.main(["--workers", "0"])
    assert e.value.code == 2 and "--workers must be ≥ 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        progress.main(["--profile", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_with_tuning_done_the_plan_counts_exactly_the_final_runs_left(monkeypatch):
    """A rerun after everything trained used to announce the grid's bound (≤ 222 runs, 15 h) and train none:
    with every tuning run cached the plan is the tuned plan's uncached runs — none after a finished study,
    the exact list when some final runs are missing."""
    monkeypatch.setattr(tuning, "_default_is_collapsed", fake_is_collapsed)
    prof = get_profile("smoke")
    cache = EvaluatingCache(planted)
    _drive(prof, None, cache)
    tune = tuning.tuning_configs(prof)
    est = progress.plan_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and est.final_todo == [] and est.runs == 0
    lines = progress.plan_lines("smoke", progress.RunProgress({"synthetic": est}, 2, 0.0, enabled=False), True)
    assert "≤" not in lines[0] and "0 final run(s)" in lines[0]
    assert "≤" not in lines[-1] and "0 run(s) in all" in lines[-1]
    lost = tuning.tuned_plan(prof, None, cache)[-1]  # one final run lost from the cache
    cache.evaluated.discard(lost.key())
    est = progress.plan_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and [c.key() for c in est.final_todo] == [lost.key()]
    # before tuning, still the bound
    fresh = progress.plan_data_set(prof, "synthetic", None, tune, tune, EvaluatingCache(planted))
    assert not fresh.exact


def test_under_successive_halving_the_plan_is_exact_once_the_settings_that_went_on_are_cached(monkeypatch):
    """The default profile tunes by successive halving: with the rungs cached but not the runs that go on to the
    cap, the plan is still a bound; with those cached too, it is the tuned plan's uncached runs."""
    from test_halving import halving_profile, planted_is_collapsed

    monkeypatch.setattr(tuning, "_default_is_collapsed", planted_is_collapsed)
    prof = halving_profile()
    cache = EvaluatingCache(planted)
    tune = tuning.tuning_configs(prof)
    FakeExecutor().run(tune, cache, evaluate=False)
    assert not progress.plan_data_set(prof, "synthetic", None, tune, [], cache).exact  # survivors not trained
    went_on = tuning.survivor_configs(prof, None, cache)
    assert went_on
    FakeExecutor().run(went_on, cache, evaluate=False)
    final = [c for c in tuning.tuned_plan(prof, None, cache) if not cache.has(c)]
    est = progress.plan_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and [c.key() for c in est.final_todo] == [c.key() for c in final] and final
    FakeExecutor().run(final, cache)
    assert progress.plan_data_set(prof, "synthetic", None, tune, [], cache).runs == 0
