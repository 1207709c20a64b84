"""The VSE++/SCAN precomp loader: round trip, per-caption rows, and every bad-input path."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from coherent_itr.data import load_splits
from coherent_itr.data.precomp import load_precomp, load_precomp_split, write_precomp_split


def _caps(n_img, split="train"):
    return [f"{split} image {i} caption {k} ." for i in range(n_img) for k in range(5)]


def _write(folder, n=(4, 2, 3), per_caption=False, d=6, seed=0):
    rng = np.random.default_rng(seed)
    feats = {}
    for split, n_img in zip(("train", "dev", "test"), n):
        f = rng.normal(size=(n_img, d)).astype(np.float32)
        feats[split] = f
        folder.mkdir(parents=True, exist_ok=True)
        np.save(folder / f"{split}_ims.npy", np.repeat(f, 5, axis=0) if per_caption else f)
        (folder / f"{split}_caps.txt").write_text("".join(c + "\n" for c in _caps(n_img, split)))
    return feats


@pytest.mark.parametrize("per_caption", [False, True])
def test_round_trip_and_per_caption_rows(tmp_path, per_caption):
    feats = _write(tmp_path / "f30k_precomp", per_caption=per_caption)
    s = load_splits("precomp", data_dir=str(tmp_path), scale="f30k")
    for split, part in zip(("train", "dev", "test"), (s.train, s.dev, s.test)):
        assert part.name == f"f30k/{split}"
        assert np.array_equal(part.features, feats[split])  # one row per image
        assert part.captions == _caps(len(feats[split]), split)
        assert list(part.image_of_caption[:6]) == [0, 0, 0, 0, 0, 1]


def test_folder_variants_ids_and_coco_testall(tmp_path):
    _write(tmp_path / "coco", n=(3, 2, 2))
    np.save(tmp_path / "coco" / "testall_ims.npy", np.ones((5, 6), np.float32))
    (tmp_path / "coco" / "testall_caps.txt").write_text("".join(c + "\n" for c in _caps(5, "testall")))
    (tmp_path / "coco" / "dev_ids.txt").write_text("391895\n522418\n")
    s = load_precomp(tmp_path, "coco")
    assert s.test.n_images == 5 and s.test.name == "coco/test"
    assert s.dev.image_ids == ["391895", "522418"]
    _write(tmp_path / "plain", n=(2, 2, 2))
    assert load_precomp(tmp_path / "plain", "f8k").train.n_images == 2  # files directly in data_dir


def test_write_precomp_split_round_trip(tmp_path):
    f = np.arange(12, dtype=np.float32).reshape(2, 6)
    write_precomp_split(tmp_path, "dev", f, _caps(2, "dev"), ["a.jpg", "b.jpg"])
    s = load_precomp_split(tmp_path, "dev", "f8k")
    assert np.array_equal(s.features, f) and s.image_ids == ["a.jpg", "b.jpg"] and s.captions == _caps(2, "dev")
    with pytest.raises(ValueError, match="empty or contains a newline"):
        write_precomp_split(tmp_path, "dev", f, _caps(2)[:-1] + ["  "])


def _bad(tmp_path):
    folder = tmp_path / "f8k_precomp"
    _write(folder)
    return folder


def test_mismatched_counts_name_both_files(tmp_path):
    folder = _bad(tmp_path)
    np.save(folder / "dev_ims.npy", np.zeros((3, 6), np.float32))  # 2 images × 5 captions expected
    with pytest.raises(ValueError, match=r"dev_ims\.npy: 3 feature rows.*dev_caps\.txt has 10 captions"):
        load_precomp(tmp_path, "f8k")


def test_caption_count_not_multiple_of_five(tmp_path):
    folder = _bad(tmp_path)
    (folder / "test_caps.txt").write_text("".join(c + "\n" for c in _caps(3, "test")[:-1]))
    with pytest.raises(ValueError, match=r"test_caps\.txt: 14 captions is not a multiple of 5"):
        load_precomp(tmp_path, "f8k")


@pytest.mark.parametrize("bad_value", [np.nan, np.inf, -np.inf])
def test_non_finite_features(tmp_path, bad_value):
    folder = _bad(tmp_path)
    f = np.ones((4, 6), np.float32)
    f[2, 3] = bad_value
    np.save(folder / "train_ims.npy", f)
    with pytest.raises(
        ValueError, match=r"train_ims\.npy: 1 feature row\(s\) contain NaN or infinite values \(first: row 2\)"
    ):
        load_precomp(tmp_path, "f8k")


def test_empty_caption_names_file_and_line(tmp_path):
    folder = _bad(tmp_path)
    caps = _caps(4)
    caps[6] = "   "
    (folder / "train_caps.txt").write_text("\n".join(caps) + "\n")
    with pytest.raises(ValueError, match=r"train_caps\.txt: line 7: empty caption"):
        load_precomp(tmp_path, "f8k")


def test_pickles_are_refused(tmp_path):
    folder = _bad(tmp_path)
    np.save(folder / "dev_ims.npy", np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
    with pytest.raises(ValueError, match=r"dev_ims\.npy: cannot load without pickles"):
        load_precomp(tmp_path, "f8k")
    with open(folder / "dev_ims.npy", "wb") as fh:  # a raw pickle where an array is expected
        pickle.dump(np.zeros((2, 6)), fh)
    with pytest.raises(ValueError, match=r"dev_ims\.npy"):
        load_precomp(tmp_path, "f8k")


def test_region_features_non_numeric_and_per_caption_mismatch(tmp_path):
    folder = _bad(tmp_path)
    np.save(folder / "train_ims.npy", np.zeros((4, 36, 8), np.float32))
    with pytest.raises(ValueError, match=r"train_ims\.npy: got region features of shape \(4, 36, 8\)"):
        load_precomp(tmp_path, "f8k")
    np.save(folder / "train_ims.npy", np.array([["a", "b"]] * 4))
    with pytest.raises(ValueError, match=r"train_ims\.npy: features must be a real numeric array"):
        load_precomp(tmp_path, "f8k")
    rows = np.random.default_rng(0).normal(size=(20, 6))  # 20 rows = per caption, but not repeated
    np.save(folder / "train_ims.npy", rows)
    with pytest.raises(ValueError, match=r"train_ims\.npy: one row per caption .* image 0 .* differ"):
        load_precomp(tmp_path, "f8k")


def test_missing_things(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_precomp(tmp_path / "nowhere", "f8k")
    with pytest.raises(FileNotFoundError, match="no precomp files for 'f30k'"):
        load_precomp(tmp_path, "f30k")
    folder = _bad(tmp_path)
    (folder / "dev_ims.npy").unlink()
    with pytest.raises(FileNotFoundError, match=r"dev_ims\.npy does not exist"):
        load_precomp(tmp_path, "f8k")
    with pytest.raises(ValueError, match="name='imagenet'"):
        load_precomp(tmp_path, "imagenet")
    with pytest.raises(ValueError, match="must name the data set"):
        load_splits("precomp", data_dir=str(tmp_path), scale="default")
