"""One ledger row and the columns :func:`reproduce.protocol.ledger_rows.build_ledger` fills on it, decided by the
ONE rule of :mod:`reproduce.protocol.ledger`: a :class:`LedgerRow` gets its test (family, level, δ, p-values), its
verdict and interval, the flags beside the verdict and, on a primary row, its power, the seeds it would need, its
stability and its verdict under δ scaled to our baseline (:func:`fill_columns`). Each failing arm's seeds give the
``failures`` and ``without_failures`` cells (the row decided again on the seeds without a failure).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, fields

import numpy as np
import pandas as pd

from reproduce.spec import claims as registry
from reproduce.spec import baselines as baselines_spec
from reproduce.protocol.claim_files import as_float
from reproduce.protocol.ledger import (
    ALPHA,
    CROSS_PAPER,
    LARGER_THAN_PAPER,
    POWER,
    STABLE,
    Estimate,
    bonferroni,
    decide,
    estimate,
    family_alpha,
    power_at,
    pseudo_effects,
    seeds_for_power,
    reversal_not_excluded,
    scaled_delta,
    smaller_than_paper,
    smallest_effect,
    stability,
)


def _direction(kind: str) -> str:
    return {"direction": "A − B > 0", "equivalence": "|A − B| < T", "identity": "|deviation| ≤ tolerance"}.get(kind, "")


@dataclass
class LedgerRow:
    """One ledger row while :func:`reproduce.protocol.ledger_rows.build_ledger` decides it: the columns a notebook
    row or the registry gives, what the steps pass on (not columns), then the columns each step fills.
    :meth:`columns` gives the row's cells."""

    id: str
    paper: str
    role: str  # primary, secondary or exploratory
    dataset: str
    statement: str
    metric: str
    unit: str
    kind: str  # direction, equivalence or identity
    tolerance: float | None
    arms: str
    n_seeds: int
    test_images: int  # the test images whose variance the interval includes; 0: seeds only
    notebook: str
    source: str
    note: str
    # passed on, not columns
    estimate: Estimate
    seed_values: list[float] | None  # the per-seed effects, oriented as the claim predicts
    collapsed: bool  # an arm of the row collapsed (a failure the verdict reports)
    collapse_reason: str
    query_bootstrap: bool = False  # an older claim file: its query_var is a bootstrap over queries
    seed_ids: tuple[int, ...] | None = None  # the seeds of seed_values (None: a file without them)
    failed: tuple[int, ...] = ()  # the seeds on which an arm failed (claim_rows.failed_seeds)
    missing: str = ""  # a placeholder's reason: no notebook row is this primary
    alpha: float = ALPHA  # the level its interval is at: its family's, or ALPHA
    # the test (_add_test)
    paper_effect: float = math.nan
    paper_source: str = ""
    family: str = ""
    family_size: float = math.nan
    level: float = math.nan
    delta: float = math.nan
    p_unadj: float = math.nan
    p_adj: float = math.nan
    ratio: float = math.nan
    effect: float = math.nan
    seed_sd: float = math.nan
    query_var: float = math.nan
    seed_effects: str = ""
    ci95_low: float = math.nan
    ci95_high: float = math.nan
    # the decision (_decide_row) and its flags
    verdict: str = ""
    reason: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    direction: str = ""
    larger_than_paper: bool | None = None
    smaller_than_paper: bool = False
    reversal_not_excluded: bool = False
    # the δ sensitivity (_delta_sensitivity): δ scaled to our baseline and the verdict under it
    our_baseline: float = math.nan
    paper_baseline: float = math.nan
    delta_scaled: float = math.nan
    verdict_scaled: str = ""
    delta_sensitive: bool | None = None
    delta_scaled_note: str = ""
    # a primary row's power and stability (_power_columns)
    power: float = math.nan
    seeds_for_power: float = math.nan
    power_note: str = ""
    underpowered: bool | None = None
    stability: float = math.nan
    fragile: bool | None = None
    # an arm's failed seeds (_decide_row): the failure rates, and the verdict on the seeds without a failure
    failures: str = ""
    without_failures: str = ""

    _PASSED_ON = ("estimate", "seed_values", "collapsed", "collapse_reason", "missing", "alpha", "seed_ids", "failed")
    _PRIMARY_ONLY = ("power", "seeds_for_power", "power_note", "underpowered", "stability", "fragile")

    def columns(self) -> dict:
        """The row's cells by column name; the power and stability cells only on a primary row (empty elsewhere)."""
        skip = self._PASSED_ON + (() if self.role == "primary" else self._PRIMARY_ONLY)
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name not in skip}


def fill_columns(
    row: LedgerRow, effects: pd.DataFrame, sizes: dict[str, int], baseline: tuple[float, float] | None
) -> None:
    """Every column of one ledger row after its notebook row or placeholder: its family, level, δ and p-values
    (:func:`_add_test`), its verdict (:func:`_decide_row`), a primary row's power, seeds and stability
    (:func:`_power_columns`), the flags beside the verdict and a primary row's δ sensitivity
    (:func:`_delta_sensitivity`). ``effects`` — :func:`reproduce.spec.claims.paper_effects`; ``sizes`` —
    :func:`family_sizes`; ``baseline`` — (our baseline, the paper's baseline) of the row's claim and data set, or
    None."""
    _add_test(row, effects, sizes)
    _decide_row(row)
    if row.role == "primary":
        _power_columns(row)
        row.failures = row.failures or _failures_unknown(row)
    row.direction = _direction(row.kind)
    row.larger_than_paper = (
        bool(row.verdict == "reproduced" and row.ratio > LARGER_THAN_PAPER) if np.isfinite(row.ratio) else None
    )
    direction = row.kind == "direction" and not row.collapsed
    row.smaller_than_paper = direction and smaller_than_paper(row.ci_high, row.paper_effect)
    row.reversal_not_excluded = (
        direction and row.verdict == "ruled out" and reversal_not_excluded(row.ci_low, row.delta)
    )
    if row.role == "primary":
        _delta_sensitivity(row, baseline)


def _delta_sensitivity(row: LedgerRow, pair: tuple[float, float] | None) -> None:
    """A primary row's δ scaled to our baseline (:func:`reproduce.protocol.ledger.scaled_delta`), its verdict under
    that δ at the same level, and ``delta_sensitive`` when that verdict differs from the declared one; where there
    is no scaled δ the note says why (:func:`reproduce.spec.baselines.why_none`)."""
    why = baselines_spec.why_none(row.id)
    if not why and row.kind == "direction" and (row.missing or row.collapsed or row.estimate.n < 2):
        why = "no interval to decide"
    ours, paper = pair if pair is not None else (math.nan, math.nan)
    row.our_baseline, row.paper_baseline = ours, paper
    if not why and not (np.isfinite(ours) and np.isfinite(paper)):
        why = "our baseline table is missing" if not np.isfinite(ours) else "the paper's baseline is missing"
    if why:
        row.delta_scaled_note = why
        return
    row.delta_scaled = scaled_delta(row.paper_effect, ours, paper)
    row.verdict_scaled = decide(row.kind, row.estimate, alpha=row.alpha, delta=row.delta_scaled)[0]
    row.delta_sensitive = bool(row.verdict_scaled != row.verdict)
    row.delta_scaled_note = (
        f"δ × our baseline {ours:.4g} ÷ the paper's {paper:.4g} ({baselines_spec.BASELINES[row.id].name}, RSUM)"
    )


def family_of(paper: str) -> str:
    """The family a claim of ``paper`` is decided in: its paper, or one family for the cross-paper claims."""
    return paper if paper else CROSS_PAPER


def family_sizes() -> dict[str, int]:
    """``{family: m}``: the claims of each paper in the registry that an interval decides (direction and
    equivalence; identities are exact checks) — fixed by the claims file, not by which rows a run produced."""
    sizes: dict[str, int] = {}
    for c in registry.CLAIMS.values():
        if c.primary.kind in ("direction", "equivalence"):
            sizes[family_of(c.paper)] = sizes.get(family_of(c.paper), 0) + 1
    return sizes


def _add_test(row: LedgerRow, effects: pd.DataFrame, sizes: dict[str, int]) -> None:
    """The row's paper effect and its source, family and level (a primary row: its paper's family at ALPHA/m; any
    other row: unadjusted at ALPHA, direction alone), δ, p-values, ratio, effect and 95% interval."""
    c = registry.CLAIMS.get(row.id)
    prim = row.role == "primary"
    known = prim and row.id in effects.index
    paper_effect = as_float(effects.loc[row.id, "paper_effect"]) if known else math.nan
    row.paper_effect = paper_effect
    row.paper_source = (
        f"{effects.loc[row.id, 'source']}, {effects.loc[row.id, 'backbone']}, "
        f"{effects.loc[row.id, 'dataset']}: {effects.loc[row.id, 'computation']}"
        if known
        else ""
    )
    decided = row.kind in ("direction", "equivalence")
    fam = family_of(c.paper if c else row.paper) if prim and decided and not row.collapsed else ""
    m = sizes.get(fam, 1) if fam else 1
    row.family, row.family_size = fam, (m if fam else math.nan)
    row.alpha = family_alpha(m) if fam else ALPHA
    row.level = 1 - row.alpha if decided else math.nan
    row.delta = smallest_effect(paper_effect if prim else math.nan, row.tolerance, row.kind)
    est = row.estimate
    if row.kind == "equivalence":
        row.p_unadj = est.p_equivalent(row.delta) if row.delta > 0 else math.nan
    elif row.kind == "direction":
        row.p_unadj = est.p_zero()
    else:
        row.p_unadj = math.nan
    row.p_adj = bonferroni(row.p_unadj, m) if fam else math.nan
    ok_ratio = prim and c is not None and c.primary.ratio and np.isfinite(paper_effect) and paper_effect != 0
    row.ratio = est.effect / paper_effect if ok_ratio and np.isfinite(est.effect) else math.nan
    row.effect = est.effect
    row.seed_sd, row.query_var = est.seed_sd, est.query_var
    row.seed_effects = ";".join(f"{x:.6g}" for x in row.seed_values) if row.seed_values is not None else ""
    row.ci95_low, row.ci95_high = est.interval(0.95)


def _no_verdict_reason(row: LedgerRow) -> str:
    """Why the row is ``inconclusive`` without applying the rule, or "": a placeholder (no notebook row), an
    identity or an equivalence row without a tolerance."""
    if row.missing:
        return row.missing
    if row.kind == "identity" and (row.tolerance is None or not np.isfinite(row.tolerance)):
        return "identity row without a tolerance"
    if row.kind == "equivalence" and not row.delta > 0:
        return "equivalence row without a tolerance"
    return ""


def _decide_row(row: LedgerRow) -> None:
    """The row's verdict, reason and interval (:func:`reproduce.protocol.ledger.decide`), or ``inconclusive`` with
    :func:`_no_verdict_reason`. The reason says when the interval is over seeds only or unadjusted (not a
    primary row) (:func:`_interval_notes`)."""
    why = _no_verdict_reason(row)
    if why:
        row.verdict, row.reason, row.ci_low, row.ci_high = "inconclusive", why, math.nan, math.nan
        return
    kind, est = row.kind, row.estimate
    verdict, why, lo, hi = decide(
        kind,
        est,
        alpha=row.alpha,
        delta=row.delta,
        paper_effect=row.paper_effect,
        collapsed=row.collapsed,
        collapse_reason=row.collapse_reason,
        tolerance=row.tolerance if kind == "identity" else None,
    )
    if kind in ("direction", "equivalence") and est.n >= 2:
        why += _interval_notes(row)
    if row.failed and kind in ("direction", "equivalence"):
        row.without_failures = _without_failures(row)
        failures = row.failures or "failed seeds " + ", ".join(map(str, row.failed))
        why += f"; {failures}; without them: {row.without_failures}"
    row.verdict, row.reason, row.ci_low, row.ci_high = verdict, why, lo, hi


def _failures_unknown(row: LedgerRow) -> str:
    """The failures cell of a primary row whose claim file names no failed seeds: no notebook row (a placeholder),
    an arm the run cache says collapsed (a claim file written before the failure rate), or not collected."""
    if row.missing:
        return "no runs measured (no notebook row)"
    if row.collapsed:
        return f"collapsed arm ({row.collapse_reason}); failure rate not collected"
    return "not collected: the claim file names no seeds (written before the failure rule)"


def _without_failures(row: LedgerRow) -> str:
    """The row decided again on the seeds on which no arm failed, at its level and δ, with the test images' variance
    of all its seeds (module doc of :mod:`.ledger`): "reproduced [L, U] on n seeds", or why there is no interval."""
    if row.seed_values is None or row.seed_ids is None or len(row.seed_ids) != len(row.seed_values):
        return "not computed (the claim file's seeds do not match its per-seed effects)"
    failed = set(row.failed)
    kept = [e for s, e in zip(row.seed_ids, row.seed_values) if s not in failed]
    if not kept:
        return "no seed without a failure"
    est = estimate(kept, row.estimate.query_var)
    tol = row.tolerance if row.kind == "identity" else None
    verdict, _, lo, hi = decide(row.kind, est, row.alpha, row.delta, row.paper_effect, tolerance=tol)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{verdict} ({len(kept)} seed(s): no interval)"
    return f"{verdict} [{lo:.3g}, {hi:.3g}] on {len(kept)} seeds"


def _interval_notes(row: LedgerRow) -> str:
    """What the reason adds about a direction or equivalence row's interval (``"; …"`` each, or "")."""
    notes = ""
    if row.query_bootstrap:
        notes += (
            "; test-set variance from an older claim file's bootstrap over queries (it counts the seed × query "
            "interaction twice: a wider interval)"
        )
    elif row.test_images == 0:
        notes += (
            "; interval over seeds only (no per-query data stored for this row)"
            if str(row.metric or "").startswith("rsum")
            else "; interval over seeds only (the test images' variance covers RSUM contrasts)"
        )
    if row.role != "primary":
        notes += "; unadjusted 95% interval (not a primary row)"
    return notes


def _power_columns(row: LedgerRow) -> None:
    """A primary row's power at 1× the paper's effect and the seeds for POWER (direction rows with a paper
    effect and an interval), *underpowered* (inconclusive below POWER: the reason says so and why), and
    its stability; a row stored only as an interval (an older claim file) is resampled from
    :func:`reproduce.protocol.ledger.pseudo_effects`: n values with its mean and seed sd."""
    est, paper_effect = row.estimate, row.paper_effect
    if row.kind not in ("direction", "equivalence") or row.collapsed or est.n < 2 or not np.isfinite(est.se):
        return
    if row.kind == "direction" and np.isfinite(paper_effect) and paper_effect != 0:
        sd = est.seed_sd
        row.power = float(power_at(abs(paper_effect), sd, est.query_var, est.n, row.alpha))
        n, why = seeds_for_power(abs(paper_effect), sd, est.query_var, row.alpha)
        row.seeds_for_power = n if n is not None else math.nan
        row.power_note = why
        row.underpowered = bool(row.power < POWER)
        if row.verdict == "inconclusive" and row.underpowered:
            row.reason += f"; underpowered: {100 * row.power:.0f}% power at the paper's effect with {est.n} seeds (" + (
                f"{n} seeds would give {POWER:.0%})" if n is not None else f"{why})"
            )
    elif row.kind == "direction":
        row.power_note = "direction alone: the paper gives no effect to plan for"
    eff = row.seed_values if row.seed_values is not None else pseudo_effects(est)
    s = stability(row.kind, eff, est.query_var, row.alpha, row.delta, row.verdict)
    row.stability, row.fragile = s, bool(s < STABLE)
