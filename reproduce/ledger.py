"""The claims ledger: one row per claim, its effect with a 95% interval over seeds, and a verdict.

The verdict is computed by ONE rule, here, never set by hand:

* ``kind="direction"`` (the claim says arm A beats arm B, or an effect is positive): with the
  per-seed effects e_s (oriented so that the claim predicts e > 0), the 95% Student-t interval
  of their mean is computed. Interval entirely above 0 → ``reproduced``; entirely below 0 →
  ``not reproduced``; otherwise (or fewer than 2 seeds, so no interval) → ``inconclusive``.
* ``kind="equivalence"`` (the claim says two things are about equal, e.g. "flat for τ ≤ 1e-2"):
  with a tolerance δ stated with the claim, the interval inside (−δ, δ) → ``reproduced``;
  entirely outside it → ``not reproduced``; otherwise ``inconclusive``.
* ``kind="identity"`` (a mathematical identity, checked numerically): the largest absolute
  deviation ≤ δ → ``reproduced``, else ``not reproduced``.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np
from scipy import stats

VERDICTS = ("reproduced", "not reproduced", "inconclusive")
KINDS = ("direction", "equivalence", "identity")
LEDGER_COLUMNS = ["id", "paper", "source", "statement", "metric", "dataset", "arms", "n_seeds", "effect",
                  "ci_low", "ci_high", "tolerance", "kind", "verdict", "notebook", "note"]


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


def verdict(kind: str, effects, tolerance: float | None = None) -> tuple[str, float, float, float]:
    """(verdict, mean effect, ci_low, ci_high) of per-seed ``effects`` under the rule of ``kind``."""
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


@dataclass
class ClaimResult:
    """One ledger row. ``effects`` are per-seed values oriented so the claim predicts > 0."""

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

    def row(self) -> dict:
        v, m, lo, hi = verdict(self.kind, self.effects, self.tolerance)
        d = asdict(self)
        d.pop("effects")
        return {**d, "n_seeds": len(self.effects), "effect": m, "ci_low": lo, "ci_high": hi, "verdict": v}
