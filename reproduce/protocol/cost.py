"""The cost model of a run: its expected worker-seconds from the per-run costs measured on the study's machine.

:func:`run_estimate_s` is :func:`reproduce.spec.profiles.run_seconds` (``COSTS``) scaled to the run's model and data
size — its training and validation by the step's FLOP (:func:`step_flop`, the arithmetic of
``benchmarks/bench_run_profile.py``) relative to the model the costs were measured with, and by the number of
training / validation / test images relative to the measured world; unchanged for the ``default`` profile.
:func:`prepare_estimate_s` prices the data preparation. The plan (:mod:`reproduce.protocol.plan`) adds them up.
"""

from __future__ import annotations

from coherent_itr.data.synthetic import SCALES

from reproduce.protocol.prepare import train_rows
from reproduce.spec.profiles import COSTS, COSTS_MODEL, expected_epochs, run_seconds

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
