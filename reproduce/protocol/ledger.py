"""The claims ledger's ONE verdict rule: effect, interval, family, smallest effect of interest, verdict, power.

Every number the rule uses is a module constant; nothing in it is tuned to a result. The rule answers the
question a reader of a paper asks — did the paper's effect reproduce, and if not, can we exclude it? — so the
threshold comes from the claim, never from the noise of other arms.

Effects
    Every effect is oriented so that the claim predicts a value > 0 (``A − B`` for "A beats B").
    Per seed s, e_s = metric(A, seed s) − metric(B, seed s) (paired by seed).

Uncertainty
    The mean effect θ̂ = mean_s e_s has two sources of error: training seeds and the finite test set.
    The test set is a sample of images, each with its captions, so the test-set unit is the image: per seed s
    and test image i, g_si = (A − B)'s per-query R@1 + R@5 + R@10 hits of image i's image→text query
    + (I/C) × the sum of the same over its captions' text→image queries (:func:`per_image_effects`; I images,
    C captions), so that mean_i g_si is the seed's RSUM effect e_s. The seeds × images table follows the
    crossed random-effects model g_si = θ + a_s + b_i + c_si (seed, image, their interaction), whose mean has
    Var(θ̂) = σ_a²/n + σ_b²/I + σ_c²/(nI). Its two-way ANOVA without replication (mean squares MS_seed,
    MS_image, MS_resid) gives it without bias as s_seed²/n + v_query:
    * seeds: s_seed² / n with s_seed the sd of e_s over the n seeds (s_seed² = MS_seed/I estimates
      σ_a² + σ_c²/I: the interaction is already in the seed variance);
    * test images: v_query = max(0, MS_image − MS_resid) / (n·I), the images' own part σ_b²/I, common to all
      seeds (:func:`image_variance`).
    se² = s_seed²/n + v_query, with df = n − 1; with no per-query data (a notebook row), v_query = 0 and the
    reason column says so. The df are those of the seed part alone: conservative, since v_query is nearly known
    (≈ I − 1 df). Welch–Satterthwaite's df, computed from the estimated seed variance, are anti-conservative at a
    family's level when v_query is a small part of se² (as it is now): at 5 seeds and ALPHA/9 its per-row error
    is 1.9–2.2× the level for v_query/(s_seed²/n) = 0.05–0.3, while n − 1 keeps it at 0.03–0.44× (simulated;
    ``tests/reproduce/protocol/test_verdicts_simulation.py``); from 15 seeds on both are within 1.1×.
    Not a bootstrap: a bootstrap over the queries of the seed-averaged differences estimates MS_image/(n·I), which
    holds the interaction σ_c²/(nI) a second time, and resampling seeds and queries together (Owen's pigeonhole
    bootstrap) a third. Fewer than 2 seeds: no interval, verdict ``inconclusive``.

Families and simultaneous intervals
    A claim's primary row is decided in its *family*: the primary rows of one paper on one data set (the
    cross-paper claims X1–X3 form one family of their own). The family's size m is fixed in advance: the
    number of that paper's claims in ``reproduce/data/claims.toml`` decided by an interval (direction and
    equivalence claims; identities are exact checks). Each row's interval is a Bonferroni interval at the
    level 1 − ALPHA/m (two-sided Student-t, df above), so the intervals of a family hold together with
    probability ≥ 1 − ALPHA, and a verdict that reads the interval is the test: p_adj = min(1, m·p).
    Secondary and exploratory rows are not claims: they get an unadjusted 95% interval and are decided on
    direction alone.

Smallest effect of interest δ
    δ = FRACTION × |paper effect| (half the paper's reported effect, in our unit) where the paper gives a
    number; otherwise the claim is decided on its direction alone (no δ: it can be reproduced or reversed,
    never ruled out) and its reason says so. Seed noise never sets δ. An equivalence claim's δ is its
    declared tolerance.
    δ assumes that the paper's effect carries over in absolute units from the paper's models to ours. For an
    RSUM claim whose baselines are known (:mod:`reproduce.spec.baselines`) the ledger also decides the row with
    δ scaled to our baseline, :func:`scaled_delta` = FRACTION × |paper effect| × our baseline ÷ the paper's
    baseline, and flags a verdict that changes under it (``delta_sensitive``); the declared δ stays the verdict.

Verdicts (direction claim, interval [L, U] at the family's level)
    * ``reproduced``: L > 0. Beside it *larger than the paper — check the baseline* when the ratio exceeds
      LARGER_THAN_PAPER.
    * ``reversed``: U < 0 (the opposite of the claim, significant).
    * ``ruled out``: L ≤ 0 ≤ U < δ — even half the claimed gain is excluded. Beside it *a reversal not
      excluded* when L < −δ: the interval is also compatible with an opposite effect at least as large as δ.
    * ``inconclusive``: anything else (the interval contains 0 and reaches δ, or there is no δ); tagged
      *underpowered* when the planned power at 1× the paper's effect is below POWER.
    * failed seeds: a seed on which an arm's run failed (``reproduce.protocol.claim_rows.run_failures``: collapsed by
      ``coherent_itr.health.is_collapsed``, or a validation or test RSUM below half the median of its arm's other
      seeds; an arm the claim predicts to fail is not counted) is a failure of that arm. The row is decided as
      above on all its seeds, and again, beside it, on the seeds without a failure
      (``reproduce.protocol.ledger_decision``: ``failures``, ``without_failures``).
    * ``not testable``: only a row of a claim file written before the failed seeds (no ``failed_seeds`` column)
      with a collapsed arm: the comparison would measure a training failure.
    Equivalence claim (|θ| < δ predicted): ``reproduced`` when the (1 − 2·ALPHA/m) interval lies inside ±δ
    (TOST at ALPHA/m), ``ruled out`` when it lies entirely outside, else ``inconclusive``. Identity claim:
    ``reproduced`` when the largest deviation is within the tolerance, else ``ruled out``.
    Beside any verdict of a direction row, *smaller than the paper* when U < |paper effect| (the paper's own
    effect is excluded), whether the row is reproduced, ruled out, inconclusive or reversed.
    So no row whose interval excludes 0 is called anything but reproduced or reversed, and no row is ruled
    out while its interval still contains δ.

Power and the seeds a claim needs (primary direction rows with a paper effect)
    Power at θ: P(L > 0) for a true effect θ = the paper's, at the row's measured s_seed and v_query and
    family level: the probability that the rule's own interval (se(n)² = s²/n + v_query, df = n − 1) lies above 0
    when the per-seed effects are N(θ + q, s_seed²) with a common q ~ N(0, v_query) (:func:`power_at`: an integral
    over the seed variance's χ²; the noncentral t's power when v_query = 0). ``seeds_for_power`` is the smallest
    n ≤ SEED_CAP
    with power ≥ POWER (:func:`seeds_for_power`); when even n → ∞ falls short (θ/√v_query < z_{1 − α/2} +
    z_POWER) the row says so: the test set's own variance, not the seeds, limits it — more test queries would.
    The sd of 5 seeds is itself uncertain (its 95% interval spans about 0.6–2.9× the estimate): the seed
    count is a plan, not a guarantee.

Stability (:func:`stability`)
    The share of N_STABILITY bootstrap resamples that give a row the same verdict: seeds drawn with
    replacement, the test-query sampling redrawn as one shift common to all seeds, q ~ N(0, v_query); the
    row is re-estimated and decided at its fixed level and δ. Below STABLE the row is *fragile*.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from reproduce.spec.power_seeds import SEED_CAP  # the most seeds the plan gives one arm

FRACTION = 0.5  # smallest effect of interest: this fraction of |paper effect|
ALPHA = 0.05  # family-wise error rate of one paper's claims on one data set (Bonferroni)
POWER = 0.80  # planned power at 1× the paper's effect; below it an inconclusive row is underpowered
STABLE = 0.80  # stability below this share of resamples → fragile
N_STABILITY = 1000  # bootstrap resamples of a row for the stability column
LARGER_THAN_PAPER = 5.0  # a reproduced effect more than this many times the paper's → check the baseline
CROSS_PAPER = "Across papers"  # the family of the cross-paper claims
SMALLER = "smaller than the paper"  # tag of a direction row whose interval lies below the paper's effect
REVERSAL = "a reversal not excluded"  # tag of a ruled-out row whose interval reaches below −δ
FAILED = "failed seeds"  # tag of a row on which an arm failed seeds: the failure rates and the verdict without them

VERDICTS = ("reproduced", "reversed", "ruled out", "inconclusive", "not testable")
KINDS = ("direction", "equivalence", "identity")
ROLES = ("primary", "secondary", "exploratory")

LEGEND = {
    "reproduced": "direction claim: the interval lies above 0 (the effect is in the claimed direction). "
    "Equivalence claim: the interval lies inside ±δ; identity: the largest deviation is within the tolerance.",
    "reversed": "direction claim: the interval lies below 0 — the opposite of the claim.",
    "ruled out": "direction claim: the interval contains 0 and lies below δ = half the paper's effect — even "
    f"half the claimed gain is excluded; *{REVERSAL}* beside it when the interval also reaches below −δ (an "
    "opposite effect as large as δ is not excluded). Equivalence claim: the interval lies outside ±δ; identity: "
    "a deviation exceeds the tolerance.",
    "inconclusive": "none of the above: the interval contains 0 and reaches δ (or the claim has no δ), fewer "
    "than 2 seeds give no interval, or the contrast was not computed (the reason column says which); "
    "*underpowered* when the seeds had < 80% power at the paper's effect.",
    "not testable": "a row of an older claim file whose arm collapsed (coherent_itr.health.is_collapsed): the "
    "comparison would measure a training failure, not the method. A current row is decided on all its seeds and, "
    "beside it, without the seeds on which an arm failed (the failures column).",
}
TAGS = {  # the notes beside a verdict, in every table that shows one
    SMALLER: "beside any verdict of a direction claim (inconclusive, ruled out and reversed ones too): the "
    "interval lies below the paper's effect, so the paper's own effect is excluded.",
    REVERSAL: "beside a ruled-out direction claim whose interval reaches below −δ: the gain is ruled out, but an "
    "opposite effect as large as δ is not.",
    FAILED: "beside the verdict of a row on which an arm failed seeds (a collapsed run, or a validation or test RSUM "
    "below half the median of its arm's other seeds; docs/protocol.md): each failing arm's failure rate and the "
    "verdict on the seeds without a failure, at the same level and δ.",
}
RULE = (
    f"interval: Bonferroni at 1 − {ALPHA:g}/m over the m claims of a paper on a data set (seeds + test "
    f"queries); δ = {FRACTION:g} × |paper effect|, none where the paper gives no number; reproduced: the interval "
    "lies above 0; reversed: below 0; ruled out: it contains 0 and lies below δ; else inconclusive "
    f"(*underpowered*: < {POWER:.0%} power at the paper's effect)."
)


# --- intervals and p-values --------------------------------------------------------------------
@dataclass(frozen=True)
class Estimate:
    """A mean effect with its standard error and degrees of freedom (seed + query variation)."""

    effect: float
    se: float
    df: float
    n: int
    query_var: float = 0.0

    @property
    def seed_sd(self) -> float:
        """The sd of the per-seed effects (from se² = s_seed²/n + query_var); NaN without an interval."""
        if not (self.n >= 2 and np.isfinite(self.se)):
            return math.nan
        return math.sqrt(max(0.0, self.se**2 - self.query_var) * self.n)

    def interval(self, level: float = 0.95) -> tuple[float, float]:
        if not (self.n >= 2 and np.isfinite(self.se) and self.df > 0):
            return math.nan, math.nan
        if self.se == 0:
            return self.effect, self.effect
        half = float(stats.t.ppf(0.5 + level / 2, self.df)) * self.se
        return self.effect - half, self.effect + half

    def p_zero(self) -> float:
        """Two-sided p-value of θ = 0."""
        if not (self.n >= 2 and np.isfinite(self.se) and self.df > 0):
            return math.nan
        if self.se == 0:
            return 0.0 if self.effect != 0 else 1.0
        return float(2 * stats.t.sf(abs(self.effect) / self.se, self.df))

    def p_equivalent(self, bound: float) -> float:
        """TOST p-value of H0: |θ| ≥ bound (small → the effect lies inside ±bound)."""
        if not (self.n >= 2 and np.isfinite(self.se) and self.df > 0) or bound <= 0:
            return math.nan
        if self.se == 0:
            return 0.0 if abs(self.effect) < bound else 1.0
        lo = stats.t.sf((self.effect + bound) / self.se, self.df)  # H0: θ ≤ −bound
        hi = stats.t.cdf((self.effect - bound) / self.se, self.df)  # H0: θ ≥ +bound
        return float(max(lo, hi))


def estimate(seed_effects, query_var: float = 0.0) -> Estimate:
    """:class:`Estimate` of per-seed effects, adding a bootstrap variance over test queries (see module doc)."""
    v = np.asarray(seed_effects, dtype=float)
    v = v[np.isfinite(v)]
    n = int(v.size)
    if n == 0:
        return Estimate(math.nan, math.nan, math.nan, 0)
    if n < 2:
        return Estimate(float(v.mean()), math.nan, math.nan, n, query_var)
    seed_var = float(v.var(ddof=1)) / n
    se2 = seed_var + max(0.0, float(query_var))
    df = float(n - 1)
    return Estimate(float(v.mean()), math.sqrt(se2), df, n, float(query_var))


def estimate_from_interval(effect: float, ci_low: float, ci_high: float, n: int, level: float = 0.95) -> Estimate:
    """The seed-only :class:`Estimate` behind a Student-t interval over ``n`` seeds (old notebook rows
    stored the interval, not the per-seed effects)."""
    if not (n >= 2 and np.isfinite(ci_low) and np.isfinite(ci_high)):
        return Estimate(float(effect), math.nan, math.nan, int(n))
    t = float(stats.t.ppf(0.5 + level / 2, n - 1))
    return Estimate(float(effect), (ci_high - ci_low) / 2 / t, n - 1, int(n))


# --- per-query metrics and the test set's variance ---------------------------------------------
def rsum_of(per_query: dict[str, np.ndarray]) -> float:
    """RSUM from :func:`coherent_itr.per_query.per_query_recall`'s output."""
    return float(per_query["i2t"].mean(axis=0).sum() + per_query["t2i"].mean(axis=0).sum())


def per_image_effects(per_query_a: list[dict], per_query_b: list[dict], image_of_caption) -> np.ndarray:
    """The seeds × test images table g of the module doc: row s is seed s's per-image RSUM contribution of
    A − B (``per_query_*``: per-seed :func:`~coherent_itr.per_query.per_query_recall` outputs, paired by
    position), so that a row's mean is that seed's RSUM effect. ``image_of_caption``: the test split's image index
    of every caption."""
    if len(per_query_a) != len(per_query_b) or not per_query_a:
        raise ValueError(
            f"per_image_effects needs the same seeds for both arms, got {len(per_query_a)} and {len(per_query_b)}"
        )
    ioc = np.asarray(image_of_caption)
    if ioc.ndim != 1 or not np.issubdtype(ioc.dtype, np.integer) or (ioc.size and ioc.min() < 0):
        raise ValueError("image_of_caption must be a 1-D array of non-negative image indices, one per caption")
    rows = []
    for s, (a, b) in enumerate(zip(per_query_a, per_query_b)):
        for arm, pq in (("A", a), ("B", b)):
            n_img, n_cap = len(pq["i2t"]), len(pq["t2i"])
            if n_cap != ioc.size or (ioc.size and ioc.max() >= n_img):
                raise ValueError(
                    f"per_image_effects: arm {arm}, seed #{s}: {n_img} image and {n_cap} caption queries, but the "
                    f"test split has {ioc.size} captions of {int(ioc.max()) + 1 if ioc.size else 0} images"
                )
        d_i2t = a["i2t"].sum(axis=1) - b["i2t"].sum(axis=1)
        d_t2i = a["t2i"].sum(axis=1) - b["t2i"].sum(axis=1)
        rows.append(d_i2t + len(d_i2t) / len(d_t2i) * np.bincount(ioc, weights=d_t2i, minlength=len(d_i2t)))
    return np.stack(rows)


def image_variance(table) -> float:
    """v_query of the module doc from a seeds × test units table: max(0, MS_unit − MS_resid) / (n·I), the
    variance of the grand mean that the test units contribute apart from the seed × unit interaction (which the
    seed variance of the row means already holds). With one seed the interaction cannot be told apart: the whole
    variance of the unit means, MS_unit / I (an upper bound; such a row has no interval anyway)."""
    g = np.asarray(table, dtype=float)
    if g.ndim != 2 or g.shape[1] < 2 or not np.isfinite(g).all():
        raise ValueError(f"image_variance needs a finite seeds × units table with ≥ 2 units, got shape {g.shape}")
    n, units = g.shape
    col = g.mean(axis=0)
    ms_unit = n * float(((col - col.mean()) ** 2).sum()) / (units - 1)
    if n < 2:
        return ms_unit / units
    resid = g - g.mean(axis=1, keepdims=True) - col + g.mean()
    ms_resid = float((resid**2).sum()) / ((n - 1) * (units - 1))
    return max(0.0, ms_unit - ms_resid) / (n * units)


def paired_estimate(per_query_a: list[dict], per_query_b: list[dict], image_of_caption) -> Estimate:
    """RSUM effect A − B from per-seed :func:`~coherent_itr.per_query.per_query_recall` outputs of two arms
    (paired by seed, same test set): the seeds' variance + the test images' own variance (module doc)."""
    table = per_image_effects(per_query_a, per_query_b, image_of_caption)
    effects = [rsum_of(a) - rsum_of(b) for a, b in zip(per_query_a, per_query_b)]
    return estimate(effects, image_variance(table))


# --- the verdict ---------------------------------------------------------------------------------
def smallest_effect(
    paper_effect: float | None = None, tolerance: float | None = None, kind: str = "direction"
) -> float:
    """δ of the module doc: FRACTION × |paper effect| (direction), the tolerance (equivalence); NaN without one."""
    if kind == "equivalence":
        return float(tolerance) if tolerance is not None and np.isfinite(tolerance) and tolerance > 0 else math.nan
    if paper_effect is None or not np.isfinite(paper_effect) or paper_effect == 0:
        return math.nan
    return FRACTION * abs(float(paper_effect))


def family_alpha(m: int) -> float:
    """The per-row level of a family of ``m`` claims (Bonferroni): ALPHA / m."""
    if m < 1:
        raise ValueError(f"a family needs at least one claim, got m = {m}")
    return ALPHA / m


def decide(
    kind: str,
    est: Estimate,
    alpha: float = ALPHA,
    delta: float = math.nan,
    paper_effect: float = math.nan,
    collapsed: bool = False,
    collapse_reason: str = "",
    tolerance: float | None = None,
) -> tuple[str, str, float, float]:
    """(verdict, reason, ci_low, ci_high) of one row under the rule (module doc, :data:`LEGEND`).

    ``alpha`` — the row's level (:func:`family_alpha` for a primary row, ALPHA for a secondary one);
    ``delta`` — its smallest effect of interest (:func:`smallest_effect`; NaN: direction alone);
    ``paper_effect`` — for the *smaller than the paper* note of a reproduced row."""
    if kind not in KINDS:
        raise ValueError(f"claim kind {kind!r} unknown; choose one of {KINDS}")
    if collapsed:
        return "not testable", f"collapsed arm: {collapse_reason or 'see the health record'}", math.nan, math.nan
    if kind == "identity":
        if tolerance is None:
            raise ValueError("an identity claim needs a tolerance")
        worst = abs(est.effect) if np.isfinite(est.effect) else math.nan
        if np.isfinite(worst) and worst <= tolerance:
            return "reproduced", f"largest deviation {worst:.3g} ≤ tolerance {tolerance:g}", math.nan, math.nan
        return "ruled out", f"largest deviation {worst:.3g} > tolerance {tolerance:g}", math.nan, math.nan
    if est.n < 2 or not np.isfinite(est.se):
        return "inconclusive", f"{est.n} seed(s): no interval", math.nan, math.nan
    if kind == "equivalence":
        if not delta > 0:
            raise ValueError("an equivalence claim needs a positive tolerance")
        lo, hi = est.interval(1 - 2 * alpha)  # TOST at alpha ↔ the (1 − 2·alpha) interval inside ±δ
        if -delta < lo and hi < delta:
            return "reproduced", f"interval inside ±{delta:.3g}", lo, hi
        if lo >= delta or hi <= -delta:
            return "ruled out", f"interval entirely outside ±{delta:.3g}", lo, hi
        return "inconclusive", f"interval overlaps ±{delta:.3g}", lo, hi
    lo, hi = est.interval(1 - alpha)
    pe = abs(paper_effect) if paper_effect is not None and np.isfinite(paper_effect) else math.nan
    smaller = f"; {SMALLER} (below its {pe:.3g})" if smaller_than_paper(hi, pe) else ""
    if lo > 0:
        return "reproduced", "interval above 0" + smaller, lo, hi
    if hi < 0:
        return "reversed", "interval below 0" + smaller, lo, hi
    if not np.isfinite(delta):
        why = "interval contains 0; direction alone (the paper gives no effect to rule out)"
        return "inconclusive", why + smaller, lo, hi
    if hi < delta:
        rev = f"; {REVERSAL} (its lower end {lo:.3g} is below −δ)" if reversal_not_excluded(lo, delta) else ""
        return "ruled out", f"interval contains 0 and lies below δ = {delta:.3g}" + rev + smaller, lo, hi
    return "inconclusive", f"interval contains 0 and reaches δ = {delta:.3g}" + smaller, lo, hi


def smaller_than_paper(ci_high: float, paper_effect: float) -> bool:
    """The *smaller than the paper* tag of a direction row, whatever its verdict: its interval lies below the
    paper's effect (U < |paper effect|), so the paper's own effect is excluded."""
    pe = abs(paper_effect) if paper_effect is not None and np.isfinite(paper_effect) else math.nan
    return bool(np.isfinite(pe) and np.isfinite(ci_high) and ci_high < pe)


def reversal_not_excluded(ci_low: float, delta: float) -> bool:
    """The *a reversal not excluded* tag of a ``ruled out`` direction row: its interval reaches below −δ, so an
    effect opposite to the claim, as large as δ, is still compatible with the data."""
    return bool(np.isfinite(ci_low) and np.isfinite(delta) and ci_low < -delta)


def scaled_delta(paper_effect: float, our_baseline: float, paper_baseline: float) -> float:
    """δ of the sensitivity column: FRACTION × |paper effect| × our baseline ÷ the paper's baseline — the paper's
    effect read as a share of its baseline model's score instead of as absolute points; NaN without both baselines."""
    ok = all(x is not None and np.isfinite(x) for x in (paper_effect, our_baseline, paper_baseline))
    if not ok or paper_effect == 0 or paper_baseline <= 0 or our_baseline <= 0:
        return math.nan
    return FRACTION * abs(float(paper_effect)) * float(our_baseline) / float(paper_baseline)


def bonferroni(p: float, m: int) -> float:
    """The Bonferroni-adjusted p-value min(1, m·p) (NaN stays NaN)."""
    return min(1.0, m * p) if np.isfinite(p) else math.nan


# --- power and the seeds a claim needs -----------------------------------------------------------
def se_df(seed_var, query_var: float, n) -> tuple[np.ndarray, np.ndarray]:
    """se = √(seed_var + query_var) and df = n − 1 of the module doc, vectorised: ``seed_var`` is the seed part s²/n
    of the squared standard error."""
    seed_var, n = np.asarray(seed_var, dtype=float), np.asarray(n, dtype=float)
    se2 = seed_var + max(0.0, float(query_var))
    return np.sqrt(se2), np.broadcast_to(n - 1, se2.shape).astype(float)


POWER_NODES = 400  # quadrature nodes over the seed variance's χ² distribution (power_at)


def power_at(effect: float, seed_sd: float, query_var: float, n, alpha: float) -> np.ndarray | float:
    """P(the interval at level 1 − ``alpha`` lies above 0) for a true ``effect`` > 0 with ``n`` ≥ 2 seeds of
    per-seed sd ``seed_sd`` and a common test-set variance ``query_var`` (module doc), vectorised over ``n``.

    The rule's own test under the model: θ̂ ~ N(θ, σ²/n + v) independent of s² ~ σ²·χ²_{n−1}/(n−1), so
    P(θ̂ − t_{1−α/2, n−1}·√(s²/n + v) > 0) = E_{s²}[Φ((θ − t·√(s²/n + v)) / √(σ²/n + v))], by the midpoint rule
    over POWER_NODES equal-probability bins of the χ² (v = 0: the noncentral t's power; σ = 0: Φ(θ/√v − t))."""
    if not (np.isfinite(effect) and np.isfinite(seed_sd) and seed_sd >= 0 and np.isfinite(query_var)):
        return math.nan
    n = np.asarray(n, dtype=float)
    v = max(0.0, float(query_var))
    crit = stats.t.ppf(1 - alpha / 2, n - 1)
    u = (np.arange(POWER_NODES) + 0.5) / POWER_NODES
    chi = stats.chi2.ppf(u.reshape(-1, *([1] * n.ndim)), n - 1) / (n - 1)
    se_hat = np.sqrt(seed_sd**2 * chi / n + v)
    sd_true = np.sqrt(seed_sd**2 / n + v)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd_true > 0, (effect - crit * se_hat) / np.where(sd_true > 0, sd_true, 1.0), np.inf)
    p = stats.norm.cdf(z).mean(axis=0)
    return float(p) if np.ndim(p) == 0 else p


def seeds_for_power(
    effect: float, seed_sd: float, query_var: float, alpha: float, power: float = POWER, cap: int = SEED_CAP
) -> tuple[int | None, str]:
    """(n, why): the fewest seeds (2 … ``cap``) whose :func:`power_at` the true ``effect`` is ≥ ``power``;
    None with the reason when no n up to ``cap`` reaches it — the test set's own variance (not reachable
    with any n) or the cap."""
    if not (np.isfinite(effect) and effect != 0 and np.isfinite(seed_sd) and np.isfinite(query_var)):
        return None, "no paper effect or no measured sd"
    effect = abs(effect)
    n = np.arange(2, cap + 1)
    ok = np.flatnonzero(np.asarray(power_at(effect, seed_sd, query_var, n, alpha)) >= power)
    if ok.size:
        return int(n[ok[0]]), ""
    if query_var > 0 and effect / math.sqrt(query_var) < stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power):
        sd_q = math.sqrt(query_var)
        return None, f"not reachable: the test set's own sd ({sd_q:.3g}) is too large; more test queries"
    return None, f"more than the cap of {cap} seeds"


# --- stability -----------------------------------------------------------------------------------
def decide_codes(kind: str, mean, se, df, alpha: float, delta: float = math.nan) -> np.ndarray:
    """:func:`decide` vectorised over resamples (no collapse): indices into :data:`VERDICTS` (checked against
    :func:`decide` in the tests)."""
    mean, se, df = (np.asarray(x, dtype=float) for x in (mean, se, df))
    code = np.full(mean.shape, VERDICTS.index("inconclusive"))
    zero = se == 0
    safe_se = np.where(zero, 1.0, se)
    level = 1 - 2 * alpha if kind == "equivalence" else 1 - alpha
    if kind not in ("direction", "equivalence"):
        raise ValueError(f"decide_codes decides direction and equivalence claims, got kind {kind!r}")
    safe_df = np.where(np.isfinite(df), df, 1e12)
    half = np.where(zero, 0.0, stats.t.ppf(0.5 + level / 2, safe_df) * safe_se)
    lo, hi = mean - half, mean + half
    if kind == "equivalence":
        code[(lo >= delta) | (hi <= -delta)] = VERDICTS.index("ruled out")
        code[(-delta < lo) & (hi < delta)] = VERDICTS.index("reproduced")
        return code
    if np.isfinite(delta):
        code[(lo <= 0) & (hi >= 0) & (hi < delta)] = VERDICTS.index("ruled out")
    code[hi < 0] = VERDICTS.index("reversed")
    code[lo > 0] = VERDICTS.index("reproduced")
    return code


def stability(
    kind: str,
    effects,
    query_var: float,
    alpha: float,
    delta: float,
    verdict: str,
    n_boot: int = N_STABILITY,
    seed: int = 0,
) -> float:
    """Share of bootstrap resamples of one row that give it ``verdict`` (module doc): its per-seed ``effects``
    (oriented) drawn with replacement, a test-query shift q ~ N(0, ``query_var``) per resample, decided at
    ``alpha`` and ``delta``. A resample that draws one seed n times has no seed spread (se² = query_var)."""
    if kind not in ("direction", "equivalence"):
        raise ValueError(f"stability: row kind {kind!r} is not decided by an interval")
    e = np.asarray(effects, dtype=float)
    e = e[np.isfinite(e)]
    n = e.size
    if n < 2:
        raise ValueError(f"stability: a row needs at least 2 per-seed effects, got {n}")
    rng = np.random.default_rng(seed)
    qv = max(0.0, float(query_var or 0.0))
    res = e[rng.integers(0, n, size=(n_boot, n))] + rng.normal(0.0, math.sqrt(qv), size=(n_boot, 1))
    se, df = se_df(res.var(axis=1, ddof=1) / n, qv, n)
    codes = decide_codes(kind, res.mean(axis=1), se, df, alpha, delta)
    return float((codes == VERDICTS.index(verdict)).mean())


def pseudo_effects(est: Estimate) -> list[float]:
    """n values with the estimate's mean and seed sd (an old claim file kept only its interval);
    only their spread enters the stability resamples."""
    sd = est.se * math.sqrt(est.n)
    z = np.arange(est.n) - (est.n - 1) / 2
    z = z / z.std(ddof=1)
    return list(est.effect + sd * z)
