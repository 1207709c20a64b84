"""Data preparation before any training run: done once, in the driver, so worker processes never
repeat it side by side.

For every data set the runs to train use, this loads its splits (Flickr8k: EfficientNet-Lite0
features of the images the runs use — each run's training subset (``train_fraction``, drawn as
``coherent_itr.train`` draws it), every dev and test image — cached per image by content, so a later,
larger plan computes only what the cache lacks; synthetic: the generated world), checks that every
run's ``train_fraction`` leaves at least one batch of it (:meth:`Config.check_train_size`, so a bad
fraction stops the driver before any training), and embeds every caption of every split with
Sentence-BERT in one call (cached by caption set; a run's subset is then read from that file).
Training runs find both on disk.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable

import numpy as np

from coherent_itr import data as data_mod
from coherent_itr import paths
from coherent_itr.config import Config
from coherent_itr.data.bundle import is_bundle
from coherent_itr.data.flickr8k import flickr8k_index
from coherent_itr.data.sbert import embed_captions, model_id
from coherent_itr.determinism import cpu_tag

from reproduce.protocol.study import Study
from reproduce.spec.profiles import COSTS, Profile


def train_rows(config: Config, n_images: int) -> np.ndarray:
    """Indices of the training images a run of ``config`` trains on, out of ``n_images``: all of them, or
    the seeded subset of ``train_fraction`` that ``coherent_itr.train`` draws (a test checks the two agree)."""
    if config.train_fraction >= 1.0:
        return np.arange(n_images)
    n = max(2, int(round(config.train_fraction * n_images)))
    return np.sort(np.random.default_rng([config.seed, 0x5AB]).choice(n_images, size=n, replace=False))


def train_images_needed(configs: Iterable[Config], train_names: list[str]) -> set[str] | None:
    """Names of the training images ``configs`` train on (the union of their subsets); None when one
    of them trains on every image."""
    rows: set[int] = set()
    for c in configs:
        if c.train_fraction >= 1.0:
            return None
        rows.update(train_rows(c, len(train_names)).tolist())
    return {train_names[i] for i in rows}


def load_for(
    data: str,
    configs: list[Config],
    data_dir=None,
    scale: str = "default",
    seed: int = 0,
    cache_dir=None,
    progress: bool = True,
):
    """The splits of ``data`` with features of every image ``configs`` train on (Flickr8k: only those
    training images, plus any the feature cache holds, plus dev and test; ``progress``: a bar while they are
    computed)."""
    train_images = None
    if data == "flickr8k" and not is_bundle(paths.flickr8k_dir(data_dir)):  # a bundle holds every image's features
        train_images = train_images_needed(configs, flickr8k_index(data_dir)["train"][0])
    return data_mod.load_splits(
        data,
        data_dir=data_dir,
        scale=scale,
        seed=seed,
        cache_dir=cache_dir,
        train_images=train_images,
        progress=progress,
    )


def _source(c: Config) -> tuple:
    return (c.data, c.data_scale, c.data_seed, c.data_dir)


class PrepareError(RuntimeError):
    """A data set that cannot be prepared on this machine (the message says why and what to do); its runs are
    skipped, the other data sets go on."""


def prepare(configs: Iterable[Config], progress: bool = True, later: Iterable[Config] = ()) -> float:
    """Prepare the data of ``configs`` (each distinct data set once); returns the seconds it took.
    ``later``: runs to train after these (a tuned plan's final runs, known only in bound before tuning):
    the images they train on are featurised now too, for the data sets of ``configs``.
    Raises ``ValueError`` (naming the numbers) if a config's training subset is smaller than a batch."""
    t0 = time.perf_counter()
    configs = list(configs)
    sources: dict[tuple, list[Config]] = {}
    for c in configs:
        sources.setdefault(_source(c), []).append(c)
    extra: dict[tuple, list[Config]] = {}
    for c in later:
        if _source(c) in sources:
            extra.setdefault(_source(c), []).append(c)
    for (data, scale, seed, data_dir), group in sorted(sources.items(), key=lambda kv: str(kv[0])):
        label = f"{data}" + (f" ({scale})" if data == "synthetic" else "")
        print(f"prepare [{label}]: loading the splits", flush=True)
        more = extra.get((data, scale, seed, data_dir), [])
        splits = load_for(data, [*group, *more], data_dir=data_dir, scale=scale, seed=seed, progress=progress)
        for c in group:
            c.check_train_size(splits.train.n_images, splits.train.captions_per_image)
        if all("sbert_embeddings" in s.extras for s in (splits.train, splits.dev, splits.test)):
            print(f"prepare [{label}]: Sentence-BERT embeddings of every caption stored in the bundle", flush=True)
            continue
        embed_all(splits, label, progress)
    return time.perf_counter() - t0


def embed_all(splits, label: str, progress: bool = True) -> None:
    """The Sentence-BERT embedding of every caption of ``splits`` in one call (the whole set, as training, evaluation
    and the notebooks' analyses read it: :func:`coherent_itr.data.sbert.embed_captions` with ``within``)."""
    captions = [c for s in (splits.train, splits.dev, splits.test) for c in s.captions]
    print(
        f"prepare [{label}]: Sentence-BERT embeddings of {len(set(captions)):,} distinct captions "
        "(cached by caption set)",
        flush=True,
    )
    try:
        with _no_weight_loading_bar():
            embed_captions(captions, progress=progress, within=captions)
    except ImportError as exc:
        raise PrepareError(
            f"{label}: the Sentence-BERT embeddings of its {len(set(captions)):,} captions are not cached and the "
            f"model cannot load ({exc}); install the study's environment (make venv), or on a machine without "
            f"Sentence-BERT train Flickr8k from a bundle (python -m reproduce.bundle)"
        ) from None


def analyses_estimate_s(data_sets, cache_dir=None) -> float:
    """Estimated seconds of :func:`prepare_analyses` for ``data_sets`` on this machine: each data set's measured cold
    cost (``reproduce.spec.profiles.COSTS[data]["analyses_prepare_s"]``) while this CPU's caches hold nothing of the
    kind it computes — no Sentence-BERT folder of the model on this CPU, and for Flickr8k no image-feature folder of
    this CPU (a fresh cache: what a fresh clone's ``make reproduce`` pays) — else 0 (read from the caches in
    seconds)."""
    root = paths.cache_dir(cache_dir, create=False)
    sbert = root / "sbert" / model_id(cache_dir).replace("/", "_")
    warm_text = sbert.is_dir() and any(sbert.glob("*.npz"))
    tag = cpu_tag()
    warm_images = any(
        f.is_dir() and (f.name.endswith(tag) if tag else "@" not in f.name) for f in (root / "features").glob("*")
    )
    cold = [d for d in data_sets if not warm_text or (d == "flickr8k" and not warm_images)]
    return sum(COSTS.get(d, {}).get("analyses_prepare_s", 0.0) for d in cold)


def prepare_analyses(profile: str | Profile, data: str, progress: bool = True) -> dict[str, float]:
    """What the notebooks of ``data`` compute from the data before they draw, once, in the driver, before the
    notebooks' kernels start: the splits as :meth:`reproduce.protocol.study.Study.splits` loads them (Flickr8k: the
    features of every dev and test image) and the Sentence-BERT embedding of every caption. Computed here, the
    kernels that run side by side read them from the cache instead of each computing them at once (on a fresh
    machine, ≈ 2,000 images and 63,000 captions). Returns the seconds, ``{"<data>_analyses_prepare_s": s}``."""
    t = time.perf_counter()
    study = Study(profile, data, progress=False)
    label = data + (f" ({study.profile.data_scale})" if data == "synthetic" else "")
    print(
        f"prepare [{label}]: what the notebooks read: the splits (Flickr8k: dev and test image features)",
        flush=True,
    )
    splits = study.splits(progress=progress)
    if not all("sbert_embeddings" in s.extras for s in (splits.train, splits.dev, splits.test)):
        embed_all(splits, label, progress)
    took = time.perf_counter() - t
    print(f"prepare [{label}]: done in {took:.0f} s", flush=True)
    return {f"{data}_analyses_prepare_s": took}


@contextlib.contextmanager
def _no_weight_loading_bar():
    """transformers draws a bar over Sentence-BERT's 103 weight tensors as it loads them (milliseconds): noise
    in every log that ignores ``--no-progress``. Off inside, transformers' own setting restored after."""
    try:
        # heavy (transformers): imported only when a data set is prepared, so --help stays light
        from transformers.utils import logging as hf_logging
    except ModuleNotFoundError:  # a machine without Sentence-BERT (a GPU machine training from a bundle)
        yield
        return
    was_on = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
