"""CIDEr-D relevance against pycocoevalcap's Cider scorer, the PTB tokenizer, and the cache."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from pycocoevalcap.cider.cider_scorer import CiderScorer

from coherent_itr.data import CaptionedImages, relevance_provider
from coherent_itr.data import cider as cd
from coherent_itr.data.synthetic import make_synthetic_splits

# realistic captions with repeated n-grams (clipping), varied lengths (penalty), punctuation
HAND = [
    [
        "A man and a woman walk a dog on the beach .",
        "Two people and a dog on the sand .",
        "A man , a woman and a brown dog walking by the ocean .",
        "a couple walks their dog at the beach",
        "People walking a dog .",
    ],
    [
        "A dog runs through the grass .",
        "A black dog is running in a grassy field .",
        "The dog runs and runs and runs .",
        "A dog in the grass",
        "A black and white dog running outside .",
    ],
    [
        "A child in a pink dress is climbing up stairs .",
        "A girl going into a wooden building .",
        "A little girl climbing into a wooden playhouse .",
        "A little girl climbing the stairs to her playhouse .",
        "A little girl in a pink dress going into a wooden cabin .",
    ],
    [
        "Two boys play soccer in a field ( one in red ) .",
        "Kids playing soccer .",
        "Two young boys are playing soccer on the grass .",
        "a boy kicks a soccer ball",
        "Boys play ball in a field .",
    ],
]


def _split(groups, name="hand"):
    caps = [c for g in groups for c in g]
    return CaptionedImages(name, np.zeros((len(groups), 2), np.float32), caps, [f"i{k}" for k in range(len(groups))])


@pytest.fixture(scope="module")
def synth():
    return make_synthetic_splits("smoke", seed=0, cache_dir=False).test.subset_images(np.arange(60))


def _coco_scores(cands, refs, df_from=None):
    """pycocoevalcap's CiderScorer on (candidate, refs) entries; optionally with the document
    frequencies of another reference corpus (``df_from``: list of ref lists with the same count)."""
    sc = CiderScorer(n=4, sigma=6.0)
    for c, r in zip(cands, refs):
        sc += (c, r)
    if df_from is not None:
        base = CiderScorer(n=4, sigma=6.0)
        for r in df_from:
            base += (r[0], r)
        base.compute_doc_freq()
        assert len(df_from) == len(refs)
        sc.compute_doc_freq = lambda: sc.document_frequency.update(base.document_frequency)
    return sc.compute_score()[1]


@pytest.mark.parametrize("which", ["synthetic", "hand"])
def test_matches_pycocoevalcap_with_candidate_in_refs(which, synth):
    split = synth if which == "synthetic" else _split(HAND)
    prov = cd.CiderRelevance(split, cache_dir=False)
    toks = prov.tokens
    n = split.n_images
    refs = [toks[5 * i : 5 * i + 5] for i in range(n)]
    rng = np.random.default_rng(1)
    full = prov._block(np.arange(n), np.arange(split.n_captions))  # float64 (images, captions)
    for _ in range(4):  # each round: one sampled candidate per image, df over the same corpus
        cand = rng.integers(0, split.n_captions, n)
        ref_scores = _coco_scores([toks[j] for j in cand], refs)
        np.testing.assert_allclose(full[np.arange(n), cand], ref_scores, rtol=0, atol=1e-6)
    own = np.arange(n) * 5 + rng.integers(0, 5, n)
    np.testing.assert_allclose(full[np.arange(n), own], _coco_scores([toks[j] for j in own], refs), atol=1e-6)
    assert full.max() > 1.0  # non-trivial values


def test_matches_pycocoevalcap_leave_one_out(synth):
    prov = cd.CiderRelevance(synth, cache_dir=False, include_candidate=False)
    toks, n = prov.tokens, synth.n_images
    refs = [toks[5 * i : 5 * i + 5] for i in range(n)]
    k = np.random.default_rng(2).integers(0, 5, n)
    own = np.arange(n) * 5 + k
    loo_refs = [[r for kk, r in enumerate(refs[i]) if kk != k[i]] for i in range(n)]
    expect = _coco_scores([toks[j] for j in own], loo_refs, df_from=refs)
    got = prov._block(np.arange(n), own)[np.arange(n), np.arange(n)]
    np.testing.assert_allclose(got, expect, atol=1e-6)
    # other images' captions are scored against all 5 references, as with the candidate included
    with_c = cd.CiderRelevance(synth, cache_dir=False, include_candidate=True)
    cols = np.arange(synth.n_captions)
    a, b = prov._block(np.arange(n), cols), with_c._block(np.arange(n), cols)
    off = np.arange(n)[:, None] != (cols // 5)[None, :]
    np.testing.assert_allclose(a[off], b[off], atol=1e-12)
    assert (a[~off] < b[~off]).mean() > 0.9  # GT captions lose their self-match


def test_out_of_corpus_candidates_match_pycocoevalcap():
    refs = [cd.tokenize(g) for g in HAND]
    cider = cd.CiderD(refs)
    cands = cd.tokenize(
        [
            "A zebra juggles flaming torches on a unicycle .",
            "dog dog dog dog dog",
            "A man and a woman walk a dog on the beach .",
            "",
        ]
    )
    got = cider.score(cands, refs)
    np.testing.assert_allclose(got, _coco_scores(cands, refs), atol=1e-6)


def test_tokenizer_rules():
    tk = cd.tokenize_simple
    assert tk("A man's dog can't swim .") == "a man 's dog ca n't swim"
    assert tk('Kids ( two ) play "tag" , happily!') == "kids -lrb- two -rrb- play tag happily"
    assert tk("Mr. Smith in Washington D.C. wears a t-shirt ...") == "mr. smith in washington d.c. wears a t-shirt"
    assert tk("We cannot see at&t or AT&T") == "we can not see at & t or at&t"


@pytest.mark.skipif(shutil.which("java") is None, reason="pycocoevalcap's PTB tokenizer needs Java")
def test_simple_tokenizer_agrees_with_the_ptb_tokenizer():
    caps = [c for g in HAND for c in g] + [
        "A man's dog can't swim .",
        "Mr. Smith in Washington D.C. wears a t-shirt ...",
        "We cannot see at&t or AT&T",
        'A small child plays with cut-outs of the letter " P "',
        "two young children RIF=ding sleds .",
        "Three boys ( one in red , two in blue ) play soccer .",
        "The dogs' toys are on the floor !",
        "A -ependent shirt ; a girl : jumping -- high ?",
    ]
    assert cd.tokenize(caps, "simple") == cd.tokenize_ptb(caps)


def test_batch_is_a_block_of_the_matrix(synth, tmp_path):
    prov = relevance_provider("cider", synth, cache_dir=tmp_path)
    m = prov.matrix()
    assert m.shape == (synth.n_images, synth.n_captions) and m.dtype == np.float32
    img = np.array([3, 0, 17, 42, 8])
    cap = img * 5 + np.array([1, 0, 4, 2, 3])
    np.testing.assert_allclose(prov.batch(img, cap), m[np.ix_(img, cap)], rtol=1e-6)
    # caption × caption: CIDEr-D of caption b against the single reference a
    cm = prov.caption_matrix(rows=[0, 7], cols=[3, 9])
    ref = cd.CiderD([prov.tokens[5 * i : 5 * i + 5] for i in range(synth.n_images)])
    assert cm[1, 0] == pytest.approx(ref.score([prov.tokens[3]], [[prov.tokens[7]]])[0], abs=1e-5)


def test_matrix_cache_hit_and_invalidation(synth, tmp_path, monkeypatch):
    p = relevance_provider("cider", synth, cache_dir=tmp_path)
    m = p.matrix()
    files = list((tmp_path / "relevance" / "cider").glob("*.npy"))
    assert len(files) == 1
    boom = lambda *a, **k: (_ for _ in ()).throw(AssertionError("recomputed"))  # noqa: E731
    monkeypatch.setattr(cd.CiderRelevance, "_compute_matrix", boom)
    assert np.array_equal(relevance_provider("cider", synth, cache_dir=tmp_path).matrix(), m)  # hit
    with pytest.raises(AssertionError, match="recomputed"):  # other params: another entry
        relevance_provider("cider", synth, cache_dir=tmp_path, include_candidate=False).matrix()
    other = synth.subset_images(np.arange(59, -1, -1))  # other captions (order): another entry
    with pytest.raises(AssertionError, match="recomputed"):
        relevance_provider("cider", other, cache_dir=tmp_path).matrix()


def test_bad_parameters_raise(synth):
    with pytest.raises(ValueError, match="unknown parameter"):
        relevance_provider("cider", synth, sigma=3.0)
    with pytest.raises(ValueError, match="include_candidate"):
        relevance_provider("cider", synth, include_candidate="yes")
    with pytest.raises(ValueError, match="tokenizer"):
        relevance_provider("cider", synth, tokenizer="nltk")
    with pytest.raises(ValueError, match="unknown relevance provider"):
        relevance_provider("spice", synth)


def test_corpus_memo_is_shared_per_split_and_gives_the_fresh_numbers(synth):
    """Runs of one worker reuse the tokenised, encoded corpus of a split (``cider._CORPUS``); a reused
    corpus scores exactly like a freshly built one, and other captions never hit it."""
    cd._CORPUS.clear()
    a = relevance_provider("cider", synth)
    b = relevance_provider("cider", synth, include_candidate=False)
    assert a.cider is b.cider and a.enc is b.enc and len(cd._CORPUS) == 1
    img, cap = np.arange(6), np.arange(30)
    memo = a.batch(img, cap)
    cd._CORPUS.clear()
    fresh = relevance_provider("cider", synth)
    assert fresh.cider is not a.cider
    np.testing.assert_array_equal(fresh.batch(img, cap), memo)
    other = dataclasses.replace(synth, captions=["a dog"] + list(synth.captions[1:]))
    assert relevance_provider("cider", other).cider is not fresh.cider and len(cd._CORPUS) == 2
