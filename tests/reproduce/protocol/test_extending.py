"""Extending the study from outside the package (README "Extending the study"): a toy loss, a toy
metric and an arm, registered from user code, flow through the plan, the tuner, the run cache and
``Study.results``; unregistering restores the package's plan, registry and keys.

The toy loss is Triplet-SN scaled by 3; the toy metric is the mean similarity of the ground-truth
pairs. The run is the smoke profile cut to a few batches (seconds)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from coherent_itr import losses, metrics, runs
from coherent_itr.losses.triplet_sn import TripletSNLoss
from coherent_itr.runs import RunCache, identity
from reproduce.spec import experiments
from reproduce.spec.profiles import get_profile
from reproduce.protocol.study import Study

TOY_LOSS, TOY_METRIC, TOY_PAPER = "toy_scaled_sn", "toy_mean_gt_sim", "toy"


class ScaledTripletSN(TripletSNLoss):
    """Triplet-SN times ``scale``."""

    def __init__(self, scale: float = 3.0, **kw) -> None:
        super().__init__(**kw)
        self.scale = float(scale)

    def forward(self, sim, rel=None):
        return self.scale * super().forward(sim, rel)


def mean_gt_similarity(problem) -> dict[str, float]:
    """Mean similarity of every caption to its own image."""
    img = problem.image_of_caption
    return {"mean_gt_sim": float(problem.sim[img, np.arange(len(img))].mean())}


@pytest.fixture
def toy_loss():
    with losses.registered(TOY_LOSS, ScaledTripletSN):
        yield TOY_LOSS
    assert TOY_LOSS not in losses.available()


def tiny_smoke():
    """The smoke profile cut to a few batches of 64 on the smoke world (one seed, one epoch)."""
    smoke = get_profile("smoke")
    return dataclasses.replace(smoke, model={**smoke.model, "epochs": 1, "train_fraction": 0.3, "grad_diag_every": 0})


def test_toy_loss_metric_and_arm_flow_through_the_study(toy_loss, tmp_path):
    profile = tiny_smoke()
    plan_before = [c.key() for c in experiments.plan(profile)]
    arm = experiments.make_arm(TOY_PAPER, "main", "Triplet-SN ×3 (toy)", TOY_LOSS, {"scale": 3.0})
    with experiments.extra_arms(arm, main=True), metrics.registered(TOY_METRIC, "matrix", mean_gt_similarity):
        assert TOY_PAPER in experiments.PAPERS and experiments.is_main(arm)
        plan = [c.key() for c in experiments.plan(profile)]
        assert plan[: len(plan_before)] == plan_before and len(plan) == len(plan_before) + 1
        study = Study(profile, "synthetic", cache=RunCache(tmp_path / "cache"), progress=False)
        df = study.results(TOY_PAPER)
    assert len(df) == 1
    row = df.iloc[0]
    assert (row.paper, row.group, row.arm, row.loss) == (TOY_PAPER, "main", arm.name, TOY_LOSS)
    assert np.isfinite(row.mean_gt_sim) and -1.0 <= row.mean_gt_sim <= 1.0
    assert np.isfinite(row.rsum) and "cs100_i2t_sbert" in df.columns  # the package's metrics too
    assert row.lr == profile.tuning.lr[0] and row.run_key  # tuned (a one-point grid) and cached
    # unregistered: the package's plan, papers, main groups and metric registry are back
    assert TOY_PAPER not in experiments.PAPERS and TOY_PAPER not in experiments.MAIN_GROUPS
    assert [c.key() for c in experiments.plan(profile)] == plan_before
    assert TOY_METRIC not in metrics.available()
    with pytest.raises(ValueError, match="unknown paper 'toy'"):
        experiments.arms(TOY_PAPER, profile)


def test_an_outside_loss_enters_the_training_key(toy_loss):
    from coherent_itr.config import Config

    cfg = Config(loss=TOY_LOSS, data="toy", data_scale="smoke")
    files = identity._files_hash(tuple(runs.training_files(cfg)))
    assert runs.training_code_hash(cfg) != files  # the toy class's source is hashed too
    assert "losses/triplet_sn.py" in runs.training_files(cfg)  # and the package's base class file
    own = Config(loss="triplet_sn", data="toy", data_scale="smoke")
    assert runs.training_code_hash(own) == identity._files_hash(tuple(runs.training_files(own)))


def test_registered_arms_join_an_existing_paper_and_leave_it():
    profile = get_profile("smoke")
    before = [a.name for a in experiments.arms("unified", profile)]
    main_before = dict(experiments.MAIN_GROUPS)
    extra = experiments.make_arm("unified", "margin", "m=0.05 (user)", "unified", {"margin": 0.05, "gamma": 60.0})
    experiments.register_arm(extra)
    try:
        assert [a.name for a in experiments.arms("unified", profile)] == [*before, extra.name]
        with pytest.raises(ValueError, match="already registered"):
            experiments.register_arm(extra)
    finally:
        experiments.unregister_arm(extra)
    assert [a.name for a in experiments.arms("unified", profile)] == before
    assert experiments.MAIN_GROUPS == main_before
    clash = experiments.make_arm("unified", "table1", "Unified", "triplet")
    with experiments.extra_arms(clash), pytest.raises(ValueError, match="name of an arm of the package"):
        experiments.arms("unified", profile)
    assert experiments.MAIN_GROUPS == main_before and experiments.registered_arms("unified") == []
