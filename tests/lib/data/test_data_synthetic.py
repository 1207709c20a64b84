"""The synthetic captioned-scenes world: determinism, sizes, captions, true relevance, acceptance.

The true relevance is checked against a loop written directly from the formula in
``coherent_itr.data.synthetic``'s docstring and against hand-computed values; the captions'
text is checked against the content codes the generator claims they express.
"""

from __future__ import annotations

import re

import numpy as np
import pytest

from coherent_itr.data import load_splits, relevance_provider
from coherent_itr.data import synthetic as syn


@pytest.fixture(scope="module")
def smoke():
    return syn.make_synthetic_splits("smoke", seed=0, cache_dir=False)


def _fresh(scale="smoke", seed=0, **kw):
    syn._cached_splits.cache_clear()
    return syn.make_synthetic_splits(scale, seed=seed, cache_dir=False, **kw)


def test_deterministic_from_seed_and_seed_matters():
    a, b = _fresh(seed=3), _fresh(seed=3)
    for x, y in zip((a.train, a.dev, a.test), (b.train, b.dev, b.test)):
        assert np.array_equal(x.features, y.features)
        assert x.captions == y.captions and x.image_ids == y.image_ids
    assert np.array_equal(a.test.true_relevance, b.test.true_relevance)
    c = _fresh(seed=4)
    assert not np.allclose(a.train.features, c.train.features)
    assert a.train.captions != c.train.captions


def test_sizes_caption_lengths_and_vocabulary(smoke):
    assert (smoke.train.n_images, smoke.dev.n_images, smoke.test.n_images) == syn.SCALES["smoke"]
    assert syn.SCALES["default"] == (3000, 500, 1000)
    caps = smoke.train.captions + smoke.dev.captions + smoke.test.captions
    lengths = np.array([len([w for w in c.split() if w not in {".", ","}]) for c in caps])
    assert lengths.min() >= 6 and lengths.max() <= 14
    vocab = {w for c in caps for w in c.lower().split()}
    assert 150 <= len(vocab) <= 500
    assert smoke.train.features.shape[1] == syn.WorldParams().dim
    assert smoke.train.features.dtype == np.float32 and np.isfinite(smoke.train.features).all()
    # captions of one image differ (varied wording and coverage)
    per_image_distinct = [len(set(smoke.test.captions[5 * i : 5 * i + 5])) for i in range(smoke.test.n_images)]
    assert np.mean(per_image_distinct) > 4.5


def test_bad_scale_and_seed_raise():
    with pytest.raises(ValueError, match="scale='huge'"):
        syn.make_synthetic_splits("huge")
    with pytest.raises(ValueError, match="seed"):
        syn.make_synthetic_splits("smoke", seed=-1)
    with pytest.raises(ValueError, match="unknown data source"):
        load_splits("nope")


def test_zipf_long_tail(smoke):
    scenes = np.concatenate([smoke.train.extras["scenes"], smoke.test.extras["scenes"]])
    for f, name in enumerate(syn.FACETS):
        counts = np.bincount(scenes[:, f], minlength=syn.N_CONCEPTS[f])
        assert counts[0] > 3 * counts[-1] + 1, f"facet {name} is not long-tailed: {counts}"


def _words_of(facet, kind, value):
    """All surface strings of the concept (kind EXACT) or group (kind HYPER) named by a caption."""
    concepts = [syn.SUBJECTS, syn.COLORS, syn.ACTIONS, syn.OBJECTS, syn.PLACES][facet]
    groups = [syn.SUBJECT_GROUPS, syn.COLOR_GROUPS, syn.ACTION_GROUPS, syn.OBJECT_GROUPS, syn.PLACE_GROUPS][facet]
    forms = concepts[value][1] if kind == syn.EXACT else groups[list(groups)[value]]
    out = []
    for f in forms:
        out += list(f) if isinstance(f, tuple) else [f]
    return out


def _contains(text, phrase):
    return re.search(r"(^|\s)" + re.escape(phrase) + r"(\s|$)", text.lower()) is not None


def test_caption_text_expresses_its_content(smoke):
    ann = smoke.test.extras["world"]
    kinds, values = ann.contents(smoke.test.captions)
    for text, k, v in zip(smoke.test.captions, kinds, values):
        for f in (0, 1, 3, 4):  # subject, color, object, place: the named words are in the text
            if k[f] != syn.ABSENT:
                assert any(_contains(text, w) for w in _words_of(f, k[f], v[f])), (text, syn.FACETS[f])
        if k[4] == syn.ABSENT:  # no place phrase of any place or place group
            all_places = [p for c in syn.PLACES for p in c[1]] + [p for g in syn.PLACE_GROUPS.values() for p in g]
            assert not any(_contains(text, p) for p in all_places), text


def _brute_force_r(scene, kind, value):
    """r* from the docstring: Σ_{f∈M} w_f κ_f / (Σ_{f∈M} w_f + λ Σ_{f∉M} w_f), one pair, loops only."""
    groups = [syn.SUBJECTS, syn.COLORS, syn.ACTIONS, syn.OBJECTS, syn.PLACES]
    group_names = [syn.SUBJECT_GROUPS, syn.COLOR_GROUPS, syn.ACTION_GROUPS, syn.OBJECT_GROUPS, syn.PLACE_GROUPS]
    w = [0.35, 0.10, 0.20, 0.15, 0.20]
    num = den_m = den_u = 0.0
    for f in range(5):
        if kind[f] == syn.ABSENT:
            den_u += w[f]
            continue
        den_m += w[f]
        scene_group = groups[f][scene[f]][2]
        if kind[f] == syn.EXACT and value[f] == scene[f]:
            num += w[f] * 1.0
        elif kind[f] == syn.HYPER and scene_group is not None and list(group_names[f])[value[f]] == scene_group:
            num += w[f] * 0.6
    return num / (den_m + 0.25 * den_u)


def test_true_relevance_equals_the_formula_loop(smoke):
    te = smoke.test
    ann = te.extras["world"]
    scenes = ann.scenes(te.image_ids)
    kinds, values = ann.contents(te.captions)
    rng = np.random.default_rng(0)
    for i, j in zip(rng.integers(0, te.n_images, 300), rng.integers(0, te.n_captions, 300)):
        assert te.true_relevance[i, j] == pytest.approx(_brute_force_r(scenes[i], kinds[j], values[j]), abs=1e-6)
    for i in range(20):  # own captions too
        for j in range(5 * i, 5 * i + 5):
            assert te.true_relevance[i, j] == pytest.approx(_brute_force_r(scenes[i], kinds[j], values[j]), abs=1e-6)


def test_true_relevance_hand_computed():
    S, C, A, O, P = range(5)
    scene = np.array([[0, 2, 0, 0, 0]])  # man, red, running, ball, park
    kind = np.zeros((4, 5), int)
    value = np.full((4, 5), -1)
    kind[0] = [1, 1, 1, 1, 1]
    value[0] = [0, 2, 0, 0, 0]  # complete and correct: 1
    kind[1, [S, A]] = 1
    value[1, [S, A]] = [0, 0]  # man running (correct, partial)
    kind[1, P] = 2
    value[1, P] = list(syn.PLACE_GROUPS).index("outdoors")  # ... outside
    kind[2, [S, A, P]] = 1
    value[2, [S, A, P]] = [1, 0, 0]  # a DOG running in the park
    kind[3, S] = 2
    value[3, S] = list(syn.SUBJECT_GROUPS).index("animal")  # "an animal": wrong group
    r = syn.true_relevance(scene, kind, value)[0]
    assert r[0] == pytest.approx(1.0)
    assert r[1] == pytest.approx((0.35 + 0.2 + 0.6 * 0.2) / (0.75 + 0.25 * 0.25))
    assert r[2] == pytest.approx((0.2 + 0.2) / (0.75 + 0.25 * 0.25))
    assert r[3] == pytest.approx(0.0)


def test_true_provider_batches_matrix_and_subsets(smoke):
    te = smoke.test
    prov = relevance_provider("true", te)
    m = prov.matrix()
    assert np.array_equal(m, te.true_relevance)
    img = np.array([5, 1, 7, 3])
    cap = img * 5 + np.array([0, 4, 2, 1])
    assert np.array_equal(prov.batch(img, cap), te.true_relevance[np.ix_(img, cap)])
    # training split: no dense matrix, lazy provider; still right after subsetting (train_fraction)
    tr = smoke.train
    assert tr.true_relevance is None
    sub = tr.subset_images(np.array([40, 3, 17, 250]))
    p = relevance_provider("true", sub)
    ann = tr.extras["world"]
    expect = ann.relevance([tr.image_ids[i] for i in (40, 3, 17, 250)], sub.captions)
    assert np.array_equal(p.matrix(), expect)
    scenes = ann.scenes(sub.image_ids)
    k, v = ann.contents(sub.captions)
    assert p.batch([2], [7])[0, 0] == pytest.approx(_brute_force_r(scenes[2], k[7], v[7]))
    with pytest.raises(ValueError, match="no parameters"):
        relevance_provider("true", te, mode="x")


def test_own_captions_are_most_relevant(smoke):
    R = smoke.test.true_relevance
    n = smoke.test.n_images
    own = R[np.arange(n)[:, None], np.arange(n)[:, None] * 5 + np.arange(5)]
    assert own.mean() > 0.8 and R.mean() < 0.3
    # the world has continuous relevance: many non-GT captions are partly relevant
    mask = np.ones_like(R, bool)
    mask[np.arange(n).repeat(5), np.arange(5 * n)] = False
    assert 0.05 < (R[mask] > 0.4).mean() < 0.5


def test_disk_cache_hit_and_invalidation(tmp_path, monkeypatch):
    syn._cached_splits.cache_clear()
    a = syn.make_synthetic_splits("smoke", seed=1, cache_dir=tmp_path)
    files = list((tmp_path / "synthetic").glob("world-*.npz"))
    assert len(files) == 1
    syn._cached_splits.cache_clear()
    monkeypatch.setattr(syn, "_generate_split", lambda *a, **k: (_ for _ in ()).throw(AssertionError("regenerated")))
    b = syn.make_synthetic_splits("smoke", seed=1, cache_dir=tmp_path)
    assert b.train.captions == a.train.captions and np.array_equal(b.test.true_relevance, a.test.true_relevance)
    with pytest.raises(AssertionError, match="regenerated"):  # another seed is another world
        syn.make_synthetic_splits("smoke", seed=2, cache_dir=tmp_path)


def test_load_splits_dispatch(tmp_path):
    s = load_splits("synthetic", scale="smoke", seed=0, cache_dir=str(tmp_path))
    assert s.test.name == "synthetic/test" and s.train.n_images == 500


# --------------------------------------------------------------------------------------------
# Acceptance properties (data card): informative but noisy Sentence-BERT pseudo labels
# --------------------------------------------------------------------------------------------
def test_sbert_relevance_is_informative_but_noisy(smoke, tmp_path_factory):
    te = smoke.test.subset_images(np.arange(60))  # 300 captions: keeps the test fast on 2 CPUs
    cache = tmp_path_factory.getbasetemp() / "shared_sbert_cache"
    R = te.true_relevance
    out = {}
    for mode in ("paired", "max5"):
        M = relevance_provider("sbert", te, cache_dir=cache, mode=mode).matrix()
        out[mode] = float(np.corrcoef(M.ravel(), R.ravel())[0, 1])
    from coherent_itr.data.sbert import embed_captions

    E = embed_captions(te.captions, cache_dir=cache).reshape(te.n_images, 5, -1)
    G = np.einsum("nkd,nld->nkl", E, E)
    iu = np.triu_indices(5, 1)
    within = G[:, iu[0], iu[1]]
    print(
        f"\nDATA CARD synthetic/smoke-test: Pearson(SBERT, r*) paired={out['paired']:.3f} "
        f"max5={out['max5']:.3f}; within-image caption cosine mean={within.mean():.3f} std={within.std():.3f}"
    )
    for mode, r in out.items():
        assert 0.5 <= r <= 0.9, f"SBERT ({mode}) Pearson with true relevance {r:.3f} outside [0.5, 0.9]"
    assert 0.05 < within.std() < 0.35
