"""A run's rankings and the compact arrays an archive carries for the views (reproduce/present/rankings.py).

Checked against explicit loops over each query (descending similarity, ties by the lower candidate index), a
stored ranking against the one it was stored from (through an ``arrays.npz`` round trip), SAM's per-query metrics
on a stored top 5 against those on the whole similarity matrix, and the refusals: a deeper ranking than stored, a
set never stored, a set computed by other code."""

from __future__ import annotations

import io

import numpy as np
import pytest

from coherent_itr import runs
from coherent_itr.io import load_npz
from reproduce.present import rankings as rk
from reproduce.present.analyses import sam_agreement


def _loop_top(sim, k, query):
    s = sim if query == "image" else sim.T
    out = []
    for row in s:
        order = sorted(range(len(row)), key=lambda j: (-row[j], j))
        out.append(order[:k])
    return np.asarray(out)


def _tied(rng, shape):
    return np.round(rng.normal(size=shape), 1).astype(np.float32)  # many ties


def _through_npz(arrays: dict, key="k" * 20):
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    got = runs.SlimArrays(load_npz(io.BytesIO(buf.getvalue())))
    got.key = key
    return got


@pytest.mark.parametrize("query", rk.QUERIES)
def test_top_and_values_match_a_loop_with_ties(query):
    sim = _tied(np.random.default_rng(1), (7, 21))
    r = rk.Ranking.of_similarity(sim)
    top = r.top(query, 6)
    assert np.array_equal(top, _loop_top(sim, 6, query))
    s = sim if query == "image" else sim.T
    assert np.array_equal(r.values(query, 6), np.take_along_axis(s, top, axis=1))
    assert np.array_equal(r.top(query, 3, [4, 1]), _loop_top(sim, 3, query)[[4, 1]])


def test_a_stored_ranking_gives_what_it_was_stored_from_and_refuses_more():
    rng = np.random.default_rng(2)
    img, cap = rng.normal(size=(9, 4)), rng.normal(size=(27, 4))
    full = rk.Ranking.of_embeddings(img, cap)
    arrays = _through_npz({"pq_i2t": np.zeros((9, 3), np.uint8), **full.to_arrays({"image": 5, "caption": 3})})
    back = rk.Ranking.from_arrays(arrays)
    assert back.shape == full.shape == (9, 27) and back.run == "k" * 20
    for query, k in (("image", 5), ("caption", 3)):
        for kk in range(1, k + 1):
            assert np.array_equal(back.top(query, kk), full.top(query, kk))
            assert np.array_equal(back.values(query, kk), full.values(query, kk))
        assert np.array_equal(back.top(query, k, [2]), full.top(query, k, [2]))
    with pytest.raises(runs.ImportedRunMissing, match=r"run k{20} .*top 3 of each caption query.*asks for the top 4"):
        back.top("caption", 4)
    with pytest.raises(ValueError, match="k=28 must be between 1 and the number of candidates"):
        back.top("image", 28)
    with pytest.raises(ValueError, match="query='text'"):
        back.top("text", 1)
    only_images = rk.Ranking.from_arrays(_through_npz(full.to_arrays({"image": 2})))
    with pytest.raises(runs.ImportedRunMissing, match="top 0 of each caption query"):
        only_images.values("caption", 1)


def test_a_run_reads_its_ranking_from_embeddings_or_from_what_it_carried():
    rng = np.random.default_rng(3)
    img, cap = rng.normal(size=(5, 3)).astype(np.float32), rng.normal(size=(10, 3)).astype(np.float32)

    class Res:
        def __init__(self, arrays):
            self.arrays = arrays

    full = rk.Ranking.of_run(Res({"test_img": img, "test_cap": cap}))
    slim = rk.Ranking.of_run(Res(_through_npz(full.to_arrays({"image": 4, "caption": 2}))))
    assert np.array_equal(full.top("image", 4), slim.top("image", 4))
    assert np.array_equal(full.values("caption", 2), slim.values("caption", 2))
    with pytest.raises(runs.ImportedRunMissing, match=r"run k{20} was imported without its test embeddings and "):
        rk.Ranking.of_run(Res(_through_npz({"pq_i2t": np.zeros((5, 3), np.uint8)})))


def test_a_set_computed_by_other_code_is_refused():
    arrays = rk.stored("demo", {"x": np.arange(3)}, "a" * 16)
    assert set(arrays) == {"view_demo_x", "view_demo_code"}
    assert np.array_equal(rk.read_stored(_through_npz(arrays), "demo", "a" * 16)["x"], np.arange(3))
    with pytest.raises(runs.ImportedRunMissing, match=r"'demo' arrays were computed by other code \(code a{16}\)"):
        rk.read_stored(_through_npz(arrays), "demo", "b" * 16)
    assert len(rk.RANKING_CODE) == 16  # its frozen code: tests/reproduce/present/test_view_code.py


@pytest.mark.parametrize("tied", [False, True])
def test_sam_per_query_metrics_on_a_stored_ranking_equal_those_on_the_similarities(tied):
    """SAM Table 1's model-based variant reads each image query's top 5 (R^V@5, R@5, quality) and NCS@5, which the
    library computes from a whole similarity matrix under its own tie rule: on :meth:`Ranking.scores` of a stored
    ranking that kept more than the top 5 it gives what it gives on the similarities themselves, ties included."""
    rng = np.random.default_rng(4)
    ioc = np.repeat(np.arange(12), 5)
    sim = _tied(rng, (12, 60)) if tied else rng.normal(size=(12, 60))
    phi, quality = rng.random((12, 60)), rng.random((12, 60))
    kept = rk.Ranking.of_similarity(sim).to_arrays({"image": 12 if tied else 8})
    stored = rk.Ranking.from_arrays(_through_npz(kept))
    want = sam_agreement.per_query_metrics(sim, ioc, phi, quality, 5)
    got = sam_agreement.per_query_metrics(stored, ioc, phi, quality, 5)
    assert got.equals(want)
    direct = sam_agreement.ncs_per_query(sim, ioc, phi, 5, "i2t")  # the library's NCS@5 on the similarities themselves
    assert np.allclose(got["NCS@5 (CIDEr-D)"], direct, rtol=0, atol=1e-12, equal_nan=True)


def test_a_stored_ranking_whose_tie_at_the_cut_off_may_go_on_is_refused():
    sim = np.zeros((2, 12))
    sim[0] = np.arange(12)[::-1]  # no ties
    sim[1, :3], sim[1, 3:9] = 5.0, 1.0  # the 4th to the 9th tie: the top 5 needs to know all of them
    kept = rk.Ranking.from_arrays(_through_npz(rk.Ranking.of_similarity(sim).to_arrays({"image": 8})))
    with pytest.raises(runs.ImportedRunMissing, match="image query 1 ties its candidate at place 5 .* up to place 8"):
        kept.scores(5)
    deeper = rk.Ranking.from_arrays(_through_npz(rk.Ranking.of_similarity(sim).to_arrays({"image": 10})))
    scores = deeper.scores(5)
    for q in range(2):  # the same candidates above the cut-off, the same tied ones at it
        assert set(np.flatnonzero(scores[q] > scores[q][np.argsort(-sim[q], kind="stable")[4]])) == set(
            np.flatnonzero(sim[q] > np.sort(sim[q])[::-1][4])
        )
        assert set(np.flatnonzero(scores[q] == np.sort(scores[q])[::-1][4])) == set(
            np.flatnonzero(sim[q] == np.sort(sim[q])[::-1][4])
        )
