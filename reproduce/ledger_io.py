"""Reading and writing the claims ledger, the README table and the results manifest.

Each notebook writes its claim rows to ``<results>/<paper>/claims_<data>.csv`` with
:func:`write_claims`; :func:`collect` reads them, gives each row its role through the registry
(:mod:`reproduce.claims`: the row that is a claim's declared primary contrast → ``primary``, every
other row → ``secondary``), decides every row by the ONE rule of :mod:`reproduce.ledger` (noise
floor, practical threshold, Holm across a data set's primary rows) and writes ``claims.csv``
(every column) and ``claims.md`` (primary rows first, then secondary, then the legend). Every
claim id has exactly one primary row per data set: a claim no notebook row tests is listed as
``inconclusive`` with the reason, never silently dropped. :func:`update_readme` writes the README
table from the same rows (primary rows only), opened by :func:`plain_summary`.

Beside its verdict every primary row in a Holm family carries what the budget can decide (rules in
:mod:`reproduce.ledger`): ``mde`` (at the Holm step level ``mde_alpha``), ``decidable``, ``stability``,
``fragile``; every primary row with a paper effect its ``ratio`` and ``larger_than_paper``.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import platform
import re
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from coherent_itr.io import atomic_write_json, atomic_write_text
from coherent_itr.runs import source_hash

from . import claims as registry
from .ledger import (
    LARGER_THAN_PAPER,
    LEGEND,
    NOISE_K,
    NOTEBOOK_COLUMNS,
    POWER,
    STABLE,
    THRESHOLD_RULE,
    Estimate,
    adjusted_level,
    decide,
    estimate,
    estimate_from_interval,
    holm,
    holm_step_alpha,
    min_detectable_effect,
    pooled_parts,
    pooled_sd,
    stability,
    threshold,
)
from .paths import ROOT
from .tables import md_cell

CLAIM_IDS = {}
for _c in registry.CLAIMS.values():
    CLAIM_IDS.setdefault(_c.paper, []).append(_c.id)
BEGIN, END = "<!-- claims-ledger:begin -->", "<!-- claims-ledger:end -->"
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
    "n_boot",
    "effect",
    "ci_low",
    "ci_high",
    "p_unadj",
    "p_adj",
    "threshold",
    "noise_floor",
    "paper_effect",
    "ratio",
    "mde",
    "decidable",
    "stability",
    "fragile",
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
    "note",
    "health_evaluated",
    "mde_alpha",
    "noise_floor_source",
]
STALE_PREFIX = "STALE"  # how the note of a row from a stale claim file starts (_read_notebook_rows, is_stale)
_RECORD_KEY = re.compile(r"^[a-z][a-z0-9_]*_[a-z0-9_]+$|^rsum$")


EXTRA_NOTEBOOK_COLUMNS = ["role", "query_var", "n_boot", "collapsed", "collapse_reason"]


def write_claims(claims: list, results_dir: str | os.PathLike, paper: str, data: str) -> pd.DataFrame:
    """Write a notebook's claim rows and return them: :class:`~reproduce.ledger.ClaimResult` objects (per-seed
    effects included) and/or rows of :func:`reproduce.claim_rows.primary_row` (dicts, role "primary").
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


def _f(x) -> float:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v


def _seed_effects(row: dict) -> list[float] | None:
    s = row.get("seed_effects")
    if not isinstance(s, str) or not s.strip():
        return None
    try:
        return [float(x) for x in s.split(";")]
    except ValueError as e:
        raise ValueError(
            f"claim {row.get('id')} ({row.get('dataset')}): seed_effects {s!r} is not a ';'-separated list of numbers"
        ) from e


def row_estimate(row: dict, sign: int = 1) -> tuple[Estimate, list[float] | None]:
    """The row's :class:`Estimate`: from its per-seed effects when the file has them, else the
    seed-only estimate behind its Student-t interval (older claim files)."""
    eff = _seed_effects(row)
    if eff is not None:
        eff = [sign * e for e in eff]
        qv = _f(row.get("query_var"))
        return estimate(eff, qv if np.isfinite(qv) else 0.0), eff
    n = int(_f(row.get("n_seeds")) or 0) if np.isfinite(_f(row.get("n_seeds"))) else 0
    lo, hi = _f(row.get("ci_low")), _f(row.get("ci_high"))
    if sign < 0:
        lo, hi = -hi, -lo
    return estimate_from_interval(sign * _f(row.get("effect")), lo, hi, n), None


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
    :func:`reproduce.notebooks.stale_claims`) keep their values but their note starts ``STALE (<reason>)``."""
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


def _direction(kind: str) -> str:
    return {"direction": "A − B > 0", "equivalence": "|A − B| < T", "identity": "|deviation| ≤ tolerance"}.get(kind, "")


def build_ledger(
    nb_rows: list[dict], datasets=registry.DATASETS, collapsed: dict | None = None, null_pair_diffs: dict | None = None
) -> pd.DataFrame:
    """Every row of the ledger, decided by the rule of :mod:`.ledger` (see its docstring).

    ``nb_rows`` — the notebooks' claim-file rows (dicts); ``collapsed`` — ``{(dataset, arm): reason}``;
    ``null_pair_diffs`` — ``{(dataset, metric key): [per-seed differences of a null pair, …]}``.

    The steps: each notebook row becomes a ledger row, the primary ones recognised (:func:`_notebook_rows`); a
    placeholder stands for every primary no row tests (:func:`_placeholder_rows`); the noise floors
    (:func:`_noise_floors`), thresholds and p-values (:func:`_add_test`); Holm per data set
    (:func:`_holm_families`); the verdicts (:func:`_decide_row`), the budget columns (:func:`_budget_columns`)
    and the last flags; the rows in ledger order (:func:`_ordered`)."""
    seen_data = sorted({str(r.get("dataset")) for r in nb_rows if isinstance(r.get("dataset"), str)})
    datasets = list(dict.fromkeys([*datasets, *seen_data]))
    out, primaries = _notebook_rows(nb_rows, collapsed)
    out += _placeholder_rows(nb_rows, datasets, primaries)
    floors = _noise_floors(out, null_pair_diffs)
    effects = registry.paper_effects()
    for o in out:
        _add_test(o, floors, effects)
    families = _holm_families(out, datasets)
    for o in out:
        _decide_row(o)
    for fam in families.values():
        _budget_columns(fam)
    for o in out:
        o["direction"] = _direction(o["kind"])
        o["larger_than_paper"] = (
            bool(o["verdict"] == "reproduced" and o["ratio"] > LARGER_THAN_PAPER) if np.isfinite(o["ratio"]) else None
        )
    return _ordered(out, datasets)


def _notebook_rows(nb_rows: list[dict], collapsed: dict | None) -> tuple[list[dict], dict]:
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
    if (cid, data) in declared:  # a row computed by claim id (reproduce.claim_rows) is THE primary
        is_primary = str(r.get("role", "")) == "primary"
        outdated = is_primary and (c is None or r.get("statement") != c.primary.statement)
        if outdated and is_stale(r):
            is_primary = False  # a stale file was written by older code: its row is kept as a secondary, marked STALE
        elif outdated:
            raise ValueError(
                f"{r['_file']}: a row of {cid} says role 'primary' but is not the registry's "
                f"primary contrast ({r.get('statement')!r}); write it with "
                f"reproduce.claim_rows.primary_row"
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


def _noise_key(r: dict, prim, data) -> str | None:
    """The (data set, metric key) group whose noise floor the row shares and feeds: a primary of two arms, or a
    notebook-measured primary computed from arm groups (S3: SN − HN on test RSUM, averaged over the grid's cells),
    its registry metric; another row contrasting two arms on a test-record metric, that metric; else None."""
    if prim:
        return str(prim.metric_for(data)) if prim.measure == "arms" or prim.arm_groups else None
    return metric_key(r.get("metric")) if _is_arm_contrast(r) else None


def _text_or(r: dict, key: str, default: str) -> str:
    return r.get(key) if isinstance(r.get(key), str) else default


def _ledger_row(r: dict, c, is_primary: bool, collapsed: dict | None) -> dict:
    """The ledger row of notebook row ``r`` of claim ``c`` (None: not in the registry): a primary row takes its
    statement, metric, unit, kind and arms from the registry (a legacy row stated the other way round is
    flipped, the registry's ``sign``); its estimate (``_est``), per-seed effects (``_eff``), noise-floor group
    (``_mkey``) and whether an arm collapsed (``_collapsed``, ``_why``) are kept for the next steps."""
    data = r.get("dataset")
    role = str(r.get("role", ""))
    sign = int(c.primary.legacy_for(data).get("sign") or 1) if is_primary and role != "primary" else 1
    est, eff = row_estimate(r, sign)
    prim = c.primary if is_primary else None
    is_col, why = _collapsed(r, c if is_primary else None, data, collapsed)
    return {
        "id": r.get("id"),
        "paper": _text_or(r, "paper", c.paper if c else ""),
        "role": "primary" if is_primary else ("exploratory" if role == "exploratory" else "secondary"),
        "dataset": data if isinstance(data, str) else "",
        "statement": prim.statement if prim else r.get("statement"),
        "metric": prim.metric_label(data) if prim else r.get("metric"),
        "unit": prim.unit if prim else "",
        "kind": prim.kind if prim else _row_kind(r),
        "tolerance": prim.tolerance if prim and prim.tolerance is not None else _f(r.get("tolerance")),
        "arms": (prim.arms_label() or r.get("arms")) if prim else r.get("arms"),
        "n_seeds": est.n,
        "n_boot": int(_f(r.get("n_boot"))) if np.isfinite(_f(r.get("n_boot"))) else 0,
        "_est": est,
        "_eff": eff,
        "_mkey": _noise_key(r, prim, data),
        "_collapsed": is_col,
        "_why": why,
        "notebook": _text_or(r, "notebook", c.notebook if c else ""),
        "source": _text_or(r, "source", c.source if c else ""),
        "note": _text_or(r, "note", ""),
    }


def _placeholder_rows(nb_rows: list[dict], datasets: list, primaries: dict) -> list[dict]:
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
                {
                    "id": c.id,
                    "paper": c.paper,
                    "role": "primary",
                    "dataset": data,
                    "statement": c.primary.statement,
                    "metric": c.primary.metric_label(data),
                    "unit": c.primary.unit,
                    "kind": c.primary.kind,
                    "tolerance": c.primary.tolerance,
                    "arms": c.primary.arms_label(),
                    "n_seeds": 0,
                    "n_boot": 0,
                    "_est": Estimate(math.nan, math.nan, math.nan, 0),
                    "_eff": None,
                    "_mkey": None,
                    "_collapsed": False,
                    "_why": "",
                    "notebook": c.notebook,
                    "source": c.source,
                    "note": (
                        f"{STALE_PREFIX} (its notebook's claim file is an earlier run's, written before this contrast)"
                        if (c.notebook, data) in stale_files
                        else ""
                    ),
                    "_missing": (
                        "its notebook's claim file has no row for the primary contrast yet"
                        if ran
                        else f"not tested in this run: {c.notebook} was not executed for {data}"
                    ),
                }
            )
    return out


def _noise_floors(out: list[dict], null_pair_diffs: dict | None) -> dict:
    """``{(data set, metric key): (noise floor, df, source)}``: ``NOISE_K`` × the sd pooled over the per-seed
    effects of the group's current contrasts (healthy rows of ≥ 2 seeds; a stale row, :func:`is_stale`, is an
    earlier run's and feeds no floor) and its declared null pairs; NaN without any df. ``source`` names the one
    contribution with the largest share of the pooled sum of squares
    (:func:`_largest_share`), so that a reader sees when one unstable contrast sets the floor."""
    groups: dict = {}
    for o in out:
        if o["_mkey"] and not o["_collapsed"] and not is_stale(o) and o["_est"].n >= 2 and np.isfinite(o["_est"].se):
            e = o["_eff"] if o["_eff"] is not None else _pseudo_effects(o["_est"])
            groups.setdefault((o["dataset"], o["_mkey"]), []).append((f"{o['id']} ({o['role']}): {o['statement']}", e))
    floors = {}
    for key in set(groups) | set(null_pair_diffs or {}):
        contrasts = groups.get(key, [])
        nulls = (null_pair_diffs or {}).get(key, [])
        sd, df = pooled_sd([e for _, e in contrasts], nulls)
        floors[key] = (NOISE_K * sd if df else math.nan, df, _largest_share(contrasts, nulls) if df else "")
    return floors


def _largest_share(contrasts: list[tuple[str, list]], null_pair_diffs: list) -> str:
    """Which single contribution to :func:`reproduce.ledger.pooled_sd` has the largest share of its sum of
    squares (:func:`reproduce.ledger.pooled_parts`) — one contrast, or all null pairs together — as
    ``"<share>% from <label>"``; empty when the sum is 0."""
    c_parts, n_parts = pooled_parts([e for _, e in contrasts], null_pair_diffs)
    parts = [(ss, label) for (ss, _), (label, _) in zip(c_parts, contrasts, strict=True)]
    if null_pair_diffs:
        parts.append((sum(ss for ss, _ in n_parts), f"the {len(null_pair_diffs)} declared null pair(s)"))
    total = sum(ss for ss, _ in parts)
    if not parts or total <= 0:
        return ""
    ss, label = max(parts, key=lambda p: p[0])
    return f"{100 * ss / total:.0f}% from {label}"


def _add_test(o: dict, floors: dict, effects: pd.DataFrame) -> None:
    """Row ``o``'s paper effect and its source (primary rows), noise floor, threshold, unadjusted p-value (the
    direction test, or the equivalence test against the threshold; none for an identity), ratio to the paper
    effect, effect and 95% interval; ``p_adj`` NaN until :func:`_holm_families`."""
    c = registry.CLAIMS.get(o["id"])
    prim = o["role"] == "primary"
    pe = _f(effects.loc[o["id"], "paper_effect"]) if prim and o["id"] in effects.index else math.nan
    o["paper_effect"] = pe
    o["paper_source"] = (
        f"{effects.loc[o['id'], 'source']}, {effects.loc[o['id'], 'backbone']}, "
        f"{effects.loc[o['id'], 'dataset']}: {effects.loc[o['id'], 'computation']}"
        if prim and o["id"] in effects.index
        else ""
    )
    nf, _, source = floors.get((o["dataset"], o["_mkey"]), (math.nan, 0, "")) if o["_mkey"] else (math.nan, 0, "")
    o["noise_floor"] = nf
    o["noise_floor_source"] = source
    o["threshold"] = threshold(nf, pe, o["tolerance"], o["kind"])
    est = o["_est"]
    if o["kind"] == "equivalence":
        o["p_unadj"] = est.p_equivalent(o["threshold"]) if o["threshold"] > 0 else math.nan
    elif o["kind"] == "direction":
        o["p_unadj"] = est.p_zero()
    else:
        o["p_unadj"] = math.nan
    ok_ratio = prim and c is not None and c.primary.ratio and np.isfinite(pe) and pe != 0
    o["ratio"] = est.effect / pe if ok_ratio and np.isfinite(est.effect) else math.nan
    o["effect"] = est.effect
    o["ci95_low"], o["ci95_high"] = est.interval(0.95)
    o["p_adj"] = math.nan


def _holm_families(out: list[dict], datasets: list) -> dict:
    """``{data set: its Holm family}``: the primary rows with a p-value that are neither collapsed nor identity
    checks; each gets its Holm-adjusted ``p_adj`` and the ``_level`` its interval is drawn at."""
    families = {}
    for data in datasets:
        fam = [
            o
            for o in out
            if o["role"] == "primary"
            and o["dataset"] == data
            and not o["_collapsed"]
            and o["kind"] != "identity"
            and np.isfinite(o["p_unadj"])
        ]
        adj = holm([o["p_unadj"] for o in fam])
        for o, p in zip(fam, adj):
            o["p_adj"] = float(p)
        m = len(fam)
        for o in fam:
            o["_level"] = adjusted_level(o["p_unadj"], o["p_adj"], m)
        families[data] = fam
    return families


def _no_verdict_reason(o: dict) -> str:
    """Why row ``o`` is ``inconclusive`` without applying the rule, or "": a placeholder (no notebook row), an
    identity or an equivalence row without a tolerance."""
    if o.get("_missing"):
        return o["_missing"]
    if o["kind"] == "identity" and (o["tolerance"] is None or not np.isfinite(o["tolerance"])):
        return "identity row without a tolerance"
    if o["kind"] == "equivalence" and not o["threshold"] > 0:
        return "equivalence row without a tolerance"
    return ""


def _decide_row(o: dict) -> None:
    """Row ``o``'s verdict, reason and interval (:func:`reproduce.ledger.decide`), or ``inconclusive`` with
    :func:`_no_verdict_reason`. The reason says when the interval is over seeds only, unadjusted (not a primary
    row) or without a noise floor (:func:`_interval_notes`)."""
    why = _no_verdict_reason(o)
    if why:
        o.update(verdict="inconclusive", reason=why, ci_low=math.nan, ci_high=math.nan)
        return
    kind, est = o["kind"], o["_est"]
    tol = o["tolerance"] if kind == "identity" else None
    v, why, lo, hi = decide(
        kind,
        est,
        o["threshold"],
        p_adj=o["p_adj"] if np.isfinite(o["p_adj"]) else None,
        level=o.get("_level"),
        collapsed=o["_collapsed"],
        collapse_reason=o["_why"],
        tolerance=tol,
    )
    if kind in ("direction", "equivalence") and est.n >= 2:
        why += _interval_notes(o)
    o.update(verdict=v, reason=why, ci_low=lo, ci_high=hi)


def _interval_notes(o: dict) -> str:
    """What the reason adds about a direction or equivalence row's interval (``"; …"`` each, or "")."""
    notes = ""
    if o["n_boot"] == 0:
        notes += (
            "; interval over seeds only (no per-query data stored for this row)"
            if str(o.get("metric", "")).startswith("rsum")
            else "; interval over seeds only (the per-query bootstrap covers RSUM contrasts)"
        )
    if o["role"] != "primary":
        notes += "; unadjusted 95% interval (not a primary row)"
    if not np.isfinite(o["noise_floor"]):
        notes += "; no noise floor for this measure"
    return notes


def _ordered(out: list[dict], datasets: list) -> pd.DataFrame:
    """The ledger's rows in order — primary, secondary, exploratory; then claim order of the registry (unknown
    ids last); then data set — and columns (:data:`COLUMNS`)."""
    df = pd.DataFrame(out)
    order = {cid: i for i, cid in enumerate(registry.CLAIMS)}
    role_order = {"primary": 0, "secondary": 1, "exploratory": 2}
    df = df.assign(
        _o=df["id"].map(order).fillna(len(order)),
        _r=df["role"].map(role_order),
        _d=df["dataset"].map({d: i for i, d in enumerate(datasets)}),
    )
    df = df.sort_values(["_r", "_o", "_d"], kind="stable")
    return df.reindex(columns=COLUMNS).reset_index(drop=True)


def _budget_columns(fam: list[dict]) -> None:
    """MDE, decidable flag and stability of the rows of one Holm family (rule in :mod:`reproduce.ledger`);
    an ``inconclusive`` row that is not decidable says so in its reason. A row stored only as an interval
    (an older claim file) is resampled from :func:`_pseudo_effects`: n values with its mean and seed sd."""
    alphas = holm_step_alpha([o["p_unadj"] for o in fam])
    stab = stability(
        [
            {
                "kind": o["kind"],
                "effects": o["_eff"] if o["_eff"] is not None else _pseudo_effects(o["_est"]),
                "query_var": o["_est"].query_var,
                "threshold": o["threshold"],
                "verdict": o["verdict"],
            }
            for o in fam
        ]
    )
    for o, a, s in zip(fam, alphas, stab):
        est = o["_est"]
        mde = min_detectable_effect(est.se, est.df, a, o["kind"])
        pe = o["paper_effect"]
        use_paper = o["kind"] == "direction" and np.isfinite(pe) and pe != 0
        ref = abs(pe) if use_paper else (o["threshold"] if o["threshold"] > 0 else math.nan)
        decidable = bool(mde <= ref) if np.isfinite(mde) and np.isfinite(ref) else None
        o.update(mde=mde, mde_alpha=float(a), decidable=decidable, stability=float(s), fragile=bool(s < STABLE))
        if o["verdict"] == "inconclusive" and decidable is False:
            o["reason"] += f"; not decidable at this budget: MDE {fmt_num(mde)} > " + (
                f"|paper effect| {fmt_num(ref)}" if use_paper else f"threshold {fmt_num(ref)}"
            )


def _pseudo_effects(est: Estimate) -> list[float]:
    """n values with the estimate's mean and seed sd (an old claim file kept only its interval);
    only their spread enters the noise floor."""
    sd = est.se * math.sqrt(est.n)
    z = np.arange(est.n) - (est.n - 1) / 2
    z = z / z.std(ddof=1)
    return list(est.effect + sd * z)


def collect(
    results_dir: str | os.PathLike,
    collapsed: dict | None = None,
    null_pair_diffs: dict | None = None,
    stale: dict | None = None,
) -> pd.DataFrame:
    """Gather every notebook's claim rows into ``claims.csv`` / ``claims.md`` under the one rule.

    Exactly one primary row per claim id and data set (a placeholder ``inconclusive`` row says why
    when no notebook row is the registry's primary contrast). ``stale``: {claim file: reason} of files
    no current execution wrote; their rows are marked ``STALE`` in the note column."""
    results_dir = Path(results_dir)
    rows = _read_notebook_rows(results_dir, stale)
    df = build_ledger(rows, collapsed=collapsed, null_pair_diffs=null_pair_diffs)
    health_known = collapsed is not None or any("collapsed" in r for r in rows)
    df["health_evaluated"] = health_known
    atomic_write_text(results_dir / "claims.csv", df.to_csv(index=False))
    atomic_write_text(results_dir / "claims.md", markdown(df, health_known=health_known))
    return df


# --- rendering ------------------------------------------------------------------------------------
_SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def fmt_num(x, digits: int = 3) -> str:
    """A number for a reader: ``digits`` significant digits, never ``e`` notation (below 10⁻⁴ as
    ``m × 10⁻ⁿ``), "—" if missing."""
    try:
        v = float(x)
    except (TypeError, ValueError):
        return "—"
    if not np.isfinite(v):
        return "—"
    if v == 0:
        return "0"
    if abs(v) >= 10**digits:
        return f"{v:.0f}"
    if abs(v) < 1e-4:  # e.g. an identity's deviation: "1.44 × 10⁻¹⁴", not 0.0000000000000144
        exp = int(np.floor(np.log10(abs(v))))
        mant = np.format_float_positional(v / 10**exp, precision=digits, unique=True, fractional=False, trim="-")
        return f"{mant} × 10{str(exp).translate(_SUPERSCRIPT)}"
    return np.format_float_positional(v, precision=digits, unique=True, fractional=False, trim="-")


def effect_cell(r) -> str:
    if not np.isfinite(_f(r["effect"])):
        return f"— ({r['reason']})" if isinstance(r.get("reason"), str) else "—"
    if not (np.isfinite(_f(r["ci_low"])) and np.isfinite(_f(r["ci_high"]))):
        why = "identity: the largest deviation" if r.get("kind") == "identity" else str(r.get("reason", ""))
        return f"{fmt_num(r['effect'])} [— {why.split(';')[0]}]"
    return f"{fmt_num(r['effect'])} [{fmt_num(r['ci_low'])}, {fmt_num(r['ci_high'])}]"


def _flag(x) -> bool | None:
    """A flag column read back from a CSV or freshly built: True / False / None (empty)."""
    if isinstance(x, (bool, np.bool_)):
        return bool(x)
    if isinstance(x, str) and x.strip().lower() in ("true", "false"):
        return x.strip().lower() == "true"
    return None


def mde_cell(r) -> str:
    """The minimum detectable effect and whether the row is decidable at this budget."""
    if not np.isfinite(_f(r.get("mde"))):
        return "—"
    d = _flag(r.get("decidable"))
    return fmt_num(r["mde"]) + {True: " (yes)", False: " (no)", None: ""}[d]


def stability_cell(r) -> str:
    """Share of bootstrap resamples with the same verdict, *fragile* below the ledger's STABLE."""
    s = _f(r.get("stability"))
    if not np.isfinite(s):
        return "—"
    return f"{100 * s:.0f}%" + (" *fragile*" if _flag(r.get("fragile")) else "")


def is_stale(r) -> bool:
    """Whether the row comes from a claim file no execution with the current inputs wrote (its note starts
    ``STALE``, :func:`_read_notebook_rows`): an earlier run's numbers."""
    return str(r.get("note") or "").startswith(STALE_PREFIX)


STALE_MARK = "*stale*: an earlier run's, see the note in `claims.csv`"
STALE = "stale"  # the README's category of a stale primary row (summary_counts, primary_table)
STALE_CELL = "*stale*"  # the README cell of a stale primary row; the line above the table says what it means


def _stale_mask(rows: pd.DataFrame) -> pd.Series:
    """Boolean Series: which of ``rows`` are stale (:func:`is_stale`, for a whole table)."""
    if "note" not in rows:
        return pd.Series(False, index=rows.index)
    return rows["note"].map(lambda n: is_stale({"note": n})).astype(bool)


def verdict_cell(r) -> str:
    """The verdict in bold, with *not decidable at this budget* (inconclusive rows) or *larger than the
    paper — check the baseline* (reproduced rows more than LARGER_THAN_PAPER × the paper's effect), and
    the *stale* mark of a row from an earlier run (:func:`is_stale`)."""
    v = f"**{r['verdict']}**"
    if r["verdict"] == "inconclusive" and _flag(r.get("decidable")) is False:
        v += " (not decidable at this budget)"
    if _flag(r.get("larger_than_paper")):
        v += " (larger than the paper — check the baseline)"
    if is_stale(r):
        v += f" — {STALE_MARK}"
    return v


def _stale_counts(df: pd.DataFrame) -> tuple[int, int]:
    """(stale primary rows, primary rows) of a ledger."""
    prim = df[df["role"] == "primary"] if len(df) else df
    return int(_stale_mask(prim).sum()), len(prim)


def stale_sentence(df: pd.DataFrame) -> str:
    """One sentence when some primary rows are stale: how many, and that their numbers are an earlier run's."""
    n, n_prim = _stale_counts(df)
    if not n:
        return ""
    return (
        f"**{n} of {n_prim} primary rows are stale**: their claim files were written by an earlier run "
        "(other code or protocol) and no execution with the current inputs has replaced them. They are marked "
        "*stale* below; read their verdicts as that run's, not this ledger's."
    )


def _cell(s) -> str:
    return md_cell(s) if isinstance(s, str) and s else "—"


def noise_floor_markdown(df: pd.DataFrame) -> str:
    """The noise floor of every metric and data set that has one (rule in :mod:`reproduce.ledger`)."""
    nf = df[np.isfinite(pd.to_numeric(df["noise_floor"], errors="coerce"))]
    if not len(nf):
        return ""
    key = nf["metric"].map(lambda m: metric_key(m) or m)
    t = nf.assign(_k=key).drop_duplicates(["dataset", "_k"]).sort_values(["dataset", "_k"])
    lines = [
        "## Noise floors",
        "",
        f"{NOISE_K:g} × the pooled sd of a single-seed paired difference between two arms "
        "(same metric, same data set; from every contrast's seed spread and the declared null pairs). The last "
        "column names the one contribution with the largest share of the pooled sum of squares: a large share "
        "means one unstable contrast sets the floor for every row of that metric.",
        "",
        "| data | metric | noise floor | largest share of the pooled variance |",
        "|---|---|---|---|",
    ]
    src = t["noise_floor_source"] if "noise_floor_source" in t else pd.Series("", index=t.index)
    src = src.map(lambda s: _cell(s) if isinstance(s, str) else "—")
    lines += [
        f"| {r['dataset']} | {_cell(r['_k'])} | {fmt_num(r['noise_floor'])} | {s} |"
        for r, s in zip(t.to_dict("records"), src, strict=True)
    ]
    return "\n".join(lines) + "\n\n"


def legend_markdown() -> str:
    lines = [
        "## Legend",
        "",
        f"Rule (`reproduce/ledger.py`): {THRESHOLD_RULE} Effects are oriented so that the claim "
        "predicts > 0 (A − B); the interval shown for a primary row is Holm-adjusted (it excludes 0 exactly when "
        "p_adj < 0.05); secondary rows show an unadjusted 95% interval and never decide a claim.",
        "",
    ]
    lines += [f"- **{v}** — {LEGEND[v]}" for v in LEGEND]
    lines += [
        "",
        f"**MDE** — the effect the row's test detects with {POWER:.0%} power at the level Holm's step applies to "
        "it, at its measured standard error and degrees of freedom; *(yes)*: decidable at this budget "
        "(MDE ≤ |paper's effect|, or ≤ T without one). **Stability** — share of bootstrap resamples "
        f"(seeds and test queries together, Holm recomputed) with the same verdict; *fragile* below {STABLE:.0%}. "
        f"A reproduced effect more than {LARGER_THAN_PAPER:g}× the paper's is flagged *larger than the paper — "
        "check the baseline*. Formulas in `reproduce/ledger.py`.",
    ]
    return "\n".join(lines) + "\n"


NO_HEALTH = (
    "**Training health was not evaluated for this ledger** (no collapse information reached it): "
    "a verdict whose arm collapsed (issue 14: e.g. Triplet-HN on Flickr8k, ladder and SAM on the synthetic "
    "world) reads as a method effect here but would be `not testable` — read such rows as provisional."
)


def markdown(df: pd.DataFrame, health_known: bool = True) -> str:
    stale = stale_sentence(df)
    out = [
        "# Claims ledger",
        "",
        "One primary row decides a claim per data set; every column and the unadjusted values are in "
        "`claims.csv`. Legend at the end.",
        *([] if health_known else ["", NO_HEALTH]),
        *(["", stale] if stale else []),
        "",
        "## Primary rows",
        "",
        "| id | claim | data | metric (unit; direction) | our effect [adjusted interval] | paper's effect | "
        "ratio | MDE (decidable?) | stability | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df[df["role"] == "primary"].to_dict("records"):
        pe = (
            f"{fmt_num(r['paper_effect'])} ({_cell(r['paper_source']).split(':')[0]})"
            if np.isfinite(_f(r["paper_effect"]))
            else "— (no number in the paper's text)"
        )
        out.append(
            f"| {r['id']} | {_cell(r['statement'])} | {r['dataset']} | {_cell(r['metric'])} "
            f"({_cell(r['unit'])}; {_cell(r['direction'])}) | {_cell(effect_cell(r))} | {pe} | "
            f"{fmt_num(r['ratio'], 2) if np.isfinite(_f(r['ratio'])) else '—'} | {mde_cell(r)} | "
            f"{stability_cell(r)} | {verdict_cell(r)} |"
        )
    for role in ("secondary", "exploratory"):
        sub = df[df["role"] == role]
        if not len(sub):
            continue
        out += [
            "",
            f"## {role.capitalize()} rows",
            "",
            "| id | statement | data | metric | arms | effect [95% interval] | threshold | verdict |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for r in sub.to_dict("records"):
            out.append(
                f"| {r['id']} | {_cell(r['statement'])} | {r['dataset'] or '—'} | {_cell(r['metric'])} | "
                f"{_cell(r['arms'])} | {_cell(effect_cell(r))} | {fmt_num(r['threshold'])} | {r['verdict']} |"
            )
    return "\n".join(out) + "\n\n" + noise_floor_markdown(df) + legend_markdown()


def primary_table(df: pd.DataFrame) -> pd.DataFrame:
    """One line per claim id: the primary row's verdict (and effect) per data set; a stale row
    (:func:`is_stale`) shows neither its effect nor its verdict, only that it awaits a current run."""
    prim = df[df["role"] == "primary"]
    datasets = list(dict.fromkeys(prim["dataset"]))
    rows = []
    for cid, c in registry.CLAIMS.items():
        line = {"id": cid, "paper": c.paper, "claim": c.primary.statement}
        for d in datasets:
            r = prim[(prim["id"] == cid) & (prim["dataset"] == d)]
            stale = bool(len(r)) and is_stale(r.iloc[0].to_dict())
            line[d] = STALE if stale else r["verdict"].iloc[0] if len(r) else "not tested"
            line[f"{d}_effect"] = "—" if stale else effect_cell(r.iloc[0].to_dict()) if len(r) else "—"
            line[f"{d}_ratio"] = _f(r["ratio"].iloc[0]) if len(r) and "ratio" in r and not stale else math.nan
            line[f"{d}_cell"] = (
                STALE_CELL if stale else verdict_cell(r.iloc[0].to_dict()) if len(r) else "**not tested**"
            )
        rows.append(line)
    return pd.DataFrame(rows)


def summary_markdown(df: pd.DataFrame) -> str:
    """The README table: primary rows only, one line per claim, with the tally per data set (stale rows
    counted apart, :func:`primary_table`)."""
    t = primary_table(df)
    datasets = [c for c in t.columns if c not in ("id", "paper", "claim") and "_" not in c]
    head = (
        "| id | paper | primary contrast | "
        + " | ".join(f"{d}: effect [interval] → verdict | {d}: ratio to paper" for d in datasets)
        + " |"
    )
    rows = [head, "|" + "---|" * (3 + 2 * len(datasets))]
    for r in t.to_dict("records"):
        rows.append(
            f"| {r['id']} | {r['paper']} | {_cell(r['claim'])} | "
            + " | ".join(
                (r[d + "_cell"] if r[d] == STALE else f"{_cell(r[d + '_effect'])} → {r[d + '_cell']}")
                + " | "
                + (fmt_num(r[d + "_ratio"], 2) if np.isfinite(r[d + "_ratio"]) else "—")
                for d in datasets
            )
            + " |"
        )
    tallies = []
    for d in datasets:
        n = t[d].value_counts()
        tallies.append(
            f"{d}: " + ", ".join(f"{n.get(v, 0)} {v}" for v in (*LEGEND, STALE) if v in LEGEND or n.get(v, 0))
        )
    return "\n".join(rows) + "\n\nPrimary rows — " + "; ".join(tallies) + ".\n"


SUMMARY_CATEGORIES = (
    "reproduced",
    "not reproduced",
    "no effect",
    "not decidable at this budget",
    "inconclusive",
    "not testable",
    STALE,
)


def summary_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Primary rows per data set (rows) and category (columns, :data:`SUMMARY_CATEGORIES`): the verdicts,
    with ``inconclusive`` split into *not decidable at this budget* (decidable flag False) and the rest; a
    stale row (:func:`is_stale`) counts as *stale*, whatever its earlier verdict."""
    prim = df[df["role"] == "primary"]
    not_decidable = prim["decidable"].map(_flag).eq(False) if "decidable" in prim else False
    cat = prim["verdict"].where(~((prim["verdict"] == "inconclusive") & not_decidable), SUMMARY_CATEGORIES[3])
    cat = cat.where(~_stale_mask(prim), STALE)
    t = pd.crosstab(prim["dataset"], cat).reindex(columns=list(SUMMARY_CATEGORIES), fill_value=0)
    return t.reindex(list(dict.fromkeys(prim["dataset"]))).fillna(0).astype(int)


def caveat(df: pd.DataFrame) -> str:
    """The one caveat sentence of the plain summary, chosen by a stated rule: of three shares over the
    primary rows of all data sets — (a) reproduced rows flagged *larger than the paper*, among reproduced
    rows; (b) *fragile* rows, among decided rows (reproduced, not reproduced, no effect); (c) rows *not
    decidable at this budget*, among all primary rows — the largest one (ties in the order a, b, c) is
    stated, stale rows (:func:`is_stale`) left out. Empty when all three are 0."""
    prim = df[df["role"] == "primary"]
    prim = prim[~_stale_mask(prim)]
    flag = {
        c: (prim[c].map(_flag).eq(True) if c in prim else pd.Series(False, index=prim.index))
        for c in ("larger_than_paper", "fragile")
    }
    not_dec = prim["decidable"].map(_flag).eq(False) if "decidable" in prim else pd.Series(False, index=prim.index)
    rep = prim["verdict"] == "reproduced"
    decided = prim["verdict"].isin(["reproduced", "not reproduced", "no effect"])
    cands = [
        (
            int((rep & flag["larger_than_paper"]).sum()),
            int(rep.sum()),
            f"reproduced effects are more than {LARGER_THAN_PAPER:g}× the paper's (check the baseline "
            "before reading them as the method's gain)",
        ),
        (
            int((decided & flag["fragile"]).sum()),
            int(decided.sum()),
            f"decided verdicts are fragile (the same verdict in fewer than {STABLE:.0%} of bootstrap resamples)",
        ),
        (
            int((prim["verdict"].eq("inconclusive") & not_dec).sum()),
            len(prim),
            "primary rows are inconclusive and not decidable at this budget (the seeds cannot detect the "
            "paper's effect with 80% power)",
        ),
    ]
    k, n, text = max(cands, key=lambda c: c[0] / c[1] if c[1] else 0.0)
    if not n or not k:
        return ""
    return f"Caveat: {k} of {n} {text}."


def plain_summary(df: pd.DataFrame) -> str:
    """The README's plain summary: per data set, how many primary rows are reproduced / not reproduced /
    no effect / not decidable at this budget (inconclusive and not testable rows when there are any), then
    the :func:`caveat` sentence and the rule that chose it. Empty without primary rows."""
    if not len(df) or not (df["role"] == "primary").any():
        return ""
    counts = summary_counts(df)
    lines = [
        f"- **{d}** ({int(row.sum())} claims): "
        + ", ".join(f"{int(row[c])} {c}" for i, c in enumerate(SUMMARY_CATEGORIES) if i < 4 or row[c])
        for d, row in counts.iterrows()
    ]
    cav = caveat(df)
    rule = (
        " _(The caveat is the largest of three shares: reproduced effects more than "
        f"{LARGER_THAN_PAPER:g}× the paper's, fragile decided verdicts, primary rows not decidable at this "
        "budget — `reproduce.ledger_io.caveat`.)_"
    )
    return "**In short.**\n\n" + "\n".join(lines) + ("\n\n" + cav + rule if cav else "") + "\n"


def claim_verdict(verdicts) -> str:
    """Old summary of several rows (kept for callers of the previous ledger; the ledger itself
    decides a claim by its ONE primary row and never reports "mixed")."""
    v = list(verdicts)
    decided = [x for x in v if x != "inconclusive"]
    if not decided:
        return "inconclusive"
    if all(x == "reproduced" for x in v):
        return "reproduced"
    if all(x == "not reproduced" for x in decided):
        return "not reproduced"
    return "mixed"


def check_notebook_summary(summary: pd.DataFrame, ledger: pd.DataFrame) -> list[str]:
    """Disagreements between a notebook's per-claim summary (columns ``id``, ``dataset``, ``verdict``)
    and the ledger's primary rows; empty when they agree. Every claim the summary names must be
    in the ledger with the same verdict."""
    prim = ledger[ledger["role"] == "primary"].set_index(["id", "dataset"])["verdict"]
    bad = []
    for r in summary.to_dict("records"):
        key = (r["id"], r["dataset"])
        if key not in prim.index:
            bad.append(f"{key[0]} on {key[1]}: in the notebook's summary but not a primary row of claims.csv")
        elif prim[key] != r["verdict"]:
            bad.append(f"{key[0]} on {key[1]}: notebook says {r['verdict']!r}, claims.csv says {prim[key]!r}")
    return bad


def assert_notebook_agrees(summary: pd.DataFrame, ledger: pd.DataFrame) -> None:
    """Raise when :func:`check_notebook_summary` finds a disagreement (for notebooks and tests)."""
    bad = check_notebook_summary(summary, ledger)
    if bad:
        raise AssertionError("the notebook disagrees with results/claims.csv:\n  " + "\n  ".join(bad))


def _readme_stale_sentence(df: pd.DataFrame) -> str:
    """The README's line on stale primary rows (empty when there are none): how many, and where their numbers are."""
    n, n_prim = _stale_counts(df)
    if not n:
        return ""
    return (
        f"**{n} of {n_prim} primary rows await a run with the current inputs**: they show *stale* below, "
        "without a verdict; [results/claims.md](results/claims.md) keeps the earlier run's numbers."
    )


def update_readme(df: pd.DataFrame, profile: str, readme: Path = ROOT / "README.md") -> None:
    """Replace the summary table between the ledger markers of README.md (primary rows only; stale rows
    without their earlier verdicts, :func:`primary_table`)."""
    text = readme.read_text()
    if BEGIN not in text or END not in text:
        return
    date = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d")
    datasets = list(dict.fromkeys(df.loc[df["role"] == "primary", "dataset"])) if len(df) else []
    block = (
        f"{BEGIN}\n"
        + plain_summary(df)
        + "\n"
        + (f"{stale}\n\n" if (stale := _readme_stale_sentence(df)) else "")
        + f"_Profile `{profile}`, data {', '.join(datasets) or 'none'}, generated {date} by "
        f"`make reproduce` (library source hash {source_hash()}). One line per claim: its ONE primary row per "
        f"data set (declared in `reproduce/data/claims.toml`), our effect with its Holm-adjusted interval and the "
        f"verdict by the rule in `reproduce/ledger.py` ({THRESHOLD_RULE.rstrip('.')}), and the ratio of our effect to "
        f"the paper's. Secondary rows, the papers' effects, minimum detectable effects, stability, noise floors and "
        f"the legend are in [results/claims.md](results/claims.md)._\n\n"
        + ("" if "health_evaluated" not in df or df["health_evaluated"].astype(bool).all() else NO_HEALTH + "\n\n")
        + summary_markdown(df)
        + END
    )
    text = re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    atomic_write_text(readme, text)


def write_manifest(
    results_dir: str | os.PathLike,
    profile: str,
    datasets: list[str],
    runtime_s: float,
    timings: dict | None = None,
    n_workers: int | None = None,
    runs_trained: int = 0,
    failures: dict | None = None,
    runs_evaluated: int = 0,
    by_data: dict | None = None,
    estimate: dict | None = None,
) -> None:
    """``results/manifest.json``: what produced the results (source hash, profile, data, machine) and
    how long each phase of this invocation took (seconds; cached runs cost nothing).

    ``last_training_invocation`` keeps the timing of the latest invocation that trained runs (this
    one, or carried over from the previous manifest when the source hash and profile are the same),
    so a rerun that only re-executes notebooks does not erase what the training cost.

    ``by_data``: per data set of this invocation, ``{"runs_trained": n, "runs_evaluated": m}`` (evaluated:
    a test evaluation computed here, for a run trained here or one trained before). ``last_training_by_data``
    keeps, per data set, the counts and phase times (``<data>_*`` of ``timings``) of the latest invocation
    that trained runs of that data set, carried over like ``last_training_invocation``: a study trained one
    data set at a time still shows what each cost.

    ``failures``: what failed or is stale in this invocation (``runs``, ``notebooks``, ``stale_claims``).
    ``estimate``: the plan's estimated against its actual wall time (``reproduce.progress.finish``)."""
    path = Path(results_dir) / "manifest.json"
    man = {
        "library_source_hash": source_hash(),
        "profile": profile,
        "data": datasets,
        "runtime_s": round(runtime_s, 1),
        "phases_s": {k: round(v, 1) for k, v in (timings or {}).items()},
        "runs_trained": runs_trained,
        "runs_evaluated": runs_evaluated,
        "failures": failures or {},
        **({"estimate": estimate} if estimate else {}),
        "workers": n_workers,
        "finished_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "torch": torch.__version__,
            "cuda": torch.cuda.is_available(),
        },
    }
    old = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except (OSError, ValueError):
            old = {}
    same = old.get("library_source_hash") == man["library_source_hash"] and old.get("profile") == profile
    last = None
    if runs_trained > 0:
        last = {
            k: man[k]
            for k in ("runtime_s", "phases_s", "runs_trained", "runs_evaluated", "workers", "finished_utc", "machine")
        }
    elif same:
        last = old.get("last_training_invocation")
    if last is not None:
        man["last_training_invocation"] = last
    per_data = dict(old.get("last_training_by_data") or {}) if same else {}
    for d, counts in (by_data or {}).items():
        if counts.get("runs_trained", 0) > 0:
            per_data[d] = {
                **counts,
                "phases_s": {k: v for k, v in man["phases_s"].items() if k.startswith(f"{d}_")},
                "workers": n_workers,
                "finished_utc": man["finished_utc"],
            }
    if per_data:
        man["last_training_by_data"] = dict(sorted(per_data.items()))
    atomic_write_json(path, man)
