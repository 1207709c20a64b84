"""The arrays a run archive carries for the views, computed from pinned inputs: the guard of their frozen code
(:func:`reproduce.present.rankings.frozen_code`), pinned by ``tests/reproduce/present/test_view_code.py``.

A :class:`~reproduce.present.rankings.Ranking` of a similarity matrix full of ties (both query directions; exact:
indices and copied similarities, the same on every CPU) and listwise Fig. 7 (b)'s errors of a small made-up split
(float arithmetic: another CPU must match them to a relative 1e-3). An edit declared to keep every stored array
(``python -m reproduce.driver.code_identity --declare-view NAME WHY``) must leave both as pinned.

``python tests/view_pins.py`` rewrites ``tests/data/view_pins.json`` — only when an edit is *meant* to change
them, together with ``python -m reproduce.driver.code_identity --freeze-view NAME``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np

HERE = Path(__file__).resolve().parent
PINS = HERE / "data" / "view_pins.json"
RANKS = {"image": 8, "caption": 10}  # the depths the study's views store (reproduce/spec/views.py): SAM 8, others 10


def digest(arrays: dict) -> str:
    """sha256 of named arrays: names, dtypes, shapes and bytes, in name order."""
    h = hashlib.sha256()
    for k in sorted(arrays):
        a = np.ascontiguousarray(arrays[k])
        h.update(f"{k}|{a.dtype.str}|{a.shape}|".encode())
        h.update(a.tobytes())
    return h.hexdigest()


def ranking_arrays() -> dict:
    """The stored ranking of a 30 × 150 similarity matrix rounded to one decimal: most rows tie at their top 10."""
    from reproduce.present.rankings import Ranking

    sim = np.round(np.random.default_rng(7).normal(size=(30, 150)), 1).astype(np.float32)
    return Ranking.of_similarity(sim).to_arrays(RANKS)


def fig7b_arrays() -> dict:
    """Fig. 7 (b)'s stored errors of seed 3 on a made-up split of 16 images × 5 captions (8-d unit embeddings,
    relevance a fixed matrix in [0, 1]), batches of 8."""
    from reproduce.present.analyses import sndcg_error

    rng = np.random.default_rng(11)
    unit = lambda x: (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    vi, vc = unit(rng.normal(size=(16, 8))), unit(rng.normal(size=(80, 8)))
    rel = rng.uniform(size=(16, 80))
    test = SimpleNamespace(n_images=16, n_captions=80, captions_per_image=5)
    return sndcg_error.error_arrays(3, vi, vc, test, lambda i, c: rel[np.ix_(i, c)], batch_size=8, n_batches=2)


def compute() -> dict:
    """``{"ranking": {"code", "sha256"}, "fig7b": {"code", "error"}}`` under this checkout's code."""
    rk, f7 = ranking_arrays(), fig7b_arrays()
    return {
        "ranking": {"code": str(rk["view_ranking_code"]), "sha256": digest(rk)},
        "fig7b": {"code": str(f7["view_fig7b_code"]), "error": f7["view_fig7b_error"].ravel().tolist()},
    }


if __name__ == "__main__":
    PINS.write_text(json.dumps(compute(), indent=1) + "\n")
    print(f"{PINS}: pinned")
