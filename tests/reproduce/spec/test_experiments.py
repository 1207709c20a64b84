"""The study's arms and profiles against the papers' statements."""

from __future__ import annotations

import dataclasses
import math

import pytest

from coherent_itr import config as config_mod
from reproduce.spec import experiments, profiles
from reproduce.protocol import plan, tuning
from reproduce.spec.profiles import get_profile
from reproduce.protocol.study import profile_for


def both(profile="default"):
    return [profile_for(profile, d) for d in ("synthetic", "flickr8k")]


def names(paper, prof, group):
    return [a.name for a in experiments.arms(paper, prof) if a.group == group]


def test_thinned_sweep_keeps_ends_default_and_at_least_four_points():
    prof = get_profile("default")
    assert prof.thin_sweeps and prof.min_sweep_points == 4
    assert prof.thin((0.0, 0.1, 0.2, 0.3, 0.4), keep=(0.2,)) == [0.0, 0.1, 0.2, 0.4]
    assert prof.thin((20.0, 40.0, 60.0, 80.0, 100.0), keep=(60.0,)) == [20.0, 40.0, 60.0, 100.0]
    assert prof.thin((1e-1, 1e-2, 1e-3, 1e-4), keep=(1e-2,)) == [1e-1, 1e-2, 1e-3, 1e-4]
    eight = ((1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (2, 3), (2, 4), (2, 5))
    kept = prof.thin(eight, keep=((2, 2), (2, 4)))
    assert kept == [(1, 1), (2, 2), (2, 4), (2, 5)]
    assert prof.thin((3.0, 5.0, 10.0), keep=(3.0,), min_points=2) == [3.0, 10.0]
    assert prof.thin((1, 2)) == [1, 2]
    assert dataclasses.replace(prof, thin_sweeps=False).thin(range(8)) == list(range(8))
    # spread: 10 values, ends + default at index 2 → the next points fill the largest gaps
    assert dataclasses.replace(prof, min_sweep_points=5).thin(range(10), keep=(2,)) == [0, 2, 5, 7, 9]


@pytest.mark.parametrize("prof", both(), ids=["synthetic", "flickr8k"])
def test_trend_and_peak_claims_get_four_points_and_at_least_three_seeds(prof):
    """B5, B6, U5, N4 rest on ≥ 4 sweep points; L2 (β₂) and L3 (L) have the papers' 3 values; ≥ 3 seeds each,
    5 for every arm of a primary contrast and every main arm."""
    from reproduce.spec.claims import primary_arm_names

    assert len(names("bcls", prof, "alpha")) >= 4  # B5
    assert len([n for n in names("bcls", prof, "beta") if n.startswith("β=")]) >= 4  # B6
    assert len([n for n in names("unified", prof, "gamma") if "∞" not in n]) >= 4  # U5
    assert len(names("listwise", prof, "tau")) >= 4  # N4
    assert len(names("ladder", prof, "beta2")) == 6  # L2: {0, .25, .5} × 2
    assert names("ladder", prof, "levels") == ["L=1", "L=2", "L=3"]  # L3
    for paper, group in [
        ("bcls", "alpha"),
        ("bcls", "beta"),
        ("unified", "gamma"),
        ("listwise", "tau"),
        ("ladder", "beta2"),
        ("ladder", "levels"),
    ]:
        for arm in experiments.arms(paper, prof):
            if arm.group == group:
                want = profiles.PRIMARY_SEEDS if arm.name in primary_arm_names(paper) else (0, 1, 2)
                assert arm.pilot_seeds(prof) == want, (paper, arm.name)
    for arm in experiments.arms("overview", prof):
        assert arm.pilot_seeds(prof) == profiles.PRIMARY_SEEDS


def test_seed_0_only_for_sweeps_no_primary_row_rests_on_and_5_seeds_for_primary_arms():
    from reproduce.spec.claim_data import primary_arm_groups
    from reproduce.spec.claims import primary_arm_names

    syn, f8k = both()
    for paper in experiments.PAPERS:
        groups = primary_arm_groups(paper)
        primary = primary_arm_names(paper) | {a.name for a in experiments.arms(paper, syn) if a.group in groups}
        for arm in experiments.arms(paper, f8k):
            # an arm of a primary contrast always gets every seed, whatever its group's cost rule
            sweep = arm.group in experiments.SWEEP_GROUPS
            full = profiles.PRIMARY_SEEDS if (arm.name in primary or not sweep) else (0, 1, 2)
            cheap = arm.seed_group in profiles.FLICKR8K_SEED0_GROUPS and arm.name not in primary
            assert arm.pilot_seeds(f8k) == ((0,) if cheap else full), arm.name
            cheap = arm.seed_group in profiles.SYNTHETIC_SEED0_GROUPS and arm.name not in primary
            assert arm.pilot_seeds(syn) == ((0,) if cheap else full), arm.name
        assert not any(a.group in profiles.FLICKR8K_SKIP_GROUPS for a in experiments.arms(paper, f8k))
    reduced = [a for a in experiments.arms("sam", f8k) if a.overrides.get("train_fraction", 1) < 1]
    s1 = {"10% data, + SAM", "10% data, Triplet-HN"}  # S1's primary contrast
    assert reduced and all(a.pilot_seeds(f8k) == (profiles.PRIMARY_SEEDS if a.name in s1 else (0,)) for a in reduced)
    full = [a for a in experiments.arms("sam", f8k) if a.group == "fraction" and a not in reduced]
    assert len(full) == 3 and all(a.pilot_seeds(f8k) == profiles.PRIMARY_SEEDS for a in full)
    # S3's primary (SN vs HN over the τ × keep-triplet cells) rests on SAM's grid: every cell, every seed
    for prof in (syn, f8k):
        grid = [a for a in experiments.arms("sam", prof) if a.group == "grid"]
        assert len(grid) == 12 and all(a.pilot_seeds(prof) == profiles.PRIMARY_SEEDS for a in grid)
    assert not any(primary_arm_groups(p) & profiles.FLICKR8K_SEED0_GROUPS for p in experiments.PAPERS)


@pytest.mark.parametrize("prof", both(), ids=["synthetic", "flickr8k"])
def test_s1_reduced_data_trains_as_many_updates_as_the_full_data_arm(prof):
    e, p = prof.model["epochs"], prof.model["early_stop_patience"]
    for arm in experiments.arms("sam", prof):
        frac = arm.overrides.get("train_fraction", 1.0)
        for c in arm.configs(prof):
            if frac == 1.0:
                assert c.epochs == e
                continue
            want = min(math.ceil(e / frac - 1e-9), prof.reduced_data_epoch_cap)
            assert c.epochs == want
            if want < prof.reduced_data_epoch_cap:
                assert c.epochs * frac == pytest.approx(e, rel=0.05)  # same number of updates (±rounding)
            if hasattr(c, "early_stop_patience"):
                assert c.early_stop_patience == math.ceil(p / frac - 1e-9)


@pytest.mark.parametrize("prof", both(), ids=["synthetic", "flickr8k"])
def test_s1_reduced_data_keeps_the_full_data_schedule_in_updates(prof):
    """Warm-up and lr decay are counted in epochs: a fraction f stretches both by 1/f, so the 10 % arm
    leaves its warm-up and decays its lr after as many updates as the full-data arm (it used to decay
    its lr 10× every 3 of its 30 epochs)."""
    d = prof.model["lr_decay_epoch"]
    seen = set()
    for arm in experiments.arms("sam", prof):
        frac = arm.overrides.get("train_fraction", 1.0)
        for c in arm.configs(prof, lr=2e-4, warmup_epochs=1):
            want_w = 1 if frac == 1.0 else math.ceil(1 / frac - 1e-9)
            assert c.warmup_epochs == want_w and c.lr_decay_epoch == (d if frac == 1.0 else math.ceil(d / frac - 1e-9))
            assert c.warmup_epochs * frac == pytest.approx(1.0, rel=0.05)
            assert min(c.lr_decay_epoch, c.epochs) * frac >= min(d, prof.model["epochs"]) - 1e-9  # no early decay
            seen.add(frac)
    assert seen == {0.1, 0.25, 1.0}
    with pytest.raises(ValueError, match="fraction"):
        profiles.schedule_for_fraction(1.5, 1, 3)
    assert profiles.schedule_for_fraction(0.1, 0, 3) == {"warmup_epochs": 0, "lr_decay_epoch": 30}


def test_a_profile_wide_data_subset_is_not_an_s1_arm():
    # smoke on Flickr8k trains every arm on 10% of the images (a code-path check): no ×10 epochs there
    prof = profile_for("smoke", "flickr8k")
    assert prof.model["train_fraction"] == 0.1
    vsepp = experiments.arms("overview", prof)[0].configs(prof)[0]
    assert vsepp.epochs == prof.model["epochs"] and vsepp.train_fraction == 0.1


def test_epochs_for_fraction_caps_and_validates():
    base = get_profile("default")
    model = {**base.model, "epochs": 3, "early_stop_patience": 1}
    prof = dataclasses.replace(base, reduced_data_epoch_cap=30, model=model)
    assert profiles.epochs_for_fraction(prof, 0.1) == (30, 10)
    assert profiles.epochs_for_fraction(prof, 0.25) == (12, 4)  # E = 3: ⌈3 / 0.25⌉
    assert profiles.epochs_for_fraction(prof, 1.0) == (3, 1)
    with pytest.raises(ValueError, match="fraction"):
        profiles.epochs_for_fraction(prof, 0.0)


@pytest.mark.parametrize("prof", both(), ids=["synthetic", "flickr8k"])
def test_vsepp_with_and_without_warmup_on_both_data_sets(prof):
    arms = [a for a in experiments.arms("overview", prof) if a.group == "warmup"]
    assert {a.overrides["warmup_epochs"] for a in arms} == {0, 1}
    assert all(a.overrides["loss"] == "triplet" and a.family == "VSE++ (Triplet-HN)" for a in arms)
    # the arm's own warm-up wins over the tuned one; the tuned lr is taken
    cfgs = [c for a in arms for c in a.configs(prof, lr=6e-4, warmup_epochs=1)]
    assert {(c.lr, c.warmup_epochs) for c in cfgs} == {(6e-4, 0), (6e-4, 1)}


@pytest.mark.parametrize("prof", both(), ids=["synthetic", "flickr8k"])
def test_sam_s1_to_s3_on_both_variants(prof):
    arms = experiments.arms("sam", prof)
    for loss in ("sam", "sam_authors"):
        fr = {
            a.overrides.get("train_fraction", 1.0)
            for a in arms
            if a.group == "fraction" and a.overrides["loss"] == loss
        }
        assert fr == {0.1, 0.25, 1.0}  # S1, S2
        grid = [a for a in arms if a.overrides["loss"] == loss and a.group.startswith("grid")]
        if prof.data == "flickr8k" and loss == "sam_authors":  # cost: the authors' grid runs on synthetic only
            assert not grid and "grid_authors" in prof.skip_groups
            continue
        assert {(a.overrides["loss_params"]["sampling"], a.overrides["loss_params"]["keep_triplet"]) for a in grid} == {
            (s, k) for s in ("RS", "HN", "SN") for k in (True, False)
        }  # S3
        assert {a.overrides["loss_params"]["tau"] for a in grid} == {3.0, 10.0}


def test_calibrated_ladder_arms_at_the_profiles_theta_beside_the_literal_one():
    prof = dataclasses.replace(get_profile("default"), ladder_theta=(0.51, 0.45))
    arms = {a.name: a for a in experiments.arms("ladder", prof)}
    main = arms["Ladder (manual, θ=0.510 calibrated)"]
    assert main.group == "table1" and main.overrides["loss_params"]["thresholds"] == [0.51]
    assert "Ladder (manual)" in arms  # literal θ = 0.40 kept
    assert arms["L=3 (θ calibrated)"].overrides["loss_params"]["thresholds"] == [0.51, 0.45]
    assert {a.overrides["loss_params"]["beta"][1] for a in arms.values() if a.group == "theta_cal_beta2"} == {0.0, 0.5}
    assert not [a for a in experiments.arms("ladder", get_profile("smoke")) if "calibrated" in a.name]


def test_default_profiles_have_calibrated_theta_where_it_differs_from_the_literal_one():
    syn, f8k = both()
    for t in profiles.LADDER_THETA_MEASURED.values():
        assert 0 < t[1] < t[0] < 1
    assert syn.ladder_theta == profiles.LADDER_THETA_MEASURED["synthetic"]
    # Flickr8k: the literal (0.40, 0.35) is within 0.02 of the calibrated θs → the literal arms are the calibrated
    assert f8k.ladder_theta is None
    assert all(abs(a - b) <= 0.02 for a, b in zip(profiles.LADDER_THETA_MEASURED["flickr8k"], (0.40, 0.35)))


def test_profiles_state_the_protocol():
    d = get_profile("default")
    assert d.tuning.lr == (2e-4, 6e-4, 2e-3, 6e-3) and d.tuning.warmup_epochs == (0, 1) and d.tuning.seed == 0
    assert d.model["early_stop_patience"] >= 1 and d.model["epochs"] >= 3
    smoke = get_profile("smoke")
    assert len(smoke.tuning.settings(True)) == 1  # a one-point grid: the code path, fast
    with pytest.raises(ValueError, match="lr"):
        profiles.TuningGrid(lr=(0.0,))
    with pytest.raises(ValueError, match="repeated"):
        profiles.TuningGrid(lr=(1e-3, 1e-3))


def test_estimate_cost_counts_distinct_tuning_and_final_runs():
    for data in ("synthetic", "flickr8k"):
        prof = profile_for("default", data)
        est = plan.estimate_cost("default", data)
        tune = {c.key() for c in [*tuning.tuning_configs(prof), *tuning.survivor_stand_ins(prof)]}
        final = {c.key() for c in experiments.plan(prof)}
        assert est["tuning_runs"] == len(tune) and est["runs"] == len(tune | final)
        assert est["total_min"] > est["train_wall_min"] > 0
        one = plan.estimate_cost("default", data, workers=1)
        assert one["train_wall_min"] == pytest.approx(2 * est["train_wall_min"])
    with pytest.raises(ValueError, match="data"):
        plan.estimate_cost("default", "coco")


def test_run_seconds_model():
    c = config_mod.Config(data="toy", epochs=4)
    k = profiles.COSTS["synthetic"]
    full = profiles.run_seconds(c, "synthetic", speedup=1.0)
    assert full == pytest.approx(k["fixed_s"] + k["eval_s"] + 4 * k["epoch_s"])
    assert profiles.run_seconds(c, "synthetic", evaluated=False) == pytest.approx(full - k["eval_s"])
    tenth = profiles.run_seconds(c.replace(train_fraction=0.1, epochs=40), "synthetic", speedup=1.0)
    assert tenth == pytest.approx(k["fixed_s"] + k["eval_s"] + 40 * (k["val_s"] + 0.1 * (k["epoch_s"] - k["val_s"])))


def test_every_planned_config_is_valid_and_main_arms_are_tuned():
    for prof in both():
        tune = tuning.tuning_configs(prof)
        mains = {tuning.tuning_key(a, prof) for p in experiments.PAPERS for a in tuning.main_arms(prof, p)}
        assert len(tune) == sum(
            len(tuning.grid(a, prof))
            for a in {
                tuning.tuning_key(a, prof): a for p in experiments.PAPERS for a in tuning.main_arms(prof, p)
            }.values()
        )
        # X1's 10 + Kendall alone, Triplet (mean), S-NDCG alone, SAM (authors' code) [+ calibrated ladder]
        assert len(mains) == 14 + bool(prof.ladder_theta)


def test_an_arms_own_fraction_applies_within_a_profiles_subset():
    """Smoke on Flickr8k trains on 10 % of the images; SAM's 25 % arm must not featurise more than that."""
    from reproduce.protocol.study import profile_for

    smoke = profile_for("smoke", "flickr8k")
    fracs = {a.name: a.configs(smoke)[0].train_fraction for a in experiments.arms("sam", smoke)}
    assert max(fracs.values()) == smoke.model["train_fraction"]
    assert {round(f, 6) for f in fracs.values()} >= {0.1, 0.025, 0.01}
    default = profile_for("default", "flickr8k")  # no profile subset: the arm's fraction as stated
    assert {a.configs(default)[0].train_fraction for a in experiments.arms("sam", default)} >= {1.0, 0.25, 0.1}
