"""Flickr8k (Hodosh, Young & Hockenmaier 2013, JAIR 47) with its human relevance judgements.

Reads the release layout from a configured folder (``data_dir`` or ``$FLICKR8K_DIR``; see
:func:`coherent_itr.paths.flickr8k_dir`)::

    images/*.jpg                    Flickr8k.token.txt      "<image>#<0-4>\\t<caption>"
    Flickr_8k.{train,dev,test}Images.txt                    one image file name per line
    ExpertAnnotations.txt           query image, caption id, 3 expert scores (1–4)
    CrowdFlowerAnnotations.txt      query image, caption id, fraction yes, #yes, #no

* The release holds 5 captions of ``2258277193_586949ec62.jpg.1``, an image that does not exist:
  captions of images that are neither in a split list nor in ``images/`` are skipped with one
  warning. A missing folder, split list or image, and a malformed caption line, raise an error
  naming the file and line.
* Image features: EfficientNet-Lite0 (:mod:`.features`), cached by image content. Only the images
  asked for are featurised (``train_images``: a run on a tenth of the training images needs that
  tenth, plus dev and test); once every image has features they are written in the VSE++ precomp
  layout under ``<cache>/precomp/flickr8k-<key>/`` and loaded from there;
  ``<key>`` hashes the encoder, every image's *bytes* (sha1) and the captions, so an image replaced
  by another — even of the same size and modification time — gives new features. The bytes are
  re-read only when a file's inode, size, mtime or ctime changed (a small memo beside the folder).
* Text files are UTF-8; a byte-order mark at the start is accepted, an undecodable byte is an
  error naming the file and the line. A missing judgement file (``ExpertAnnotations.txt``,
  ``CrowdFlowerAnnotations.txt``) is said once per process, as a :class:`Flickr8kWarning`.
* Human judgements, aligned with the loaded captions (``split.extras``):
  ``"expert"`` — mean of the 3 expert scores (1 = does not describe the image … 4 = describes
  it), all on test images; ``"crowd"`` — fraction of CrowdFlower "yes" votes. Each a pandas
  DataFrame with ``image_idx`` (row of the split), ``caption_idx`` (column = 5·image + k),
  ``score``, ``is_gt`` (the caption was written for that image), the ids and the raw columns.
  Pairs whose image or caption is not in the split are left out (counted in ``df.attrs``).
  Malformed judgement lines are skipped with one warning naming the file and the lines
  (``bad_lines="error"`` raises instead).
"""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path

import numpy as np

from ..io import atomic_write_json
from ..paths import cache_dir as _cache_root
from ..paths import flickr8k_dir
from .base import CaptionedImages, DataSplits
from .features import FEATURE_BATCH, FEATURE_DIM, FeatureStore, encoder_key, extract_features, file_hash
from .precomp import load_precomp_split, write_precomp_split

TOKEN_FILE = "Flickr8k.token.txt"
SPLIT_FILES = {
    "train": "Flickr_8k.trainImages.txt",
    "dev": "Flickr_8k.devImages.txt",
    "test": "Flickr_8k.testImages.txt",
}
EXPERT_FILE = "ExpertAnnotations.txt"
CROWD_FILE = "CrowdFlowerAnnotations.txt"
CAPTIONS_PER_IMAGE = 5
_IMAGE_NAME = re.compile(r"^[\w.\-]+\.(jpg|jpeg|png)$", re.IGNORECASE)


class Flickr8kWarning(UserWarning):
    """Something in the release was skipped (the captions of a non-existent image, bad lines)."""


_WARNED: set[str] = set()  # judgement files already reported missing in this process


def _lines(path: Path) -> list[str]:
    """Lines of a UTF-8 release file without line endings or trailing blank lines; a leading
    byte-order mark is dropped, an undecodable byte raises ``ValueError`` naming file and line."""
    if not path.is_file():
        raise FileNotFoundError(f"Flickr8k file {path} does not exist")
    raw = path.read_bytes()
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    lines = []
    for n, b in enumerate(raw.split(b"\n"), start=1):
        try:
            lines.append(b.decode("utf-8").rstrip("\r"))
        except UnicodeDecodeError as exc:
            raise ValueError(
                f"{path}: line {n}: not UTF-8 text (byte {b[exc.start : exc.start + 1]!r} at column "
                f"{exc.start + 1}); save the file as UTF-8"
            ) from None
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def check_release(data_dir=None) -> Path:
    """The release folder, after checking (cheaply: names only) that it holds ``images/``, the caption
    file and the three split lists; ``FileNotFoundError`` naming every missing one otherwise. Missing
    judgement files are not an error here (see :func:`load_flickr8k`)."""
    root = flickr8k_dir(data_dir)
    missing = [n for n in ("images",) if not (root / n).is_dir()]
    missing += [n for n in (TOKEN_FILE, *SPLIT_FILES.values()) if not (root / n).is_file()]
    if missing:
        raise FileNotFoundError(f"Flickr8k folder {root} lacks {', '.join(missing)}")
    return root


def missing_judgements(root: Path) -> list[Path]:
    """The judgement files (expert, crowd) absent from the release folder ``root``."""
    return [root / f for f in (EXPERT_FILE, CROWD_FILE) if not (root / f).is_file()]


def read_split_list(path: Path, images_dir: Path) -> list[str]:
    """Image file names of a split list, each checked to exist in ``images_dir``."""
    names, seen = [], set()
    for k, line in enumerate(_lines(path), start=1):
        name = line.strip()
        if not _IMAGE_NAME.match(name):
            raise ValueError(f"{path}: line {k}: expected an image file name like '123_abc.jpg', got {line!r}")
        if name in seen:
            raise ValueError(f"{path}: line {k}: image {name} is listed twice")
        if not (images_dir / name).is_file():
            raise FileNotFoundError(f"{path}: line {k}: image {name} not found in {images_dir}")
        seen.add(name)
        names.append(name)
    if not names:
        raise ValueError(f"{path}: the split list is empty")
    return names


def read_token_file(path: Path, wanted: set[str], images_dir: Path) -> dict[str, list[str]]:
    """Captions (k = 0..4) of every image in ``wanted``; others skipped (non-existent: one warning)."""
    caps: dict[str, dict[int, str]] = {}
    skipped: dict[str, int] = {}
    expect = "expected '<image>.jpg#<0-4>\\t<caption>'"
    for n, line in enumerate(_lines(path), start=1):
        key, tab, text = line.partition("\t")
        name, hash_, k = key.strip().rpartition("#")
        if not tab or not hash_ or not name:
            raise ValueError(f"{path}: line {n}: malformed caption line {line[:80]!r}; {expect}")
        if not k.isdigit() or not 0 <= int(k) < CAPTIONS_PER_IMAGE:
            raise ValueError(f"{path}: line {n}: caption number {k!r} of {name} is not in 0–4; {expect}")
        if not text.strip():
            raise ValueError(f"{path}: line {n}: empty caption for {key}; {expect}")
        if name not in wanted:
            if not (images_dir / name).is_file():
                skipped[name] = skipped.get(name, 0) + 1
            continue
        per = caps.setdefault(name, {})
        if int(k) in per:
            raise ValueError(f"{path}: line {n}: duplicate caption {key}")
        per[int(k)] = text.strip()
    if skipped:
        what = ", ".join(f"{nm} ({c} captions)" for nm, c in sorted(skipped.items()))
        warnings.warn(
            f"{path}: skipped the captions of image(s) that exist in no split and not in {images_dir}: {what}",
            Flickr8kWarning,
            stacklevel=3,
        )
    out = {}
    for name in wanted:
        per = caps.get(name, {})
        if sorted(per) != list(range(CAPTIONS_PER_IMAGE)):
            raise ValueError(f"{path}: image {name} has captions {sorted(per)}; expected numbers 0–4")
        out[name] = [per[k] for k in range(CAPTIONS_PER_IMAGE)]
    return out


def flickr8k_index(data_dir=None) -> dict[str, tuple[list[str], list[str]]]:
    """{split: (image names, captions in precomp order)} from the release folder."""
    root = flickr8k_dir(data_dir)
    images = root / "images"
    if not images.is_dir():
        raise FileNotFoundError(f"Flickr8k folder {root} has no images/ folder")
    names = {s: read_split_list(root / f, images) for s, f in SPLIT_FILES.items()}
    seen: dict[str, str] = {}
    for s, ns in names.items():
        for nm in ns:
            if nm in seen:
                raise ValueError(f"{root / SPLIT_FILES[s]}: image {nm} is also in the {seen[nm]} split")
            seen[nm] = s
    caps = read_token_file(root / TOKEN_FILE, set(seen), images)
    return {s: (ns, [c for nm in ns for c in caps[nm]]) for s, ns in names.items()}


# ---------------------------------------------------------------------------------------------
# Human judgements
# ---------------------------------------------------------------------------------------------
_CAPTION_ID = re.compile(r"^([\w.\-]+\.jpg)#([0-4])$")


def read_judgements(path: Path, kind: str, bad_lines: str = "warn"):
    """Raw table of ``ExpertAnnotations.txt`` (kind "expert") or ``CrowdFlowerAnnotations.txt`` ("crowd")."""
    import pandas as pd

    if kind not in ("expert", "crowd"):
        raise ValueError(f"kind={kind!r} is invalid; expected 'expert' or 'crowd'")
    if bad_lines not in ("warn", "error"):
        raise ValueError(f"bad_lines={bad_lines!r} is invalid; expected 'warn' or 'error'")
    if not path.is_file():
        raise FileNotFoundError(f"Flickr8k file {path} does not exist")
    rows, bad = [], []
    raw = path.read_bytes().removeprefix(b"\xef\xbb\xbf").split(b"\n")  # a UTF-8 byte-order mark is fine
    while raw and not raw[-1].strip():
        raw.pop()
    for n, b in enumerate(raw, start=1):
        problem = None
        try:
            f = b.decode("ascii").rstrip("\r").split("\t")
        except UnicodeDecodeError:
            f, problem = [], "not ASCII text (corrupted bytes)"
        if problem is None:
            if len(f) != 5:
                problem = f"{len(f)} tab-separated fields, expected 5"
            elif not _IMAGE_NAME.match(f[0]) or not _CAPTION_ID.match(f[1]):
                problem = f"bad image or caption id {f[0]!r}, {f[1]!r}"
            else:
                try:
                    if kind == "expert":
                        e = [int(x) for x in f[2:]]
                        if not all(1 <= x <= 4 for x in e):
                            problem = f"expert scores {e} not in 1–4"
                        else:
                            rows.append((f[0], f[1], *e))
                    else:
                        frac, ny, nn = float(f[2]), int(f[3]), int(f[4])
                        if ny < 0 or nn < 0 or ny + nn == 0 or abs(frac - ny / (ny + nn)) > 1e-3:
                            problem = f"vote counts {ny}/{nn} inconsistent with fraction {frac}"
                        else:
                            rows.append((f[0], f[1], frac, ny, nn))
                except ValueError:
                    problem = f"non-numeric score fields {f[2:]}"
        if problem is not None:
            if bad_lines == "error":
                raise ValueError(f"{path}: line {n}: malformed judgement line ({problem})")
            bad.append(n)
    cols = ["image_id", "caption_id"] + (
        ["expert1", "expert2", "expert3"] if kind == "expert" else ["frac_yes", "n_yes", "n_no"]
    )
    df = pd.DataFrame(rows, columns=cols)
    df.attrs.update({"source": str(path), "n_lines": len(raw), "skipped_lines": _ranges(bad)})
    if bad:
        warnings.warn(
            f"{path}: skipped {len(bad)} malformed line(s) ({_ranges(bad)}); kept {len(df)} rows",
            Flickr8kWarning,
            stacklevel=2,
        )
    return df


def _ranges(ns: list[int]) -> str:
    out, i = [], 0
    while i < len(ns):
        j = i
        while j + 1 < len(ns) and ns[j + 1] == ns[j] + 1:
            j += 1
        out.append(f"lines {ns[i]}–{ns[j]}" if j > i else f"line {ns[i]}")
        i = j + 1
    return ", ".join(out)


def align_judgements(df, image_names: list[str], kind: str):
    """Judgements whose image and caption are in the split, with split indices and the score."""
    pos = {nm: i for i, nm in enumerate(image_names)}
    cap_img = df["caption_id"].str.rsplit("#", n=1).str[0]
    cap_k = df["caption_id"].str.rsplit("#", n=1).str[1].astype(int)
    keep = df["image_id"].map(pos).notna() & cap_img.map(pos).notna()
    out = df[keep].copy()
    out.insert(0, "image_idx", out["image_id"].map(pos).astype(np.int64))
    out.insert(
        1, "caption_idx", (cap_img[keep].map(pos).astype(np.int64) * CAPTIONS_PER_IMAGE + cap_k[keep]).astype(np.int64)
    )
    if kind == "expert":
        out["score"] = out[["expert1", "expert2", "expert3"]].mean(axis=1)
    else:
        out["score"] = out["frac_yes"].astype(float)
    out["is_gt"] = cap_img[keep].values == out["image_id"].values
    out = out.reset_index(drop=True)
    out.attrs = {**df.attrs, "n_rows_file": len(df), "n_aligned": len(out), "n_dropped": int((~keep).sum())}
    return out


# ---------------------------------------------------------------------------------------------
# The data set
# ---------------------------------------------------------------------------------------------
def _images_fingerprint(names: list[str], hashes: list[str]) -> str:
    """Hash of every image's name and content hash (never its size or mtime, which a replaced
    image can keep)."""
    h = hashlib.sha256()
    for nm, fh in zip(names, hashes):
        h.update(f"{nm}|{fh}\n".encode())
    return h.hexdigest()


def _stat_fingerprint(images: Path, names: list[str]) -> str:
    """Hash of every image's inode, size, mtime and *ctime*: any write to a file, or an ``os.utime``
    that restores its mtime, changes its ctime, which no user call can set back. Used only to find the
    content fingerprint computed last time without re-reading every image."""
    h = hashlib.sha256(f"{images.resolve()}\n".encode())
    for nm in names:
        st = (images / nm).stat()
        h.update(f"{nm}|{st.st_ino}|{st.st_size}|{st.st_mtime_ns}|{st.st_ctime_ns}\n".encode())
    return h.hexdigest()


def _content_fingerprint(images: Path, names: list[str], cache_root: Path) -> tuple[str, list[str]]:
    """(fingerprint of the images' bytes, their sha1s in ``names`` order). The sha1s are read again only
    when some file's inode, size, mtime or ctime changed since they were last read (or the memo of that
    time is unusable: its sha1s must give its fingerprint back)."""
    memo = cache_root / "precomp" / "file-hashes" / f"flickr8k-{_stat_fingerprint(images, names)[:16]}.json"
    try:
        m = json.loads(memo.read_text())
        hashes = [str(h) for h in m["hashes"]]
        if len(hashes) == len(names) and _images_fingerprint(names, hashes) == m["content"]:
            return m["content"], hashes
    except (OSError, ValueError, KeyError, TypeError):
        pass
    hashes = [file_hash(images / nm) for nm in names]
    content = _images_fingerprint(names, hashes)
    atomic_write_json(memo, {"content": content, "images": str(images), "n_images": len(names), "hashes": hashes})
    return content, hashes


def missing_feature_rows(split) -> np.ndarray:
    """Rows of ``split`` without image features (NaN rows: training images that a
    ``load_flickr8k(train_images=...)`` call left unfeaturised)."""
    return np.flatnonzero(~np.isfinite(split.features).all(axis=1))


def load_flickr8k(
    data_dir=None,
    cache_dir=None,
    precision: str = "float32",
    batch_size: int = FEATURE_BATCH,
    progress: bool = True,
    judgements: bool = True,
    bad_lines: str = "warn",
    train_images=None,
) -> DataSplits:
    """Train/dev/test of Flickr8k with EfficientNet-Lite0 features and aligned human judgements.

    ``train_images``: the training images that need features — None: all of them (the whole release is
    featurised once and written as a precomp folder); ``"cached"``: those the feature cache holds; or a
    collection of image file names: those (computed when missing) and any the cache holds. Dev and test
    images are always featurised. A training image left out has a NaN feature row
    (:func:`missing_feature_rows`); a run must train on featurised rows only. Features come from the same
    per-image cache either way, so a subset then the rest gives the features of featurising everything."""
    root = flickr8k_dir(data_dir)
    index = flickr8k_index(root)
    images = root / "images"
    all_names = [nm for s in ("train", "dev", "test") for nm in index[s][0]]
    content, hashes = _content_fingerprint(images, all_names, _cache_root(cache_dir))
    if train_images is not None and not isinstance(train_images, str):
        train_images = set(train_images)
        unknown = sorted(train_images - set(index["train"][0]))
        if unknown:
            raise ValueError(
                f"train_images: {len(unknown)} name(s) not in the training split list "
                f"{root / SPLIT_FILES['train']}, e.g. {unknown[0]!r}"
            )
    elif train_images not in (None, "cached"):
        raise ValueError(f"train_images={train_images!r} is invalid; expected None, 'cached' or image file names")
    key_src = "|".join(
        [encoder_key(precision, batch_size), content]
        + [f"{s}:" + "\n".join(index[s][1]) for s in ("train", "dev", "test")]
    )
    key = hashlib.sha256(key_src.encode()).hexdigest()[:16]
    folder = _cache_root(cache_dir) / "precomp" / f"flickr8k-{key}"
    done = folder / "DONE.json"
    out = {}
    if done.exists():
        out = {s: load_precomp_split(folder, s, "flickr8k") for s in ("train", "dev", "test")}
    else:
        store = FeatureStore(cache_dir, precision, batch_size)
        n_train = len(index["train"][0])
        if train_images is None:
            pick = list(range(len(all_names)))
        else:  # the wanted training images, those the cache holds, and every dev and test image
            wanted = set() if train_images == "cached" else train_images
            pick = [
                i for i, (nm, h) in enumerate(zip(all_names, hashes)) if i >= n_train or nm in wanted or h in store.rows
            ]
        feats = np.full((len(all_names), FEATURE_DIM), np.nan, dtype=np.float32)
        feats[pick] = extract_features(
            [images / all_names[i] for i in pick],
            cache_dir=cache_dir,
            batch_size=batch_size,
            precision=precision,
            progress=progress,
            hashes=[hashes[i] for i in pick],
            desc="Flickr8k images → EfficientNet-Lite0 features",
            store=store,
        )
        start = 0
        for s in ("train", "dev", "test"):
            names, caps = index[s]
            out[s] = CaptionedImages(f"flickr8k/{s}", feats[start : start + len(names)], list(caps), list(names))
            start += len(names)
        if len(pick) == len(all_names):  # every image featurised: later loads read one precomp folder
            for s, sp in out.items():
                write_precomp_split(folder, s, sp.features, sp.captions, sp.image_ids)
            atomic_write_json(
                done,
                {
                    "encoder": encoder_key(precision, batch_size),
                    "source": str(root),
                    "n_images": {s: len(index[s][0]) for s in index},
                },
            )
    if judgements:
        tables = {}
        for kind, fname in (("expert", EXPERT_FILE), ("crowd", CROWD_FILE)):
            if (root / fname).is_file():
                tables[kind] = read_judgements(root / fname, kind, bad_lines)
            elif str(root / fname) not in _WARNED:
                _WARNED.add(str(root / fname))
                warnings.warn(
                    f"Flickr8k judgement file {root / fname} does not exist: the {kind} judgements "
                    f"(and the metrics that need them) are left out",
                    Flickr8kWarning,
                    stacklevel=2,
                )
        for s, sp in out.items():
            for kind, df in tables.items():
                al = align_judgements(df, sp.image_ids, kind)
                if len(al):
                    sp.extras[kind] = al
    return DataSplits(out["train"], out["dev"], out["test"])
