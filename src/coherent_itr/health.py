"""Training health: is a run's embedding usable, or did training collapse?

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
per image: N = 100 → 31.6, N = 1000 → 3.20 (vs 600 for perfect retrieval). The metrics break ties
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

Why these numbers (fixed from what collapse means and from planted runs, before looking at any
study run; the planted cases are re-checked by ``tests/test_health.py``):

* chance RSUM: 31.57 for N = 100 validation images with 5 captions each, 3.20 for N = 1000
  (R@1 of a random ranking is 0.1% there), 102.0 for the 30-image toy validation split;
* random unit vectors (the disorder of an untrained encoder): RSUM/chance 0.96 ± 0.18
  (0.63–1.33 over 20 draws) at N = 100, 0.93 ± 0.12 at N = 1000 — a factor 2 is > 5 standard
  deviations above chance, so no run that learned nothing passes;
* a planted collapsed embedding — one shared unit vector plus isotropic noise of std σ per
  coordinate, d = 128 — gives (pos, hardest-negative) cosines (0.9999, 0.9999) at σ = 0.001,
  (0.9989, 0.9992) at σ = 0.003 and (0.987, 0.991) at σ = 0.01, with RSUM/chance 1.0–1.4: the
  geometric rule flags all three. At σ = 0.03 the cosines are (0.90, 0.93), outside the
  geometric rule, and the retrieval rule flags it (RSUM/chance 0.86–0.97). The geometric rule
  matters where the residual ranking is still above 2× chance: with N = 1000 chance is only 3.2,
  so a squashed embedding can reach 10× chance and yet have every cosine ≥ 0.99;
* a healthy tiny run (toy world 120/30/30 images, GRU-32, 8 epochs) goes from 2.1× chance after
  epoch 1 to 4.6× (the ceiling there is 600/102 = 5.9×), with positive and hardest-negative
  cosines ≈ 0.02 and a *negative* gap (−0.003): the gap alone must not decide. On the smoke
  synthetic world (100 validation images, 2 epochs), Unified reaches 4.2× chance (healthy) while
  Triplet-HN stays at 1.8× (collapsed by the retrieval rule; cosines 0.338 vs 0.340).

The retrieval rule has little resolution when chance is large (600/chance is the ceiling): use
validation splits of ≥ 100 images (every profile does).

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


def is_collapsed(record_or_history) -> tuple[bool, str]:
    """``(collapsed, reason)`` at the selected checkpoint (see the module docstring for the rule)."""
    h = _selected(record_or_history)
    pos, neg, gap, ratio = (float(h[k]) for k in HEALTH_KEYS)
    if not all(math.isfinite(x) for x in (pos, neg, gap, ratio)):
        return True, f"non-finite health values (pos={pos}, hardneg={neg}, rsum/chance={ratio})"
    if neg >= COLLAPSE_COS and abs(gap) <= COLLAPSE_GAP:
        return True, (
            f"geometry: hardest-negative cosine {neg:.4f} ≥ {COLLAPSE_COS} and |gap| {abs(gap):.4f} "
            f"≤ {COLLAPSE_GAP} (positive {pos:.4f}): embeddings nearly identical"
        )
    if ratio <= COLLAPSE_RSUM_FACTOR:
        return True, f"retrieval: validation RSUM is {ratio:.2f}× chance ≤ {COLLAPSE_RSUM_FACTOR}×"
    return False, (
        f"healthy: gap {gap:+.4f} (positive {pos:.4f}, hardest negative {neg:.4f}), RSUM {ratio:.1f}× chance"
    )
