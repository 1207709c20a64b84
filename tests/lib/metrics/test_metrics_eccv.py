"""The eccv-caption adapter, checked by running the ``eccv-caption`` package itself (its bundled
COCO-id positive sets; no download) on a small universe of real COCO 5K-test ids."""

import warnings

import numpy as np
import pytest

pytest.importorskip("eccv_caption")
warnings.filterwarnings("ignore", message="failed to import `ujson`")

from eccv_caption import Metrics  # noqa: E402

from coherent_itr.metrics import positive_set_metrics, retrieval_metrics  # noqa: E402
from coherent_itr.metrics.eccv import (  # noqa: E402
    coco_test_caption_ids,
    load_positive_sets,
    positive_matrices,
    ranked_ids,
    run_eccv_caption,
)


@pytest.fixture(scope="module")
def universe():
    """A few ECCV queries and every item they need: 20 image and 20 caption queries, all their
    ECCV positives, the images of all those captions, all 5 captions of every image (so the
    original COCO ground truth is complete inside the universe), plus 15 unrelated images."""
    eccv, orig = load_positive_sets("eccv"), load_positive_sets("original")
    q_img = sorted(eccv["i2t"])[:20]
    q_cap = sorted(eccv["t2i"])[:20]
    images = set(q_img) | {i for c in q_cap for i in eccv["t2i"][c]} | {orig["t2i"][c][0] for c in q_cap}
    images |= {orig["t2i"][c][0] for i in q_img for c in eccv["i2t"][i]}
    extra = [i for i in sorted(orig["i2t"]) if i not in images][:15]
    images = sorted(images | set(extra))
    captions = sorted(c for i in images for c in orig["i2t"][i])
    img_of_cap = np.array([images.index(orig["t2i"][c][0]) for c in captions])
    rng = np.random.default_rng(0)
    sim = rng.normal(size=(len(images), len(captions)))
    sim[img_of_cap, np.arange(len(captions))] += 1.5  # make retrieval non-trivial
    return dict(
        eccv=eccv,
        q_img=q_img,
        q_cap=q_cap,
        images=np.array(images),
        captions=np.array(captions),
        img=img_of_cap,
        sim=sim,
    )


def test_ids_come_from_the_package():
    ids = coco_test_caption_ids()
    assert ids.shape == (25000,) and len(np.unique(ids)) == 25000
    orig = load_positive_sets("original")
    assert len(orig["i2t"]) == 5000 and all(len(v) == 5 for v in orig["i2t"].values())


def test_ranked_ids_follow_the_similarity(universe):
    u = universe
    i2t, t2i = ranked_ids(u["sim"], u["images"], u["captions"], max_len=7)
    row = 3
    expect = u["captions"][np.argsort(-u["sim"][row])[:7]]
    assert i2t[int(u["images"][row])] == expect.tolist()
    col = 11
    assert t2i[int(u["captions"][col])] == u["images"][np.argsort(-u["sim"][:, col])[:7]].tolist()
    assert len(i2t) == len(u["images"]) and len(t2i) == len(u["captions"])


def test_eccv_map_at_r_rprecision_r1_agree_with_the_package(universe):
    u = universe
    p_i2t, p_t2i = positive_matrices(u["images"], u["captions"], "eccv")
    # keep the chosen queries only (the others are skipped by our metrics: no positive)
    p_i2t[~np.isin(u["images"], u["q_img"])] = False
    p_t2i[:, ~np.isin(u["captions"], u["q_cap"])] = False
    # every ECCV positive of a chosen query lies inside the universe
    assert p_i2t.sum() == sum(len(u["eccv"]["i2t"][i]) for i in u["q_img"])
    assert p_t2i.sum() == sum(len(u["eccv"]["t2i"][c]) for c in u["q_cap"])
    ours = positive_set_metrics(u["sim"], u["img"], p_i2t, p_t2i)
    assert ours["mapr_i2t_nq"] == 20 and ours["mapr_t2i_nq"] == 20

    m = Metrics()
    m.eccv_gts = {
        "i2t": {i: u["eccv"]["i2t"][i] for i in u["q_img"]},
        "t2i": {c: u["eccv"]["t2i"][c] for c in u["q_cap"]},
    }
    i2t, t2i = ranked_ids(u["sim"], u["images"], u["captions"], max_len=None)
    ref = m.eccv_metrics({"i2t": i2t, "t2i": t2i}, "all")
    for d in ("i2t", "t2i"):
        assert ours[f"mapr_{d}"] == pytest.approx(100 * ref["eccv_map_at_r"][d], abs=1e-9)
        assert ours[f"rprec_{d}"] == pytest.approx(100 * ref["eccv_rprecision"][d], abs=1e-9)
        assert ours[f"r1_{d}"] == pytest.approx(100 * ref["eccv_r1"][d], abs=1e-9)
    # the same through the adapter that runs the package (lists truncated to 100 ≥ every R)
    via = run_eccv_caption(
        u["sim"],
        u["images"],
        u["captions"],
        restrict_to_queries=(u["q_img"], u["q_cap"]),
        target_metrics=("eccv_map_at_r", "eccv_rprecision", "eccv_r1"),
    )
    for d in ("i2t", "t2i"):
        assert via[f"eccv_map_at_r_{d}"] == pytest.approx(ref["eccv_map_at_r"][d])
        assert via[f"eccv_r1_{d}"] == pytest.approx(ref["eccv_r1"][d])


def test_binary_recall_agrees_with_the_package_coco_recalls(universe):
    u = universe
    via = run_eccv_caption(
        u["sim"],
        u["images"],
        u["captions"],
        target_metrics=("coco_5k_recalls",),
        restrict_to_queries=True,
        max_len=None,
    )
    ours = retrieval_metrics(u["sim"], u["img"])
    for d in ("i2t", "t2i"):
        for k in (1, 5, 10):
            assert ours[f"{d}_r{k}"] == pytest.approx(100 * via[f"coco_5k_r{k}_{d}"], abs=1e-9)


def test_bad_ids():
    with pytest.raises(ValueError, match="one COCO id per row"):
        ranked_ids(np.zeros((2, 3)), [1, 2, 3], [4, 5, 6])
    with pytest.raises(ValueError, match="unique"):
        ranked_ids(np.zeros((2, 3)), [1, 1], [4, 5, 6])
    with pytest.raises(ValueError, match="source must be one of"):
        load_positive_sets("pm")
