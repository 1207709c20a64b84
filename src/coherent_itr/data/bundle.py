"""A data bundle: what training and evaluating on another machine needs, without the photos or any model.

A bundle is a folder written by ``python -m reproduce.bundle`` (:func:`write_bundle`)::

    MANIFEST.json                    format, version, data set, encoder and sentence-model ids, and the
                                     sha256 and size of every other file (written last)
    {train,dev,test}_ims.npy         image features, one row per image, float16
    {train,dev,test}_caps.txt        captions, 5 consecutive lines per image (VSE++ precomp order)
    {train,dev,test}_ids.txt         image ids (file names), one per line
    {train,dev,test}_sbert.npy       Sentence-BERT embedding of every caption (rows as in _caps.txt), float16
    ExpertAnnotations.txt            the release's judgement files, byte for byte (when it has them)
    CrowdFlowerAnnotations.txt

Loading it (:func:`load_bundle`; ``load_splits("flickr8k", data_dir=BUNDLE)`` or ``$FLICKR8K_DIR=BUNDLE``
do the same, see :func:`is_bundle`) first checks every file against the manifest — a missing file, or
one whose size or sha256 differs, raises :class:`BundleError` naming it — then gives the same
:class:`~.base.DataSplits` the release folder gives, with the float16 values widened to float32:

* features from the ``_ims.npy`` files (the precomp reader, :func:`.precomp.load_precomp_split`);
* the human judgements read and aligned by the release loader's own functions
  (:func:`.flickr8k.read_judgements`, :func:`.flickr8k.align_judgements`) into ``split.extras``;
* the stored caption embeddings in ``split.extras["sbert_embeddings"]`` (a :class:`CaptionEmbeddings`),
  which :class:`.sbert.SBERTRelevance` uses instead of running the sentence model. CIDEr-D relevance
  needs the captions only. So every relevance provider the study trains or evaluates with works
  without the photos, the image encoder or the sentence model.

A run from a bundle therefore equals a run from the release folder whose image features were rounded to
float16 and whose caption embeddings were rounded to float16 and brought back to unit norm (:func:`unit_rows`;
``tests/lib/data/test_bundle.py``). Its numbers differ from the release folder's, and so does its run key
(:func:`coherent_itr.runs.data_form`).
"""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np

from ..io import atomic_write_bytes, atomic_write_text, load_npy, sha256_file
from .base import CaptionedImages, DataSplits

FORMAT = "coherent_itr-bundle"
VERSION = 1
MANIFEST = "MANIFEST.json"
SPLITS = ("train", "dev", "test")
SBERT_EXTRA = "sbert_embeddings"  # split.extras key of the stored caption embeddings
STORED_DTYPE = "float16"


class BundleError(ValueError):
    """A bundle is incomplete, altered or not a bundle; the message names the file."""


def unit_rows(embeddings: np.ndarray) -> np.ndarray:
    """The stored (float16) embeddings as float32 rows of unit L2 norm, as the sentence model gave them: rounding
    to float16 moves a norm by up to ~1e-3, and the cosine of two identical captions then exceeds 1 (a unit-scaled
    relevance above 1, which S-NDCG refuses). The norm is taken in float64; a zero row stays zero."""
    e = np.asarray(embeddings, dtype=np.float64)
    norm = np.linalg.norm(e, axis=1, keepdims=True)
    return (e / np.where(norm > 0, norm, 1.0)).astype(np.float32)


class CaptionEmbeddings:
    """Sentence embeddings stored with a split, looked up by caption text.

    Identical captions have identical embeddings (the sentence model is deterministic and
    :func:`.sbert.embed_captions` embeds each distinct caption once), so a lookup by text serves any
    subset or reordering of the split's captions (e.g. a ``train_fraction`` subset)."""

    def __init__(self, model_id: str, captions: Sequence[str], embeddings: np.ndarray) -> None:
        if embeddings.ndim != 2 or embeddings.shape[0] != len(captions):
            raise ValueError(f"{len(captions)} captions but embeddings of shape {embeddings.shape}")
        self.model_id = model_id
        self.embeddings = unit_rows(embeddings)
        self._row = {c: i for i, c in enumerate(captions)}

    def rows(self, captions: Sequence[str]) -> np.ndarray:
        """(len(captions), d) float32 embeddings of ``captions``; ``KeyError`` naming a caption not stored."""
        try:
            idx = [self._row[c] for c in captions]
        except KeyError as exc:
            raise KeyError(f"caption {exc.args[0]!r} has no stored embedding in this bundle") from None
        return self.embeddings[np.asarray(idx, dtype=np.int64)]


def is_bundle(folder: str | os.PathLike | None) -> bool:
    """Whether ``folder`` holds a bundle (a ``MANIFEST.json``) rather than a release layout."""
    return folder is not None and (Path(folder) / MANIFEST).is_file()


def _npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(arr), allow_pickle=False)
    return buf.getvalue()


def write_bundle(
    out: str | os.PathLike,
    splits: DataSplits,
    embeddings: dict[str, np.ndarray],
    *,
    data: str,
    encoder: str,
    sentence_model: str,
    judgement_files: Sequence[str | os.PathLike] = (),
    info: dict | None = None,
) -> Path:
    """Write ``splits`` (features rounded to float16), the caption ``embeddings`` of each split (float16,
    rows as the split's captions) and the ``judgement_files`` (copied) into the empty or new folder ``out``,
    then ``MANIFEST.json`` with every file's sha256 and size. ``encoder`` / ``sentence_model`` name the
    models that produced the features / embeddings; ``info`` is stored in the manifest as is."""
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise BundleError(f"bundle folder {out} is not empty; choose a new or empty folder")
    out.mkdir(parents=True, exist_ok=True)
    names = []
    for s in SPLITS:
        sp: CaptionedImages = getattr(splits, s)
        emb = embeddings[s]
        if emb.shape[0] != sp.n_captions:
            raise ValueError(f"{s}: {emb.shape[0]} caption embeddings for {sp.n_captions} captions")
        bad = [k for k, c in enumerate(sp.captions) if not c.strip() or "\n" in c or c != c.strip()]
        if bad:
            raise ValueError(f"{s}: caption {bad[0]} ({sp.captions[bad[0]]!r}) is empty or not one stripped line")
        atomic_write_bytes(out / f"{s}_ims.npy", _npy_bytes(sp.features.astype(np.float16)))
        atomic_write_text(out / f"{s}_caps.txt", "".join(c + "\n" for c in sp.captions))
        atomic_write_text(out / f"{s}_ids.txt", "".join(f"{i}\n" for i in sp.image_ids))
        atomic_write_bytes(out / f"{s}_sbert.npy", _npy_bytes(np.asarray(emb).astype(np.float16)))
        names += [f"{s}_ims.npy", f"{s}_caps.txt", f"{s}_ids.txt", f"{s}_sbert.npy"]
    for f in judgement_files:
        shutil.copyfile(f, out / Path(f).name)
        names.append(Path(f).name)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "data": data,
        "features": {"encoder": encoder, "dtype": STORED_DTYPE},
        "sentence_model": {"id": sentence_model, "dtype": STORED_DTYPE},
        "n_images": {s: getattr(splits, s).n_images for s in SPLITS},
        "captions_per_image": splits.train.captions_per_image,
        "info": info or {},
        "files": {n: {"sha256": sha256_file(out / n), "bytes": (out / n).stat().st_size} for n in names},
    }
    atomic_write_text(out / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    return out


def verify_bundle(folder: str | os.PathLike) -> dict:
    """The manifest of the bundle in ``folder`` after checking every file it lists (presence, size,
    sha256); :class:`BundleError` naming the first file that fails."""
    folder = Path(folder)
    path = folder / MANIFEST
    if not path.is_file():
        raise BundleError(f"{folder} is not a bundle: it has no {MANIFEST}")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise BundleError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise BundleError(f"{path}: not a {FORMAT} manifest (format={manifest.get('format')!r})")
    if manifest.get("version") != VERSION:
        raise BundleError(f"{path}: bundle version {manifest.get('version')!r}; this code reads version {VERSION}")
    files = manifest.get("files")
    needed = [f"{s}_{k}" for s in SPLITS for k in ("ims.npy", "caps.txt", "ids.txt", "sbert.npy")]
    if not isinstance(files, dict) or any(n not in files for n in needed):
        missing = [n for n in needed if not isinstance(files, dict) or n not in files]
        raise BundleError(f"{path}: the manifest lists no {', '.join(missing)}")
    rebuild = "the bundle is incomplete or was altered; rebuild it with python -m reproduce.bundle"
    for name, want in files.items():
        f = folder / name
        if not isinstance(want, dict):
            raise BundleError(f"{path}: the entry of {name} is {want!r}, expected {{'sha256': ..., 'bytes': ...}}")
        if Path(name).name != name or not f.is_file():
            raise BundleError(f"{f}: listed in {MANIFEST} but missing; {rebuild}")
        if f.stat().st_size != want.get("bytes"):
            raise BundleError(f"{f}: {f.stat().st_size} bytes, the manifest says {want.get('bytes')}; {rebuild}")
        got = sha256_file(f)
        if got != want.get("sha256"):
            raise BundleError(f"{f}: sha256 {got} differs from the manifest's {want.get('sha256')}; {rebuild}")
    return manifest


def load_bundle(folder: str | os.PathLike, bad_lines: str = "warn") -> DataSplits:
    """Train/dev/test from the bundle in ``folder`` (verified first, see :func:`verify_bundle`)."""
    from .flickr8k import CROWD_FILE, EXPERT_FILE, align_judgements, read_judgements
    from .precomp import load_precomp_split

    folder = Path(folder)
    manifest = verify_bundle(folder)
    data, cpi = manifest["data"], int(manifest["captions_per_image"])
    tables = {
        kind: read_judgements(folder / fname, kind, bad_lines)
        for kind, fname in (("expert", EXPERT_FILE), ("crowd", CROWD_FILE))
        if fname in manifest["files"]
    }
    out = {}
    for s in SPLITS:
        sp = load_precomp_split(folder, s, data, cpi)
        emb = load_npy(folder / f"{s}_sbert.npy")
        if emb.ndim != 2 or emb.shape[0] != sp.n_captions:
            raise BundleError(f"{folder / f'{s}_sbert.npy'}: shape {emb.shape}, expected ({sp.n_captions}, d)")
        sp.extras[SBERT_EXTRA] = CaptionEmbeddings(manifest["sentence_model"]["id"], sp.captions, emb)
        for kind, df in tables.items():
            al = align_judgements(df, sp.image_ids, kind)
            if len(al):
                sp.extras[kind] = al
        out[s] = sp
    return DataSplits(out["train"], out["dev"], out["test"])
