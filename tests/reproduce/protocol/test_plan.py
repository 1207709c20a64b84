"""The plan made before any work (``reproduce.protocol.plan``): its run counts bound what the protocol then trains,
exactly once tuning is cached; its lines; the paper profile's cost on this device; the cost command."""

from __future__ import annotations

import dataclasses
import re

import pytest
import torch

from coherent_itr import runs
from reproduce.protocol import cost, plan, trials, tuning
from reproduce.spec import profiles
from reproduce.spec.profiles import COSTS, COSTS_MODEL, TuningGrid, get_profile
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
    final, every = plan.final_run_bounds(prof, None, cache)
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
    final, every = plan.final_run_bounds(prof, papers, cache)
    n_tune, rounds = _drive(prof, papers, cache)
    assert n_tune == len(tuning.tuning_configs(prof, papers))
    assert len(rounds) >= 2  # the health check did move a family
    assert rounds[0] <= len(final) and sum(rounds) <= every
    # the bound is reached by some choice: the family with the most runs has as many at every setting
    assert len(final) == len({c.key() for c in final})


def test_plan_lines_give_tuning_and_final_counts_and_an_estimate():
    prof = get_profile("smoke")
    cache = FakeCache(planted)
    tune = tuning.tuning_configs(prof)
    est = plan.estimate_data_set(prof, "synthetic", None, tune, tune, cache)
    lines = plan.plan_lines(plan.Plan("smoke", [plan.DataSetPlan("synthetic", prof, tune, tune, None, est)], workers=2))
    m = re.search(r"(\d+) tuning run\(s\) \+ ≤ (\d+) final run\(s\)", lines[0])
    assert m and int(m[1]) == len(tune) and int(m[2]) == len(plan.final_run_bounds(prof, None, cache)[0])
    total = next(x for x in lines if "in all" in x)  # then the device's line
    assert f"≤ {len(tune) + int(m[2])} run(s) in all" in total and "estimated wall time" in total
    assert "runs train on this CPU" in lines[-1]


def test_on_a_cuda_device_the_plan_says_its_costs_are_the_cpus(monkeypatch):
    """The CPU's costs overprice a GPU (results/benchmarks/gpu/): on CUDA the plan says so instead of passing
    them off as the device's, and prices the runs from the GPU's measurements (CUDA planted)."""
    import torch

    prof = get_profile("smoke")
    tune = tuning.tuning_configs(prof)
    est = plan.estimate_data_set(prof, "synthetic", None, tune, tune, FakeCache(planted))
    p = plan.Plan("smoke", [plan.DataSetPlan("synthetic", prof, tune, tune, None, est)], workers=2)
    assert not any("CUDA" in x for x in plan.plan_lines(p))
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv(runs.ENGINE_ENV, raising=False)  # the solo engine (a driver run in this process may have set it)
    assert not any("this CPU" in x for x in plan.plan_lines(p))
    lines = plan.plan_lines(p)
    assert "runs on CUDA, which those CPU costs do not price" in lines[-1] and "reproduce.protocol.cost" in lines[-1]
    final = [cost.gpu_run_estimate_s(c, "synthetic", trained=c.key() in est.tuning_keys) for c in est.final_todo]
    want = (sum(cost.gpu_run_estimate_s(c, "synthetic", evaluated=False) for c in tune) + sum(final)) / 2
    assert f"the runs take ≈ {cost.minutes(want)} on 2 worker(s)" in lines[-1] and "H200" in lines[-1]


def test_on_cuda_packed_runs_are_priced_as_solo_runs_until_a_packed_measurement(monkeypatch):
    """With the packed engine on CUDA (``$COHERENT_ITR_ENGINE``) and no packed measurement, the plan prices the runs
    as solo runs and says so; a measurement in ``PACKED_COSTS`` (planted) prices them instead and is named."""
    prof = get_profile("smoke")
    tune = tuning.tuning_configs(prof)
    est = plan.estimate_data_set(prof, "synthetic", None, tune, tune, FakeCache(planted))
    p = plan.Plan("smoke", [plan.DataSetPlan("synthetic", prof, tune, tune, None, est)], workers=2)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.delenv(runs.ENGINE_ENV, raising=False)
    solo = plan.plan_lines(p)
    assert not any("packed" in x for x in solo)
    monkeypatch.setenv(runs.ENGINE_ENV, "pack:8")
    lines = plan.plan_lines(p)
    assert lines[:-1] == solo
    assert "packed runs priced as solo runs: no packed measurement yet" in lines[-1] and "PACKED_COSTS" in lines[-1]
    assert cost.packed_run_estimate_s(tune[0], "synthetic") == cost.gpu_run_estimate_s(tune[0], "synthetic")
    measured = {**profiles.GPU_COSTS, "device": "Planted GPU, packs of 8", "epoch_s": {"triplet": 0.01}}
    monkeypatch.setattr(cost, "PACKED_COSTS", measured)
    lines = plan.plan_lines(p)
    assert "packed runs priced from Planted GPU, packs of 8 (reproduce.spec.profiles.PACKED_COSTS)" in lines[-1]
    cfg = tune[0].replace(loss="triplet", loss_params={})
    e = profiles.expected_epochs(cfg, "synthetic")
    steps = profiles.COSTS["synthetic"]["steps"] / measured["steps"]
    want = measured["fixed_s"] + e * (0.01 * steps * cfg.train_fraction + measured["val_s"])
    assert cost.packed_run_estimate_s(cfg, "synthetic", evaluated=False) == pytest.approx(want)
    assert profiles.PACKED_COSTS is None  # no GPU visit has measured a pack


def test_a_gpu_run_is_priced_from_the_gpu_measurements():
    """fixed part + evaluation + expected epochs × (the loss's training seconds scaled by the data set's steps +
    validation), written out from ``GPU_COSTS``; a trained run pays its fixed part and evaluation only."""
    from reproduce.spec import profiles

    g = profiles.GPU_COSTS
    prof = get_profile("default")
    cfg = tuning.tuning_configs(prof)[0].replace(loss="sam", loss_params={}, relevance="cider", relevance_params={})
    for data in ("flickr8k", "synthetic"):
        e = profiles.expected_epochs(cfg, data)
        steps = profiles.COSTS[data]["steps"]
        want = g["fixed_s"] + profiles.COSTS[data]["eval_s"] + e * (2.77 * steps / 235 + 0.20)
        assert cost.gpu_run_estimate_s(cfg, data) == pytest.approx(want)
        assert cost.gpu_run_estimate_s(cfg, data, trained=True) == g["fixed_s"] + profiles.COSTS[data]["eval_s"]
    assert g["epoch_s"]["sam"] == 2.77 and g["steps"] == 235


def test_on_a_cpu_the_plan_names_it_and_says_when_it_is_not_the_archives(monkeypatch):
    """A CPU run's key names its CPU: the plan says which CPU trains, and on another than the run archive's that
    the archive's runs do not serve and that its data are computed here, cached apart (the other CPU is planted)."""
    from coherent_itr import runs

    monkeypatch.setattr(runs, "cpu_identity", lambda: runs.REFERENCE_CPU)
    assert "the CPU of the committed run archive" in plan.cpu_line("default")
    monkeypatch.setattr(runs, "cpu_identity", lambda: "GenuineIntel/AVX512")
    line = plan.cpu_line("default")
    assert f"GenuineIntel/AVX512, not the run archive's ({runs.REFERENCE_CPU})" in line
    assert "--runs-from" in line and "cache folders named for this CPU" in line


def test_the_paper_profile_says_its_cost_on_this_device_is_an_estimate():
    prof = get_profile("paper")
    lines = plan.paper_cost_lines(prof, "flickr8k", ["bcls"], workers=2, device="cpu")
    assert len(lines) == 2 and all("ESTIMATE" in x and "on cpu" in x for x in lines)
    m = prof.model
    flop = cost.step_flop(m["batch_size"], m["embed_dim"], m["word_dim"], m["text_hidden"], 1768 / 128)
    assert f"{flop / 1e9:.1f} GFLOP" in lines[0]
    c, r = COSTS["flickr8k"], COSTS_MODEL  # the step the costs were measured at, priced by its FLOP
    ref_step_s = (c["epoch_s"] - c["val_s"]) / c["steps"]
    ref_flop = cost.step_flop(r["batch_size"], r["embed_dim"], r["word_dim"], r["text_hidden"], 1768 / 128)
    ref_rate = ref_flop / ref_step_s
    assert f"≈ {flop / ref_rate:.2f} s a training step" in lines[0]


def test_on_cuda_the_paper_step_is_priced_at_the_devices_measured_matmul_rate(monkeypatch):
    import torch

    monkeypatch.setattr(plan, "matmul_gflops", lambda device, seconds=0.3: 1000.0)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Planted GPU")
    prof = get_profile("paper")
    lines = plan.paper_cost_lines(prof, "flickr8k", ["bcls"], workers=2, device="cuda")
    m = prof.model
    flop = cost.step_flop(m["batch_size"], m["embed_dim"], m["word_dim"], m["text_hidden"], 1768 / 128)
    assert f"≈ {flop / 1e12:.2f} s a training step" in lines[0] and "Planted GPU" in lines[0]
    assert "1 in parallel" in lines[1] and "ESTIMATE" in lines[1]


def test_the_data_card_alone_plans_no_run():
    est = plan.estimate_data_set(get_profile("smoke"), "synthetic", [], [], [], EvaluatingCache(planted))
    assert est.runs == 0 and est.prepare_s == 0.0
    assert plan.paper_cost_lines(get_profile("paper"), "flickr8k", [], workers=2, device="cpu") == []


def test_the_cost_command_takes_flags_and_names_a_bad_one(capsys):
    """``python -m reproduce.protocol.plan --help`` once failed with "unknown profile '--help'"."""
    with pytest.raises(SystemExit) as e:
        plan.main(["--help"])
    assert e.value.code == 0 and "--workers" in capsys.readouterr().out
    with pytest.raises(SystemExit) as e:
        plan.main(["--workers", "0"])
    assert e.value.code == 2 and "--workers must be ≥ 1, got 0" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        plan.main(["--profile", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err


def test_with_tuning_done_the_plan_counts_exactly_the_final_runs_left(monkeypatch):
    """A rerun after everything trained used to announce the grid's bound (≤ 222 runs, 15 h) and train none:
    with every tuning run cached the plan is the tuned plan's uncached runs — none after a finished study,
    the exact list when some final runs are missing."""
    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    prof = get_profile("smoke")
    cache = EvaluatingCache(planted)
    _drive(prof, None, cache)
    tune = tuning.tuning_configs(prof)
    est = plan.estimate_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and est.final_todo == [] and est.runs == 0
    assert [c.key() for c in est.final_plan] == [c.key() for c in tuning.tuned_plan(prof, None, cache)]
    lines = plan.plan_lines(plan.Plan("smoke", [plan.DataSetPlan("synthetic", prof, tune, [], None, est)], workers=2))
    assert "≤" not in lines[0] and "0 final run(s)" in lines[0]
    total = next(x for x in lines if "in all" in x)
    assert "≤" not in total and "0 run(s) in all" in total
    lost = tuning.tuned_plan(prof, None, cache)[-1]  # one final run lost from the cache
    cache.evaluated.discard(lost.key())
    est = plan.estimate_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and [c.key() for c in est.final_todo] == [lost.key()]
    # before tuning, still the bound
    fresh = plan.estimate_data_set(prof, "synthetic", None, tune, tune, EvaluatingCache(planted))
    assert not fresh.exact and fresh.final_plan is None


def test_under_successive_halving_the_plan_is_exact_once_the_settings_that_went_on_are_cached(monkeypatch):
    """The default profile tunes by successive halving: with the rungs cached but not the runs that go on to the
    cap, the plan is still a bound; with those cached too, it is the tuned plan's uncached runs."""
    from test_halving import halving_profile, planted_is_collapsed

    monkeypatch.setattr(trials, "default_is_collapsed", planted_is_collapsed)
    prof = halving_profile()
    cache = EvaluatingCache(planted)
    tune = tuning.tuning_configs(prof)
    FakeExecutor().run(tune, cache, evaluate=False)
    assert not plan.estimate_data_set(prof, "synthetic", None, tune, [], cache).exact  # survivors not trained
    went_on = tuning.survivor_configs(prof, None, cache)
    assert went_on
    FakeExecutor().run(went_on, cache, evaluate=False)
    final = [c for c in tuning.tuned_plan(prof, None, cache) if not cache.has(c)]
    est = plan.estimate_data_set(prof, "synthetic", None, tune, [], cache)
    assert est.exact and [c.key() for c in est.final_todo] == [c.key() for c in final] and final
    FakeExecutor().run(final, cache)
    assert plan.estimate_data_set(prof, "synthetic", None, tune, [], cache).runs == 0
