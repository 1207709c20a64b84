"""The protocol one tuning problem at a time (reproduce/protocol/pipeline.py).

On planted caches (successive halving, a health check that moves choices, failed rungs and final runs), asking
:func:`ready_runs` after every finished run and training any of the ready runs — in shuffled orders, as workers
finish — trains each run once and ends at a fixed point of :func:`tuning.tuned_plan` (every final run trained or
failed), the same final plan whatever the order: the one reached by training every ready run before asking again.
A problem's final runs are ready before another problem's rungs are done."""

from __future__ import annotations

import dataclasses
import random

import pytest

from reproduce.protocol import pipeline, trials, tuning
from reproduce.spec import experiments
from reproduce.spec.profiles import get_profile
from test_halving import CAP, halving_profile, planted_is_collapsed
from test_plan import EvaluatingCache
from test_tuning import fake_is_collapsed, planted, tuned_profile


def _score(cfg):
    """At the rung the larger lr is better; at the cap the smallest lr that went on wins."""
    return 100.0 * cfg.lr / 1e-3 if cfg.epochs < CAP else 1000.0 - 1e5 * cfg.lr


def _collapsed(cfg):  # the best full-run setting collapses on seed 1: the health check moves its family on
    return cfg.seed == 1 and cfg.lr == 2e-3


def _fail(cfg):
    return (cfg.lr == 2e-3 and cfg.epochs < CAP and cfg.loss == "unified") or (cfg.seed == 2 and cfg.loss == "bcls")


def pipelined(prof, papers, cache, fail, seed) -> tuple[list, list]:
    """Ask, train some of the ready runs (a third, chosen at random, as any worker may finish first; every one when
    ``seed`` is None), ask again. Returns the final plan, every run of which is trained or failed, and the order in
    which (kind, config) ran."""
    rng = random.Random(seed)
    failed: set[str] = set()
    order = []
    known = pipeline.KnownRuns(cache)
    while True:
        r = pipeline.ready_runs(prof, papers, known, failed)
        todo = [("tune", c) for c in r.tuning] + [("final", c) for c in r.final]
        if not todo:
            assert r.chosen_all
            final = tuning.tuned_plan(prof, papers, cache, failed_keys=failed)
            assert all(cache.has(c) or c.key() in failed for c in final)  # nothing of the plan left to train
            return final, order
        some = todo if seed is None else rng.sample(todo, max(1, len(todo) // 3))  # some of the workers finish
        for kind, c in some:
            order.append((kind, c))
            if fail(c):
                failed.add(c.key())
            else:
                cache.get_or_train(c, evaluate=kind == "final")


@pytest.mark.parametrize("seed", [0, 1])
def test_the_pipeline_trains_each_run_once_and_chooses_the_same_in_any_order(monkeypatch, seed):
    monkeypatch.setattr(trials, "default_is_collapsed", planted_is_collapsed)
    prof = dataclasses.replace(halving_profile(), seeds=(0, 1, 2), sweep_seeds=(0, 1))
    papers = ["overview", "unified", "bcls"]
    a, b = EvaluatingCache(_score, _collapsed), EvaluatingCache(_score, _collapsed)
    final_a, _ = pipelined(prof, papers, a, _fail, None)
    final_b, order = pipelined(prof, papers, b, _fail, seed)
    assert sorted(c.key() for c in final_a) == sorted(c.key() for c in final_b)
    trained_b = {c.key() for c in b.trained}
    assert len(trained_b) == len(b.trained)  # each run once
    assert {c.key() for c in final_b if not _fail(c)} <= b.evaluated & a.evaluated
    # the health check moved families: seed 1 was trained at 2e-3 (the choice at the cap), the final plan is elsewhere
    assert any(c.seed == 1 and c.lr == 2e-3 for c in b.trained) and not any(c.lr == 2e-3 for c in final_b)
    # nothing held back: a final run started while another problem still had a rung to train
    first_final = next(i for i, (kind, _) in enumerate(order) if kind == "final")
    assert any(kind == "tune" and c.epochs < CAP for kind, c in order[first_final:])


@pytest.mark.parametrize("seed", [0, 1])
def test_when_every_setting_collapses_on_another_seed_the_choice_is_made_on_whole_counts(monkeypatch, seed):
    """The least collapsed setting is chosen on whole counts: the pipeline trains every seed of every setting it
    tried, and chooses the same in any order."""
    monkeypatch.setattr(trials, "default_is_collapsed", planted_is_collapsed)
    prof = dataclasses.replace(halving_profile(), seeds=(0, 1, 2), sweep_seeds=(0, 1))

    def collapsed(c):  # seed 1 collapses everywhere; seed 2 too at the larger lrs
        return c.epochs == CAP and (c.seed == 1 or (c.seed == 2 and c.lr >= 6e-3))

    a, b = EvaluatingCache(_score, collapsed), EvaluatingCache(_score, collapsed)
    final_a, _ = pipelined(prof, ["unified"], a, lambda c: False, None)
    final_b, _ = pipelined(prof, ["unified"], b, lambda c: False, seed)
    assert sorted(c.key() for c in final_a) == sorted(c.key() for c in final_b)
    assert len({c.key() for c in b.trained}) == len(b.trained)


def test_without_halving_and_without_tuning(monkeypatch):
    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    prof = tuned_profile()
    a, b = EvaluatingCache(planted), EvaluatingCache(planted)
    final_a, _ = pipelined(prof, ["unified"], a, lambda c: False, None)
    final_b, _ = pipelined(prof, ["unified"], b, lambda c: False, 0)
    assert sorted(c.key() for c in final_a) == sorted(c.key() for c in final_b)
    assert sorted(c.key() for c in a.trained) == sorted(c.key() for c in b.trained)
    untuned = dataclasses.replace(get_profile("smoke"), tuning=None)
    r = pipeline.ready_runs(untuned, ["unified"], EvaluatingCache(planted))
    assert r.chosen_all and not r.tuning
    assert sorted(c.key() for c in r.final) == sorted(c.key() for c in experiments.plan(untuned, ["unified"]))


def test_known_runs_read_each_entry_once_and_ask_again_for_what_was_missing():
    class Counting(EvaluatingCache):
        reads = 0

        def load_training(self, cfg):
            Counting.reads += 1
            return super().load_training(cfg)

    cache = Counting(planted)
    known = pipeline.KnownRuns(cache)
    cfg = tuning.tuning_configs(tuned_profile(), ["unified"])[0]
    assert known.load_training(cfg) is None and not known.has_training(cfg) and not known.has(cfg)
    cache.get_or_train(cfg, evaluate=False)
    assert known.has_training(cfg) and not known.has(cfg)
    rec = known.load_training(cfg).record
    assert known.load_training(cfg).record is rec and Counting.reads == 2
    cache.get_or_train(cfg)
    assert known.has(cfg)
