"""The claims ledger's construction: every notebook claim-file row read, given its role through the registry and
decided by the ONE rule of :mod:`reproduce.protocol.ledger`.

Each notebook writes its claim rows to ``<results>/<paper>/claims_<data>.csv`` (:mod:`reproduce.protocol.claim_files`:
what a notebook writes and the ledger reads); :func:`build_ledger` gives each row its role
(:mod:`reproduce.spec.claims`: the row that is a claim's declared primary contrast → ``primary``, every other row →
``secondary``), its family, level and δ, and decides it (:mod:`reproduce.protocol.ledger_decision`). Every
claim id has exactly one primary row per data set: a claim no notebook row tests is listed as ``inconclusive``
with the reason, never silently dropped. Beside its verdict every primary row decided by an interval carries
``stability`` and ``fragile``; every one with a paper effect its ``ratio``, ``power`` at that effect, the
``seeds_for_power`` it would need and ``underpowered``. Rendering: :mod:`reproduce.present.ledger_render`;
the files: :mod:`reproduce.driver.ledger_files`.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from reproduce.spec import claims as registry
from reproduce.protocol.claim_files import STALE_PREFIX, _count, _seed_list, as_float, is_stale, row_estimate
from reproduce.protocol.ledger import Estimate
from reproduce.protocol.ledger_decision import LedgerRow, family_sizes, fill_columns


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
    a placeholder stands for every primary no row tests (:func:`_placeholder_rows`); each row's family, level, δ,
    p-values, verdict, flags and, on a primary row, power, seeds, stability and δ sensitivity
    (:func:`reproduce.protocol.ledger_decision.fill_columns`); the rows in ledger order (:func:`_ordered`)."""
    seen_data = sorted({str(r.get("dataset")) for r in nb_rows if isinstance(r.get("dataset"), str)})
    datasets = list(dict.fromkeys([*datasets, *seen_data]))
    rows, primaries = _notebook_rows(nb_rows, collapsed)
    rows += _placeholder_rows(nb_rows, datasets, primaries)
    effects = registry.paper_effects()
    sizes = family_sizes()
    for row in rows:
        fill_columns(row, effects, sizes, (baselines or {}).get((row.id, row.dataset)))
    return _ordered(rows, datasets)


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
