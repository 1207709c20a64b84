"""Adapter to the ``eccv-caption`` package (Chun et al., "ECCV Caption", ECCV 2022), the evaluation
BCLS (Table VII) and the listwise paper (Table VII) use for semantic retrieval on MS-COCO.

The package ships only ids: COCO 2014 image ids and caption annotation ids of the Karpathy 5K
test split, with three positive sets per query — ``original`` (the 5 captions / 1 image),
``cxc`` (CxC-derived) and ``eccv`` (machine- and human-verified). Its ``Metrics`` class takes
rankings as ``{query id: [candidate ids, best first]}``. Everything needed is bundled in the
package: no download is needed except for PMRP (``pm_*`` files, > 140 MB), which we do not use.

* :func:`ranked_ids` turns a similarity matrix over COCO ids into that input (top ``max_len``
  per query; ties keep the matrix's column order — the package cannot see scores).
* :func:`positive_matrices` turns the package's positive sets into boolean matrices for
  :func:`coherent_itr.metrics.semantic.positive_set_metrics` (our chunked mAP@R / R-P / R@1).
* :func:`run_eccv_caption` runs the package itself on a similarity matrix.

Only meaningful with real MS-COCO features; here it is exercised on ids (see the tests).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np

from ._blocks import block, check_sim, default_chunk, descending, to_numpy

SOURCES = ("original", "cxc", "eccv")


def _data_dir() -> Path:
    import eccv_caption

    return Path(eccv_caption.__file__).parent / "data"


def coco_test_caption_ids() -> np.ndarray:
    """The 25,000 caption annotation ids of the Karpathy 5K test split, in the package's order."""
    return np.load(_data_dir() / "coco_test_ids.npy", allow_pickle=False)


def load_positive_sets(source: str = "eccv") -> dict[str, dict[int, list[int]]]:
    """``{"i2t": {image id: [caption ids]}, "t2i": {caption id: [image ids]}}`` from the package."""
    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    out = {}
    for d, fname in (("i2t", "image_to_caption"), ("t2i", "caption_to_image")):
        path = _data_dir() / f"{source}_{fname}.json"
        with open(path) as f:
            raw = json.load(f)
        out[d] = {int(k): [int(x) for x in v] for k, v in raw.items()}
    return out


def _ids(x, n: int, name: str) -> np.ndarray:
    a = to_numpy(x, name).astype(np.int64)
    if a.shape != (n,):
        raise ValueError(
            f"{name} must have one COCO id per {'row' if name == 'image_ids' else 'column'} "
            f"of sim ({n}), got shape {a.shape}"
        )
    if len(np.unique(a)) != n:
        raise ValueError(f"{name} must be unique")
    return a


def ranked_ids(sim, image_ids, caption_ids, max_len: int | None = 100, chunk: int | None = None):
    """The rankings in the ``eccv-caption`` package's input format.

    Args:
        sim: (n_images, n_captions) similarities.
        image_ids, caption_ids: the COCO id of every row / column (unique).
        max_len: items kept per list (None = full lists; the package's COCO-1K recalls need full
            lists, ECCV mAP@R needs at least R ≤ 48 items).
        chunk: queries per block.

    Returns:
        ``(i2t, t2i)``: ``{image id: [caption ids, best first]}`` and ``{caption id: [image ids]}``.
    """
    sim = check_sim(sim)
    iid = _ids(image_ids, sim.shape[0], "image_ids")
    cid = _ids(caption_ids, sim.shape[1], "caption_ids")
    out = []
    for d, q_ids, c_ids in (("i2t", iid, cid), ("t2i", cid, iid)):
        n_q, n_c = len(q_ids), len(c_ids)
        k = n_c if max_len is None else min(int(max_len), n_c)
        step = chunk or default_chunk(n_c)
        res: dict[int, list[int]] = {}
        for s in range(0, n_q, step):
            e = min(n_q, s + step)
            top = descending(block(sim, d, s, e))[:, :k]
            for q, row in zip(q_ids[s:e].tolist(), c_ids[top].tolist()):
                res[q] = row
        out.append(res)
    return out[0], out[1]


def positive_matrices(image_ids, caption_ids, source: str = "eccv") -> tuple[np.ndarray, np.ndarray]:
    """The package's positive sets as boolean matrices aligned with ``sim``.

    Args:
        image_ids, caption_ids: the COCO id of every row / column of ``sim``.
        source: one of :data:`SOURCES` (default: the ECCV Caption positives).

    Returns:
        ``(P_i2t, P_t2i)``, boolean (n_images, n_captions): ``P_i2t[i, c]`` — caption c is a positive
        of image query i; ``P_t2i[i, c]`` — image i is a positive of caption query c. The two differ
        (the package's i2t and t2i sets cover different queries); queries without an entry have no
        positive and are skipped by the metrics.
    """
    sets = load_positive_sets(source)
    iid = to_numpy(image_ids, "image_ids").astype(np.int64)
    cid = to_numpy(caption_ids, "caption_ids").astype(np.int64)
    irow = {v: i for i, v in enumerate(iid.tolist())}
    ccol = {v: c for c, v in enumerate(cid.tolist())}
    p_i2t = np.zeros((len(iid), len(cid)), dtype=bool)
    p_t2i = np.zeros((len(iid), len(cid)), dtype=bool)
    for img, caps in sets["i2t"].items():
        if img in irow:
            cols = [ccol[c] for c in caps if c in ccol]
            p_i2t[irow[img], cols] = True
    for cap, imgs in sets["t2i"].items():
        if cap in ccol:
            rows = [irow[i] for i in imgs if i in irow]
            p_t2i[rows, ccol[cap]] = True
    return p_i2t, p_t2i


def run_eccv_caption(
    sim,
    image_ids,
    caption_ids,
    target_metrics=("eccv_map_at_r", "eccv_rprecision", "eccv_r1", "coco_5k_recalls"),
    ks=(1, 5, 10),
    max_len: int | None = 100,
    restrict_to_queries=False,
) -> dict[str, float]:
    """Run ``eccv_caption.Metrics`` on ``sim``.

    The package evaluates every query of its positive sets, so ``sim`` must cover the whole 5K
    test split unless the queries are restricted; restricted numbers are not comparable to
    published ones (they exist for tests).

    Args:
        sim: (n_images, n_captions) similarities.
        image_ids, caption_ids: the COCO id of every row / column.
        target_metrics: the package's metric names.
        ks: the recall cut-offs.
        max_len: items kept per ranked list (:func:`ranked_ids`).
        restrict_to_queries: False (all of the package's queries), True (those that are rows /
            columns of ``sim``) or an ``(image ids, caption ids)`` pair of query ids to keep.

    Returns:
        ``{f"{metric}_{i2t|t2i}": value}`` as the package reports them (fractions).
    """
    from eccv_caption import Metrics

    i2t, t2i = ranked_ids(sim, image_ids, caption_ids, max_len=max_len)
    m = Metrics()
    if restrict_to_queries is not False:
        keep_i, keep_t = (
            (set(i2t), set(t2i))
            if restrict_to_queries is True
            else (set(int(x) for x in restrict_to_queries[0]), set(int(x) for x in restrict_to_queries[1]))
        )
        for attr in ("coco_gts", "cxc_gts", "eccv_gts"):
            gts = getattr(m, attr)
            setattr(
                m,
                attr,
                {
                    "i2t": {k: v for k, v in gts["i2t"].items() if k in keep_i and k in i2t},
                    "t2i": {k: v for k, v in gts["t2i"].items() if k in keep_t and k in t2i},
                },
            )
    else:
        missing = set(m.eccv_gts["i2t"]) - set(i2t)
        if missing:
            warnings.warn(
                f"{len(missing)} ECCV image queries are not rows of sim; the package will fail — "
                f"pass the full COCO 5K test split or restrict_to_queries=True"
            )
    res = m.compute_all_metrics(i2t, t2i, target_metrics=list(target_metrics), Ks=list(ks), verbose=False)
    return {f"{k}_{d}": float(v) for k, dv in res.items() for d, v in dv.items()}
