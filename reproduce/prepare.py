"""Data preparation before any training run: done once, in the driver, so worker processes never
repeat it side by side.

For every data set the runs to train use, this loads its splits (Flickr8k: EfficientNet-Lite0
features of every image, cached by image content; synthetic: the generated world), checks that
every run's ``train_fraction`` leaves at least one batch of it (:meth:`Config.check_train_size`,
so a bad fraction stops the driver before any training), and embeds every caption of every split
with Sentence-BERT in one call (cached by caption set; a run's subset is then read from that
file). Training runs find both on disk.
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from coherent_itr import data as data_mod
from coherent_itr.config import Config
from coherent_itr.data.sbert import embed_captions


def prepare(configs: Iterable[Config], progress: bool = True) -> float:
    """Prepare the data of ``configs`` (each distinct data set once); returns the seconds it took.
    Raises ``ValueError`` (naming the numbers) if a config's training subset is smaller than a batch."""
    t0 = time.perf_counter()
    configs = list(configs)
    sources: dict[tuple, list[Config]] = {}
    for c in configs:
        sources.setdefault((c.data, c.data_scale, c.data_seed, c.data_dir), []).append(c)
    for (data, scale, seed, data_dir), group in sorted(sources.items(), key=lambda kv: str(kv[0])):
        label = f"{data}" + (f" ({scale})" if data == "synthetic" else "")
        print(f"prepare [{label}]: loading the splits", flush=True)
        splits = data_mod.load_splits(data, data_dir=data_dir, scale=scale, seed=seed)
        for c in group:
            c.check_train_size(splits.train.n_images, splits.train.captions_per_image)
        captions = [c for s in (splits.train, splits.dev, splits.test) for c in s.captions]
        print(
            f"prepare [{label}]: Sentence-BERT embeddings of {len(captions):,} captions (cached by caption set)",
            flush=True,
        )
        embed_captions(captions, progress=progress)
    return time.perf_counter() - t0
