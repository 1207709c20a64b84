"""Flickr8k: the loader's bad-input paths on a small fake release, EfficientNet-Lite0 features on a
handful of images, the human judgement tables, and (when FLICKR8K_DIR is set) the real release."""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from coherent_itr import determinism
from coherent_itr.data import features as ft
from coherent_itr.data import flickr8k as f8
from helpers import SPLITS, make_release


@pytest.fixture
def release(tmp_path):
    return make_release(tmp_path / "flickr8k")


def test_index_order_and_one_warning_for_the_bogus_image(release):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        idx = f8.flickr8k_index(release)
    ours = [w for w in rec if issubclass(w.category, f8.Flickr8kWarning)]
    assert len(ours) == 1 and "2258277193_586949ec62.jpg.1 (5 captions)" in str(ours[0].message)
    names, caps = idx["test"]
    assert names == SPLITS["test"]
    assert caps[7] == "A caption 2 of 31_e.jpg ."  # image 1, caption 2 → row 5·1 + 2
    assert len(idx["train"][1]) == 10


def test_missing_folder_and_files(tmp_path, release, monkeypatch):
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    with pytest.raises(FileNotFoundError, match="FLICKR8K_DIR"):
        f8.flickr8k_index(None)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        f8.flickr8k_index(tmp_path / "nope")
    (release / f8.SPLIT_FILES["dev"]).unlink()
    with pytest.raises(FileNotFoundError, match=r"Flickr_8k\.devImages\.txt does not exist"):
        f8.flickr8k_index(release)


def test_missing_image_names_list_file_and_line(release):
    (release / "images" / "31_e.jpg").unlink()
    with pytest.raises(FileNotFoundError, match=r"Flickr_8k\.testImages\.txt: line 2: image 31_e\.jpg not found"):
        f8.flickr8k_index(release)


def test_malformed_split_list(release):
    (release / f8.SPLIT_FILES["train"]).write_text("10_a.jpg\nthis is not a file name\n")
    with pytest.raises(ValueError, match=r"trainImages\.txt: line 2: expected an image file name"):
        f8.flickr8k_index(release)


@pytest.mark.parametrize(
    "line, message",
    [
        ("30_d.jpg#1 A caption without a tab", r"line 3: malformed caption line"),
        ("30_d.jpg#7\tA caption", r"line 3: caption number '7' of 30_d\.jpg is not in 0–4"),
        ("30_d.jpg#1\t   ", r"line 3: empty caption for 30_d\.jpg#1"),
        ("30_d.jpg\tno number", r"line 3: malformed caption line"),
    ],
)
def test_malformed_caption_lines_name_file_and_line(release, line, message):
    path = release / f8.TOKEN_FILE
    lines = path.read_text().splitlines()
    lines[2] = line
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"Flickr8k\.token\.txt: " + message):
        f8.flickr8k_index(release)


@pytest.mark.filterwarnings("ignore::coherent_itr.data.flickr8k.Flickr8kWarning")
def test_missing_and_duplicate_captions(release):
    path = release / f8.TOKEN_FILE
    lines = path.read_text().splitlines()
    path.write_text("\n".join(l for l in lines if not l.startswith("20_c.jpg#4")) + "\n")
    with pytest.raises(ValueError, match=r"image 20_c\.jpg has captions \[0, 1, 2, 3\]"):
        f8.flickr8k_index(release)
    path.write_text("\n".join(lines + ["10_a.jpg#0\tagain ."]) + "\n")
    with pytest.raises(ValueError, match=rf"line {len(lines) + 1}: duplicate caption 10_a\.jpg#0"):
        f8.flickr8k_index(release)


def test_judgements_aligned_and_bad_lines_skipped_with_one_warning(release):
    test_names = SPLITS["test"]
    ex = f8.align_judgements(f8.read_judgements(release / f8.EXPERT_FILE, "expert"), test_names, "expert")
    assert ex[["image_idx", "caption_idx"]].values.tolist() == [[0, 2], [0, 5], [1, 4]]
    assert ex["score"].tolist() == pytest.approx([11 / 3, 5 / 3, 8 / 3])
    assert ex["is_gt"].tolist() == [True, False, False]
    assert ex.attrs["n_dropped"] == 1
    with pytest.warns(
        f8.Flickr8kWarning, match=r"CrowdFlowerAnnotations\.txt: skipped 1 malformed line\(s\) \(line 2\)"
    ):
        raw = f8.read_judgements(release / f8.CROWD_FILE, "crowd")
    cr = f8.align_judgements(raw, test_names, "crowd")
    assert cr[["image_idx", "caption_idx", "score", "is_gt"]].values.tolist() == [
        [0, 8, pytest.approx(1 / 3), False],
        [1, 6, 1.0, True],
    ]
    with pytest.raises(ValueError, match=r"CrowdFlowerAnnotations\.txt: line 2: malformed"):
        f8.read_judgements(release / f8.CROWD_FILE, "crowd", bad_lines="error")
    (release / f8.EXPERT_FILE).write_text("30_d.jpg\t30_d.jpg#2\t4\t5\t3\n")
    with pytest.raises(ValueError, match=r"line 1: malformed judgement line \(expert scores \[4, 5, 3\] not in 1–4\)"):
        f8.read_judgements(release / f8.EXPERT_FILE, "expert", bad_lines="error")


def test_load_flickr8k_features_precomp_layout_and_cache(release, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    with pytest.warns(f8.Flickr8kWarning):
        s = f8.load_flickr8k(release, cache_dir=cache, progress=False)
    assert (s.train.n_images, s.dev.n_images, s.test.n_images) == (2, 1, 2)
    assert s.test.image_ids == SPLITS["test"] and s.test.features.shape == (2, 1280)
    assert s.test.captions[5] == "A caption 0 of 31_e.jpg ."
    assert list(s.test.extras["expert"]["caption_idx"]) == [2, 5, 4]
    assert "crowd" in s.train.extras and list(s.train.extras["crowd"]["caption_idx"]) == [5]
    folders = list((cache / "precomp").glob("flickr8k-*"))
    assert len(folders) == 1 and (folders[0] / "test_ims.npy").exists() and (folders[0] / "test_caps.txt").exists()
    # features equal the network's own pooled features: its classifier applied to them gives its logits
    model = ft.load_encoder()
    x = torch.from_numpy(np.stack([ft.load_image(release / "images" / n) for n in SPLITS["test"]]))
    with torch.no_grad():
        logits = model(x)
        from_ours = model._fc(torch.from_numpy(s.test.features))
    np.testing.assert_allclose(from_ours.numpy(), logits.numpy(), rtol=1e-4, atol=1e-4)
    # second load: from the precomp cache, no network
    monkeypatch.setattr(ft, "encode_images", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-extracted")))
    monkeypatch.setattr(f8, "extract_features", lambda *a, **k: (_ for _ in ()).throw(AssertionError("re-extracted")))
    with pytest.warns(f8.Flickr8kWarning):
        s2 = f8.load_flickr8k(release, cache_dir=cache, progress=False)
    assert np.array_equal(s2.test.features, s.test.features)


def test_feature_cache_is_keyed_by_content(release, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    imgs = release / "images"
    a = ft.extract_features([imgs / "10_a.jpg", imgs / "11_b.jpg"], cache_dir=cache, progress=False)
    calls = []
    real = ft.encode_padded
    monkeypatch.setattr(ft, "encode_padded", lambda b, n, p="float32": calls.append(len(b)) or real(b, n, p))
    # the same bytes under another name: served from the cache
    (imgs / "copy.jpg").write_bytes((imgs / "10_a.jpg").read_bytes())
    b = ft.extract_features([imgs / "copy.jpg", imgs / "11_b.jpg"], cache_dir=cache, progress=False)
    assert calls == [] and np.array_equal(a, b)
    # changed content: recomputed (only that image)
    (imgs / "copy.jpg").write_bytes((imgs / "20_c.jpg").read_bytes())
    c = ft.extract_features([imgs / "copy.jpg", imgs / "11_b.jpg"], cache_dir=cache, progress=False)
    assert calls == [1] and not np.allclose(c[0], a[0])
    (imgs / "broken.jpg").write_bytes(b"not a jpeg")
    with pytest.raises(ValueError, match=r"broken\.jpg: cannot read the image"):
        ft.extract_features([imgs / "broken.jpg"], cache_dir=cache, progress=False)
    with pytest.raises(FileNotFoundError, match="missing.jpg"):
        ft.extract_features([imgs / "missing.jpg"], cache_dir=cache, progress=False)


def _counting_encoder(monkeypatch) -> list[int]:
    """Patch the encoder to record how many images each forward pass encodes (not counting its padding); returns
    the record."""
    calls: list[int] = []
    real = ft.encode_padded
    monkeypatch.setattr(ft, "encode_padded", lambda b, n, p="float32": calls.append(len(b)) or real(b, n, p))
    return calls


def test_an_images_feature_has_the_same_bits_whatever_shares_its_forward_pass(release, tmp_path):
    """Every forward pass is padded to the feature batch size: an image encoded alone, with others, on 1 or 2
    threads, or by hand inside a full batch of 32 other images gets the same bits (oneDNN's kernels depend on the
    batch shape and thread count, so unpadded passes gave features that differed by up to 3e-6)."""
    imgs = release / "images"
    paths = [imgs / n for n in ("10_a.jpg", "11_b.jpg", "20_c.jpg")]
    got = {}
    for threads in (1, 2):
        got["alone", threads] = ft.extract_features(paths[:1], cache_dir=False, progress=False, num_threads=threads)
        got["three", threads] = ft.extract_features(paths, cache_dir=False, progress=False, num_threads=threads)
    rng = np.random.default_rng(0)
    batch = rng.normal(size=(ft.FEATURE_BATCH, 3, ft.IMAGE_SIZE, ft.IMAGE_SIZE)).astype(np.float32)
    batch[5] = ft.load_image(paths[0])  # among 31 noise images, not first
    prev = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        by_hand = ft.encode_images(batch)[5]
    finally:
        torch.set_num_threads(prev)
    for (how, threads), feats in got.items():
        assert np.array_equal(feats[0], by_hand), (how, threads)
    assert np.array_equal(got["three", 1], got["three", 2])
    with pytest.raises(ValueError, match=r"33 images for a forward pass of 32"):
        ft.encode_padded(np.zeros((33, 3, 2, 2), np.float32), ft.FEATURE_BATCH)


def test_the_feature_cache_key_names_the_batch_size(tmp_path):
    tag = determinism.cpu_tag()
    assert ft.encoder_key().endswith(f"-pad{ft.FEATURE_BATCH}{tag}")
    assert ft.encoder_key(batch_size=4).endswith(f"-pad4{tag}")
    store = ft.FeatureStore(tmp_path, batch_size=4)
    with pytest.raises(ValueError, match="a feature store of batch size 4 for features of batch size 32"):
        ft.extract_features([], store=store, progress=False)


def test_a_training_subset_then_the_rest_gives_the_features_of_featurising_everything(release, tmp_path, monkeypatch):
    """Featurise one training image (plus dev and test), then the whole release into the same cache: the
    second load encodes only the image the first left out, and every feature equals featurising the whole
    release at once into a fresh cache."""
    calls = _counting_encoder(monkeypatch)
    part_cache, whole_cache = tmp_path / "part", tmp_path / "whole"
    with pytest.warns(f8.Flickr8kWarning):
        sub = f8.load_flickr8k(release, cache_dir=part_cache, progress=False, train_images={"11_b.jpg"})
    assert sum(calls) == 4  # 11_b + the dev image + the two test images; 10_a never read
    assert f8.missing_feature_rows(sub.train).tolist() == [0]  # 10_a.jpg is a NaN row
    assert np.isfinite(sub.train.features[1]).all() and f8.missing_feature_rows(sub.test).size == 0
    assert not list((part_cache / "precomp").glob("flickr8k-*/DONE.json"))  # no precomp folder for a subset
    calls.clear()
    with pytest.warns(f8.Flickr8kWarning):
        cached = f8.load_flickr8k(release, cache_dir=part_cache, progress=False, train_images="cached")
    assert calls == [] and f8.missing_feature_rows(cached.train).tolist() == [0]
    with pytest.warns(f8.Flickr8kWarning):
        rest = f8.load_flickr8k(release, cache_dir=part_cache, progress=False)
    assert calls == [1]  # only 10_a.jpg
    calls.clear()
    with pytest.warns(f8.Flickr8kWarning):
        whole = f8.load_flickr8k(release, cache_dir=whole_cache, progress=False)
    assert sum(calls) == 5
    for s in ("train", "dev", "test"):
        a, b = getattr(rest, s), getattr(whole, s)
        np.testing.assert_allclose(a.features, b.features, rtol=0, atol=1e-6)
        assert a.captions == b.captions and a.image_ids == b.image_ids and a.name == b.name
    np.testing.assert_array_equal(sub.train.features[1], rest.train.features[1])
    np.testing.assert_array_equal(sub.test.features, rest.test.features)
    # every image featurised: the whole set went to a precomp folder, read by the next load without encoding
    assert len(list((part_cache / "precomp").glob("flickr8k-*/DONE.json"))) == 1
    calls.clear()
    with pytest.warns(f8.Flickr8kWarning):
        again = f8.load_flickr8k(release, cache_dir=part_cache, progress=False, train_images="cached")
    assert calls == [] and np.array_equal(again.train.features, rest.train.features)


@pytest.mark.filterwarnings("ignore::coherent_itr.data.flickr8k.Flickr8kWarning")
def test_train_images_must_be_training_images(release, tmp_path):
    with pytest.raises(ValueError, match=r"not in the training split list .*trainImages\.txt, e\.g\. '20_c\.jpg'"):
        f8.load_flickr8k(release, cache_dir=tmp_path, progress=False, train_images=["20_c.jpg"])
    with pytest.raises(ValueError, match=r"train_images='some' is invalid"):
        f8.load_flickr8k(release, cache_dir=tmp_path, progress=False, train_images="some")


def test_a_damaged_feature_part_is_skipped_and_recomputed(release, tmp_path, monkeypatch):
    imgs = release / "images"
    paths = [imgs / "10_a.jpg", imgs / "11_b.jpg"]
    a = ft.extract_features(paths, cache_dir=tmp_path, progress=False, save_every=1, batch_size=1)
    parts = sorted((tmp_path / "features").glob("*/part-*.npz"))
    assert len(parts) == 2
    z = dict(np.load(parts[0], allow_pickle=False))
    bad = z["features"].copy()
    bad[0, 3] = np.nan
    from coherent_itr.io import atomic_save_npz

    atomic_save_npz(parts[0], hashes=z["hashes"], features=bad)
    parts[1].write_bytes(parts[1].read_bytes()[:100])  # truncated
    calls = _counting_encoder(monkeypatch)
    with pytest.warns(ft.FeatureCacheWarning, match=r"part-.*non-finite") as rec:
        b = ft.extract_features(paths, cache_dir=tmp_path, progress=False, batch_size=1)
    assert any("unreadable" in str(w.message) for w in rec)
    assert calls == [1, 1]
    np.testing.assert_array_equal(a, b)


def test_prepare_draws_the_training_subset_that_train_draws():
    """``reproduce.protocol.prepare.train_rows`` (which images preparation featurises) against the subset
    ``coherent_itr.train`` trains on, for several fractions and seeds."""
    from coherent_itr.config import Config
    from coherent_itr.data.base import CaptionedImages
    from coherent_itr.train import _train_subset
    from reproduce.protocol.prepare import train_images_needed, train_rows

    n = 300
    split = CaptionedImages(
        "x/train", np.zeros((n, 1), np.float32), [f"c{i}" for i in range(5 * n)], [f"{i}.jpg" for i in range(n)]
    )
    names = split.image_ids
    for frac, seed in ((0.1, 0), (0.1, 1), (0.25, 2), (1.0, 0), (0.02, 5)):
        cfg = Config(train_fraction=frac, seed=seed)
        want = _train_subset(split, frac, seed).image_ids
        assert [names[i] for i in train_rows(cfg, n)] == want
    union = train_images_needed([Config(train_fraction=0.1, seed=0), Config(train_fraction=0.1, seed=1)], names)
    assert union == set(_train_subset(split, 0.1, 0).image_ids) | set(_train_subset(split, 0.1, 1).image_ids)
    assert train_images_needed([Config(train_fraction=0.1), Config()], names) is None


def test_a_worker_featurises_the_images_of_its_run_that_preparation_did_not(release, tmp_path, monkeypatch):
    """``worker._splits_for``: a run whose training subset lacks features gets them before it trains."""
    from coherent_itr.config import Config
    from reproduce.driver import worker

    monkeypatch.setenv("FLICKR8K_DIR", str(release))
    cache = tmp_path / "cache"
    with pytest.warns(f8.Flickr8kWarning):
        f8.load_flickr8k(release, cache_dir=cache, progress=False, train_images=[])  # dev and test only
    calls = _counting_encoder(monkeypatch)
    worker._SPLITS.clear()
    cfg = Config(data="flickr8k", data_dir=str(release), train_fraction=1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", f8.Flickr8kWarning)
        splits = worker._splits_for(cfg, str(cache), 1)
    worker._SPLITS.clear()
    assert sum(calls) == 2 and f8.missing_feature_rows(splits.train).size == 0


def test_preprocessing_is_imagenet_normalised_224(release):
    from PIL import Image

    x = ft.load_image(release / "images" / "11_b.jpg")  # a 300×200 image
    assert x.shape == (3, 224, 224) and x.dtype == np.float32
    raw = np.asarray(Image.open(release / "images" / "10_a.jpg").convert("RGB"), dtype=np.float64) / 255
    y = ft.load_image(release / "images" / "10_a.jpg")
    np.testing.assert_allclose(y[1], (raw[:, :, 1] - 0.456) / 0.224, atol=1e-5)


# ------------------------------------------------------------------------------------------------
# the real release (FLICKR8K_DIR)
# ------------------------------------------------------------------------------------------------
@pytest.mark.flickr8k
def test_real_release_index_and_bogus_image(flickr8k_dir):
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        idx = f8.flickr8k_index(flickr8k_dir)
    ours = [w for w in rec if issubclass(w.category, f8.Flickr8kWarning)]
    assert len(ours) == 1 and "2258277193_586949ec62.jpg.1" in str(ours[0].message)
    assert [len(idx[s][0]) for s in ("train", "dev", "test")] == [6000, 1000, 1000]
    assert [len(idx[s][1]) for s in ("train", "dev", "test")] == [30000, 5000, 5000]
    # spot check against the raw file, read independently
    raw = {}
    for line in (Path(flickr8k_dir) / f8.TOKEN_FILE).read_text().splitlines():
        k, c = line.split("\t")
        raw[k] = c.strip()
    names, caps = idx["test"]
    for i in (0, 499, 999):
        for k in range(5):
            assert caps[5 * i + k] == raw[f"{names[i]}#{k}"]


@pytest.mark.flickr8k
@pytest.mark.filterwarnings("ignore::coherent_itr.data.flickr8k.Flickr8kWarning")
def test_real_judgements(flickr8k_dir):
    root = Path(flickr8k_dir)
    idx = f8.flickr8k_index(root)
    names, caps = idx["test"]
    ex = f8.align_judgements(f8.read_judgements(root / f8.EXPERT_FILE, "expert"), names, "expert")
    assert len(ex) == 5822 and ex.attrs["n_dropped"] == 0
    assert int(ex["is_gt"].sum()) == 158
    assert ex["image_idx"].nunique() == 1000 and ex["score"].between(1, 4).all()
    raw_lines = (root / f8.EXPERT_FILE).read_text().splitlines()
    for r in (0, 2000, 5821):
        img, cap_id, *scores = raw_lines[r].split("\t")
        row = ex.iloc[r]
        assert names[row.image_idx] == img and row.score == pytest.approx(np.mean([int(x) for x in scores]))
        cap_img, k = cap_id.split("#")
        assert row.caption_idx == 5 * names.index(cap_img) + int(k)
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        cr_raw = f8.read_judgements(root / f8.CROWD_FILE, "crowd")
    n_bad = cr_raw.attrs["n_lines"] - len(cr_raw)
    assert len([w for w in rec if issubclass(w.category, f8.Flickr8kWarning)]) == (1 if n_bad else 0)
    cr = f8.align_judgements(cr_raw, names, "crowd")
    assert len(cr) > 40000 and cr["score"].between(0, 1).all()
    print(
        f"\nDATA CARD flickr8k judgements: expert {len(ex)} pairs ({int(ex.is_gt.sum())} GT); crowd file "
        f"{cr_raw.attrs['n_lines']} lines, {n_bad} malformed ({cr_raw.attrs['skipped_lines']}), "
        f"{len(cr)} aligned to test ({int(cr.is_gt.sum())} GT)"
    )


@pytest.mark.flickr8k
@pytest.mark.filterwarnings("ignore::coherent_itr.data.flickr8k.Flickr8kWarning")
def test_real_images_features_handful(flickr8k_dir, tmp_path):
    names = f8.flickr8k_index(flickr8k_dir)["test"][0][:3]
    paths = [Path(flickr8k_dir) / "images" / n for n in names]
    a = ft.extract_features(paths, cache_dir=tmp_path, batch_size=2, progress=False)
    assert a.shape == (3, 1280) and np.isfinite(a).all() and (a >= -0.3).all()  # pooled swish ≥ −0.28
    model = ft.load_encoder()
    x = torch.from_numpy(np.stack([ft.load_image(p) for p in paths]))
    with torch.no_grad():
        probs = torch.softmax(model(x), dim=1)
    # a trained ImageNet classifier is confident on real photos (random weights would give ≈ 1/1000)
    assert probs.max(dim=1).values.mean() > 0.1


def test_the_data_card_lists_the_release_warnings_once_and_other_readers_stay_quiet(release, monkeypatch):
    from reproduce.protocol.study import Study, data_warnings

    monkeypatch.setenv("FLICKR8K_DIR", str(release))
    notes = data_warnings("flickr8k")
    assert len(notes) == 2 and all(str(release) not in m for m in notes)
    assert notes[0].startswith("$FLICKR8K_DIR/Flickr8k.token.txt") and "2258277193_586949ec62.jpg.1" in notes[0]
    assert "CrowdFlowerAnnotations.txt" in notes[1] and "malformed" in notes[1]
    assert data_warnings("synthetic") == []
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        Study("smoke", "flickr8k")  # a notebook's study: the release's warnings are silenced in its kernel
        f8.flickr8k_index(release)
    assert not [w for w in rec if issubclass(w.category, f8.Flickr8kWarning)]


def test_features_of_one_cpu_are_never_served_to_another(tmp_path, monkeypatch):
    """A feature's last bits depend on the CPU's kernels, and a run's key names its CPU: a cache shared by two CPUs
    (a cluster's) keeps their features apart, and the reference CPU's folder keeps its name. Both CPUs are planted."""
    monkeypatch.setattr(determinism, "cpu_identity", lambda: determinism.REFERENCE_CPU)
    reference = ft.FeatureStore(tmp_path)
    reference.save(["a" * 40, "b" * 40], np.ones((2, ft.FEATURE_DIM), np.float32))
    assert reference.folder.name == ft.encoder_key() and "@" not in reference.folder.name
    monkeypatch.setattr(determinism, "cpu_identity", lambda: "GenuineIntel/AVX512")
    other = ft.FeatureStore(tmp_path)
    assert other.rows == {} and other.folder.name == reference.folder.name + "@GenuineIntel-AVX512"
    other.save(["a" * 40], np.zeros((1, ft.FEATURE_DIM), np.float32))
    monkeypatch.setattr(determinism, "cpu_identity", lambda: determinism.REFERENCE_CPU)
    again = ft.FeatureStore(tmp_path)
    assert sorted(again.rows) == ["a" * 40, "b" * 40] and again.rows["a" * 40].min() == 1.0
