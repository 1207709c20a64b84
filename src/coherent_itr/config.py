"""The one configuration object of a training run, validated on construction.

Defaults are the VSE++ settings every paper builds on (Faghri et al.; reference notes): Adam,
lr 2e-4, ×0.1 after 15 of 30 epochs, batch 128, gradient-norm clip 2.0, margin 0.2, GRU-1024
over 300-d word embeddings, vocabulary of training words with count ≥ 4, model selection by
best validation RSUM. A run is a pure function of its ``Config`` (and the library source), so
``Config.key()`` identifies it in the run cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from dataclasses import dataclass, field

from . import losses as _losses

DEVICES = ("auto", "cpu", "cuda")
SAMPLINGS = ("captions", "images")
# The smallest train_fraction accepted on construction: below it even the largest training set the
# library loads (COCO precomp, 113,287 images) keeps fewer than 2 images. Whether a fraction leaves
# a whole batch of a given data set is checked where its size is known (Config.check_train_size).
LARGEST_TRAIN_IMAGES = 113_287
MIN_TRAIN_FRACTION = 2 / LARGEST_TRAIN_IMAGES


def _is_int(v) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _is_real(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


@dataclass(frozen=True)
class Config:
    """Every setting of one training run; frozen and validated on construction.

    Args:
        data, data_scale, data_dir, data_seed, train_fraction: the data source and its size (see
            :func:`coherent_itr.data.load_splits`), and the random share of training images used.
        relevance, relevance_params: the pseudo-label provider a relevance-based loss trains on
            (:func:`coherent_itr.data.relevance_provider`); None for the others.
        embed_dim, word_dim, text_hidden, vocab_min_count: the VSE++ model.
        loss, loss_params: the loss, built by :func:`coherent_itr.losses.build`.
        epochs, batch_size, lr, lr_decay_epoch, lr_decay, grad_clip, sampling, seed, device,
            warmup_epochs, early_stop_patience, bf16: optimisation and selection (field comments).
        eval_fold_size, grad_diag_every, max_eval_captions: evaluation and logging.

    Raises:
        ValueError: a field outside its allowed values, naming the field, its value and what is allowed
            (a loss parameter of the wrong type also raises, through :func:`coherent_itr.losses.build`).

    Example::

        >>> from coherent_itr.config import Config
        >>> cfg = Config(data="toy", data_scale="smoke", loss="triplet", loss_params={"margin": 0.2})
        >>> cfg.key() == cfg.replace(loss_params={}).key()   # parameters at their defaults name the same run
        True
        >>> try:
        ...     Config(lr=2)
        ... except ValueError as err:
        ...     print(err)
        Config.lr=2 is invalid; expected a float in (0, 1)
    """

    # --- data -----------------------------------------------------------------------------
    data: str = "synthetic"  # "synthetic", "flickr8k", "precomp", "toy"
    data_scale: str = "default"  # size of the synthetic world ("smoke", "default", "paper")
    data_dir: str | None = None  # folder for flickr8k / precomp (else $FLICKR8K_DIR)
    data_seed: int = 0  # seed of the synthetic world (fixed across training seeds)
    train_fraction: float = 1.0  # random subset of training images (SAM Table 2: 0.1, 0.25)
    relevance: str | None = None  # pseudo-label provider for the loss (None: the loss needs none)
    relevance_params: dict = field(default_factory=dict)
    # --- model (VSE++) ----------------------------------------------------------------------
    embed_dim: int = 1024  # joint embedding size
    word_dim: int = 300
    text_hidden: int = 1024  # GRU hidden size (= embed_dim in VSE++; projected if different)
    vocab_min_count: int = 4  # words seen fewer times in *training* captions map to <unk>
    # --- loss -------------------------------------------------------------------------------
    loss: str = "triplet"  # any name in coherent_itr.losses.available()
    loss_params: dict = field(default_factory=dict)
    # --- optimisation -----------------------------------------------------------------------
    epochs: int = 30
    batch_size: int = 128
    lr: float = 2e-4
    lr_decay_epoch: int = 15  # multiply lr by lr_decay after this many epochs
    lr_decay: float = 0.1
    grad_clip: float = 2.0  # max gradient norm (0 disables)
    sampling: str = "captions"  # "captions": every caption once per epoch (VSE++);
    #                                    "images": every image once with a random caption
    seed: int = 0
    device: str = "auto"  # "auto" picks CUDA when present
    warmup_epochs: int = 0  # first epochs on ALL negatives (VSE∞ vse_mean_warmup_epochs) for every
    #                                    loss built on hardest negatives; 0 = none (the papers' recipes)
    early_stop_patience: int = 0  # stop when val RSUM has not improved for this many epochs (0 = off;
    #                                    ``epochs`` is then the cap)
    bf16: bool = False  # bfloat16 autocast of the encoders' training forward (loss in float32); only
    #                                    faster with AMX-BF16 or a GPU — ≈ 6.5× slower on an AVX2-only CPU
    #                                    (results/benchmarks/run_profile.md)
    # --- evaluation / logging ---------------------------------------------------------------
    eval_fold_size: int = 1000  # COCO-style 1K folds when the test set has ≥ 2 folds
    grad_diag_every: int = 0  # tangent-gradient diagnostics (Unified Eqs. 11–12, 17–18, Fig. 4) every
    #                                    k training steps into record["iterations"]; 0 = none
    max_eval_captions: int | None = None  # validation subset cap (None = whole dev split)

    def __post_init__(self) -> None:
        def bad(name, allowed):
            raise ValueError(f"Config.{name}={getattr(self, name)!r} is invalid; expected {allowed}")

        for name in (
            "epochs",
            "batch_size",
            "embed_dim",
            "word_dim",
            "text_hidden",
            "vocab_min_count",
            "eval_fold_size",
        ):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 1:
                bad(name, "a positive integer")
        if self.batch_size < 2:
            bad("batch_size", "an integer ≥ 2 (a batch needs negatives)")
        for name in ("warmup_epochs", "early_stop_patience", "grad_diag_every"):
            v = getattr(self, name)
            if not (_is_int(v) and v >= 0):
                bad(name, "an integer ≥ 0 (0 disables it)")
        if not isinstance(self.bf16, bool):
            bad("bf16", "True or False")
        if not (_is_int(self.lr_decay_epoch) and self.lr_decay_epoch >= 0):
            bad("lr_decay_epoch", "an integer ≥ 0 (a whole number of epochs)")
        if not (_is_real(self.lr) and 0 < self.lr < 1):
            bad("lr", "a float in (0, 1)")
        if not (_is_real(self.lr_decay) and 0 < self.lr_decay <= 1):
            bad("lr_decay", "a float in (0, 1]")
        if not (_is_real(self.grad_clip) and self.grad_clip >= 0):
            bad("grad_clip", "a finite float ≥ 0 (0 disables clipping)")
        if not (_is_real(self.train_fraction) and 0 < self.train_fraction <= 1):
            bad("train_fraction", "a float in (0, 1]")
        if self.train_fraction < MIN_TRAIN_FRACTION:
            bad(
                "train_fraction",
                f"at least {MIN_TRAIN_FRACTION:.2g} (below it even {LARGEST_TRAIN_IMAGES:,} "
                "training images leave fewer than 2)",
            )
        if not (_is_int(self.data_seed) and self.data_seed >= 0):
            bad("data_seed", "an integer ≥ 0")
        if self.device not in DEVICES:
            bad("device", f"one of {list(DEVICES)}")
        if self.sampling not in SAMPLINGS:
            bad("sampling", f"one of {list(SAMPLINGS)}")
        if not _is_int(self.seed) or self.seed < 0:
            bad("seed", "an integer ≥ 0")
        if self.max_eval_captions is not None and not (
            _is_int(self.max_eval_captions) and self.max_eval_captions >= 10
        ):
            bad("max_eval_captions", "None or an integer ≥ 10")
        if self.loss not in _losses.available():
            bad("loss", f"one of {_losses.available()}")
        for name in ("loss_params", "relevance_params"):
            if not isinstance(getattr(self, name), dict):
                bad(name, "a dict of keyword arguments")
        # raises ValueError naming bad params (the loss is built once per class and parameters)
        if _losses.registry.traits(self.loss, **self.loss_params).requires_relevance and self.relevance is None:
            raise ValueError(
                f"Config.loss={self.loss!r} needs a relevance provider: set Config.relevance "
                "(e.g. 'sbert', 'cider', 'true')"
            )

    def check_train_size(self, n_images: int, captions_per_image: int) -> None:
        """``ValueError`` naming the numbers unless ``train_fraction`` of a training split of ``n_images``
        images keeps at least one whole batch (of captions, or of images with ``sampling="images"``)."""
        per_image = captions_per_image if self.sampling == "captions" else 1
        kept = round(self.train_fraction * n_images)
        if kept * per_image < self.batch_size:
            unit = "captions" if self.sampling == "captions" else "images"
            raise ValueError(
                f"Config.train_fraction={self.train_fraction!r} keeps {kept} of {n_images} training images "
                f"({kept * per_image} {unit} an epoch), fewer than one batch (batch_size={self.batch_size}); "
                f"expected a fraction ≥ {self.batch_size / (n_images * per_image):.3g} for this data"
            )

    # ----------------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Config":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown Config field(s) {unknown}; valid fields: {sorted(known)}")
        return cls(**d)

    def replace(self, **changes) -> "Config":
        return dataclasses.replace(self, **changes)

    def key(self) -> str:
        """Stable hash of every field (the config's part of a run-cache key).

        Loss parameters equal to the loss's defaults are left out first, so ``{"margin": 0.2}`` and
        ``{}`` for the triplet loss name the same run (and two notebooks share it)."""
        # the fields as to_dict() gives them, without its deep copy (the JSON is the same: no field holds a dataclass)
        d = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        d["loss_params"] = _without_defaults(self.loss, self.loss_params)
        blob = json.dumps(d, sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _canonical(value):
    """JSON-equivalent form (tuples → lists) for comparing parameter values."""
    return json.loads(json.dumps(value, default=str))


def _without_defaults(loss: str, params: dict) -> dict:
    defaults = _losses.parameters(loss)
    return {k: v for k, v in params.items() if not (k in defaults and _canonical(defaults[k]) == _canonical(v))}
