"""Data preparation before any training run: done once, in the driver, so worker processes never
repeat it side by side.

For every data set the runs to train use, this loads its splits (Flickr8k: EfficientNet-Lite0
features of every image, cached by image content; synthetic: the generated world) and embeds every
caption of every split with Sentence-BERT in one call (cached by caption set; a run's subset is
then read from that file). Training runs find both on disk.
"""
from __future__ import annotations

import time
from collections.abc import Iterable

from coherent_itr import data as data_mod
from coherent_itr.config import Config
from coherent_itr.data.sbert import embed_captions


def prepare(configs: Iterable[Config], progress: bool = True) -> float:
    """Prepare the data of ``configs`` (each distinct data set once); returns the seconds it took."""
    t0 = time.perf_counter()
    sources = {(c.data, c.data_scale, c.data_seed, c.data_dir) for c in configs}
    for data, scale, seed, data_dir in sorted(sources, key=str):
        splits = data_mod.load_splits(data, data_dir=data_dir, scale=scale, seed=seed)
        embed_captions([c for s in (splits.train, splits.dev, splits.test) for c in s.captions], progress=progress)
    return time.perf_counter() - t0
