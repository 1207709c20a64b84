"""The cost model of a run (``reproduce.protocol.cost``): the measured costs for the measured model, scaled by the
step's FLOP and the data size otherwise; the preparation priced by the images the runs use."""

from __future__ import annotations

import dataclasses

import pytest

from coherent_itr.config import Config
from reproduce.protocol import cost
from reproduce.spec import experiments
from reproduce.spec.profiles import COSTS, COSTS_MODEL, get_profile, run_seconds


def test_run_estimate_is_run_seconds_for_the_measured_model_and_smaller_for_smoke():
    default = get_profile("default")
    for data in ("synthetic", "flickr8k"):
        prof = dataclasses.replace(default, data=data) if data == "synthetic" else default
        c = experiments.arms("bcls", prof)[0].config(prof, 0)
        c = c.replace(data=data, **COSTS_MODEL)  # the model the costs were measured with: no scaling
        assert cost.run_estimate_s(c, data) == pytest.approx(run_seconds(c, data))
        assert cost.run_estimate_s(c, data, evaluated=False) == pytest.approx(run_seconds(c, data, evaluated=False))
        assert cost.run_estimate_s(c, data, trained=True) == pytest.approx(
            COSTS[data]["fixed_s"] + COSTS[data]["eval_s"]
        )
    smoke = get_profile("smoke")
    s = experiments.arms("bcls", smoke)[0].config(smoke, 0)
    d = experiments.arms("bcls", default)[0].config(default, 0)
    assert cost.run_estimate_s(s, "synthetic") < cost.run_estimate_s(d, "synthetic") / 3


def test_step_flop_is_the_benchmark_arithmetic():
    """The default model's Flickr8k step (batch 128, GRU-64 over 64-d words into 128-d, Σ tokens 1768): the
    0.41 GFLOP that results/benchmarks/run_profile_flickr8k.md records; written out from its terms."""
    b, f, d, w, h, tokens = 128, 1280, 128, 64, 64, 1768
    hand = 3 * (6 * h * (w + h) * tokens + 2 * f * d * b + 2 * b * b * d + 2 * h * d * b)
    assert cost.step_flop(b, d, w, h, tokens / b) == pytest.approx(hand)
    assert round(hand / 1e9, 2) == 0.41


def test_flickr8k_preparation_is_priced_by_the_images_the_runs_use():
    sub = [Config(data="flickr8k", train_fraction=0.1, seed=0)]
    whole = [Config(data="flickr8k")]
    assert cost.prepare_estimate_s("flickr8k", whole) == pytest.approx(COSTS["flickr8k"]["prepare_s"])
    saved = cost.FEATURE_S_PER_IMAGE * (6000 - 600)
    assert cost.prepare_estimate_s("flickr8k", sub) == pytest.approx(COSTS["flickr8k"]["prepare_s"] - saved)
    assert cost.prepare_estimate_s("synthetic", []) == 0.0
