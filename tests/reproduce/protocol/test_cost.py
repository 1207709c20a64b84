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


def _record(data, loss, epochs, train_s, val_s, total_s, device="cpu", engine=None, scale="default"):
    r = {
        "config": {"data": data, "loss": loss, "data_scale": scale},
        "history": [{"epoch": e + 1} for e in range(epochs)],
        "timing": {"train_s": train_s, "val_s": val_s, "total_s": total_s},
        "machine": {"device": device},
    }
    if engine:
        r["engine"] = {"step": engine}
    return r


def test_measured_costs_group_runs_by_data_loss_device_and_engine():
    records = [
        _record("flickr8k", "triplet", 10, 100.0, 5.0, 110.0),
        _record("flickr8k", "triplet", 5, 60.0, 5.0, 70.0),
        _record("flickr8k", "triplet", 4, 44.0, 2.0, 50.0),
        _record("flickr8k", "triplet", 8, 8.0, 0.8, 12.0, device="cuda", engine="cuda-graph"),
        _record("synthetic", "sam", 2, 1.0, 0.1, 1.5, scale="smoke"),
        {"config": {"data": "flickr8k", "loss": "vlc"}, "history": [], "timing": {}},  # no epoch: left out
    ]
    rows = cost.measured_costs(records)
    assert [(r["data"], r["loss"], r["device"], r["engine"], r["runs"]) for r in rows] == [
        ("flickr8k", "triplet", "cpu", "eager", 3),
        ("flickr8k", "triplet", "cuda", "cuda-graph", 1),
        ("synthetic (smoke)", "sam", "cpu", "eager", 1),
    ]
    cpu = rows[0]
    assert cpu["epochs_mean"] == pytest.approx(19 / 3)
    assert cpu["train_s_per_epoch"] == pytest.approx(11.0)  # median of 10, 12, 11
    assert cpu["val_s_per_epoch"] == pytest.approx(0.5)  # median of 0.5, 1.0, 0.5
    assert cpu["run_s"] == pytest.approx(70.0)
    table = cost.measured_table(rows).splitlines()
    assert table[0].startswith("| data | loss | device | engine | runs |") and len(table) == 2 + 3
    assert table[2] == "| flickr8k | triplet | cpu | eager | 3 | 6.3 | 11.00 | 0.50 | 70.0 |"


def test_measured_costs_of_a_folder_without_a_run_cache_say_what_was_expected(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        cost.main([str(tmp_path)])
    assert e.value.code == 2
    assert f"{tmp_path}/runs/train: no run cache there" in capsys.readouterr().err
    bad = tmp_path / "runs" / "train" / "0123"
    bad.mkdir(parents=True)
    (bad / "record.json").write_text("{not json")
    with pytest.raises(SystemExit):
        cost.main([str(tmp_path)])
    assert f"{bad}/record.json: not a run record" in capsys.readouterr().err
