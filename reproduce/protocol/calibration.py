"""θ calibration and SAM margins measured on the study's data: what the ladder and SAM notebooks show.

The statistics themselves (θ quantiles at the ladder paper's scope of interest, SAM margin
distributions) are :mod:`coherent_itr.data.relevance_stats`; they are re-exported here. :func:`measure`
computes them on random training batches of a data source (``python -m reproduce.protocol.calibration flickr8k``).
"""

from __future__ import annotations

import numpy as np

from coherent_itr import data as data_mod
from coherent_itr.data.base import CaptionedImages
from coherent_itr.data.flickr8k import flickr8k_index
from coherent_itr.data.relevance_stats import (
    COCO1K_CANDIDATES,
    COCO1K_GT,
    PAPER_THETAS,
    SCOPE_SHARES,
    calibrated_theta,
    calibrated_thetas,
    margin_distribution,
    off_diagonal,
    relevance_batches,
    theta_table,
    training_batches,
)

__all__ = [
    "COCO1K_CANDIDATES",
    "COCO1K_GT",
    "PAPER_THETAS",
    "SCOPE_SHARES",
    "calibrated_theta",
    "calibrated_thetas",
    "margin_distribution",
    "measure",
    "off_diagonal",
    "relevance_batches",
    "theta_table",
    "training_batches",
]


def _captions_only_train(data: str, n_images: int | None = 1500, seed: int = 0):
    """Flickr8k's training captions without image features (relevance needs captions only; the features
    take minutes to extract cold) — of a random ``n_images`` subset (None: all 6,000): random batch pairs
    of a random subset have the distribution of random pairs of the whole split (a same-image pair in a
    batch is 4 / 7,499 vs 4 / 29,999 likely — both negligible), at a quarter of the Sentence-BERT cost."""
    names, caps = flickr8k_index()["train"]
    cpi = len(caps) // len(names)
    keep = (
        np.arange(len(names))
        if n_images is None
        else np.sort(np.random.default_rng(seed).choice(len(names), min(n_images, len(names)), replace=False))
    )
    return CaptionedImages(
        f"{data}/train (captions only, {len(keep)} images)",
        np.zeros((len(keep), 1), np.float32),
        [caps[i * cpi + k] for i in keep for k in range(cpi)],
        [names[i] for i in keep],
        captions_per_image=cpi,
    )


def measure(
    data: str = "synthetic", data_scale: str = "default", n_batches: int = 50, batch_size: int = 128, seed: int = 0
) -> dict:
    """θ calibration (Sentence-BERT, paired cosine) and SAM margins (CIDEr-D, candidate included) on
    ``n_batches`` random training batches of ``data``; what the ladder / SAM notebooks show."""
    tr = _captions_only_train(data) if data == "flickr8k" else data_mod.load_splits(data, scale=data_scale).train
    sb = data_mod.relevance_provider("sbert", tr, mode="paired", scale="cosine")
    rel = relevance_batches(
        sb, tr.n_images, tr.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )
    thetas = calibrated_thetas(rel)
    table = theta_table(rel, sorted({*PAPER_THETAS, *thetas}))
    ci = data_mod.relevance_provider("cider", tr, include_candidate=True)
    phi = relevance_batches(
        ci, tr.n_images, tr.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )
    return {
        "data": data,
        "thetas": thetas,
        "shares": SCOPE_SHARES,
        "theta_table": table,
        "sam_margins": {t: margin_distribution(phi, t) for t in (3.0, 5.0, 10.0)},
    }


if __name__ == "__main__":
    import sys

    d = sys.argv[1] if len(sys.argv) > 1 else "synthetic"
    r = measure(d)
    print(d, "calibrated thetas", r["thetas"])
    print(r["theta_table"].to_string())
    for t, m in r["sam_margins"].items():
        print("SAM", t, m)
