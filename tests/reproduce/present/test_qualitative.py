"""Qualitative views: the selection rule against an explicit loop, table contents, a drawn figure."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from coherent_itr.data.base import CaptionedImages
from reproduce.present import qualitative as q


def _split(n_img=6, cpi=5, seed=0) -> CaptionedImages:
    rng = np.random.default_rng(seed)
    caps = [f"caption {k} of image {k // cpi}" for k in range(n_img * cpi)]
    return CaptionedImages(
        "toy/test", rng.normal(size=(n_img, 4)).astype(np.float32), caps, [f"img{i}.png" for i in range(n_img)], cpi
    )


def _emb(n, d, seed, dtype=np.float32):
    x = np.random.default_rng(seed).normal(size=(n, d))
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(dtype)


def _loop_rank(sim_a, sim_b, k, query):
    """The rule written out: per query, sort candidates by similarity (ties: lower index), count the
    common candidates of the two top-k lists; order queries by that count, then by index."""
    if query == "caption":
        sim_a, sim_b = sim_a.T, sim_b.T
    counts = []
    for qi in range(sim_a.shape[0]):
        top = []
        for s in (sim_a[qi], sim_b[qi]):
            cands = sorted(range(len(s)), key=lambda c: (-s[c], c))[:k]
            top.append(set(cands))
        counts.append(len(top[0] & top[1]))
    order = sorted(range(len(counts)), key=lambda i: (counts[i], i))
    return order, [counts[i] for i in order]


@pytest.mark.parametrize("query", ["image", "caption"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_disagreement_rank_matches_a_loop(query, seed):
    img, cap = _emb(8, 6, seed), _emb(40, 6, seed + 10)
    img_b, cap_b = _emb(8, 6, seed + 20), _emb(40, 6, seed + 30)
    sim_a, sim_b = q.similarity(img, cap), q.similarity(img_b, cap_b)
    # plant exact ties so the tie rule matters: duplicate candidates under arm A
    sim_a[:, 3] = sim_a[:, 2]
    got = q.disagreement_rank(sim_a, sim_b, k=5, query=query)
    order, counts = _loop_rank(sim_a, sim_b, 5, query)
    assert got["query"].tolist() == order
    assert got["overlap"].tolist() == counts


def test_disagreement_rank_planted():
    rng = np.random.default_rng(3)
    sim = rng.normal(size=(4, 20))
    other = sim.copy()
    other[2] = -sim[2]  # query 2: reversed ranking → no common top-5 candidate
    other[1, np.argsort(-sim[1])[:2]] -= 100  # query 1: the two best of A drop out of B's top 5 → overlap 3
    d = q.disagreement_rank(sim, other, k=5)
    assert d["query"].tolist() == [2, 1, 0, 3]
    assert d["overlap"].tolist() == [0, 3, 5, 5]
    with pytest.raises(ValueError, match="differ in shape"):
        q.disagreement_rank(sim, sim[:, :10])
    with pytest.raises(ValueError, match="k=30"):
        q.disagreement_rank(sim, sim, k=30)
    with pytest.raises(ValueError, match="query='text'"):
        q.disagreement_rank(sim, sim, query="text")


def test_similarity_accepts_float16_and_float32_and_rejects_bad_input():
    img, cap = _emb(3, 8, 0), _emb(15, 8, 1)
    s32 = q.similarity(img, cap)
    s16 = q.similarity(img.astype(np.float16), cap.astype(np.float16))
    assert s16.dtype == np.float32 and s32.dtype == np.float32
    np.testing.assert_allclose(s16, s32, atol=5e-3)
    np.testing.assert_allclose(s32, img.astype(np.float64) @ cap.T.astype(np.float64), atol=1e-6)
    with pytest.raises(ValueError, match="dimension 8.*7"):
        q.similarity(img, cap[:, :7])
    bad = cap.copy()
    bad[4, 0] = np.nan
    with pytest.raises(ValueError, match="row 4"):
        q.similarity(img, bad)
    with pytest.raises(ValueError, match="floats"):
        q.similarity(np.ones((2, 3), dtype=int), cap[:, :3])


def test_top_k_table_contents():
    split = _split()
    rng = np.random.default_rng(5)
    sims = {"A": rng.normal(size=(6, 30)), "B": rng.normal(size=(6, 30))}
    rel = rng.uniform(size=(6, 30))
    sims["A"][2, 11] = 10.0  # caption 11 (of image 2: ground truth) tops A's list for image 2
    human = pd.DataFrame({"image_idx": [2, 2, 2, 0], "caption_idx": [11, 11, 4, 4], "score": [4.0, 3.0, 1.0, 2.0]})
    t = q.top_k_table(sims, split, 2, k=3, query="image", relevance={"sbert": rel, "true": 1 - rel}, human=human)
    assert list(t.columns) == [
        "arm",
        "rank",
        "image_idx",
        "caption_idx",
        "text",
        "gt",
        "similarity",
        "sbert",
        "true",
        "expert",
    ]
    assert t.arm.tolist() == ["A"] * 3 + ["B"] * 3 and t["rank"].tolist() == [1, 2, 3] * 2
    for arm in ("A", "B"):
        sub = t[t.arm == arm]
        expect = sorted(range(30), key=lambda c: (-sims[arm][2, c], c))[:3]
        assert sub.caption_idx.tolist() == expect
        for _, r in sub.iterrows():
            c = r.caption_idx
            assert r.image_idx == 2 and r.text == split.captions[c] and r["gt"] == (c // 5 == 2)
            assert r.similarity == pytest.approx(sims[arm][2, c])
            assert r.sbert == pytest.approx(rel[2, c]) and r.true == pytest.approx(1 - rel[2, c])
            want = {11: 3.5, 4: 1.0}.get(c, np.nan)  # duplicates of a judged pair are averaged
            assert (np.isnan(r.expert) and np.isnan(want)) or r.expert == want
    first = t[(t.arm == "A") & (t["rank"] == 1)].iloc[0]
    assert first.caption_idx == 11 and first["gt"] and first.expert == 3.5
    # caption query: candidates are images; the judged pair (image 2, caption 11) keeps its score
    tc = q.top_k_table({"A": sims["A"]}, split, 11, k=2, query="caption", relevance=rel, human=human)
    assert tc.image_idx.tolist() == sorted(range(6), key=lambda i: (-sims["A"][i, 11], i))[:2]
    assert tc.iloc[0].image_idx == 2 and tc.iloc[0].text == "img2.png" and tc.iloc[0].expert == 3.5
    assert "sbert" in tc.columns
    with pytest.raises(ValueError, match="out of range"):
        q.top_k_table(sims, split, 6, query="image")
    with pytest.raises(ValueError, match="arm 'C'.*does not match"):
        q.top_k_table({"C": np.zeros((5, 30))}, split, 0)


def test_disagreement_table_and_html_view():
    split = _split()
    rng = np.random.default_rng(6)
    sims = {"A": rng.normal(size=(6, 30)), "B": rng.normal(size=(6, 30))}
    d = q.disagreement_table(sims, split, "A", "B", k=5, query="caption", n=4)
    assert len(d) == 4 and list(d.columns) == ["query", "common in top 5", "caption"]
    assert d["caption"].tolist() == [split.captions[i] for i in d["query"]]
    html = q.render_query_html(
        sims, split, "A", "B", "caption", int(d["query"][0]), 5, {"sbert": rng.uniform(size=(6, 30))}
    )
    assert html.count("<table") == 2 and split.captions[int(d["query"][0])] in html
    with pytest.raises(KeyError, match="'Z'"):
        q.render_query_html(sims, split, "A", "Z")


def test_figure_with_a_photo(tmp_path):
    from PIL import Image

    split = _split()
    for i in range(6):
        arr = np.zeros((60, 80, 3), dtype=np.uint8)
        arr[..., i % 3] = 40 * i
        Image.fromarray(arr).save(tmp_path / f"img{i}.png")
    (tmp_path / "img5.png").unlink()  # one image without a photo
    rng = np.random.default_rng(7)
    sims = {"VSE++": rng.normal(size=(6, 30)), "BCLS": rng.normal(size=(6, 30))}
    rel = rng.uniform(size=(6, 30))
    human = pd.DataFrame({"image_idx": [0], "caption_idx": [0], "score": [3.0]})
    pick = q.disagreement_rank(sims["VSE++"], sims["BCLS"]).head(2)["query"].tolist() + [5]
    fig = q.figure_qualitative(
        sims,
        split,
        pick,
        relevance={"sbert": rel},
        human=human,
        images_dir=tmp_path,
        rule="Images: smallest top-5 overlap.",
    )
    texts = [t.get_text() for ax in fig.axes for t in ax.texts] + [t.get_text() for t in fig.texts]
    joined = " ".join(texts).replace("\n", " ")
    assert "smallest top-5 overlap" in joined and "expert score" in joined and "no photo" in joined
    n_images_drawn = sum(len(ax.images) for ax in fig.axes)
    assert n_images_drawn == 2  # the two photos that exist
    for qi in pick:  # every top-5 caption of every arm is drawn
        for arm, s in sims.items():
            for c in np.argsort(-s[qi], kind="stable")[:5]:
                assert split.captions[c] in joined
    fig.savefig(tmp_path / "fig.png")
    assert (tmp_path / "fig.png").stat().st_size > 10_000
    with pytest.raises(ValueError, match="relevance"):
        q.figure_qualitative(sims, split, [0])


def test_explorer_widget_updates(tmp_path):
    pytest.importorskip("ipywidgets")
    split = _split()
    rng = np.random.default_rng(8)
    sims = {"A": rng.normal(size=(6, 30)), "B": rng.normal(size=(6, 30)), "C": rng.normal(size=(6, 30))}
    box = q.explorer(sims, split, relevance={"sbert": rng.uniform(size=(6, 30))}, k=3, n_list=4)
    (_, arm_b), (kind, idx) = box.children[0].children, box.children[1].children
    worst, view, listing = box.children[2:]
    assert "img0.png" in view.value and listing.value.count("<tr") == 5  # header + 4 queries
    idx.value = 4
    assert "img4.png" in view.value
    kind.value = "caption"
    assert idx.max == 29 and "caption query" in view.value
    arm_b.value = "C"
    expect = q.disagreement_table(sims, split, "A", "C", 3, "caption", 4)
    assert [v for _, v in worst.options] == expect["query"].tolist()
    worst.value = worst.options[1][1]
    assert idx.value == expect["query"][1] and split.captions[idx.value] in view.value


def test_html_view_shows_photos_when_there_are_some(tmp_path):
    from PIL import Image

    split = _split()
    for i in range(6):
        Image.fromarray(np.full((30, 40, 3), 20 * i, dtype=np.uint8)).save(tmp_path / f"img{i}.png")
    rng = np.random.default_rng(9)
    sims = {"A": rng.normal(size=(6, 30)), "B": rng.normal(size=(6, 30))}
    by_caption = q.render_query_html(sims, split, "A", "B", "caption", 7, k=3, images_dir=tmp_path)
    assert by_caption.count("<img") == 6  # a thumbnail per candidate image, 3 per arm
    by_image = q.render_query_html(sims, split, "A", "B", "image", 1, k=3, images_dir=tmp_path)
    assert by_image.count("<img") == 1  # the query photo
    assert q.render_query_html(sims, split, "A", "B", "caption", 7, k=3).count("<img") == 0
