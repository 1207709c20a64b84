"""The claims ledger's construction: every notebook claim-file row read, given its role through the registry and
decided by the ONE rule of :mod:`reproduce.protocol.ledger`.

Each notebook writes its claim rows to ``<results>/<paper>/claims_<data>.csv`` with :func:`write_claims`;
:func:`build_ledger` gives each row its role (:mod:`reproduce.spec.claims`: the row that is a claim's declared
primary contrast → ``primary``, every other row → ``secondary``), its family, level and δ, and decides it. Every
claim id has exactly one primary row per data set: a claim no notebook row tests is listed as ``inconclusive``
with the reason, never silently dropped. Beside its verdict every primary row decided by an interval carries
``stability`` and ``fragile``; every one with a paper effect its ``ratio``, ``power`` at that effect, the
``seeds_for_power`` it would need and ``underpowered``. Rendering: :mod:`reproduce.present.ledger_render`;
the files: :mod:`reproduce.driver.ledger_files`.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import pandas as pd

from coherent_itr.io import atomic_write_text

from reproduce.spec import claims as registry
from reproduce.protocol.ledger import (
    ALPHA,
    CROSS_PAPER,
    LARGER_THAN_PAPER,
    NOTEBOOK_COLUMNS,
    POWER,
    STABLE,
    Estimate,
    bonferroni,
    decide,
    estimate,
    estimate_from_interval,
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
from reproduce.spec import baselines as baselines_spec


COLUMNS = [
    "id",
    "paper",
    "role",
    "dataset",
    "statement",
    "metric",
    "unit",
    "direction",
    "arms",
    "n_seeds",
    "test_images",
    "effect",
    "ci_low",
    "ci_high",
    "p_unadj",
    "p_adj",
    "family",
    "family_size",
    "level",
    "delta",
    "delta_scaled",
    "verdict_scaled",
    "delta_sensitive",
    "paper_effect",
    "ratio",
    "seed_sd",
    "query_var",
    "power",
    "seeds_for_power",
    "power_note",
    "underpowered",
    "stability",
    "fragile",
    "failures",
    "without_failures",
    "smaller_than_paper",
    "reversal_not_excluded",
    "larger_than_paper",
    "verdict",
    "reason",
    "notebook",
    # extras: the unadjusted 95% interval, the claim's kind/tolerance, where the paper's number comes from
    "ci95_low",
    "ci95_high",
    "kind",
    "tolerance",
    "source",
    "paper_source",
    "our_baseline",
    "paper_baseline",
    "delta_scaled_note",
    "note",
    "health_evaluated",
    "seed_effects",
]

STALE_PREFIX = "STALE"  # how the note of a row from a stale claim file starts (_read_notebook_rows, is_stale)

_RECORD_KEY = re.compile(r"^[a-z][a-z0-9_]*_[a-z0-9_]+$|^rsum$")

EXTRA_NOTEBOOK_COLUMNS = [
    "role",
    "query_var",
    "test_images",
    "collapsed",
    "collapse_reason",
    "seeds",
    "failed_seeds",
    "failures",
]


def write_claims(claims: list, results_dir: str | os.PathLike, paper: str, data: str) -> pd.DataFrame:
    """Write a notebook's claim rows and return them: :class:`~reproduce.protocol.ledger.ClaimResult` objects (per-seed
    effects included) and/or rows of :func:`reproduce.protocol.claim_rows.primary_row` (dicts, role "primary").
    The verdict column is the notebook's preliminary one; the ledger's verdict is decided in :func:`collect`."""
    rows = [c if isinstance(c, dict) else c.row() for c in claims]
    extra = [k for k in EXTRA_NOTEBOOK_COLUMNS if any(k in r for r in rows)]
    df = pd.DataFrame(rows, columns=NOTEBOOK_COLUMNS + extra)
    out = Path(results_dir) / paper / f"claims_{data}.csv"
    atomic_write_text(out, df.to_csv(index=False))
    return df


def claim_files(results_dir: Path) -> list[Path]:
    """The notebooks' claim files of one profile: ``<results>/<paper>/claims_*.csv`` (synthetic) and
    ``<results>/flickr8k/<paper>/claims_*.csv`` — never those of another profile's results folder
    nested inside it (``results/smoke/`` lives under ``results/``)."""
    return sorted([*results_dir.glob("*/claims_*.csv"), *(results_dir / "flickr8k").glob("*/claims_*.csv")])


def as_float(x) -> float:
    """``x`` as a float; NaN for what is not a number (a missing or text cell of a claim file)."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _count(row: dict, key: str) -> int:
    """A claim file's count cell as an int; 0 where it is missing or not a number."""
    v = as_float(row.get(key))
    return int(v) if np.isfinite(v) else 0


def _semicolon_list(row: dict, key: str, convert, what: str) -> list:
    """A claim file's ';'-separated cell ``key`` converted item by item; a ValueError naming the claim, its data set,
    the column and the cell where an item is not one of ``what``."""
    cell = row.get(key)
    try:
        return [convert(x) for x in str(cell).split(";")]
    except ValueError as e:
        raise ValueError(
            f"claim {row.get('id')} ({row.get('dataset')}): {key} {cell!r} is not a ';'-separated list of {what}"
        ) from e


def _seed_effects(row: dict) -> list[float] | None:
    s = row.get("seed_effects")
    if not isinstance(s, str) or not s.strip():
        return None
    return _semicolon_list(row, "seed_effects", float, "numbers")


def row_estimate(row: dict, sign: int = 1) -> tuple[Estimate, list[float] | None]:
    """The row's :class:`Estimate`: from its per-seed effects when the file has them, else the
    seed-only estimate behind its Student-t interval (older claim files)."""
    eff = _seed_effects(row)
    if eff is not None:
        eff = [sign * e for e in eff]
        qv = as_float(row.get("query_var"))
        return estimate(eff, qv if np.isfinite(qv) else 0.0), eff
    n = _count(row, "n_seeds")
    lo, hi = as_float(row.get("ci_low")), as_float(row.get("ci_high"))
    if sign < 0:
        lo, hi = -hi, -lo
    return estimate_from_interval(sign * as_float(row.get("effect")), lo, hi, n), None


def metric_key(metric: str) -> str | None:
    """The test-record key a notebook's metric text names (``"rsum (test, %)"`` → ``rsum``), or None."""
    if not isinstance(metric, str):
        return None
    head = re.split(r"[ (,]", metric.strip(), maxsplit=1)[0]
    return head if _RECORD_KEY.match(head) else None


def _is_arm_contrast(row: dict) -> bool:
    arms = str(row.get("arms", ""))
    return (" vs " in arms or " − " in arms) and metric_key(row.get("metric")) is not None


def _read_notebook_rows(results_dir: Path, stale: dict | None = None) -> list[dict]:
    """Every claim-file row; rows of a file in ``stale`` ({file: reason}, see
    :func:`reproduce.driver.notebooks.stale_claims`) keep their values but their note starts ``STALE (<reason>)``."""
    stale = {Path(k).resolve(): v for k, v in (stale or {}).items()}
    rows = []
    for p in claim_files(results_dir):
        df = pd.read_csv(p)
        if p.resolve() in stale:
            df["note"] = [
                f"{STALE_PREFIX} ({stale[p.resolve()]})" + (f"; {n}" if isinstance(n, str) else "")
                for n in df.get("note", [None] * len(df))
            ]
        if "id" not in df.columns:
            raise ValueError(f"{p}: a claim file needs an 'id' column, found {list(df.columns)}")
        for r in df.to_dict("records"):
            r["_file"] = str(p)
            rows.append(r)
    return rows


def _collapsed(row: dict, c, dataset: str, collapsed: dict | None) -> tuple[bool, str]:
    """A collapsed arm: the claim file's ``collapsed`` column (with ``collapse_reason``), or the
    ``collapsed`` mapping ``{(dataset, arm name): reason}`` given to :func:`collect`. The arm a claim
    predicts to fail (``predicted_to_fail`` in the claims file) is not counted: its collapse is the
    predicted outcome, and the row is decided on its numbers."""
    flag = row.get("collapsed")
    if isinstance(flag, str):
        flag = flag.strip().lower() in ("true", "1", "yes")
    elif isinstance(flag, (bool, np.bool_, int, np.integer)) or (isinstance(flag, float) and np.isfinite(flag)):
        flag = bool(flag)
    else:
        flag = False
    if flag:
        return True, str(row.get("collapse_reason") or "collapsed arm")
    if collapsed and c is not None and c.primary.measure == "arms":
        for arm in (c.primary.arm_a, c.primary.arm_b):
            for a in arm if isinstance(arm, tuple) else (arm,):
                if (dataset, a) in collapsed and a != c.primary.predicted_to_fail:
                    return True, f"{a}: {collapsed[(dataset, a)]}"
    return False, ""


def _seed_list(row: dict, key: str) -> tuple[int, ...] | None:
    """A claim file's ';'-separated seed numbers (``seeds``, ``failed_seeds``): None where the cell is missing (a file
    written before the failure rate), () where it is empty."""
    if key not in row:
        return None
    cell = row.get(key)
    if cell is None or (isinstance(cell, float) and not np.isfinite(cell)) or str(cell).strip() == "":
        return ()
    return tuple(_semicolon_list(row, key, lambda x: int(float(x)), "seeds"))


def _direction(kind: str) -> str:
    return {"direction": "A − B > 0", "equivalence": "|A − B| < T", "identity": "|deviation| ≤ tolerance"}.get(kind, "")


@dataclass
class LedgerRow:
    """One ledger row while :func:`build_ledger` decides it: the columns a notebook row or the registry gives, what
    the steps pass on (not columns), then the columns each step fills. :meth:`columns` gives the row's cells."""

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


def build_ledger(
    nb_rows: list[dict],
    datasets=registry.DATASETS,
    collapsed: dict | None = None,
    baselines: dict | None = None,
) -> pd.DataFrame:
    """Every row of the ledger, decided by the rule of :mod:`.ledger` (see its docstring).

    ``nb_rows`` — the notebooks' claim-file rows (dicts); ``collapsed`` — ``{(dataset, arm): reason}``;
    ``baselines`` — ``{(claim id, data set): (our baseline, the paper's baseline)}`` for the δ sensitivity
    (:func:`reproduce.spec.baselines.baselines`; None or a missing key: no scaled δ, the note says why).

    The steps: each notebook row becomes a :class:`LedgerRow`, the primary ones recognised (:func:`_notebook_rows`);
    a placeholder stands for every primary no row tests (:func:`_placeholder_rows`); each row's family, level, δ
    and p-values (:func:`_add_test`); the verdicts (:func:`_decide_row`); the power, seeds and stability of the
    primary rows (:func:`_power_columns`) and the last flags; the rows in ledger order (:func:`_ordered`)."""
    seen_data = sorted({str(r.get("dataset")) for r in nb_rows if isinstance(r.get("dataset"), str)})
    datasets = list(dict.fromkeys([*datasets, *seen_data]))
    rows, primaries = _notebook_rows(nb_rows, collapsed)
    rows += _placeholder_rows(nb_rows, datasets, primaries)
    effects = registry.paper_effects()
    sizes = family_sizes()
    for row in rows:
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
            _delta_sensitivity(row, (baselines or {}).get((row.id, row.dataset)))
    return _ordered(rows, datasets)


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


def _notebook_rows(nb_rows: list[dict], collapsed: dict | None) -> tuple[list[LedgerRow], dict]:
    """The ledger row of every notebook row (:func:`_ledger_row`) and ``{(claim id, data set): statement}`` of
    the rows that are a claim's primary (:func:`_is_primary`)."""
    out, primaries = [], {}
    declared = {(r.get("id"), r.get("dataset")) for r in nb_rows if str(r.get("role", "")) == "primary"}
    for r in nb_rows:
        c = registry.CLAIMS.get(r.get("id"))
        is_primary = _is_primary(r, c, declared, primaries)
        out.append(_ledger_row(r, c, is_primary, collapsed))
    return out, primaries


def _is_primary(r: dict, c, declared: set, primaries: dict) -> bool:
    """Whether notebook row ``r`` is the primary row of its claim ``c`` on its data set: where a row of that claim
    and data set is declared ``role="primary"`` (``declared``: their (id, data set)), that row, which must be
    the registry's primary contrast (a row of a stale file that is not — older code wrote it — counts as a
    secondary row); elsewhere the row the registry's legacy matcher picks. A primary row is recorded in
    ``primaries``; a second one for the same claim and data set is an error."""
    cid, data = r.get("id"), r.get("dataset")
    if (cid, data) in declared:  # a row computed by claim id (reproduce.protocol.claim_rows) is THE primary
        is_primary = str(r.get("role", "")) == "primary"
        outdated = is_primary and (c is None or r.get("statement") != c.primary.statement)
        if outdated and is_stale(r):
            is_primary = False  # a stale file was written by older code: its row is kept as a secondary, marked STALE
        elif outdated:
            raise ValueError(
                f"{r['_file']}: a row of {cid} says role 'primary' but is not the registry's "
                f"primary contrast ({r.get('statement')!r}); write it with "
                f"reproduce.protocol.claim_rows.primary_row"
            )
    else:
        is_primary = c is not None and isinstance(data, str) and c.primary.matches(data, row=r)
    if is_primary:
        if (cid, data) in primaries:
            raise ValueError(
                f"{r['_file']}: two rows match the primary contrast of {cid} on {data} "
                f"({primaries[(cid, data)]!r} and {r.get('statement')!r}); make the registry's "
                f"legacy matcher in reproduce/data/claims.toml specific"
            )
        primaries[(cid, data)] = r.get("statement")
    return is_primary


def _row_kind(r: dict) -> str:
    """The row's kind when it names a known one (direction, equivalence, identity), else ``direction``."""
    kind = r.get("kind")
    return str(kind) if isinstance(kind, str) and kind in ("direction", "equivalence", "identity") else "direction"


def _text_or(r: dict, key: str, default: str) -> str:
    return r.get(key) if isinstance(r.get(key), str) else default


def _ledger_row(r: dict, c, is_primary: bool, collapsed: dict | None) -> LedgerRow:
    """The ledger row of notebook row ``r`` of claim ``c`` (None: not in the registry): a primary row takes its
    statement, metric, unit, kind and arms from the registry (a legacy row stated the other way round is
    flipped, the registry's ``sign``), with its estimate, per-seed effects and whether an arm collapsed."""
    data = r.get("dataset")
    role = str(r.get("role", ""))
    sign = int(c.primary.legacy_for(data).get("sign") or 1) if is_primary and role != "primary" else 1
    est, eff = row_estimate(r, sign)
    prim = c.primary if is_primary else None
    failed = _seed_list(r, "failed_seeds")
    if failed is not None:  # a row that carries its failed seeds is decided on all seeds, and without them
        is_col, why = False, ""
    else:
        is_col, why = _collapsed(r, c if is_primary else None, data, collapsed)
    return LedgerRow(
        id=r.get("id"),
        paper=_text_or(r, "paper", c.paper if c else ""),
        role="primary" if is_primary else ("exploratory" if role == "exploratory" else "secondary"),
        dataset=data if isinstance(data, str) else "",
        statement=prim.statement if prim else r.get("statement"),
        metric=prim.metric_label(data) if prim else r.get("metric"),
        unit=prim.unit if prim else "",
        kind=prim.kind if prim else _row_kind(r),
        tolerance=prim.tolerance if prim and prim.tolerance is not None else as_float(r.get("tolerance")),
        arms=(prim.arms_label() or r.get("arms")) if prim else r.get("arms"),
        n_seeds=est.n,
        test_images=_count(r, "test_images"),
        query_bootstrap=_count(r, "n_boot") > 0,
        notebook=_text_or(r, "notebook", c.notebook if c else ""),
        source=_text_or(r, "source", c.source if c else ""),
        note=_text_or(r, "note", ""),
        estimate=est,
        seed_values=eff,
        collapsed=is_col,
        collapse_reason=why,
        seed_ids=_seed_list(r, "seeds") or None,
        failed=failed or (),
        failures=_text_or(r, "failures", "") if failed is not None else "",
    )


def _placeholder_rows(nb_rows: list[dict], datasets: list, primaries: dict) -> list[LedgerRow]:
    """An ``inconclusive`` primary row for every claim and data set that no notebook row is the primary of,
    saying why: the claim's notebook ran on that data set but wrote no primary row, or it did not run. When
    that notebook's claim file is stale (:func:`is_stale`), so is the placeholder: a current run may write the row."""
    tested_files = {(str(r.get("notebook")), r.get("dataset")) for r in nb_rows}
    stale_files = {(str(r.get("notebook")), r.get("dataset")) for r in nb_rows if is_stale(r)}
    out = []
    for c in registry.CLAIMS.values():
        for data in datasets:
            if (c.id, data) in primaries:
                continue
            ran = (c.notebook, data) in tested_files
            out.append(
                LedgerRow(
                    id=c.id,
                    paper=c.paper,
                    role="primary",
                    dataset=data,
                    statement=c.primary.statement,
                    metric=c.primary.metric_label(data),
                    unit=c.primary.unit,
                    kind=c.primary.kind,
                    tolerance=c.primary.tolerance,
                    arms=c.primary.arms_label(),
                    n_seeds=0,
                    test_images=0,
                    notebook=c.notebook,
                    source=c.source,
                    note=(
                        f"{STALE_PREFIX} (its notebook's claim file is an earlier run's, written before this contrast)"
                        if (c.notebook, data) in stale_files
                        else ""
                    ),
                    estimate=Estimate(math.nan, math.nan, math.nan, 0),
                    seed_values=None,
                    collapsed=False,
                    collapse_reason="",
                    missing=(
                        "its notebook's claim file has no row for the primary contrast yet"
                        if ran
                        else f"not tested in this run: {c.notebook} was not executed for {data}"
                    ),
                )
            )
    return out


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


def _ordered(rows: list[LedgerRow], datasets: list) -> pd.DataFrame:
    """The ledger's rows in order — primary, secondary, exploratory; then claim order of the registry (unknown
    ids last); then data set — and columns (:data:`COLUMNS`)."""
    df = pd.DataFrame([row.columns() for row in rows])
    order = {cid: i for i, cid in enumerate(registry.CLAIMS)}
    role_order = {"primary": 0, "secondary": 1, "exploratory": 2}
    df = df.assign(
        _o=df["id"].map(order).fillna(len(order)),
        _r=df["role"].map(role_order),
        _d=df["dataset"].map({d: i for i, d in enumerate(datasets)}),
    )
    df = df.sort_values(["_r", "_o", "_d"], kind="stable")
    return df.reindex(columns=COLUMNS).reset_index(drop=True)


def is_stale(r) -> bool:
    """Whether the row comes from a claim file no execution with the current inputs wrote (its note starts
    ``STALE``, :func:`_read_notebook_rows`): an earlier run's numbers."""
    return str(r.get("note") or "").startswith(STALE_PREFIX)
