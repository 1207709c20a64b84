"""The equal-budget tuner: grid, families, selection on validation only, determinism."""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Mapping

import pandas as pd
import pytest

from coherent_itr import config as config_mod
from coherent_itr import losses
from reproduce.spec import experiments
from reproduce.present import tuning_tables
from reproduce.protocol import pipeline, trials, tuning
from reproduce.spec.profiles import TuningGrid, get_profile
from tiny_run import TINY


def tuned_profile(name="smoke", **kw):
    return dataclasses.replace(get_profile(name), tuning=TuningGrid(), **kw)


# --- poisoned test metrics ---------------------------------------------------------------------------
class Poison(Mapping):
    """Any access raises: stands for test metrics the tuner must never read."""

    def _boom(self, *a, **k):
        raise AssertionError("the tuner read test metrics")

    __getitem__ = __iter__ = __len__ = __contains__ = _boom
    get = keys = items = values = _boom


class Traced(dict):
    """A record that logs which top-level keys were read."""

    def __init__(self, *a, **k):
        super().__init__(*a, **k)
        self.read: set[str] = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.read.add(k)
        return super().get(k, default)

    def __contains__(self, k):
        self.read.add(k)
        return super().__contains__(k)


def record(lr, warm, rsums, collapsed=False, loss="triplet"):
    best = max(range(len(rsums)), key=lambda i: rsums[i]) + 1
    hist = [
        {"epoch": i + 1, "val_rsum": r, "val_pos_sim": 0.5, "val_hardneg_sim": 0.99 if collapsed else 0.3}
        for i, r in enumerate(rsums)
    ]
    return Traced(
        config={"loss": loss, "lr": lr, "warmup_epochs": warm},
        history=hist,
        best_epoch=best,
        epochs_run=len(rsums),
        health={"collapsed": collapsed},
        test=Poison(),
        timing=Poison(),
    )


def fake_is_collapsed(view):
    c = view["health"]["collapsed"]
    return c, "planted" if c else ""


def test_trial_reads_only_validation_fields_and_never_test_metrics():
    rec = record(6e-4, 1, [100.0, 250.0, 240.0])
    t = tuning.trial_from_record(rec, fake_is_collapsed)
    assert (t["lr"], t["warmup_epochs"], t["val_rsum"], t["best_epoch"], t["epochs_run"]) == (6e-4, 1, 250.0, 2, 3)
    assert rec.read <= set(tuning.VALIDATION_KEYS)
    assert "test" not in rec.read and "timing" not in rec.read
    # the test metrics may also be absent altogether
    del rec["test"]
    assert tuning.trial_from_record(rec, fake_is_collapsed)["val_rsum"] == 250.0


def test_selection_ignores_test_numbers_even_when_they_disagree():
    # the setting with the better TEST number has the worse validation RSUM: validation decides
    a, b = record(2e-4, 0, [300.0]), record(2e-3, 0, [310.0])
    dict.__setitem__(a, "test", {"rsum": 999.0})
    dict.__setitem__(b, "test", {"rsum": float("nan")})
    chosen = tuning.select([tuning.trial_from_record(r, fake_is_collapsed) for r in (a, b)])
    assert chosen["lr"] == 2e-3


def test_best_epoch_must_be_in_history():
    rec = record(2e-4, 0, [1.0, 2.0])
    dict.__setitem__(rec, "best_epoch", 5)
    with pytest.raises(ValueError, match="best_epoch=5"):
        tuning.trial_from_record(rec, fake_is_collapsed)


def trials_grid():
    out = []
    for lr, w, r, c in [
        (2e-4, 0, 300.0, False),
        (2e-4, 1, 300.0, False),
        (6e-4, 0, 300.0, False),
        (6e-4, 1, 280.0, False),
        (2e-3, 0, 500.0, True),
        (2e-3, 1, float("nan"), False),
    ]:
        out.append(tuning.trial_from_record(record(lr, w, [r], collapsed=c), fake_is_collapsed))
    return out


def test_selection_rules_collapsed_last_ties_to_smaller_lr_then_no_warmup():
    t = trials_grid()
    chosen = tuning.select(t)
    # 2e-3 has the best RSUM but collapsed; NaN counts as collapsed; three healthy ties at 300
    assert (chosen["lr"], chosen["warmup_epochs"]) == (2e-4, 0)
    assert math.isnan(t[-1]["val_rsum"]) and t[-1]["collapsed"] is True


def test_selection_is_deterministic_under_any_order():
    t = trials_grid()
    ref = tuning.select(t)
    for seed in range(20):
        random.Random(seed).shuffle(t)
        assert tuning.select(t) == ref


def test_all_collapsed_still_chooses_the_best_of_them():
    t = [
        tuning.trial_from_record(record(lr, 0, [r], collapsed=True), fake_is_collapsed)
        for lr, r in [(2e-4, 50.0), (6e-4, 70.0)]
    ]
    assert tuning.select(t)["lr"] == 6e-4
    with pytest.raises(ValueError):
        tuning.select([])


@pytest.mark.parametrize(
    "loss, params",
    [
        ("triplet", {}),
        ("triplet", {"max_violation": False}),
        ("triplet", {"reduction": "mean"}),
        ("triplet_sn", {}),
        ("vlc", {}),
        ("unified", {}),
        ("bcls", {}),
        ("bcls", {"triplet": "triplet"}),
        ("ladder", {}),
        ("adaptive_ladder", {}),
        ("listwise", {}),
        ("sam", {"keep_triplet": True, "sampling": "SN"}),
        ("sam", {"keep_triplet": False, "sampling": "SN"}),
        ("sam", {"keep_triplet": False, "sampling": "HN"}),
        ("sam_authors", {"keep_triplet": True}),
        ("sam_authors", {"keep_triplet": False}),
        ("sam_authors", {"keep_triplet": False, "sampling": "HN"}),
        ("sndcg", {}),
        ("kendall_sw_hs", {}),
    ],
)
def test_honours_warmup_says_whether_the_warmup_changes_the_loss(loss, params):
    """The one answer to "does a warm-up apply?" (the library's ``honours_warmup``, read by the tuner's grid
    and by the training loop) checked against what it means: switching the warm-up on changes the value."""
    import torch

    g = torch.Generator().manual_seed(0)
    sim = torch.rand(12, 12, generator=g, dtype=torch.float64) * 2 - 1
    rel = torch.rand(12, 12, generator=g, dtype=torch.float64)
    rel = (rel + rel.T) / 2
    rel.fill_diagonal_(1.0)
    plain, warm = losses.build(loss, **params), losses.build(loss, **params)
    warm.set_warmup(True)
    args = (sim, rel) if plain.requires_relevance else (sim,)
    changed = float(plain(*args)) != float(warm(*args))
    assert plain.honours_warmup is changed
    arm = experiments.Arm("p", "g", "a", {"loss": loss, "loss_params": params})
    assert arm.honours_warmup is changed and tuning.grid(arm, get_profile("default")) == get_profile(
        "default"
    ).tuning.settings(changed)


@pytest.mark.parametrize("data", ["synthetic", "flickr8k"])
def test_tuning_and_training_agree_on_the_warmup_of_every_planned_arm(data, monkeypatch):
    """Every final config carries a warm-up exactly when the training loop applies it: an arm whose loss a
    warm-up does not change never inherits its family's warm-up (the loop would ignore it, the key would lie)."""
    from reproduce.protocol.study import profile_for

    prof = profile_for("default", data)
    monkeypatch.setattr(tuning, "chosen_setting", lambda fam: {"lr": 6e-4, "warmup_epochs": 1})
    fams = type("AnyFamily", (dict,), {"__missing__": lambda self, k: None})()
    n = 0
    for paper in experiments.PAPERS:
        paper_arms = experiments.arms(paper, prof)
        for arm in paper_arms:
            for cfg in tuning.arm_configs(arm, paper_arms, prof, fams):
                applied = losses.build(cfg.loss, **cfg.loss_params).honours_warmup  # what train() reads
                fixed = "warmup_epochs" in arm.overrides
                if fixed:
                    assert cfg.warmup_epochs == arm.overrides["warmup_epochs"]
                else:  # (a reduced-data arm stretches the warm-up to equal updates: > 1 epoch)
                    assert (cfg.warmup_epochs > 0) is applied, (paper, arm.name, cfg.warmup_epochs, applied)
                n += 1
    assert n > 50


def test_an_arms_candidates_before_tuning_are_its_final_configs_at_every_setting_its_family_may_choose(monkeypatch):
    """What a run archive keeps for the views before tuning is done: for every setting of the family's grid, the
    final configs tuning would give if it chose that setting, and nothing else."""
    from reproduce.protocol.study import profile_for

    prof = profile_for("default", "flickr8k")
    fams = type("AnyFamily", (dict,), {"__missing__": lambda self, k: None})()
    for paper in experiments.PAPERS:
        paper_arms = experiments.arms(paper, prof)
        for arm in paper_arms:
            expected = set()
            for setting in tuning.grid(tuning.family_of(arm, paper_arms), prof):
                monkeypatch.setattr(tuning, "chosen_setting", lambda fam, s=setting: dict(s))
                expected |= {c.key() for c in tuning.arm_configs(arm, paper_arms, prof, fams)}
            got = [c.key() for c in tuning.candidate_configs(arm, paper_arms, prof)]
            assert set(got) == expected, (paper, arm.name)


def test_every_arm_has_a_family_and_the_documented_mappings():
    prof = tuned_profile("default", ladder_theta=(0.5, 0.45))
    fam = tuning.family_table(prof).set_index(["paper", "arm"])["family"]
    assert fam[("bcls", "α=0")] == "BCLS" and fam[("bcls", "w/o SW-HS (full Kendall)")] == "BCLS"
    assert fam[("unified", "γ=∞ (Triplet-HN)")] == "Triplet-HN" and fam[("unified", "m=0")] == "Unified"
    assert fam[("ladder", "L=1")] == "VSE++" and fam[("ladder", "(1,1)")] == "Ladder (adaptive)"
    assert fam[("ladder", "auto(2,2) β₂=0.5")] == "Ladder (adaptive)"
    assert fam[("sam", "10% data, + SAM")] == "100% data, + SAM"
    assert fam[("sam", "authors τ=10 SN keep=False")] == "100% data, + SAM (authors' code)"
    assert fam[("listwise", "τ=0.1")] == "Triplet + S-NDCG"
    assert fam[("overview", "VSE++ with 1 warm-up epoch")] == "VSE++ (Triplet-HN)"
    assert fam[("ladder", "L=3 (θ calibrated)")].startswith("Ladder (manual, θ=0.500")


def test_family_errors_name_the_arm():
    arms = experiments.arms("unified", get_profile("smoke"))
    bad = experiments.Arm("unified", "gamma", "odd", {"loss": "unified"}, family="nope")
    with pytest.raises(ValueError, match="family 'nope'"):
        tuning.family_of(bad, arms)


def test_tuning_configs_are_the_grid_of_each_distinct_main_arm_at_seed_0():
    prof = tuned_profile()
    cfgs = tuning.tuning_configs(prof)
    assert len({c.key() for c in cfgs}) == len(cfgs)
    assert {c.seed for c in cfgs} == {0}
    assert {c.lr for c in cfgs} == {2e-4, 6e-4, 2e-3, 6e-3}
    vsepp = [c for c in cfgs if c.loss == "triplet" and c.loss_params == {} and c.train_fraction == 1.0]
    grid = (2e-4, 6e-4, 2e-3, 6e-3)
    assert sorted((c.lr, c.warmup_epochs) for c in vsepp) == [(lr, w) for lr in grid for w in (0, 1)]
    sn = [c for c in cfgs if c.loss == "triplet_sn"]
    assert sorted(c.lr for c in sn) == [2e-4, 6e-4, 2e-3, 6e-3] and {c.warmup_epochs for c in sn} == {0}
    n_expected = 0
    keys = set()
    for paper in experiments.PAPERS:
        for a in tuning.main_arms(prof, paper):
            k = tuning.tuning_key(a, prof)
            if k not in keys:
                keys.add(k)
                n_expected += len(tuning.grid(a, prof))
    assert len(cfgs) == n_expected
    assert (
        tuning.tuning_configs(
            get_profile("paper").__class__(**{**dataclasses.asdict(get_profile("smoke")), "tuning": None})
        )
        == []
    )


class FakeCache:
    """Records planted per config: validation RSUM = f(loss, lr, warm-up); test metrics poisoned."""

    def __init__(self, score, collapsed=lambda c: False):
        self.score, self.collapsed, self.store, self.trained = score, collapsed, {}, []

    def has(self, cfg):
        return cfg.key() in self.store

    has_training = has  # the tuning phase trains without evaluating

    def get_or_train(self, cfg, progress=False, evaluate=True):
        if not self.has(cfg):
            self.trained.append(cfg)
            self.store[cfg.key()] = record(
                cfg.lr, cfg.warmup_epochs, [self.score(cfg) - 10, self.score(cfg)], self.collapsed(cfg), cfg.loss
            )
        return self.load(cfg)

    def load(self, cfg):
        rec = self.store.get(cfg.key())
        return None if rec is None else type("R", (), {"record": rec})()

    def load_training(self, cfg):  # the training entry: no test metrics at all
        rec = self.store.get(cfg.key())
        return None if rec is None else type("R", (), {"record": {k: v for k, v in rec.items() if k != "test"}})()


def planted(cfg):
    # healthy best: 6e-4 with warm-up for hardest-negative losses, 2e-4 otherwise; 2e-3 scores best but collapses
    if cfg.lr == 2e-3:
        return 900.0
    hn = losses.build(cfg.loss, **cfg.loss_params).honours_warmup
    if hn:
        return 400.0 if (cfg.lr, cfg.warmup_epochs) == (6e-4, 1) else 300.0
    return 350.0 if cfg.lr == 2e-4 else 340.0


class FakeExecutor:
    def __init__(self, fail=lambda c: False):
        self.fail, self.calls = fail, []

    def run(self, configs, cache, evaluate=True):
        self.calls.append(list(configs))
        out = []
        for c in configs:
            if self.fail(c):
                out.append(type("F", (), {"config": c.to_dict(), "error": "FloatingPointError: boom"})())
            else:
                cache.get_or_train(c, evaluate=evaluate)
        return out


def test_protocol_end_to_end_on_planted_records():
    prof = tuned_profile()
    cache = FakeCache(planted, collapsed=lambda c: c.lr == 2e-3)
    papers = ["overview", "unified", "bcls"]
    with pytest.raises(tuning.TuningIncomplete, match="not in the cache"):
        tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed)
    tune = tuning.tuning_configs(prof, papers)
    FakeExecutor().run(tune, cache)
    final = tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed)
    assert all(c.lr != 2e-3 for c in final)  # the collapsed lr is never chosen, though it scores best
    vsepp = [c for c in final if c.loss == "triplet" and c.loss_params == {}]
    assert {(c.lr, c.warmup_epochs) for c in vsepp} == {(6e-4, 1), (6e-4, 0)}  # + the no-warm-up sensitivity arm
    assert {(c.lr, c.warmup_epochs) for c in final if c.loss == "unified"} == {(2e-4, 0)}  # sweeps: family's lr
    assert {(c.lr, c.warmup_epochs) for c in final if c.loss == "bcls"} == {(2e-4, 0)}
    # the final seed-0 runs of main arms are tuning runs: nothing new to train for them
    tune_keys = {c.key() for c in tune}
    main_final = [c for c in final if c.seed == 0 and c.key() in tune_keys]
    assert main_final
    # the notebook table marks exactly one chosen row per tuning problem
    tab = tuning.tuning_table(prof, "unified", cache, is_collapsed=fake_is_collapsed)
    assert set(tab.columns) >= {"arm", "lr", "warmup_epochs", "val_rsum", "collapsed", "chosen"}
    assert tab.groupby("arm").chosen.sum().eq(1).all()
    assert tab[tab.chosen].collapsed.eq(False).all()


def test_failed_tuning_runs_are_never_chosen_and_the_next_invocation_asks_for_them_again(monkeypatch):
    prof = tuned_profile()
    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    cache = FakeCache(lambda c: 900.0 if c.lr == 6e-4 else 300.0)
    ex = FakeExecutor(fail=lambda c: c.lr == 6e-4)  # the would-be winner fails to train
    failures = ex.run(pipeline.ready_runs(prof, ["unified"], cache).tuning, cache, evaluate=False)
    assert len(failures) == 4 and "FloatingPointError" in failures[0].error
    failed = {config_mod.Config.from_dict(f.config).key() for f in failures}
    r = pipeline.ready_runs(prof, ["unified"], cache, failed)
    assert not r.tuning and r.chosen_all and {c.lr for c in r.final} == {2e-4}  # failed runs never chosen
    assert {c.lr for c in tuning.tuned_plan(prof, ["unified"], cache, failed_keys=failed)} == {2e-4}
    n_failed = sum(c.lr == 6e-4 for c in tuning.tuning_configs(prof, ["unified"]))
    assert n_failed == 4  # Triplet-HN × 2 warm-ups, VLC, Unified
    again = pipeline.ready_runs(prof, ["unified"], cache)  # a later invocation: only the failed runs are asked for
    assert sorted(c.key() for c in again.tuning) == sorted(failed)


def test_summary_written_per_data_set(tmp_path, monkeypatch):
    prof = tuned_profile()
    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    cache = FakeCache(planted)
    FakeExecutor().run(tuning.tuning_configs(prof, ["listwise"]), cache)
    df = tuning_tables.write_tuning_summary(tmp_path / "flickr8k", prof, cache, papers=["listwise"])
    assert (tmp_path / "flickr8k" / "tuning_summary.csv").is_file()
    md = (tmp_path / "flickr8k" / "tuning_summary.md").read_text()
    assert "selection by validation RSUM" in md and "Triplet + S-NDCG" in md
    assert "## Families" in md and "| τ=0.1 " in md
    assert pd.read_csv(tmp_path / "flickr8k" / "tuning_summary.csv").shape == df.shape
    assert df.chosen.sum() == 3  # Triplet (mean), S-NDCG alone, Triplet + S-NDCG


def test_a_one_paper_summary_keeps_the_families_of_papers_tuned_before(tmp_path, monkeypatch):
    """``--papers listwise`` after a run of Unified: the summary still lists Unified's families (its tuning runs
    are cached); a paper never tuned is not listed, and nothing is trained to list it."""
    prof = tuned_profile()
    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    cache = FakeCache(planted)
    FakeExecutor().run(tuning.tuning_configs(prof, ["listwise"]), cache)
    alone = tuning_tables.write_tuning_summary(tmp_path, prof, cache, papers=["listwise"])
    assert tuning.covered_papers(prof, ["listwise"], cache) == ["listwise"]
    FakeExecutor().run(tuning.tuning_configs(prof, ["unified"]), cache)
    n_trained = len(cache.trained)
    both = tuning_tables.write_tuning_summary(tmp_path, prof, cache, papers=["listwise"])
    assert tuning.covered_papers(prof, ["listwise"], cache) == ["listwise", "unified"]
    assert "Unified" in " ".join(both["arm"]) and "Unified" not in " ".join(alone["arm"])
    assert set(alone["arm"]) < set(both["arm"])
    assert len(cache.trained) == n_trained  # nothing trained to list it
    assert "Unified" in (tmp_path / "tuning_summary.md").read_text()


def test_profile_without_tuning_keeps_the_old_plan():
    prof = dataclasses.replace(get_profile("smoke"), tuning=None)
    assert [c.key() for c in tuning.tuned_plan(prof, ["unified"], cache=None)] == [
        c.key() for c in experiments.plan(prof, ["unified"])
    ]
    assert tuning.tuning_table(prof, "unified", None).empty


def test_a_real_run_record_is_read_by_the_tuner(tmp_path):
    """The record format of coherent_itr.train (history, best_epoch, config) is what the tuner reads
    (train() computes no test metric: those live in the run cache's evaluation entry)."""
    from coherent_itr.train import train

    cfg = config_mod.Config(**{**TINY, "epochs": 2, "lr_decay_epoch": 2})
    res = train(cfg, progress=False, cache_dir=str(tmp_path))
    t = tuning.trial_from_record(res.record, is_collapsed=lambda v: (False, ""))
    assert t["lr"] == cfg.lr and t["best_epoch"] in (1, 2) and math.isfinite(t["val_rsum"])
    assert t["val_rsum"] == max(h["val_rsum"] for h in res.record["history"])


def test_study_resolves_arms_to_their_tuned_configs(monkeypatch):
    """Notebooks get tuned runs transparently: Study trains missing tuning runs, then every arm (sweeps
    included) uses its family's chosen setting; the tuning table marks the choice."""
    from reproduce.protocol.study import Study

    monkeypatch.setattr(trials, "default_is_collapsed", fake_is_collapsed)
    cache = FakeCache(planted, collapsed=lambda c: c.lr == 2e-3)
    st = Study(tuned_profile(), "synthetic", cache=cache, progress=False)
    gamma = [a for a in st.arms("unified", "gamma")]
    cfgs = [c for a in gamma for c in st.configs(a)]
    assert {(c.lr, c.warmup_epochs) for c in cfgs if c.loss == "unified"} == {(2e-4, 0)}
    assert {(c.lr, c.warmup_epochs) for c in cfgs if c.loss == "triplet"} == {(6e-4, 1)}  # γ=∞ → Triplet-HN
    assert len(cache.trained) == len(tuning.tuning_configs(st.profile, ["unified"]))  # tuning runs only
    tab = st.tuning_table("unified")
    assert tab.chosen.sum() == 3 and not tab[tab.chosen].collapsed.any()
    # without tuning in the profile: the profile's own lr, nothing trained for tuning
    plain = Study(
        dataclasses.replace(get_profile("smoke"), tuning=None), "synthetic", cache=FakeCache(planted), progress=False
    )
    assert {c.lr for a in plain.arms("unified") for c in plain.configs(a)} == {get_profile("smoke").model["lr"]}
    assert plain.cache.trained == []


def _vsepp_setting(final):
    return {(c.lr, c.warmup_epochs) for c in final if c.loss == "triplet" and c.loss_params == {} and c.seed == 0}


def _train_to_fixed_point(prof, papers, cache, rounds=8):
    """What the driver does: train the final plan, ask again, until the choice no longer moves."""
    for _ in range(rounds):
        final = tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed)
        todo = [c for c in final if not cache.has(c)]
        if not todo:
            return final
        FakeExecutor().run(todo, cache)
    raise AssertionError("no fixed point")


def test_a_setting_that_collapses_on_another_seed_is_replaced_by_the_next_one():
    prof = tuned_profile(seeds=(0, 1, 2))
    papers = ["unified"]
    # VSE++ (Triplet-HN): (6e-4, warm-up 1) is best on seed 0 but collapses with seed 1
    cache = FakeCache(
        planted, collapsed=lambda c: c.lr == 2e-3 or (c.seed == 1 and (c.lr, c.warmup_epochs) == (6e-4, 1))
    )
    FakeExecutor().run(tuning.tuning_configs(prof, papers), cache)
    first = tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed)
    assert (6e-4, 1) in _vsepp_setting(first)  # pending: its other seeds are not trained yet
    final = _train_to_fixed_point(prof, papers, cache)
    # next in seed-0 order among the 300-point ties: the smaller lr, then no warm-up
    assert (2e-4, 0) in _vsepp_setting(final) and (6e-4, 1) not in _vsepp_setting(final)
    assert {(c.lr, c.warmup_epochs) for c in final if c.loss == "unified"} == {(2e-4, 0)}  # unaffected family
    tab = tuning.tuning_table(prof, "unified", cache, is_collapsed=fake_is_collapsed)
    hn = tab[tab.arm == "Triplet-HN"].set_index(["lr", "warmup_epochs"])
    assert hn.loc[(6e-4, 1), "other_seeds"] == "1/2 collapsed" and not hn.loc[(6e-4, 1), "chosen"]
    assert hn.loc[(2e-4, 0), "other_seeds"] == "0/2 collapsed" and hn.loc[(2e-4, 0), "chosen"]
    assert hn.loc[(2e-3, 0), "other_seeds"] == ""  # collapsed on seed 0: never checked
    # deterministic: the same cache gives the same plan
    assert [c.key() for c in tuning.tuned_plan(prof, papers, cache, is_collapsed=fake_is_collapsed)] == [
        c.key() for c in final
    ]


def test_when_every_setting_collapses_on_some_seed_the_fewest_collapses_win():
    prof = tuned_profile(seeds=(0, 1, 2))
    papers = ["unified"]

    def collapsed(c):  # VSE++: every healthy seed-0 setting collapses on seed 2; (2e-4, 1) also on seed 1
        hn = c.loss == "triplet" and c.loss_params == {}
        return c.lr == 2e-3 or (hn and c.seed == 2) or (hn and c.seed == 1 and (c.lr, c.warmup_epochs) == (2e-4, 1))

    cache = FakeCache(planted, collapsed=collapsed)
    FakeExecutor().run(tuning.tuning_configs(prof, papers), cache)
    final = _train_to_fixed_point(prof, papers, cache)
    assert (6e-4, 1) in _vsepp_setting(final)  # 1/2 collapsed like the others but best on seed 0
    fams = tuning.families(prof, papers, cache, is_collapsed=fake_is_collapsed)
    hn = next(f for f in fams.values() if f.arm.name == "Triplet-HN")
    assert hn.chosen["other_seeds"] == "1/2 collapsed"
    checked = {(t["lr"], t["warmup_epochs"]): t.get("other_seeds") for t in hn.trials}
    assert checked[(2e-4, 1)] == "2/2 collapsed"


def test_the_health_check_trains_missing_seeds_on_the_spot_when_asked():
    prof = tuned_profile(seeds=(0, 1, 2))
    cache = FakeCache(planted, collapsed=lambda c: c.lr == 2e-3 or (c.seed == 2 and c.loss == "vlc" and c.lr == 2e-4))
    FakeExecutor().run(tuning.tuning_configs(prof, ["unified"]), cache)
    n = len(cache.trained)
    fams = tuning.families(prof, ["unified"], cache, train_missing=True, is_collapsed=fake_is_collapsed)
    vlc = next(f for f in fams.values() if f.arm.overrides["loss"] == "vlc")
    assert (vlc.chosen["lr"], vlc.chosen["other_seeds"]) == (6e-4, "0/2 collapsed")
    assert len(cache.trained) > n and all(c.seed in (1, 2) for c in cache.trained[n:])


def test_a_notebook_trains_no_seed_of_a_setting_one_collapse_has_decided():
    """A study's notebook (``train_missing``) chose as the driver does but trained the seeds the driver had left
    out of a setting that had already collapsed on one, inside a view, only to count them: it trains none."""
    prof = tuned_profile(seeds=(0, 1, 2, 3))
    papers = ["unified"]
    cache = FakeCache(
        planted, collapsed=lambda c: c.lr == 2e-3 or (c.seed == 1 and (c.lr, c.warmup_epochs) == (6e-4, 1))
    )
    FakeExecutor().run(tuning.tuning_configs(prof, papers), cache)
    hn_arm = next(a for a in tuning.main_arms(prof, "unified") if a.name == "Triplet-HN")
    FakeExecutor().run([hn_arm.config(prof, 1, lr=6e-4, warmup_epochs=1)], cache)  # the driver's first seed back
    n = len(cache.trained)

    for train_missing in (True, False):
        fams = tuning.families(prof, papers, cache, train_missing=train_missing, is_collapsed=fake_is_collapsed)
        hn = next(f for f in fams.values() if f.arm.name == "Triplet-HN")
        assert (hn.chosen["lr"], hn.chosen["warmup_epochs"]) == (2e-4, 0)
        checked = {(t["lr"], t["warmup_epochs"]): t.get("other_seeds") for t in hn.trials}
        assert checked[(6e-4, 1)] == "1/1 collapsed (not all trained)"
    trained = {(c.lr, c.warmup_epochs, c.seed) for c in cache.trained[n:] if c.loss == "triplet" and not c.loss_params}
    assert trained == {(2e-4, 0, 1), (2e-4, 0, 2), (2e-4, 0, 3)}  # the chosen setting's seeds, checked
    assert hn.chosen["other_seeds"] == "0/3 collapsed" and "collapsed_other_seeds" not in hn.chosen


def test_health_sentences_say_in_words_what_the_tuning_table_shows():
    rows = [
        # all collapsed on seed 0
        ("A", 2e-4, 0, True, "", True),
        ("A", 2e-3, 0, True, "", False),
        # every healthy setting collapses on another seed: keeps the fewest
        ("B", 2e-4, 0, True, "", False),
        ("B", 6e-4, 0, False, "1/2 collapsed", True),
        ("B", 2e-3, 0, False, "2/2 collapsed", False),
        # moved by the check
        ("C", 6e-4, 1, False, "2/2 collapsed", False),
        ("C", 2e-4, 1, False, "0/2 collapsed", True),
        # plain
        ("D", 2e-3, 0, False, "0/2 collapsed", True),
    ]
    t = pd.DataFrame(rows, columns=["arm", "lr", "warmup_epochs", "collapsed", "other_seeds", "chosen"])
    words = tuning_tables.health_sentences(t)
    assert len(words) == 3
    assert words[0].startswith("**A**: every setting of the grid is collapsed on seed 0 (2 of 2)")
    assert "**B**" in words[1] and "lr 0.0006: 1/2 collapsed; lr 0.002: 2/2 collapsed" in words[1]
    assert "keeps lr 0.0006" in words[1]
    assert "**C**" in words[2] and "rejected lr 0.0006, 1 warm-up epoch (2/2 collapsed)" in words[2]
    assert "lr 0.0002, 1 warm-up epoch is healthy on every seed" in words[2]


def test_a_narrow_cone_is_shown_beside_the_choice_and_never_removes_a_setting():
    """The Flickr8k case that motivated the retrieval-only rule: a GRU-64 VSE++ at 27x chance with a
    hardest-negative cosine of 0.999 was marked collapsed and lost to a setting at 7x chance."""
    from coherent_itr import health as h

    def rec(lr, rsum, hardneg):
        row = {
            "epoch": 3,
            "val_rsum": rsum,
            "val_rsum_chance": 3.2,
            "val_pos_sim": hardneg - 0.0005,
            "val_hardneg_sim": hardneg,
        }
        return Traced(
            config={"loss": "triplet", "lr": lr, "warmup_epochs": 1},
            history=[row],
            best_epoch=3,
            epochs_run=3,
            health=h.epoch_health(row),
            test=Poison(),
            timing=Poison(),
        )

    narrow, wide = tuning.trial_from_record(rec(2e-3, 87.3, 0.999)), tuning.trial_from_record(rec(2e-4, 23.4, 0.4))
    assert narrow["narrow_cone"] is True and narrow["collapsed"] is False and narrow["hardneg_cos"] == 0.999
    assert wide["narrow_cone"] is False and tuning.select([narrow, wide]) is narrow
