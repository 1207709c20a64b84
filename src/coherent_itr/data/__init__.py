"""Data sources, containers and relevance (pseudo-label) providers.

``load_splits(source, ...)`` returns train/dev/test :class:`DataSplits` for a named source;
``relevance_provider(name, split, ...)`` returns a :class:`RelevanceProvider` for a split.

Sources (:data:`SOURCES`):

* ``"synthetic"`` — the embedded captioned-scenes world (:mod:`.synthetic`), ``scale`` in
  ``"smoke"`` (500/100/100 images), ``"default"`` (3000/500/1000), ``"paper"`` (29000/1000/1000),
  deterministic from ``seed``; true relevance known.
* ``"flickr8k"`` — the real benchmark from ``data_dir`` or ``$FLICKR8K_DIR`` with
  EfficientNet-Lite0 features and the expert / crowd judgements in ``split.extras``; a folder
  holding a bundle (``MANIFEST.json``, written by ``python -m reproduce.bundle``) is loaded from
  the bundle instead, without photos or models (:mod:`.bundle`).
* ``"precomp"`` — VSE++/SCAN precomp features under ``data_dir``; ``scale`` names the data set
  (``"f8k"``, ``"f30k"``, ``"coco"``).
* ``"toy"`` — a tiny generated set for unit tests.

Providers (:data:`PROVIDERS`): ``"sbert"`` (params ``mode="paired"|"max5"``,
``scale="cosine"|"unit"``), ``"cider"`` (CIDEr-D; ``include_candidate=True|False``,
``tokenizer="simple"|"ptb"``), ``"true"`` (the synthetic world's r*).

Statistics of a relevance model on training batches (ladder θ at the paper's scope of interest, SAM
margin distributions): :mod:`.relevance_stats`.
"""

from __future__ import annotations

from .base import CaptionedImages, DataSplits, RelevanceProvider, TrueRelevance
from .toy import make_toy_splits

SOURCES = ("synthetic", "flickr8k", "precomp", "toy")
PROVIDERS = ("sbert", "cider", "true")


def load_splits(
    source: str,
    *,
    data_dir: str | None = None,
    scale: str = "default",
    seed: int = 0,
    cache_dir: str | None = None,
    train_images=None,
    progress: bool = True,
) -> DataSplits:
    """Load the train/dev/test splits of ``source``.

    Args:
        source: one of :data:`SOURCES`.
        data_dir: the data directory (``flickr8k``: default ``$FLICKR8K_DIR``; ``precomp``: required).
        scale: the size profile of a generated source (``"smoke"``, ``"default"``, ``"paper"``) or the
            data-set name for ``precomp``.
        seed: seed of a generated source (ignored by the others).
        cache_dir: where features are cached.
        train_images: Flickr8k only, whose training images are featurised on demand: ``None`` (all),
            ``"cached"`` (what the feature cache holds) or a list of image names
            (:func:`~coherent_itr.data.flickr8k.load_flickr8k`; other sources have every feature).
        progress: Flickr8k only: a progress bar while image features are computed.

    Returns:
        :class:`DataSplits` with ``train``, ``dev`` and ``test`` :class:`CaptionedImages`.

    Raises:
        ValueError: an unknown source or scale.

    Example::

        >>> from coherent_itr import data
        >>> splits = data.load_splits("toy", scale="smoke")
        >>> splits.test.n_images, splits.test.captions_per_image
        (30, 5)
    """
    if source == "synthetic":
        from .synthetic import make_synthetic_splits

        return make_synthetic_splits(scale, seed=seed, cache_dir=cache_dir)
    if source == "flickr8k":
        from ..paths import flickr8k_dir
        from .bundle import is_bundle, load_bundle
        from .flickr8k import load_flickr8k

        if is_bundle(flickr8k_dir(data_dir)):
            return load_bundle(flickr8k_dir(data_dir))
        return load_flickr8k(data_dir, cache_dir=cache_dir, train_images=train_images, progress=progress)
    if source == "precomp":
        from .precomp import NAMES, load_precomp

        if scale not in NAMES:
            raise ValueError(f"precomp data: scale={scale!r} must name the data set, one of {list(NAMES)}")
        return load_precomp(data_dir, scale)
    if source == "toy":
        sizes = {"smoke": (120, 30, 30), "default": (200, 40, 40)}
        if scale not in sizes:
            raise ValueError(f"toy data: scale={scale!r} not allowed; choose one of {list(sizes)}")
        n_tr, n_dev, n_te = sizes[scale]
        return make_toy_splits(n_tr, n_dev, n_te, seed=seed)
    raise ValueError(f"unknown data source {source!r}; valid sources: {', '.join(SOURCES)}")


def relevance_provider(
    name: str, split: CaptionedImages, *, cache_dir: str | None = None, within=None, **params
) -> RelevanceProvider:
    """Build a relevance (pseudo-label) provider over ``split``.

    Args:
        name: one of :data:`PROVIDERS`.
        split: the captioned images the provider scores.
        cache_dir: where the provider caches its matrices.
        within: the whole data set's captions, ``split``'s among them: Sentence-BERT embeds them together and takes
            ``split``'s rows, so its relevance does not depend on which captions a cache embedded when
            (:func:`~coherent_itr.data.sbert.embed_captions`); the other providers do not read it.
        **params: the provider's parameters (module docstring), e.g. ``mode="paired"`` for ``sbert``.

    Returns:
        A :class:`RelevanceProvider`: ``matrix()`` (images × captions) and ``batch(image_idx, caption_idx)``.

    Raises:
        ValueError: an unknown provider or parameter.
    """
    if name == "true":
        if params:
            raise ValueError(f"relevance provider 'true' takes no parameters, got {sorted(params)}")
        from .synthetic import SyntheticTrueRelevance, WorldAnnotations

        if isinstance(split.extras.get("world"), WorldAnnotations):
            return SyntheticTrueRelevance(split)
        return TrueRelevance(split)
    if name == "sbert":
        from .sbert import SBERTRelevance

        return SBERTRelevance(split, cache_dir=cache_dir, within=within, **params)
    if name == "cider":
        from .cider import CiderRelevance

        return CiderRelevance(split, cache_dir=cache_dir, **params)
    raise ValueError(f"unknown relevance provider {name!r}; valid providers: {', '.join(PROVIDERS)}")


__all__ = [
    "CaptionedImages",
    "DataSplits",
    "RelevanceProvider",
    "TrueRelevance",
    "load_splits",
    "relevance_provider",
    "make_toy_splits",
    "SOURCES",
    "PROVIDERS",
]
