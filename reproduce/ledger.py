"""The claims ledger's ONE verdict rule: effect, interval, noise floor, threshold, multiplicity, verdict.

The rule below was written down before the ledger was regenerated under it (issue 15); nothing in
it was tuned to a result. Every number it uses is a module constant.

Effects
    Every effect is oriented so that the claim predicts a value > 0 (``A − B`` for "A beats B").
    Per seed s, e_s = metric(A, seed s) − metric(B, seed s) (paired by seed).

Uncertainty
    The mean effect θ̂ = mean_s e_s has two sources of error: training seeds and the finite test set.
    * seeds: s_seed² / n with s_seed the sd of e_s over the n seeds;
    * test queries: v_query, the variance of the seed-averaged effect under a paired bootstrap over
      test queries (images for i2t, captions for t2i, resampled independently; both arms see the
      same resampled queries) — :func:`query_bootstrap_var` on per-query values (:func:`per_query_recall`).
      Every seed is evaluated on the same test set, so test-set noise is common to all seeds and is
      not in s_seed: the two variances add.
    se² = s_seed²/n + v_query, with Welch–Satterthwaite degrees of freedom
    df = (n − 1)·(se² / (s_seed²/n))² (the bootstrap part has effectively infinite df); with no
    per-query data (a notebook row), v_query = 0, df = n − 1 and the reason column says so.
    p_unadj = two-sided Student-t p-value of θ = 0 (for an equivalence claim: the TOST p-value of
    |θ| ≥ T). Fewer than 2 seeds: no interval, verdict ``inconclusive``.

Noise floor (per metric and data set)
    σ_d² = pooled (degree-of-freedom weighted) variance of a *single-seed* paired difference between
    two arms: from every contrast's per-seed effects e_s (their variance over seeds, df n − 1 — the
    mean difference does not enter) and from every declared *null pair*, two arms identical in
    expectation (ladder β₂ = 0 vs VSE++, 'γ=∞ (Triplet-HN)' vs 'Triplet-HN', …), whose mean squared
    per-seed difference enters with df n (any systematic offset between them counts as noise).
    noise_floor = NOISE_K · σ_d with NOISE_K = 2: a difference smaller than what two single runs
    of identical configs routinely show — the papers' tables are single runs — is not a practical
    effect. Claims not measured on trained arms (B7, B9, L5, N3, N5, N6, S4, U6, …) have no noise floor.

Practical threshold
    T = max(noise_floor, FRACTION · |paper effect|) with FRACTION = 0.5 (half the paper's reported
    effect, in the same unit); a missing paper effect or noise floor counts as 0.
    For an equivalence claim (e.g. "flat for τ ≤ 1e-2") T = max(noise_floor, declared tolerance).

Multiplicity
    Holm (``statsmodels.stats.multitest.multipletests(method="holm")``) over the decidable primary
    rows of ONE data set (direction and equivalence claims with an interval and no collapsed arm)
    at ALPHA = 0.05; p_adj is Holm's adjusted p. The *adjusted interval* of a row is its interval at
    the per-row level 1 − ALPHA·p_unadj/p_adj, i.e. the level Holm effectively applies to it: it
    excludes 0 exactly when p_adj < ALPHA, so the interval shown never contradicts the verdict.
    Secondary and exploratory rows are not adjusted (their p_adj is left empty) and their verdicts
    use their unadjusted 95% interval — they never decide a claim.

Verdicts — see :data:`LEGEND` (rendered into ``results/claims.md``).

What the budget can decide (primary rows in a Holm family; reported beside the verdict, never changing it)
    Minimum detectable effect (:func:`min_detectable_effect`), direction claim: MDE = δ · se, the true
    effect at which the row's t test rejects θ = 0 in the claimed direction with probability POWER = 0.8,
    i.e. δ solves P(T' > t_{1 − α_j/2, df}) = POWER for T' noncentral t with df degrees of freedom and
    noncentrality δ (for df = ∞ the closed form δ = z_{1 − α_j/2} + z_POWER). se and df are the row's
    measured standard error and Welch–Satterthwaite degrees of freedom; α_j = ALPHA / (m − j + 1) is the
    level Holm's step applies to the row of rank j (by unadjusted p, 1 = smallest) in its family of m
    rows (:func:`holm_step_alpha`). Equivalence claim (t-approximation): MDE = (t_{1 − α_j, df} +
    t_{(1 + POWER)/2, df}) · se, the smallest margin ±T that TOST declares equivalent with probability
    ≈ POWER when θ = 0 (exact for df = ∞).
    *Decidable at this budget*: MDE ≤ |paper effect| (direction claim with the paper's number), else
    MDE ≤ T; undefined (empty) without a positive reference.
    Stability (:func:`stability`): the share of N_STABILITY bootstrap resamples of a data set's family
    that give a row the same verdict. In one resample every row's seeds are drawn with replacement and
    its test-query sampling is redrawn as one shift common to all its seeds, q ~ N(0, v_query) (the
    ledger keeps the query-bootstrap variance, not the per-query values); the row is re-estimated,
    Holm is recomputed over the resampled family and the rule above decides it with the threshold T
    held at its measured value. A resample that draws one seed n times has no seed spread (se² =
    v_query); it is decided as such. Below STABLE = 0.8 the row is *fragile*.
    Ratio = our effect / the paper's effect; a ``reproduced`` row with ratio > LARGER_THAN_PAPER = 5
    is flagged *larger than the paper — check the baseline*.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats
from scipy.optimize import brentq
from threadpoolctl import threadpool_limits

from coherent_itr import metrics
from coherent_itr.runs import default_threads

FRACTION = 0.5  # practical threshold: this fraction of |paper effect|
NOISE_K = 2.0  # noise floor: this many single-seed paired-difference sds
ALPHA = 0.05  # family-wise error rate per data set (Holm)
N_BOOT = 1000  # bootstrap resamples of the test queries
POWER = 0.80  # minimum detectable effect: power of the row's test
STABLE = 0.80  # stability below this share of resamples → fragile
N_STABILITY = 1000  # bootstrap resamples of a family for the stability column
LARGER_THAN_PAPER = 5.0  # a reproduced effect more than this many times the paper's → check the baseline

VERDICTS = ("reproduced", "not reproduced", "no effect", "inconclusive", "not testable")
KINDS = ("direction", "equivalence", "identity")
ROLES = ("primary", "secondary", "exploratory")

LEGEND = {
    "reproduced": "direction claim: the adjusted interval excludes 0 (Holm p_adj < 0.05) and the effect is "
    "at least the practical threshold T in the claimed direction; equivalence claim: the "
    "adjusted interval lies inside ±T; identity: the largest deviation is within the tolerance.",
    "not reproduced": "direction claim: the adjusted interval excludes 0 and the effect is at least T in the "
    "OPPOSITE direction; equivalence claim: the adjusted interval lies entirely outside ±T; "
    "identity: a deviation exceeds the tolerance.",
    "no effect": "direction claim: the adjusted interval lies inside ±T — whatever the true effect is, it is "
    "smaller than the practical threshold.",
    "inconclusive": "none of the above: the interval is too wide to decide, the effect is significant but "
    "below T while the interval still reaches beyond ±T, fewer than 2 seeds give no interval, "
    "or the contrast was not computed in this run (the reason column says which).",
    "not testable": "an arm of the contrast is collapsed (coherent_itr.health.is_collapsed): the comparison "
    "would measure a training failure, not the method; never reproduced or not reproduced.",
}
THRESHOLD_RULE = (
    f"T = max(noise floor, {FRACTION:g} × |paper effect|); noise floor = {NOISE_K:g} × the pooled "
    "sd of a single-seed paired difference between arms identical in expectation (same metric, "
    "same data set); Holm over the primary rows of a data set at α = 0.05."
)


# --- intervals and p-values --------------------------------------------------------------------
def mean_ci(values, level: float = 0.95) -> tuple[float, float, float]:
    """Mean and two-sided Student-t ``level`` interval of ``values`` (NaN bounds for n < 2)."""
    v = np.asarray(values, dtype=float)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return math.nan, math.nan, math.nan
    m = float(v.mean())
    if v.size < 2:
        return m, math.nan, math.nan
    half = float(stats.t.ppf(0.5 + level / 2, v.size - 1) * v.std(ddof=1) / math.sqrt(v.size))
    return m, m - half, m + half


@dataclass(frozen=True)
class Estimate:
    """A mean effect with its standard error and degrees of freedom (seed + query variation)."""

    effect: float
    se: float
    df: float
    n: int
    query_var: float = 0.0

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
    df = (n - 1) * (se2 / seed_var) ** 2 if seed_var > 0 else math.inf
    return Estimate(float(v.mean()), math.sqrt(se2), df, n, float(query_var))


def estimate_from_interval(effect: float, ci_low: float, ci_high: float, n: int, level: float = 0.95) -> Estimate:
    """The seed-only :class:`Estimate` behind a Student-t interval over ``n`` seeds (old notebook rows
    stored the interval, not the per-seed effects)."""
    if not (n >= 2 and np.isfinite(ci_low) and np.isfinite(ci_high)):
        return Estimate(float(effect), math.nan, math.nan, int(n))
    t = float(stats.t.ppf(0.5 + level / 2, n - 1))
    return Estimate(float(effect), (ci_high - ci_low) / 2 / t, n - 1, int(n))


# --- per-query metrics and the bootstrap over test queries ---------------------------------------
def per_query_recall(img_emb, cap_emb, image_of_caption, ks=(1, 5, 10)) -> dict[str, np.ndarray]:
    """Per-query hits ×100 for R@K: ``{"i2t": (n_images, len(ks)), "t2i": (n_captions, len(ks))}``.

    The columns are :func:`coherent_itr.metrics.per_query` ``(sim, image_of_caption, "retrieval")``'s
    ``{d}_r{K}`` (cosine = dot product of the stored,
    L2-normalised embeddings; pessimistic ties): the column means are ``i2t_r1 …`` and their sum
    over both directions is RSUM (checked in the tests against ``retrieval_metrics``). The similarity
    is computed in float32, as :func:`coherent_itr.evaluation.evaluate_embeddings` computes the test
    records: in float64 two similarities that float32 rounds to a tie can be told apart, and one flipped
    rank moves RSUM away from the record. The product runs with the run's BLAS thread count
    (``coherent_itr.runs.default_threads``, as the cache evaluates a run): OpenBLAS splits the sums
    differently with 2 threads, and on the cold-run cache that flipped one text→image rank of N1's
    Triplet (mean) seed 2 (RSUM 236.06 vs the record's 235.96)."""
    with threadpool_limits(limits=default_threads(), user_api="blas"):
        sim = np.asarray(img_emb, dtype=np.float32) @ np.asarray(cap_emb, dtype=np.float32).T
    hits = metrics.per_query(sim, image_of_caption, "retrieval", ks=tuple(ks))
    return {d: np.stack([hits[f"{d}_r{k}"] for k in ks], axis=1) for d in ("i2t", "t2i")}


def rsum_of(per_query: dict[str, np.ndarray]) -> float:
    """RSUM from :func:`per_query_recall`'s output."""
    return float(per_query["i2t"].mean(axis=0).sum() + per_query["t2i"].mean(axis=0).sum())


def query_bootstrap_var(diff_i2t, diff_t2i=None, n_boot: int = N_BOOT, seed: int = 0) -> float:
    """Bootstrap variance of ``mean(diff_i2t) + mean(diff_t2i)`` resampling image queries and caption
    queries independently. ``diff_*`` are per-query differences A − B of a metric's per-query
    contribution (e.g. the row sums of :func:`per_query_recall`), already averaged over seeds,
    so arms are paired on the same resampled queries."""
    rng = np.random.default_rng(seed)
    total = np.zeros(n_boot)
    for d in (diff_i2t, diff_t2i):
        if d is None:
            continue
        d = np.asarray(d, dtype=float)
        idx = rng.integers(0, d.size, size=(n_boot, d.size))
        total += d[idx].mean(axis=1)
    return float(total.var(ddof=1))


def paired_bootstrap(per_query_a: list[dict], per_query_b: list[dict], n_boot: int = N_BOOT, seed: int = 0) -> Estimate:
    """RSUM effect A − B from per-seed :func:`per_query_recall` outputs of two arms (paired by seed,
    same test set): seed variation + a paired bootstrap over test queries (module doc)."""
    if len(per_query_a) != len(per_query_b) or not per_query_a:
        raise ValueError(
            f"paired_bootstrap needs the same seeds for both arms, got {len(per_query_a)} and {len(per_query_b)}"
        )
    effects = [rsum_of(a) - rsum_of(b) for a, b in zip(per_query_a, per_query_b)]
    d = {
        k: np.mean([a[k].sum(axis=1) - b[k].sum(axis=1) for a, b in zip(per_query_a, per_query_b)], axis=0)
        for k in ("i2t", "t2i")
    }
    return estimate(effects, query_bootstrap_var(d["i2t"], d["t2i"], n_boot, seed))


# --- noise floor and threshold ------------------------------------------------------------------
def pooled_parts(contrast_effects=(), null_pair_diffs=()) -> tuple[list[tuple[float, int]], list[tuple[float, int]]]:
    """The (sum of squares, df) that each contrast and each null pair adds to :func:`pooled_sd`: a contrast's
    per-seed effects about their own mean (df n − 1; fewer than 2 finite values add nothing, shown as (0, 0)),
    a null pair's per-seed differences about 0 (df n). Returned as (contrast parts, null-pair parts), in the
    given order."""
    contrasts = []
    for e in contrast_effects:
        e = np.asarray(e, dtype=float)
        e = e[np.isfinite(e)]
        contrasts.append((float(((e - e.mean()) ** 2).sum()), e.size - 1) if e.size >= 2 else (0.0, 0))
    nulls = []
    for d in null_pair_diffs:
        d = np.asarray(d, dtype=float)
        d = d[np.isfinite(d)]
        nulls.append((float((d**2).sum()), d.size))
    return contrasts, nulls


def pooled_sd(contrast_effects=(), null_pair_diffs=()) -> tuple[float, int]:
    """(σ_d, df): pooled sd of a single-seed paired difference (module doc). ``contrast_effects`` —
    per-seed effects of any contrasts (their variance about their own mean, df n − 1);
    ``null_pair_diffs`` — per-seed differences of arms identical in expectation (mean square, df n);
    each one's part: :func:`pooled_parts`."""
    ss, df = 0.0, 0
    for part_ss, part_df in (p for parts in pooled_parts(contrast_effects, null_pair_diffs) for p in parts):
        ss += part_ss
        df += part_df
    return (math.sqrt(ss / df) if df else math.nan), df


def noise_floor(contrast_effects=(), null_pair_diffs=()) -> float:
    """NOISE_K × :func:`pooled_sd` (NaN without any seed pair)."""
    sd, _ = pooled_sd(contrast_effects, null_pair_diffs)
    return NOISE_K * sd


def threshold(
    noise: float, paper_effect: float | None = None, tolerance: float | None = None, kind: str = "direction"
) -> float:
    """The practical threshold T of the module doc (missing parts count as 0)."""
    floor = noise if noise is not None and np.isfinite(noise) else 0.0
    if kind == "equivalence":
        tol = tolerance if tolerance is not None and np.isfinite(tolerance) else 0.0
        return max(floor, tol)
    pe = abs(paper_effect) if paper_effect is not None and np.isfinite(paper_effect) else 0.0
    return max(floor, FRACTION * pe)


# --- the verdict ---------------------------------------------------------------------------------
def adjusted_level(p_unadj: float, p_adj: float, m: int = 1) -> float:
    """Per-row confidence level Holm effectively applies (module doc); Bonferroni when p_adj = 0."""
    if not (np.isfinite(p_unadj) and np.isfinite(p_adj)):
        return 1 - ALPHA
    if p_adj <= 0:
        return 1 - ALPHA / max(1, m)
    return 1 - ALPHA * min(1.0, p_unadj / p_adj)


def decide(
    kind: str,
    est: Estimate,
    thr: float,
    p_adj: float | None = None,
    level: float | None = None,
    collapsed: bool = False,
    collapse_reason: str = "",
    tolerance: float | None = None,
) -> tuple[str, str, float, float]:
    """(verdict, reason, ci_low, ci_high) of one row under the rule (module doc, :data:`LEGEND`).

    ``p_adj`` — Holm-adjusted p (None: the row is not in a family, its unadjusted p is used);
    ``level`` — level of the reported interval (default: :func:`adjusted_level`)."""
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
        return "not reproduced", f"largest deviation {worst:.3g} > tolerance {tolerance:g}", math.nan, math.nan
    if est.n < 2 or not np.isfinite(est.se):
        return "inconclusive", f"{est.n} seed(s): no interval", math.nan, math.nan
    if kind == "equivalence" and thr <= 0:
        raise ValueError("an equivalence claim needs a positive tolerance")
    p_raw = est.p_zero() if kind == "direction" else est.p_equivalent(thr)
    p = p_raw if p_adj is None or not np.isfinite(p_adj) else p_adj
    if level is None:
        level = adjusted_level(p_raw, p)
    if kind == "equivalence":
        lo, hi = est.interval(1 - 2 * (1 - level))  # TOST at α ↔ the (1 − 2α) interval inside ±T
        if p < ALPHA:
            return "reproduced", f"interval inside ±{thr:.3g}", lo, hi
        if lo >= thr or hi <= -thr:
            return "not reproduced", f"interval entirely outside ±{thr:.3g}", lo, hi
        return "inconclusive", f"interval overlaps ±{thr:.3g}", lo, hi
    lo, hi = est.interval(level)
    e = est.effect
    significant = est.p_zero() < ALPHA if p_adj is None else p < ALPHA
    if significant and e > 0 and e >= thr:
        return "reproduced", f"interval excludes 0 and effect ≥ threshold {thr:.3g}", lo, hi
    if significant and e < 0 and -e >= thr:
        return "not reproduced", f"interval excludes 0 and effect ≤ −threshold {thr:.3g}", lo, hi
    if -thr < lo and hi < thr:
        return "no effect", f"interval inside ±{thr:.3g}", lo, hi
    if significant:
        return "inconclusive", f"interval excludes 0 but |effect| < threshold {thr:.3g} and reaches beyond it", lo, hi
    return "inconclusive", "interval includes 0 and reaches beyond the threshold", lo, hi


def holm_rows(p: np.ndarray) -> np.ndarray:
    """Holm-adjusted p-values along the last axis, vectorised over the leading axes (equal to
    ``statsmodels`` ``multipletests(method="holm")`` row by row — tested)."""
    p = np.asarray(p, dtype=float)
    m = p.shape[-1]
    order = np.argsort(p, axis=-1, kind="stable")
    ps = np.take_along_axis(p, order, axis=-1)
    adj = np.minimum(1.0, np.maximum.accumulate(ps * (m - np.arange(m)), axis=-1))
    out = np.empty_like(adj)
    np.put_along_axis(out, order, adj, axis=-1)
    return out


def holm(p_values) -> np.ndarray:
    """Holm-adjusted p-values (``statsmodels``); NaN entries stay NaN and are not counted."""
    # slow import (≈ 1.3 s), only for Holm's adjustment
    from statsmodels.stats.multitest import multipletests

    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.isfinite(p)
    if ok.any():
        out[ok] = multipletests(p[ok], alpha=ALPHA, method="holm")[1]
    return out


# --- what the budget can decide: minimum detectable effect and stability --------------------------
def holm_step_alpha(p_values) -> np.ndarray:
    """Per row, the level Holm's step applies to it: ALPHA / (m − j + 1) for the row of rank j (by p,
    ties in the given order, 1 = smallest) among the m finite p-values; NaN where p is NaN."""
    p = np.asarray(p_values, dtype=float)
    out = np.full(p.shape, math.nan)
    ok = np.flatnonzero(np.isfinite(p))
    m = ok.size
    for rank, i in enumerate(ok[np.argsort(p[ok], kind="stable")], start=1):
        out[i] = ALPHA / (m - rank + 1)
    return out


def min_detectable_effect(se: float, df: float, alpha: float, kind: str = "direction", power: float = POWER) -> float:
    """The minimum detectable effect of the module doc: direction claim — δ·se with δ the noncentrality at
    which a noncentral t with ``df`` degrees of freedom exceeds t_{1 − α/2, df} with probability ``power``
    (normal closed form z_{1 − α/2} + z_power for df = ∞); equivalence claim — (t_{1 − α, df} +
    t_{(1 + power)/2, df})·se. NaN when se, df or α is not usable."""
    if not (np.isfinite(se) and se >= 0 and df > 0 and 0 < alpha < 1):
        return math.nan
    if kind == "direction":
        if not np.isfinite(df):
            return float((stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) * se)

        crit = float(stats.t.ppf(1 - alpha / 2, df))
        start = crit + float(stats.norm.ppf(power))
        hi = 2 * start + 10
        delta = brentq(lambda d: stats.nct.sf(crit, df, d) - power, 0.0, hi, xtol=1e-10)
        return float(delta * se)
    if kind == "equivalence":
        return float((stats.t.ppf(1 - alpha, df) + stats.t.ppf((1 + power) / 2, df)) * se)
    raise ValueError(f"a minimum detectable effect needs a direction or equivalence claim, got kind {kind!r}")


def decide_codes(kind: str, mean, se, df, thr, p_adj, level) -> np.ndarray:
    """:func:`decide` vectorised over resamples for a row in a Holm family (``p_adj`` given, no collapse):
    indices into :data:`VERDICTS` (checked against :func:`decide` in the tests)."""
    mean, se, df = (np.asarray(x, dtype=float) for x in (mean, se, df))
    p_adj, level = np.asarray(p_adj, dtype=float), np.asarray(level, dtype=float)
    code = np.full(mean.shape, VERDICTS.index("inconclusive"))
    zero = se == 0
    safe_se = np.where(zero, 1.0, se)
    if kind == "equivalence":
        q = stats.t.ppf(0.5 + (1 - 2 * (1 - level)) / 2, df)
        half = np.where(zero, 0.0, q * safe_se)
        lo, hi = mean - half, mean + half
        code[(lo >= thr) | (hi <= -thr)] = VERDICTS.index("not reproduced")
        code[p_adj < ALPHA] = VERDICTS.index("reproduced")
        return code
    if kind != "direction":
        raise ValueError(f"decide_codes decides direction and equivalence claims, got kind {kind!r}")
    half = np.where(zero, 0.0, stats.t.ppf(0.5 + level / 2, df) * safe_se)
    lo, hi = mean - half, mean + half
    sig = p_adj < ALPHA
    code[(-thr < lo) & (hi < thr)] = VERDICTS.index("no effect")
    code[sig & (mean < 0) & (-mean >= thr)] = VERDICTS.index("not reproduced")
    code[sig & (mean > 0) & (mean >= thr)] = VERDICTS.index("reproduced")
    return code


def _p_values(kind: str, mean, se, df, thr) -> np.ndarray:
    """:meth:`Estimate.p_zero` (direction) or :meth:`Estimate.p_equivalent` (equivalence), vectorised."""
    zero = se == 0
    safe = np.where(zero, 1.0, se)
    if kind == "direction":
        return np.where(zero, np.where(mean != 0, 0.0, 1.0), 2 * stats.t.sf(np.abs(mean) / safe, df))
    lo = stats.t.sf((mean + thr) / safe, df)
    hi = stats.t.cdf((mean - thr) / safe, df)
    return np.where(zero, np.where(np.abs(mean) < thr, 0.0, 1.0), np.maximum(lo, hi))


def stability(rows: list[dict], n_boot: int = N_STABILITY, seed: int = 0) -> np.ndarray:
    """Share of bootstrap resamples of a Holm family that give each row its observed verdict (module doc).

    ``rows``: the family, each ``{"kind", "effects" (per-seed, oriented), "query_var", "threshold",
    "verdict"}``. Seeds are resampled independently per row, the test-query shift q ~ N(0, query_var)
    per row and resample; Holm is recomputed across the rows of every resample."""
    if not rows:
        return np.zeros(0)
    rng = np.random.default_rng(seed)
    means, ses, dfs, ps = [], [], [], []
    for r in rows:
        if r["kind"] not in ("direction", "equivalence"):
            raise ValueError(f"stability: row kind {r['kind']!r} is not decided in a Holm family")
        e = np.asarray(r["effects"], dtype=float)
        e = e[np.isfinite(e)]
        n = e.size
        if n < 2:
            raise ValueError(f"stability: a row needs at least 2 per-seed effects, got {n}")
        qv = max(0.0, float(r.get("query_var") or 0.0))
        res = e[rng.integers(0, n, size=(n_boot, n))] + rng.normal(0.0, math.sqrt(qv), size=(n_boot, 1))
        mean = res.mean(axis=1)
        seed_var = res.var(axis=1, ddof=1) / n
        se2 = seed_var + qv
        with np.errstate(divide="ignore", invalid="ignore"):
            df = np.where(seed_var > 0, (n - 1) * (se2 / np.where(seed_var > 0, seed_var, 1.0)) ** 2, np.inf)
        se = np.sqrt(se2)
        means.append(mean), ses.append(se), dfs.append(df)
        ps.append(_p_values(r["kind"], mean, se, df, float(r["threshold"])))
    p = np.stack(ps, axis=1)  # (n_boot, m)
    p_adj = holm_rows(p)
    m = p.shape[1]
    with np.errstate(divide="ignore", invalid="ignore"):
        level = np.where(p_adj > 0, 1 - ALPHA * np.minimum(1.0, p / np.where(p_adj > 0, p_adj, 1.0)), 1 - ALPHA / m)
    out = np.empty(m)
    for j, r in enumerate(rows):
        codes = decide_codes(r["kind"], means[j], ses[j], dfs[j], float(r["threshold"]), p_adj[:, j], level[:, j])
        out[j] = float((codes == VERDICTS.index(r["verdict"])).mean())
    return out


# --- the notebooks' row (kept so the notebooks run unchanged until they are rewritten) ------------
def verdict(kind: str, effects, tolerance: float | None = None) -> tuple[str, float, float, float]:
    """Preliminary per-row verdict a notebook shows (seed-only 95% interval, no threshold, no
    adjustment, old three-word vocabulary). The ledger's verdict is :func:`decide` — see the module doc."""
    if kind not in KINDS:
        raise ValueError(f"claim kind {kind!r} unknown; choose one of {KINDS}")
    if kind == "identity":
        if tolerance is None:
            raise ValueError("an identity claim needs a tolerance")
        dev = np.abs(np.asarray(effects, dtype=float))
        worst = float(dev.max()) if dev.size else math.nan
        ok = dev.size > 0 and np.isfinite(worst) and worst <= tolerance
        return ("reproduced" if ok else "not reproduced"), worst, math.nan, math.nan
    m, lo, hi = mean_ci(effects)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive", m, lo, hi
    if kind == "direction":
        if lo > 0:
            return "reproduced", m, lo, hi
        if hi < 0:
            return "not reproduced", m, lo, hi
        return "inconclusive", m, lo, hi
    if tolerance is None or tolerance <= 0:
        raise ValueError("an equivalence claim needs a positive tolerance")
    if -tolerance < lo and hi < tolerance:
        return "reproduced", m, lo, hi
    if lo >= tolerance or hi <= -tolerance:
        return "not reproduced", m, lo, hi
    return "inconclusive", m, lo, hi


NOTEBOOK_COLUMNS = [
    "id",
    "paper",
    "source",
    "statement",
    "metric",
    "dataset",
    "arms",
    "n_seeds",
    "effect",
    "ci_low",
    "ci_high",
    "tolerance",
    "kind",
    "verdict",
    "notebook",
    "note",
    "seed_effects",
]
LEDGER_COLUMNS = NOTEBOOK_COLUMNS  # the notebooks' claim files (``write_claims``)


@dataclass
class ClaimResult:
    """One notebook row. ``effects`` are per-seed values oriented so the claim predicts > 0; they
    are written to the claim file (``seed_effects``) so the ledger can re-decide the row."""

    id: str
    paper: str
    source: str
    statement: str
    metric: str
    dataset: str
    arms: str
    effects: list = field(default_factory=list)
    kind: str = "direction"
    tolerance: float | None = None
    notebook: str = ""
    note: str = ""
    role: str = ""  # "exploratory" for a row added after seeing results; the registry decides primary

    def row(self) -> dict:
        v, m, lo, hi = verdict(self.kind, self.effects, self.tolerance)
        d = asdict(self)
        eff = d.pop("effects")
        if not d["role"]:
            d.pop("role")
        return {
            **d,
            "n_seeds": len(self.effects),
            "effect": m,
            "ci_low": lo,
            "ci_high": hi,
            "verdict": v,
            "seed_effects": ";".join(repr(float(x)) for x in eff),
        }
