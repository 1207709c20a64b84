"""Data sources, containers and relevance (pseudo-label) providers.

``load_splits(source, ...)`` returns train/dev/test :class:`DataSplits` for a named source;
``relevance_provider(name, split, ...)`` returns a :class:`RelevanceProvider` for a split.
"""
from __future__ import annotations

from .base import CaptionedImages, DataSplits, RelevanceProvider, TrueRelevance
from .toy import make_toy_splits

SOURCES = ("toy",)
PROVIDERS = ("true",)


def load_splits(source: str, *, data_dir: str | None = None, scale: str = "default", seed: int = 0,
                cache_dir: str | None = None) -> DataSplits:
    """Load the train/dev/test splits of ``source`` (one of :data:`SOURCES`)."""
    if source == "toy":
        sizes = {"smoke": (120, 30, 30), "default": (200, 40, 40)}
        if scale not in sizes:
            raise ValueError(f"toy data: scale={scale!r} not allowed; choose one of {list(sizes)}")
        n_tr, n_dev, n_te = sizes[scale]
        return make_toy_splits(n_tr, n_dev, n_te, seed=seed)
    raise ValueError(f"unknown data source {source!r}; valid sources: {', '.join(SOURCES)}")


def relevance_provider(name: str, split: CaptionedImages, *, cache_dir: str | None = None, **params) -> RelevanceProvider:
    """Build the relevance provider ``name`` (one of :data:`PROVIDERS`) over ``split``."""
    if name == "true":
        if params:
            raise ValueError(f"relevance provider 'true' takes no parameters, got {sorted(params)}")
        return TrueRelevance(split)
    raise ValueError(f"unknown relevance provider {name!r}; valid providers: {', '.join(PROVIDERS)}")


__all__ = ["CaptionedImages", "DataSplits", "RelevanceProvider", "TrueRelevance", "load_splits",
           "relevance_provider", "make_toy_splits", "SOURCES", "PROVIDERS"]
