"""Test-set evaluation of a trained model: every metric against every yardstick, one record.

The same evaluation for every loss (claim X1): binary R@K, and the coherence / semantic metrics
of :func:`coherent_itr.metrics.evaluate` against

* ``sbert`` — Sentence-BERT pseudo labels (paired-caption cosine mapped to [0, 1]: NDCG and NCS
  need non-negative relevance; CS@K and τ are unchanged by the monotone map);
* ``cider`` — CIDEr-D of each caption against the image's 5 references (SAM's φ; NCS);
* ``true`` — the synthetic world's true relevance r* (not a training signal of any loss), with
  positives for mAP@R / R-P / R@1 at r* ≥ :data:`TRUE_POSITIVE_THRESHOLD`;
* ``expert`` / ``crowd`` — Flickr8k's human judgements (agreement and expert-judged positives).

The first two are the circular yardsticks BCLS warns about; the last two are not (claim X2).
"""

from __future__ import annotations

import numpy as np

from . import data as data_mod
from . import metrics
from .data.relevance import captions_hash

# A caption is a semantic positive of a synthetic image when it describes it almost fully and
# correctly: a correct partial description scores ≈ 0.8–0.95, one wrong facet drops it below.
TRUE_POSITIVE_THRESHOLD = 0.8
PSEUDO_PROVIDERS = {"sbert": {"mode": "paired", "scale": "unit"}, "cider": {"include_candidate": True}}


_CACHE: dict[str, tuple] = {}  # split content key -> yardsticks (a few test splits per process)


def yardsticks(split: data_mod.CaptionedImages, cache_dir: str | None = None):
    """The yardsticks of ``split``.

    Args:
        split: a test split.
        cache_dir: where providers cache their matrices on disk (this keeps the last few splits' in memory).

    Returns:
        (pseudo-label matrices by name, true relevance or None, human judgements by source or None).
    """
    key = f"{split.name}:{captions_hash(split.captions)}:{split.n_images}:{cache_dir}"
    if key not in _CACHE:
        rel = {
            name: data_mod.relevance_provider(name, split, cache_dir=cache_dir, **params).matrix()
            for name, params in PSEUDO_PROVIDERS.items()
        }
        true = None
        if split.true_relevance is not None or "world" in split.extras:
            true = data_mod.relevance_provider("true", split, cache_dir=cache_dir).matrix()
        human = {k: split.extras[k] for k in ("expert", "crowd") if k in split.extras} or None
        if len(_CACHE) >= 4:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = (rel, true, human)
    return _CACHE[key]


def evaluate_embeddings(
    img: np.ndarray,
    cap: np.ndarray,
    split: data_mod.CaptionedImages,
    fold_size: int = 1000,
    cache_dir: str | None = None,
) -> dict[str, float]:
    """Every metric of the embeddings of ``split``.

    Args:
        img: (n_images, d) L2-normalised image embeddings.
        cap: (n_captions, d) L2-normalised caption embeddings.
        split: the split they embed (captions, image of each caption, extras such as human judgements).
        fold_size: COCO-style folds when the split has at least two (see ``metrics.evaluate``).
        cache_dir: where relevance providers cache their matrices.

    Returns:
        The flat record of :func:`coherent_itr.metrics.evaluate` of the float32 cosine similarity.
    """
    rel, true, human = yardsticks(split, cache_dir)
    sim = img.astype(np.float32) @ cap.astype(np.float32).T
    return metrics.evaluate(
        sim,
        split.image_of_caption,
        rel=rel,
        true_rel=true,
        human=human,
        true_positive_threshold=TRUE_POSITIVE_THRESHOLD if true is not None else None,
        fold_size=fold_size,
    )


_SPLITS: dict[tuple, data_mod.CaptionedImages] = {}  # (data, dir, scale, seed, cache) -> test split


def _test_split(config: dict, cache_dir: str | None) -> data_mod.CaptionedImages:
    key = (config["data"], config.get("data_dir"), config["data_scale"], config["data_seed"], cache_dir)
    if key not in _SPLITS:
        if len(_SPLITS) >= 4:
            _SPLITS.pop(next(iter(_SPLITS)))
        _SPLITS[key] = data_mod.load_splits(
            config["data"],
            data_dir=config.get("data_dir"),
            scale=config["data_scale"],
            seed=config["data_seed"],
            cache_dir=cache_dir,
            train_images="cached",  # only the test split is used: no training image is featurised for it
        ).test
    return _SPLITS[key]


def evaluate_run(result, splits: data_mod.DataSplits | None = None, cache_dir: str | None = None) -> dict[str, float]:
    """Every test metric of a training result, from its stored test embeddings (no model needed).

    Args:
        result: a :class:`coherent_itr.train.RunResult` or a cached run (``record`` and ``arrays`` with
            the selected checkpoint's ``test_img`` / ``test_cap``).
        splits: the splits the run used; None loads the test split from ``record["config"]``.
        cache_dir: where relevance providers cache their matrices.

    Returns:
        The flat record of :func:`coherent_itr.metrics.evaluate` against every yardstick of the test
        split (see the module docstring).

    Raises:
        ValueError: the result has no stored test embeddings, or their sizes do not match the split.
    """
    record, arrays = result.record, result.arrays
    name = record.get("run_key", "(not cached)")
    missing = {"test_img", "test_cap"} - set(arrays)
    if missing:
        raise ValueError(f"run {name}: no stored test embeddings {sorted(missing)}; cannot evaluate")
    config = record["config"]
    split = splits.test if splits is not None else _test_split(config, cache_dir)
    img, cap = np.asarray(arrays["test_img"]), np.asarray(arrays["test_cap"])
    if img.shape[0] != split.n_images or cap.shape[0] != split.n_captions:
        raise ValueError(
            f"run {name}: stored embeddings have {img.shape[0]} images and {cap.shape[0]} captions, "
            f"but the test split {split.name} has {split.n_images} and {split.n_captions}"
        )
    return evaluate_embeddings(img, cap, split, config.get("eval_fold_size", 1000), cache_dir)
