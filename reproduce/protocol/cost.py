"""The cost model of a run: its expected worker-seconds from the per-run costs measured on the study's machine.

:func:`run_estimate_s` is :func:`reproduce.spec.profiles.run_seconds` (``COSTS``) scaled to the run's model and data
size — its training and validation by the step's FLOP (:func:`step_flop`, the arithmetic of
``benchmarks/bench_run_profile.py``) relative to the model the costs were measured with, and by the number of
training / validation / test images relative to the measured world; unchanged for the ``default`` profile.
:func:`prepare_estimate_s` prices the data preparation. The plan (:mod:`reproduce.protocol.plan`) adds them up.

:func:`measured_costs` reads what finished runs cost where they trained (``python -m reproduce.protocol.cost CACHE``):
per data set, loss, device and step engine, the epochs and the seconds an epoch — the numbers a device's cost
table is fitted from (``scripts/gpu_study.sh`` writes them into its report).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

from coherent_itr.data.synthetic import SCALES

from reproduce.protocol.prepare import train_rows
from reproduce.spec.profiles import COSTS, COSTS_MODEL, GPU_COSTS, PACKED_COSTS, expected_epochs, run_seconds
from reproduce.spec.tables import md_cell

FEATURE_DIM = 1280  # EfficientNet-Lite0 / synthetic image features
# what ``COSTS`` were measured with: the default profile's model on the default synthetic world and Flickr8k
REFERENCE_MODEL = dict(COSTS_MODEL)
REFERENCE_SIZES = {"synthetic": (3000, 500, 1000), "flickr8k": (6000, 1000, 1000)}  # train, dev, test images
# mean tokens per caption (Σ tokens per batch of 128 / 128: results/benchmarks/run_profile*.md)
TOKENS_PER_CAPTION = {"synthetic": 1603 / 128, "flickr8k": 1768 / 128}
# Flickr8k preparation (``COSTS["flickr8k"]["prepare_s"]``): ≈ 560 s of it featurised all 7,999 photos
FEATURE_S_PER_IMAGE = 560.0 / 7999


def step_flop(
    batch_size: int, embed_dim: int, word_dim: int, text_hidden: int, tokens_per_caption: float, feat_dim=FEATURE_DIM
) -> float:
    """FLOP of one training step (``benchmarks/bench_run_profile.py``): multiply-add = 2 FLOP; GRU forward
    6·H·(W + H) per token, image projection 2·F·D per image, similarities 2·B²·D, text projection 2·H·D
    per caption when H ≠ D; a step ≈ 3 × its forward."""
    b, d, w, h = batch_size, embed_dim, word_dim, text_hidden
    fwd = (
        6 * h * (w + h) * tokens_per_caption * b
        + 2 * feat_dim * d * b
        + 2 * b * b * d
        + (2 * h * d * b if h != d else 0)
    )
    return 3.0 * fwd


def _flop_per_caption(model: dict, data: str) -> float:
    keys = ("batch_size", "embed_dim", "word_dim", "text_hidden")
    return step_flop(*(model[k] for k in keys), TOKENS_PER_CAPTION[data]) / model["batch_size"]


def _sizes(config, data: str) -> tuple[int, int, int]:
    if data == "synthetic":
        return SCALES.get(config.data_scale, REFERENCE_SIZES["synthetic"])
    return REFERENCE_SIZES[data]


def run_estimate_s(config, data: str, evaluated: bool = True, trained: bool = False) -> float:
    """Expected seconds of one run on one worker: :func:`reproduce.spec.profiles.run_seconds` with its training
    and validation scaled by the FLOP per caption relative to :data:`REFERENCE_MODEL` and by the data
    size relative to the measured world, its test evaluation by (test images)² (a images × captions
    matrix). Equals ``run_seconds`` for the default profile's model and data. ``trained``: the run is
    trained already (a chosen tuning run): its fixed part and evaluation only."""
    c = COSTS[data]
    model = {k: getattr(config, k) for k in REFERENCE_MODEL}
    flop = _flop_per_caption(model, data) / _flop_per_caption(REFERENCE_MODEL, data)
    (n_tr, n_dev, n_te), (r_tr, r_dev, r_te) = _sizes(config, data), REFERENCE_SIZES[data]
    epochs = expected_epochs(config, data)
    base = run_seconds(config, data, evaluated=False) - c["fixed_s"]  # epochs × (validation + training)
    per_epoch = base / epochs
    val = c["val_s"]
    train = per_epoch - val
    epoch_s = val * flop * n_dev / r_dev + train * flop * n_tr / r_tr
    eval_s = c["eval_s"] * (n_te / r_te) ** 2 if evaluated else 0.0
    return c["fixed_s"] + eval_s + (0.0 if trained else epochs * epoch_s)


def gpu_run_estimate_s(config, data: str, evaluated: bool = True, trained: bool = False) -> float:
    """Expected seconds of one run on one worker of a GPU shared as :data:`reproduce.spec.profiles.GPU_COSTS` was
    measured: its fixed part, its test evaluation when ``evaluated`` (the CPU's price), and unless ``trained``
    :func:`~reproduce.spec.profiles.expected_epochs` epochs of the loss's measured training (the slowest loss's
    for one not measured) scaled by the data set's steps, plus validation."""
    return _device_run_s(GPU_COSTS, config, data, evaluated, trained)


def packed_run_estimate_s(config, data: str, evaluated: bool = True, trained: bool = False) -> float:
    """Expected seconds of one run as a member of a pack on a GPU: from
    :data:`reproduce.spec.profiles.PACKED_COSTS` as :func:`gpu_run_estimate_s` prices from ``GPU_COSTS``, or, while
    no packed run has been measured (``PACKED_COSTS`` is None), the solo run's price (:func:`packed_priced_as_solo`)."""
    if packed_priced_as_solo():
        return gpu_run_estimate_s(config, data, evaluated, trained)
    return _device_run_s(PACKED_COSTS, config, data, evaluated, trained)


def packed_priced_as_solo() -> bool:
    """Whether packed runs are priced as solo runs: no packed measurement yet (``PACKED_COSTS`` is None)."""
    return PACKED_COSTS is None


def _device_run_s(g: dict, config, data: str, evaluated: bool, trained: bool) -> float:
    steps = COSTS[data]["steps"] / g["steps"]
    train = g["epoch_s"].get(config.loss, max(g["epoch_s"].values())) * steps * config.train_fraction
    eval_s = COSTS[data]["eval_s"] if evaluated else 0.0
    return g["fixed_s"] + eval_s + (0.0 if trained else expected_epochs(config, data) * (train + g["val_s"]))


def prepare_estimate_s(data: str, configs: list) -> float:
    """Seconds of data preparation: the measured ``prepare_s`` with Flickr8k's feature part priced per image
    the runs use (every training image if one run uses them all, else their subsets), dev and test included."""
    c = COSTS[data]
    if data != "flickr8k" or not configs:
        return c["prepare_s"] if configs else 0.0
    n_tr, n_dev, n_te = REFERENCE_SIZES["flickr8k"]

    rows: set[int] = set()
    for cfg in configs:
        rows.update(train_rows(cfg, n_tr).tolist())
    return c["prepare_s"] - FEATURE_S_PER_IMAGE * (n_tr - len(rows))  # the training images left out


def minutes(s: float) -> str:
    """Seconds in words: "42 s", "3.5 min", "2.1 h"."""
    if s < 60:
        return f"{s:.0f} s"
    return f"{s / 60:.1f} min" if s < 3600 else f"{s / 3600:.1f} h"


def _engine(record: dict) -> str:
    engine = record.get("engine") or {}
    return str(engine.get("step", "eager")) if isinstance(engine, dict) else str(engine)


def measured_costs(records) -> list[dict]:
    """What the runs of ``records`` (``record.json`` dicts of finished runs) cost, grouped by data set, loss, device
    and step engine: how many runs, their mean epochs, and the medians of the training and validation seconds an
    epoch and of a run's seconds (training, validation and test encoding: ``timing["total_s"]``). Sorted by data
    set, then most seconds first. Seconds are the wall time of each run, beside whatever else shared the machine
    (the number of workers is not in a record: say it beside the table)."""
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        c, t = r.get("config", {}), r.get("timing", {})
        epochs = len(r.get("history", []))
        if not epochs or "train_s" not in t:
            continue
        device = (r.get("machine") or {}).get("device", "?")
        data = c.get("data", "?")
        if data == "synthetic":  # the generated world's size
            data = f"synthetic ({c.get('data_scale', '?')})"
        groups.setdefault((data, c.get("loss", "?"), device, _engine(r)), []).append(
            {
                "epochs": epochs,
                "train": t["train_s"] / epochs,
                "val": t.get("val_s", 0.0) / epochs,
                "total": t["total_s"],
            }
        )
    rows = [
        {
            "data": data,
            "loss": loss,
            "device": device,
            "engine": engine,
            "runs": len(g),
            "epochs_mean": statistics.fmean(x["epochs"] for x in g),
            "train_s_per_epoch": statistics.median(x["train"] for x in g),
            "val_s_per_epoch": statistics.median(x["val"] for x in g),
            "run_s": statistics.median(x["total"] for x in g),
        }
        for (data, loss, device, engine), g in groups.items()
    ]
    return sorted(rows, key=lambda row: (row["data"], -row["run_s"] * row["runs"], row["loss"]))


def cache_records(root) -> list[dict]:
    """The ``record.json`` of every trained run in the run cache at ``root`` (its folder, as ``COHERENT_ITR_CACHE``)."""
    folder = Path(root) / "runs" / "train"
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: no run cache there (expected COHERENT_ITR_CACHE's folder, with runs/train/)"
        )
    out = []
    for f in sorted(folder.glob("*/record.json")):
        try:
            out.append(json.loads(f.read_text()))
        except ValueError as exc:
            raise ValueError(f"{f}: not a run record ({exc})") from None
    return out


def measured_table(rows: list[dict]) -> str:
    """:func:`measured_costs` as a markdown table (seconds to 2 decimals)."""
    head = "| data | loss | device | engine | runs | epochs (mean) | train s / epoch | validation s / epoch | run s |"
    lines = [head, "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        cells = [r["data"], r["loss"], r["device"], r["engine"], r["runs"], f"{r['epochs_mean']:.1f}"]
        cells += [f"{r['train_s_per_epoch']:.2f}", f"{r['val_s_per_epoch']:.2f}", f"{r['run_s']:.1f}"]
        lines.append("| " + " | ".join(md_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """``python -m reproduce.protocol.cost CACHE``: the measured costs of the runs in the run cache at CACHE."""
    ap = argparse.ArgumentParser(prog="python -m reproduce.protocol.cost", description=main.__doc__)
    ap.add_argument("cache", help="the run cache's folder (as COHERENT_ITR_CACHE)")
    a = ap.parse_args(argv)
    try:
        rows = measured_costs(cache_records(a.cache))
    except (FileNotFoundError, ValueError) as exc:
        ap.exit(2, f"{ap.prog}: {exc}\n")
    print(measured_table(rows) if rows else f"{ap.prog}: no finished run in {a.cache}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
