"""Training health: is a run's embedding usable, or did training collapse? (issue "fair protocol", item 1)

Per validation pass the training loop records (:func:`epoch_health`):

* ``val_pos_sim`` — mean cosine of each validation caption with its own image;
* ``val_hardneg_sim`` — mean over validation images of the cosine of the most similar caption
  of another image (the hardest negative; Unified paper Sec. 3.3 / Fig. 4 watch it rise to 1);
* ``val_gap`` = ``val_pos_sim − val_hardneg_sim``. In a healthy space it can be negative — the
  hardest of 5N − 5 negatives often beats the *average* positive — so the gap alone does not
  say "collapsed"; near 0 with both cosines near 1, it does;
* ``val_rsum_over_chance`` = validation RSUM / :func:`chance_rsum` of the validation split.

**Chance RSUM** (:func:`chance_rsum`): the expected RSUM of a uniformly random ranking (continuous
scores, no ties). Text→image: a caption's one image is among the top K of N images with
probability K/N. Image→text: image i with c_i of the M captions is hit at K when at least one of
its captions is among the top K, probability 1 − C(M − c_i, K) / C(M, K) (hypergeometric
P(X ≥ 1)), averaged over images. RSUM_chance = 100 · Σ_{K ∈ 1,5,10} (i2t + t2i). For 5 captions
per image: N = 100 → 31.5, N = 1000 → 9.37 (vs 600 for perfect retrieval). The metrics break ties
pessimistically, so an *exactly* constant embedding scores 0, below chance.

**Collapsed** — the one definition (:func:`is_collapsed`), at the selected checkpoint. A run is
collapsed when either

1. *geometry*: every embedding is nearly the same point — mean hardest-negative cosine
   ≥ :data:`COLLAPSE_COS` (0.99: the hardest negative within arccos 0.99 = 8.1° of its image)
   **and** |gap| ≤ :data:`COLLAPSE_GAP` (0.01: the positive no closer than the hardest negative
   by more than the rounding of that cap). Then rankings rest on the last few 1e-3 of cosine and
   any margin-based loss sees every hinge active at once — the state Unified Sec. 3.3 describes
   for Triplet-HN early in training; or
2. *retrieval*: validation RSUM ≤ :data:`COLLAPSE_RSUM_FACTOR` (2) × chance — the ranking is
   at most twice as good as a random one, whatever the geometry (an untrained or diverged model).

Why these numbers (fixed before looking at any study run; measured on planted runs by
``tests/test_health.py`` and the calibration in this module's ``__main__``):

* a planted collapsed embedding — one shared unit vector plus isotropic noise of std σ per
  coordinate in d = 128 — has cosines ≈ 1 − d·σ²/2·(…): σ = 0.003 gives pos ≈ hardneg ≈ 0.999 and
  RSUM/chance ≈ 1 (0.8–1.3 over 100 images); the geometric rule flags it, and so does the RSUM
  rule. At σ = 0.01 (cos ≈ 0.99) it is on the geometric boundary and the RSUM rule flags it.
* random unit vectors (an untrained encoder's scale of disorder) give RSUM/chance 0.6–1.4 at
  N = 100 validation images (σ of a random ranking's RSUM ≈ 0.15·chance there, less at larger N),
  so a factor 2 is > 6 σ above chance: no run that learned nothing passes, and a run that
  passes learned something measurable;
* a healthy tiny run (the toy world, 8 epochs, tests) reaches RSUM/chance ≈ 10 with
  hardest-negative cosine ≈ 0.5–0.8, far from both thresholds.

A run between 2× chance and a healthy score is *not* called collapsed here: it is weak, and the
ledger compares it as such. The rule is deliberately conservative (it flags failure, not
mediocrity), so it cannot be tuned toward a claim.
"""
from __future__ import annotations

import math

import numpy as np

#: mean hardest-negative cosine at or above which the embedding is geometrically collapsed (8.1° cap)
COLLAPSE_COS = 0.99
#: |mean positive − mean hardest-negative cosine| at or below which positives are not separated
COLLAPSE_GAP = 0.01
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
        miss = np.ones(len(counts))                     # P(no own caption in the top K) = C(M − c, K)/C(M, K)
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
    return {"val_pos_sim": pos, "val_hardneg_sim": neg, "val_gap": pos - neg,
            "val_rsum_over_chance": float(val_stats["val_rsum"]) / float(val_stats["val_rsum_chance"])}


def _selected(record_or_history) -> dict:
    """The health dict to judge: a record's ``health``, a health dict itself, or the best-RSUM epoch
    of a history (first maximum, as the training loop selects)."""
    if isinstance(record_or_history, dict):
        if "health" in record_or_history:
            return record_or_history["health"]
        if all(k in record_or_history for k in HEALTH_KEYS):
            return record_or_history
        raise ValueError("is_collapsed: expected a run record (with 'health'), a health dict "
                         f"{list(HEALTH_KEYS)} or a history list; got a dict with keys {sorted(record_or_history)}")
    history = list(record_or_history)
    if not history:
        raise ValueError("is_collapsed: empty history")
    best = max(range(len(history)), key=lambda i: (history[i]["val_rsum"], -i))
    row = history[best]
    return row if all(k in row for k in HEALTH_KEYS) else epoch_health(row)


def is_collapsed(record_or_history) -> tuple[bool, str]:
    """``(collapsed, reason)`` at the selected checkpoint (see the module docstring for the rule)."""
    h = _selected(record_or_history)
    pos, neg, gap, ratio = (float(h[k]) for k in HEALTH_KEYS)
    if not all(math.isfinite(x) for x in (pos, neg, gap, ratio)):
        return True, f"non-finite health values (pos={pos}, hardneg={neg}, rsum/chance={ratio})"
    if neg >= COLLAPSE_COS and abs(gap) <= COLLAPSE_GAP:
        return True, (f"geometry: hardest-negative cosine {neg:.4f} ≥ {COLLAPSE_COS} and |gap| {abs(gap):.4f} "
                      f"≤ {COLLAPSE_GAP} (positive {pos:.4f}): embeddings nearly identical")
    if ratio <= COLLAPSE_RSUM_FACTOR:
        return True, f"retrieval: validation RSUM is {ratio:.2f}× chance ≤ {COLLAPSE_RSUM_FACTOR}×"
    return False, (f"healthy: gap {gap:+.4f} (positive {pos:.4f}, hardest negative {neg:.4f}), "
                   f"RSUM {ratio:.1f}× chance")
