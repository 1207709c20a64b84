"""The data bundle (``python -m reproduce.bundle``): on the small fake Flickr8k release, training and evaluating
from the bundle give exactly the numbers of the release folder whose features and caption embeddings are
float16-rounded, with no photo, image encoder or sentence model at hand; a changed or missing file is named."""

from __future__ import annotations

import hashlib
import json
import shutil
import zlib

import numpy as np
import pandas as pd
import pytest
from helpers import SPLITS, make_release
from tiny_run import tiny

from coherent_itr import data as data_mod
from coherent_itr import evaluation
from coherent_itr.config import Config
from coherent_itr.data import bundle as bd
from coherent_itr.data import features as ft
from coherent_itr.data import flickr8k as f8
from coherent_itr.data import sbert
from coherent_itr.train import train
from reproduce.driver import bundle as cli

pytestmark = pytest.mark.filterwarnings("ignore::coherent_itr.data.flickr8k.Flickr8kWarning")


def _rounded(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def _fake_features(paths, **kw) -> np.ndarray:
    """Deterministic per-photo 'features', already float16-exact (the inputs both routes share)."""
    rows = [np.random.default_rng(zlib.crc32(p.name.encode())).normal(0.3, 0.5, 1280) for p in paths]
    return _rounded(np.stack(rows).astype(np.float32))


def _fake_embed(captions, cache_dir=None, batch_size=256, progress=None) -> np.ndarray:
    """Deterministic unit vectors per caption text, float16-exact."""
    rows = []
    for c in captions:
        v = np.random.default_rng(zlib.crc32(c.encode())).normal(size=384)
        rows.append(v / np.linalg.norm(v))
    return _rounded(np.stack(rows).astype(np.float32))


def _refuse(what):
    def fail(*a, **k):
        raise AssertionError(f"{what} was called while training from a bundle")

    return fail


@pytest.fixture
def built(tmp_path, monkeypatch, capsys):
    release = make_release(tmp_path / "flickr8k")
    monkeypatch.setattr(f8, "extract_features", _fake_features)
    monkeypatch.setattr(sbert, "embed_captions", _fake_embed)
    out = tmp_path / "bundle"
    rc = cli.main(["--data", "flickr8k", "--out", str(out), "--data-dir", str(release), "--quiet"])
    assert rc == 0, capsys.readouterr().err
    assert "bundle " in capsys.readouterr().out
    return release, out


def test_the_bundle_holds_what_training_needs_and_nothing_else(built):
    release, out = built
    files = {p.name for p in out.iterdir()}
    per_split = {f"{s}_{k}" for s in ("train", "dev", "test") for k in ("ims.npy", "caps.txt", "ids.txt", "sbert.npy")}
    assert files == per_split | {bd.MANIFEST, f8.EXPERT_FILE, f8.CROWD_FILE}
    manifest = json.loads((out / bd.MANIFEST).read_text())
    assert set(manifest["files"]) == files - {bd.MANIFEST}
    for name, f in manifest["files"].items():  # checksums, computed here independently
        raw = (out / name).read_bytes()
        assert f == {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}
    assert (out / f8.CROWD_FILE).read_bytes() == (release / f8.CROWD_FILE).read_bytes()
    ims = np.load(out / "test_ims.npy", allow_pickle=False)
    assert ims.dtype == np.float16 and ims.shape == (2, 1280)
    np.testing.assert_array_equal(ims, _fake_features([release / "images" / n for n in SPLITS["test"]]))
    caps = (out / "test_caps.txt").read_text().splitlines()
    assert caps[5] == "A caption 0 of 31_e.jpg ." and len(caps) == 10
    emb = np.load(out / "test_sbert.npy", allow_pickle=False)
    assert emb.dtype == np.float16 and emb.shape == (10, 384)
    np.testing.assert_array_equal(emb, _fake_embed(caps))
    assert (out / "dev_ids.txt").read_text() == "20_c.jpg\n"
    providers = {(n, json.dumps(p, sort_keys=True)) for n, p in manifest["info"]["providers"]}
    assert ("sbert", '{"mode": "paired", "scale": "cosine"}') in providers
    assert ("cider", '{"include_candidate": true}') in providers


CONFIGS = [
    dict(loss="listwise", relevance="sbert", relevance_params={"mode": "paired", "scale": "unit"}),
    dict(loss="ladder", relevance="sbert", relevance_params={"mode": "paired", "scale": "cosine"}, train_fraction=0.5),
    dict(loss="sam", loss_params={"tau": 3.0, "sampling": "SN", "keep_triplet": True}, relevance="cider",
         relevance_params={"include_candidate": True}),
]  # fmt: skip
# the shared tiny run on the fake release's few photos: batches of 4, two epochs, diagnostics every step
TINY = tiny(drop=("data", "data_scale"), text_hidden=8, batch_size=4, epochs=2, device="cpu", grad_diag_every=1)


def _without_timing(history):
    return [{k: v for k, v in row.items() if k != "epoch_time_s"} for row in history]


def test_training_from_the_bundle_equals_the_folder_with_float16_inputs(built, tmp_path, monkeypatch):
    release, out = built
    # the folder's embeddings as the bundle serves them: float16, then unit norm again
    monkeypatch.setattr(sbert, "embed_captions", lambda captions, **kw: bd.unit_rows(_fake_embed(captions)))
    folder_runs = {}
    folder_splits = data_mod.load_splits("flickr8k", data_dir=str(release), cache_dir=str(tmp_path / "c1"))
    for k, over in enumerate(CONFIGS):
        cfg = Config(data="flickr8k", data_dir=str(release), **TINY, **over)
        res = train(cfg, progress=False, cache_dir=str(tmp_path / "c1"))
        ev = evaluation.evaluate_embeddings(
            res.arrays["test_img"], res.arrays["test_cap"], folder_splits.test, cache_dir=str(tmp_path / "c1")
        )
        folder_runs[k] = (res, ev)
    # from here on: no photos, no image encoder, no sentence model
    shutil.rmtree(release)
    for mod, name in ((f8, "extract_features"), (ft, "load_encoder"), (sbert, "embed_captions"),
                      (sbert, "load_model"), (sbert, "model_id")):  # fmt: skip
        monkeypatch.setattr(mod, name, _refuse(f"{mod.__name__}.{name}"))
    monkeypatch.setenv("FLICKR8K_DIR", str(out))
    from_env = data_mod.load_splits("flickr8k", cache_dir=str(tmp_path / "c2"))
    for s in ("train", "dev", "test"):
        a, b = getattr(folder_splits, s), getattr(from_env, s)
        assert (a.name, a.captions, a.image_ids) == (b.name, b.captions, b.image_ids)
        np.testing.assert_array_equal(a.features, b.features)
        assert b.features.dtype == np.float32
        for kind in ("expert", "crowd"):
            assert (kind in a.extras) == (kind in b.extras)
            if kind in a.extras:
                pd.testing.assert_frame_equal(a.extras[kind], b.extras[kind])
    assert "expert" in from_env.test.extras and "crowd" in from_env.test.extras
    for k, over in enumerate(CONFIGS):
        cfg = Config(data="flickr8k", data_dir=str(out), **TINY, **over)
        res = train(cfg, progress=False, cache_dir=str(tmp_path / "c2"))
        ev = evaluation.evaluate_embeddings(
            res.arrays["test_img"], res.arrays["test_cap"], from_env.test, cache_dir=str(tmp_path / "c2")
        )
        ref, ref_ev = folder_runs[k]
        assert _without_timing(res.history) == _without_timing(ref.history), over["loss"]
        for name in ("test_img", "test_cap"):
            np.testing.assert_array_equal(res.arrays[name], ref.arrays[name])
        assert set(ev) == set(ref_ev)
        for key, v in ev.items():
            assert v == ref_ev[key] or (np.isnan(v) and np.isnan(ref_ev[key])), key
        assert any(key.startswith("expert") or "expert" in key for key in ev)  # the judgements were used


def test_a_changed_or_missing_file_is_named(built):
    _, out = built
    data_mod.load_splits("flickr8k", data_dir=str(out))  # intact: loads
    path = out / "test_sbert.npy"
    raw = bytearray(path.read_bytes())
    raw[-1] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(bd.BundleError, match=r"test_sbert\.npy: sha256 [0-9a-f]{64} differs from the manifest"):
        data_mod.load_splits("flickr8k", data_dir=str(out))
    path.write_bytes(bytes(raw[:-1]))
    with pytest.raises(bd.BundleError, match=r"test_sbert\.npy: \d+ bytes, the manifest says"):
        bd.load_bundle(out)
    path.unlink()
    with pytest.raises(bd.BundleError, match=r"test_sbert\.npy: listed in MANIFEST\.json but missing"):
        bd.load_bundle(out)
    manifest = json.loads((out / bd.MANIFEST).read_text())
    del manifest["files"]["test_sbert.npy"]
    (out / bd.MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(bd.BundleError, match=r"the manifest lists no test_sbert\.npy"):
        bd.load_bundle(out)
    (out / bd.MANIFEST).unlink()
    with pytest.raises(bd.BundleError, match="has no MANIFEST.json"):
        bd.load_bundle(out)
    with pytest.raises(FileNotFoundError, match="images"):  # no manifest: read as a release, which it is not
        data_mod.load_splits("flickr8k", data_dir=str(out))


def test_the_builder_refuses_what_a_bundle_cannot_serve(built, tmp_path, capsys):
    release, out = built
    cli.check_servable(cli.planned_providers("flickr8k"))  # every planned arm's relevance is servable
    with pytest.raises(ValueError, match="tokenizer='ptb' needs Java"):
        cli.check_servable([("cider", {"include_candidate": True, "tokenizer": "ptb"})])
    with pytest.raises(ValueError, match="provider 'true'"):
        cli.check_servable([("true", {})])
    assert cli.main(["--data", "flickr8k", "--out", str(out), "--data-dir", str(release), "--quiet"]) == 2
    assert "is not an empty folder" in capsys.readouterr().err
    assert cli.main(["--data", "flickr8k", "--out", str(tmp_path / "b2"), "--data-dir", str(out), "--quiet"]) == 2
    assert "is itself a bundle" in capsys.readouterr().err


def test_caption_embeddings_follow_a_subset_and_name_a_missing_caption():
    emb = np.arange(12, dtype=np.float32).reshape(3, 4)
    ce = bd.CaptionEmbeddings("m", ["a .", "b .", "a ."], emb)
    unit = emb / np.linalg.norm(emb.astype(np.float64), axis=1, keepdims=True)
    np.testing.assert_allclose(ce.rows(["b .", "a ."]), unit[[1, 2]], rtol=1e-7)  # duplicates: the last row
    with pytest.raises(KeyError, match="'zzz' has no stored embedding"):
        ce.rows(["zzz"])


def _identical_caption_cosines(emb: np.ndarray, captions: list[str]) -> np.ndarray:
    """The cosine, as ``SBERTRelevance.batch`` computes it (float32 dot products), of every pair of identical
    captions at different rows."""
    rows: dict[str, list[int]] = {}
    for i, c in enumerate(captions):
        rows.setdefault(c, []).append(i)
    pairs = [(a, b) for r in rows.values() for a in r for b in r if a < b]
    return np.array([float(emb[a] @ emb[b]) for a, b in pairs])


def test_identical_captions_of_a_bundle_have_relevance_at_most_1_and_s_ndcg_takes_them():
    """float16 rounding moves a norm by up to ~1e-3: two identical captions then had a unit-scaled relevance above 1,
    which S-NDCG refuses (every Triplet + S-NDCG run from the bundle stopped on a GPU). The bundle serves them at
    unit norm again."""
    import torch

    from coherent_itr import losses
    from coherent_itr.data.base import CaptionedImages

    rng = np.random.default_rng(0)
    caps = [f"caption {k} ." for k in range(40)]
    caps[7] = caps[3] = caps[30] = "A dog runs ."
    v = rng.normal(size=(40, 384))
    v[[7, 30]] = v[3]
    stored = (v / np.linalg.norm(v, axis=1, keepdims=True)).astype(np.float16)
    raw = _identical_caption_cosines(stored.astype(np.float32), caps)
    assert raw.max() > 1 + 1e-6 or raw.min() < 1 - 1e-6  # the rounding alone moved them off 1
    ce = bd.CaptionEmbeddings("m", caps, stored)
    assert np.abs(_identical_caption_cosines(ce.rows(caps), caps) - 1).max() <= 1e-6
    split = CaptionedImages(
        name="t", features=np.zeros((8, 4), np.float32), captions=caps, image_ids=[f"{i}.jpg" for i in range(8)]
    )
    split.extras[bd.SBERT_EXTRA] = ce
    provider = sbert.SBERTRelevance(split, mode="paired", scale="unit")
    rel = provider.batch(np.array([0, 1, 6, 0]), np.array([3, 7, 30, 4]))
    assert rel.max() <= 1 + 1e-6
    sim = torch.randn(4, 4)
    losses.build("sndcg")(sim, torch.as_tensor(rel))  # no ValueError


@pytest.mark.flickr8k
@pytest.mark.slow
def test_the_real_flickr8k_captions_from_a_bundle_have_relevance_at_most_1(flickr8k_dir, tmp_path):
    """On the release's own test captions and their Sentence-BERT embeddings: float16 storage puts the cosine of some
    identical captions outside 1 ± 1e-6; the bundle's rows do not."""
    _, caps = f8.flickr8k_index(flickr8k_dir)["test"]
    emb = sbert.embed_captions(caps, cache_dir=str(tmp_path), progress=False)
    dup = _identical_caption_cosines(emb, caps)
    assert len(dup) > 0, "the test split has identical captions"
    stored = emb.astype(np.float16)
    raw = _identical_caption_cosines(stored.astype(np.float32), caps)
    served = _identical_caption_cosines(bd.CaptionEmbeddings("m", caps, stored).rows(caps), caps)
    assert np.abs(raw - 1).max() > 1e-6 and np.abs(served - 1).max() <= 1e-6, (raw.max(), served.max())


def test_a_run_from_a_bundle_has_its_own_key_and_a_release_runs_key_is_unchanged(built, monkeypatch):
    import hashlib as _h

    import torch

    from coherent_itr import runs

    release, out = built
    cfg = Config(data="flickr8k", **TINY)
    monkeypatch.setenv("FLICKR8K_DIR", str(release))
    blob = {"config": cfg.key(), "code": runs.training_code_hash(cfg), "threads": 1, "torch": torch.__version__}
    blob |= runs.device_numerics(cfg)  # {} on the reference CPU; another CPU's keys name it
    from_release = runs.run_key(cfg)
    assert from_release == _h.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()[:20]
    monkeypatch.setenv("FLICKR8K_DIR", str(out))
    form = runs.local_numerics(cfg)["flickr8k_form"]
    content = json.loads((out / bd.MANIFEST).read_text())
    del content["info"]
    assert form == "bundle:" + hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:16]
    assert runs.run_key(cfg) != from_release
    synthetic = Config(data="synthetic", data_scale="smoke")
    assert "flickr8k_form" not in runs.local_numerics(synthetic)
    machine = runs.local_numerics(cfg)  # an imported machine's record names its bundle for its Flickr8k runs only
    assert runs.run_key(synthetic, 1, machine) == runs.run_key(synthetic)


def test_a_bundle_runs_key_names_its_files_and_models_not_who_built_it(built, monkeypatch):
    """Rebuilding a bundle from the same data with another library version (its manifest's ``info``) keeps its
    runs' keys; another file's content, or another feature encoder, moves them."""
    from coherent_itr import runs

    _, out = built
    cfg = Config(data="flickr8k", **TINY)
    monkeypatch.setenv("FLICKR8K_DIR", str(out))
    manifest = out / bd.MANIFEST
    original = manifest.read_text()
    key = runs.run_key(cfg)
    content = json.loads(original)
    try:
        content["info"] = {"built_by": "someone else", "library_source": "0" * 16}
        manifest.write_text(json.dumps(content, indent=3))
        assert runs.run_key(cfg) == key
        content["files"]["train_ims.npy"]["sha256"] = "0" * 64
        manifest.write_text(json.dumps(content))
        assert runs.run_key(cfg) != key
        content = json.loads(original)
        content["features"]["encoder"] += "-other"
        manifest.write_text(json.dumps(content))
        assert runs.run_key(cfg) != key
        manifest.write_text("not json")
        assert runs.local_numerics(cfg)["flickr8k_form"] == "bundle:" + hashlib.sha256(b"not json").hexdigest()[:16]
    finally:
        manifest.write_text(original)


def test_data_bundle_points_the_driver_at_a_bundle_and_refuses_a_folder_that_is_not_one(built, tmp_path, monkeypatch):
    """``python -m reproduce --data-bundle DIR`` (a GPU machine's command line): Flickr8k from the bundle DIR,
    whatever ``$FLICKR8K_DIR`` was, set for the workers too; a folder without a manifest is refused by name."""
    import os

    from reproduce.driver import cli as driver_cli
    from reproduce.driver import preflight

    _, out = built
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    sets, why = preflight.resolve_data_sets(None, str(out))
    assert sets == ["synthetic", "flickr8k"] and why[-1] == f"flickr8k: the bundle at {out} (from $FLICKR8K_DIR)"
    assert os.environ["FLICKR8K_DIR"] == str(out)
    with pytest.raises(driver_cli.UsageError, match=r"--data-bundle .*: not a bundle: it has no MANIFEST\.json"):
        preflight.resolve_data_sets(["flickr8k"], str(tmp_path))


def test_the_driver_takes_a_bundle_for_flickr8k_and_names_an_altered_file(built, monkeypatch):
    """``python -m reproduce`` with ``$FLICKR8K_DIR`` at a bundle (a GPU machine: no photos, no sentence model)
    checks the bundle's files, not a release's, and says which it reads; an altered file is named before any
    work."""
    from reproduce.driver import cli as driver_cli
    from reproduce.driver import preflight

    _, out = built
    monkeypatch.setenv("FLICKR8K_DIR", str(out))
    sets, why = preflight.resolve_data_sets(["flickr8k"])
    assert sets == ["flickr8k"] and why[-1] == f"flickr8k: the bundle at {out} (from $FLICKR8K_DIR)"
    (out / "dev_caps.txt").write_text("changed\n")
    with pytest.raises(driver_cli.UsageError, match=r"dev_caps\.txt: .*rebuild it with python -m reproduce\.bundle"):
        preflight.resolve_data_sets(["flickr8k"])


def test_preparation_loads_a_bundle_without_the_release_index(built, monkeypatch):
    """A bundle holds every training image's features: preparation reads no release index (there is none)."""
    from reproduce.protocol import prepare

    _, out = built
    monkeypatch.setenv("FLICKR8K_DIR", str(out))
    monkeypatch.setattr(prepare, "flickr8k_index", _refuse("the release index"))
    cfg = Config(**tiny(data="flickr8k", train_fraction=0.5))
    splits = prepare.load_for("flickr8k", [cfg])
    assert splits.train.n_images == len(SPLITS["train"])
