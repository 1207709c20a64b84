"""Successive halving of the tuning grid: a rung is the beginning of its full run, the better half of
every grid goes on under one rule for every arm, a setting stopped at the rung is never chosen, and the tuner
still reads validation fields only."""

from __future__ import annotations

import dataclasses
import math

import pytest

from coherent_itr import config as config_mod
from reproduce.spec import experiments
from reproduce.protocol import halving, pipeline, trials, tuning
from reproduce.spec.profiles import TuningGrid, get_profile
from reproduce.protocol.study import profile_for
from test_tuning import FakeCache, FakeExecutor, fake_is_collapsed, record
from tiny_run import TINY


@pytest.fixture(autouse=True)
def _planted_collapse(monkeypatch):
    """The planted records carry a ``collapsed`` flag, not the health values ``coherent_itr.health`` reads."""
    monkeypatch.setattr(trials, "default_is_collapsed", planted_is_collapsed)


def planted_is_collapsed(view):
    """The planted flag of a record; a rung read from a full run's first epochs carries the planted cone
    (hardest-negative cosine 0.99 in ``test_tuning.record``) instead."""
    if "collapsed" in view["health"]:
        return fake_is_collapsed(view)
    c = any(h["val_hardneg_sim"] == 0.99 for h in view["history"])
    return c, "planted" if c else ""


CAP = 4


def halving_profile(rung=1, keep=0.5):
    smoke = get_profile("smoke")
    return dataclasses.replace(
        smoke, tuning=TuningGrid(rung_epochs=rung, keep=keep), model={**smoke.model, "epochs": CAP}
    )


@pytest.mark.parametrize("warmup", [0, 1])
def test_a_rung_run_is_the_beginning_of_its_full_run(tmp_path, warmup):
    """Trained to 2 (+ warm-up) epochs, a run records exactly the first epochs of the same run trained to 4: the
    history, the selected epoch and the health the tuner ranks by — so a cached full run answers for its rung."""
    from coherent_itr.train import train

    full_cfg = config_mod.Config(**{**TINY, "epochs": 4, "lr_decay_epoch": 3, "warmup_epochs": warmup})
    rung_epochs = warmup + 2
    full = train(full_cfg, progress=False, cache_dir=str(tmp_path)).record
    rung = train(full_cfg.replace(epochs=rung_epochs), progress=False, cache_dir=str(tmp_path)).record
    view = halving.rung_view(trials.validation_view(full), rung_epochs)
    keys = ("epoch", "val_rsum", "val_hardneg_sim", "val_pos_sim", "train_loss")
    assert [{k: h[k] for k in keys} for h in view["history"]] == [{k: h[k] for k in keys} for h in rung["history"]]
    assert view["best_epoch"] == rung["best_epoch"] and view["epochs_run"] == rung["epochs_run"]
    for k in ("val_rsum", "val_hardneg_sim", "val_gap", "val_rsum_over_chance"):
        assert view["health"][k] == rung["health"][k]
    same = lambda v: (False, "")  # noqa: E731
    a, b = tuning.trial_from_record(view, same), tuning.trial_from_record(rung, same)
    assert {k: a[k] for k in ("val_rsum", "best_epoch", "epochs_run")} == {
        k: b[k] for k in ("val_rsum", "best_epoch", "epochs_run")
    }


def test_rung_view_selects_like_the_training_loop():
    """First maximum from the first epoch after the warm-up; a prefix inside the warm-up keeps its last epoch."""
    rec = record(1e-3, 1, [90.0, 50.0, 70.0, 70.0, 95.0])
    rec["warmup"] = {"epochs": [1], "applies": True}
    for h in rec["history"]:
        h.update(val_gap=0.1, val_rsum_over_chance=h["val_rsum"] / 3)
    assert halving.rung_view(rec, 4)["best_epoch"] == 3  # not the warm-up epoch 1, the first of the two 70s
    assert halving.rung_view(rec, 5)["best_epoch"] == 5
    assert halving.rung_view(rec, 1)["best_epoch"] == 1  # never left the warm-up: its last epoch
    rec["warmup"] = {"epochs": [1], "applies": False}  # a loss the warm-up does not change: epoch 1 counts
    assert halving.rung_view(rec, 4)["best_epoch"] == 1
    with pytest.raises(ValueError, match="no epoch"):
        halving.rung_view({**rec, "history": []}, 3)


def test_the_default_profile_states_its_rung_before_the_run():
    prof = profile_for("default", "flickr8k")
    assert prof.tuning.rung_epochs == 5 and prof.tuning.keep == 0.5
    for paper in experiments.PAPERS:
        for arm in tuning.main_arms(prof, paper):
            for s in tuning.grid(arm, prof):
                r, f = tuning.rung_config(arm, prof, s), tuning._tuning_config(arm, prof, s)
                assert r.replace(epochs=f.epochs) == f  # a rung differs from its full run in the cap alone
                assert r.epochs == tuning._first_epoch(arm, s) - 1 + 5 < f.epochs
                assert tuning.full_config_of(r, prof) == f


@pytest.mark.parametrize("n,keep,want", [(6, 0.5, 3), (3, 0.5, 2), (1, 0.5, 1), (2, 0.5, 1), (6, 1.0, 6), (5, 0.2, 1)])
def test_survivor_count(n, keep, want):
    assert halving.n_survivors(n, keep) == want


def _score(cfg):
    """Planted: at the rung, larger lr is better; at the cap, the *smallest* lr that went on wins (a slow starter)."""
    rung = cfg.epochs < CAP
    return 100.0 * cfg.lr / 1e-3 if rung else 1000.0 - 1e5 * cfg.lr


def test_the_better_half_goes_on_with_one_rule_for_every_arm():
    prof = halving_profile()
    cache = FakeCache(_score)
    papers = list(experiments.PAPERS)
    tune = tuning.tuning_configs(prof, papers)
    assert all(c.epochs < prof.model["epochs"] for c in tune)  # rungs only
    with pytest.raises(tuning.TuningIncomplete, match="rung run"):
        tuning.survivor_configs(prof, papers, cache)
    FakeExecutor().run(tune, cache, evaluate=False)
    more = tuning.survivor_configs(prof, papers, cache)
    FakeExecutor().run(more, cache, evaluate=False)
    fams = tuning.families(prof, papers, cache, is_collapsed=planted_is_collapsed)
    for fam in fams.values():
        g = tuning.grid(fam.arm, prof)
        went = [t for t in fam.trials if t["went_on"]]
        assert len(went) == halving.n_survivors(len(g), 0.5)  # the same share for every arm
        # the ones that went on are the best at the rung (largest lr here), in the selection order
        rung_best = sorted(fam.trials, key=lambda t: (-t["rung_val_rsum"], t["lr"], t["warmup_epochs"]))
        assert {(t["lr"], t["warmup_epochs"]) for t in went} == {
            (t["lr"], t["warmup_epochs"]) for t in rung_best[: len(went)]
        }
        stopped = [t for t in fam.trials if not t["went_on"]]
        assert all(t["status"].startswith("stopped at the rung") for t in stopped)
        # the choice is the best *full* run among those that went on (here the smallest lr that went on)
        assert fam.chosen["went_on"] and fam.chosen["lr"] == min(t["lr"] for t in went)
    # only rungs and the survivors' full runs were trained: never a full run of a stopped setting
    full_trained = {c.key() for c in cache.trained if c.epochs == prof.model["epochs"]}
    assert full_trained == {c.key() for c in more}


def test_a_setting_stopped_at_the_rung_is_never_chosen_even_when_every_survivor_collapses():
    prof = halving_profile()
    cache = FakeCache(_score, collapsed=lambda c: c.epochs >= 2)  # every full run collapses
    papers = ["unified"]
    FakeExecutor().run(tuning.tuning_configs(prof, papers), cache, evaluate=False)
    FakeExecutor().run(tuning.survivor_configs(prof, papers, cache), cache, evaluate=False)
    for fam in tuning.families(prof, papers, cache, is_collapsed=planted_is_collapsed).values():
        assert fam.chosen["went_on"] is True  # a collapsed survivor, not a healthy setting that stopped early


def test_a_cached_full_run_answers_for_its_rung_and_nothing_retrains():
    prof = halving_profile()
    cache = FakeCache(_score)
    papers = ["unified"]
    full = [tuning._tuning_config(a, prof, s) for a in tuning.main_arms(prof, "unified") for s in tuning.grid(a, prof)]
    FakeExecutor().run(full, cache, evaluate=False)  # e.g. trained by a profile without halving
    n = len(cache.trained)
    assert all(tuning.tuning_run_done(c, prof, cache) for c in tuning.tuning_configs(prof, papers))
    r = pipeline.ready_runs(prof, papers, cache)
    assert r.tuning == [] and r.chosen_all  # no rung and no full run to train again
    assert len(cache.trained) == n


def test_the_pipeline_asks_for_the_rungs_then_the_survivors_then_the_final_runs():
    prof = halving_profile()
    cache = FakeCache(_score)
    ex = FakeExecutor()
    rungs = pipeline.ready_runs(prof, ["bcls"], cache)
    assert rungs.tuning and not rungs.final and all(c.epochs < prof.model["epochs"] for c in rungs.tuning)
    ex.run(rungs.tuning, cache, evaluate=False)
    surv = pipeline.ready_runs(prof, ["bcls"], cache)
    assert surv.tuning and not surv.final and all(c.epochs == prof.model["epochs"] for c in surv.tuning)
    assert sorted(c.key() for c in surv.tuning) == sorted(
        c.key() for c in tuning.survivor_configs(prof, ["bcls"], cache)
    )
    ex.run(surv.tuning, cache, evaluate=False)
    final = pipeline.ready_runs(prof, ["bcls"], cache)
    assert not final.tuning and final.chosen_all and final.final and all(math.isfinite(c.lr) for c in final.final)


def test_halving_reads_no_test_metric():
    """The rung trials come from ``rung_view`` of a validation view: a poisoned test/timing never reached."""
    rec = record(1e-3, 0, [10.0, 20.0, 30.0])
    rec["warmup"] = {"epochs": [], "applies": False}
    for h in rec["history"]:
        h.update(val_gap=0.1, val_rsum_over_chance=2.0)
    view = halving.rung_view(trials.validation_view(rec), 2)
    assert view["best_epoch"] == 2 and rec.read <= set(tuning.VALIDATION_KEYS)
