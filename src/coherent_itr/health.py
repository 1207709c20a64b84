"""Training health: is a run's embedding usable, or did training collapse?

Per validation pass the training loop records (:func:`epoch_health`):

* ``val_pos_sim`` — mean cosine of each validation caption with its own image;
* ``val_hardneg_sim`` — mean over validation images of the cosine of the most similar caption
  of another image (the hardest negative; Unified paper Sec. 3.3 / Fig. 4 watch it rise to 1);
* ``val_gap`` = ``val_pos_sim − val_hardneg_sim``. In a healthy space it can be negative — the
  hardest of 5N − 5 negatives often beats the *average* positive — so the gap alone does not
  say "collapsed"; near 0 with both cosines near 1 it marks a narrow cone (below);
* ``val_rsum_over_chance`` = validation RSUM / :func:`chance_rsum` of the validation split.

**Chance RSUM** (:func:`chance_rsum`): the expected RSUM of a uniformly random ranking (continuous
scores, no ties). Text→image: a caption's one image is among the top K of N images with
probability K/N. Image→text: image i with c_i of the M captions is hit at K when at least one of
its captions is among the top K, probability 1 − C(M − c_i, K) / C(M, K) (hypergeometric
P(X ≥ 1)), averaged over images. RSUM_chance = 100 · Σ_{K ∈ 1,5,10} (i2t + t2i). For 5 captions
per image: N = 100 → 31.6, N = 1000 → 3.20 (vs 600 for perfect retrieval). The metrics break ties
pessimistically, so an *exactly* constant embedding scores 0, below chance.

**Collapsed** — the one definition (:func:`is_collapsed`), at the selected checkpoint: a run is
collapsed when it has no retrieval ability, i.e. validation RSUM ≤ :data:`COLLAPSE_RSUM_FACTOR` (2)
× chance, or when it diverged (a non-finite health value). Ranking depends on the *order* of the
similarities, not on the width of the cone they live in, so geometry alone never removes a run.

**The cone** (:func:`cone`) — a recorded diagnostic, never a reason to drop a run: mean
hardest-negative cosine ≥ :data:`CONE_COS` (0.99: within arccos 0.99 = 8.1° of its image) with
|gap| ≤ :data:`CONE_GAP` (0.01). Hardest-negative training passes through such a narrow cone early
on and then escapes it (Unified paper, Sec. 3.3 and Fig. 4). On Flickr8k a GRU-64 VSE++ run with a
hardest-negative cosine of 0.999 already ranked at 27× chance (validation RSUM 87.3); in a 10-epoch
GRU-128 run the cosine is 0.99 in epochs 2–3 and 0.65 in epoch 4, where validation RSUM jumps
166 → 206. Tables and the Fig. 4 analysis show the cone.

Why these numbers (from what collapse means and from planted runs, re-checked by
``tests/lib/test_health.py``):

* chance RSUM: 31.57 for N = 100 validation images with 5 captions each, 3.20 for N = 1000
  (R@1 of a random ranking is 0.1% there), 102.0 for the 30-image toy validation split;
* random unit vectors (the disorder of an untrained encoder): RSUM/chance 0.96 ± 0.18
  (0.63–1.33 over 20 draws) at N = 100, 0.93 ± 0.12 at N = 1000 — a factor 2 is > 5 standard
  deviations above chance, so no run that learned nothing passes;
* a planted collapsed embedding — one shared unit vector plus isotropic noise of std σ per
  coordinate, d = 128 — ranks at chance (RSUM/chance 1.0–1.4 for σ = 0.001–0.03): collapsed;
* a planted *squashed* healthy embedding — a well-separated embedding pulled towards one direction,
  which keeps its ranking — has every cosine ≥ 0.99 and RSUM far above chance: a narrow cone, not
  collapsed;
* a healthy tiny run (toy world 120/30/30 images, GRU-32, 8 epochs) goes from 2.1× chance after
  epoch 1 to 4.6× (the ceiling there is 600/102 = 5.9×), with a *negative* gap (−0.003): the gap
  alone must not decide either.

The retrieval rule has little resolution when chance is large (600/chance is the ceiling): use
validation splits of ≥ 100 images (every profile does).

A run between 2× chance and a healthy score is *not* called collapsed here: it is weak, and the
ledger compares it as such. The rule is deliberately conservative (it flags failure, not
mediocrity), so it cannot be tuned toward a claim.
"""

from __future__ import annotations

import math

import numpy as np

#: mean hardest-negative cosine at or above which the embedding sits in a narrow cone (8.1° cap; diagnostic)
CONE_COS = 0.99
#: |mean positive − mean hardest-negative cosine| at or below which the cone is called narrow (diagnostic)
CONE_GAP = 0.01
#: validation RSUM at or below this multiple of chance RSUM counts as no retrieval ability
COLLAPSE_RSUM_FACTOR = 2.0
KS = (1, 5, 10)
HEALTH_KEYS = ("val_pos_sim", "val_hardneg_sim", "val_gap", "val_rsum_over_chance")


def chance_rsum(image_of_caption, ks=KS) -> float:
    """Expected RSUM (percent) of a uniformly random ranking for captions → images ``image_of_caption``."""
    img = np.asarray(image_of_caption, dtype=np.int64)
    m = len(img)
    counts = np.bincount(img)
    n = len(counts)
    total = 0.0
    for k in ks:
        t2i = min(k, n) / n
        miss = np.ones(len(counts))  # P(no own caption in the top K) = C(M − c, K)/C(M, K)
        for t in range(min(k, m)):
            miss *= np.clip(m - counts - t, 0, None) / (m - t)
        total += t2i + float(np.mean(1.0 - miss))
    return 100.0 * total


def similarity_health(sim: np.ndarray, image_of_caption) -> dict[str, float]:
    """``val_pos_sim`` and ``val_hardneg_sim`` of an images × captions cosine matrix."""
    own = np.asarray(image_of_caption, dtype=np.int64)
    cols = np.arange(sim.shape[1])
    pos = sim[own, cols]
    neg = sim.copy()
    neg[own, cols] = -np.inf
    return {"val_pos_sim": float(pos.mean()), "val_hardneg_sim": float(neg.max(axis=1).mean())}


def epoch_health(val_stats: dict) -> dict[str, float]:
    """The health record of one validation pass from its stats (``val_rsum``, ``val_rsum_chance``,
    ``val_pos_sim``, ``val_hardneg_sim``): the four :data:`HEALTH_KEYS`."""
    missing = [k for k in ("val_rsum", "val_rsum_chance", "val_pos_sim", "val_hardneg_sim") if k not in val_stats]
    if missing:
        raise KeyError(f"epoch_health: validation stats lack {missing}; got keys {sorted(val_stats)}")
    pos, neg = float(val_stats["val_pos_sim"]), float(val_stats["val_hardneg_sim"])
    return {
        "val_pos_sim": pos,
        "val_hardneg_sim": neg,
        "val_gap": pos - neg,
        "val_rsum_over_chance": float(val_stats["val_rsum"]) / float(val_stats["val_rsum_chance"]),
    }


def _selected(record_or_history) -> dict:
    """The health dict to judge: a record's ``health``, a health dict itself, or the best-RSUM epoch
    of a history (first maximum, as the training loop selects)."""
    if isinstance(record_or_history, dict):
        if "health" in record_or_history:
            return record_or_history["health"]
        if all(k in record_or_history for k in HEALTH_KEYS):
            return record_or_history
        raise ValueError(
            "is_collapsed: expected a run record (with 'health'), a health dict "
            f"{list(HEALTH_KEYS)} or a history list; got a dict with keys {sorted(record_or_history)}"
        )
    history = list(record_or_history)
    if not history:
        raise ValueError("is_collapsed: empty history")
    best = max(range(len(history)), key=lambda i: (history[i]["val_rsum"], -i))
    row = history[best]
    return row if all(k in row for k in HEALTH_KEYS) else epoch_health(row)


def cone(record_or_history) -> tuple[bool, str]:
    """``(narrow, text)``: whether the selected checkpoint's embeddings sit in a narrow cone (mean
    hardest-negative cosine ≥ :data:`CONE_COS` and |gap| ≤ :data:`CONE_GAP`). A diagnostic of the
    hardest-negative transient (Unified Sec. 3.3, Fig. 4); it never decides collapse."""
    h = _selected(record_or_history)
    pos, neg, gap = float(h["val_pos_sim"]), float(h["val_hardneg_sim"]), float(h["val_gap"])
    narrow = neg >= CONE_COS and abs(gap) <= CONE_GAP
    return narrow, f"cosines: positive {pos:.4f}, hardest negative {neg:.4f}, gap {gap:+.4f}" + (
        " (narrow cone)" if narrow else ""
    )


def is_collapsed(record_or_history) -> tuple[bool, str]:
    """``(collapsed, reason)`` at the selected checkpoint: no retrieval ability (validation RSUM ≤
    :data:`COLLAPSE_RSUM_FACTOR` × chance) or diverged (non-finite health values). The cone
    (:func:`cone`) is reported in the reason and never decides."""
    h = _selected(record_or_history)
    pos, neg, gap, ratio = (float(h[k]) for k in HEALTH_KEYS)
    if not all(math.isfinite(x) for x in (pos, neg, gap, ratio)):
        return True, f"diverged: non-finite health values (pos={pos}, hardneg={neg}, rsum/chance={ratio})"
    _, cone_text = cone(h)
    if ratio <= COLLAPSE_RSUM_FACTOR:
        return True, f"retrieval: validation RSUM is {ratio:.2f}× chance ≤ {COLLAPSE_RSUM_FACTOR:g}× ({cone_text})"
    return False, f"healthy: RSUM {ratio:.1f}× chance ({cone_text})"
