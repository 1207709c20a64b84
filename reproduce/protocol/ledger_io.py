"""Reading and writing the claims ledger, the README table and the results manifest.

Each notebook writes its claim rows to ``<results>/<paper>/claims_<data>.csv`` with
:func:`write_claims`; :func:`collect` reads them, gives each row its role through the registry
(:mod:`reproduce.spec.claims`: the row that is a claim's declared primary contrast → ``primary``, every
other row → ``secondary``), decides every row by the ONE rule of :mod:`reproduce.protocol.ledger` (a family per
paper and data set, δ from the paper's effect) and writes ``claims.csv``
(every column) and ``claims.md`` (primary rows first, then secondary, then the legend). Every
claim id has exactly one primary row per data set: a claim no notebook row tests is listed as
``inconclusive`` with the reason, never silently dropped. :func:`update_readme` writes the README
table from the same rows (primary rows only), opened by :func:`plain_summary`.

Beside its verdict every primary row decided by an interval carries ``stability`` and ``fragile``; every one
with a paper effect its ``ratio``, ``power`` at that effect, the ``seeds_for_power`` it would need and
``underpowered`` (rules in :mod:`reproduce.protocol.ledger`); :func:`power_markdown` writes them to ``power.md``.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import math
import os
import platform
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from coherent_itr.io import atomic_write_json, atomic_write_text
from coherent_itr.runs import source_hash

from reproduce.spec import claims as registry
from reproduce.protocol.ledger import (
    ALPHA,
    CROSS_PAPER,
    LARGER_THAN_PAPER,
    LEGEND,
    NOTEBOOK_COLUMNS,
    POWER,
    RULE,
    SEED_CAP,
    STABLE,
    Estimate,
    bonferroni,
    decide,
    estimate,
    estimate_from_interval,
    family_alpha,
    power_at,
    seeds_for_power,
    smallest_effect,
    stability,
)
from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import get_profile
from reproduce.spec.tables import md_cell, smoke_banner

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
    "family",
    "family_size",
    "level",
    "delta",
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
    "smaller_than_paper",
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
    "seed_effects",
]
STALE_PREFIX = "STALE"  # how the note of a row from a stale claim file starts (_read_notebook_rows, is_stale)
_RECORD_KEY = re.compile(r"^[a-z][a-z0-9_]*_[a-z0-9_]+$|^rsum$")


EXTRA_NOTEBOOK_COLUMNS = ["role", "query_var", "n_boot", "collapsed", "collapse_reason"]


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


def _direction(kind: str) -> str:
    return {"direction": "A − B > 0", "equivalence": "|A − B| < T", "identity": "|deviation| ≤ tolerance"}.get(kind, "")


def build_ledger(nb_rows: list[dict], datasets=registry.DATASETS, collapsed: dict | None = None) -> pd.DataFrame:
    """Every row of the ledger, decided by the rule of :mod:`.ledger` (see its docstring).

    ``nb_rows`` — the notebooks' claim-file rows (dicts); ``collapsed`` — ``{(dataset, arm): reason}``.

    The steps: each notebook row becomes a ledger row, the primary ones recognised (:func:`_notebook_rows`); a
    placeholder stands for every primary no row tests (:func:`_placeholder_rows`); each row's family, level, δ
    and p-values (:func:`_add_test`); the verdicts (:func:`_decide_row`); the power, seeds and stability of the
    primary rows (:func:`_power_columns`) and the last flags; the rows in ledger order (:func:`_ordered`)."""
    seen_data = sorted({str(r.get("dataset")) for r in nb_rows if isinstance(r.get("dataset"), str)})
    datasets = list(dict.fromkeys([*datasets, *seen_data]))
    out, primaries = _notebook_rows(nb_rows, collapsed)
    out += _placeholder_rows(nb_rows, datasets, primaries)
    effects = registry.paper_effects()
    sizes = family_sizes()
    for o in out:
        _add_test(o, effects, sizes)
        _decide_row(o)
        if o["role"] == "primary":
            _power_columns(o)
        o["direction"] = _direction(o["kind"])
        o["larger_than_paper"] = (
            bool(o["verdict"] == "reproduced" and o["ratio"] > LARGER_THAN_PAPER) if np.isfinite(o["ratio"]) else None
        )
        o["smaller_than_paper"] = bool(
            o["verdict"] == "reproduced" and o["kind"] == "direction" and o["ci_high"] < abs(o["paper_effect"])
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


def _ledger_row(r: dict, c, is_primary: bool, collapsed: dict | None) -> dict:
    """The ledger row of notebook row ``r`` of claim ``c`` (None: not in the registry): a primary row takes its
    statement, metric, unit, kind and arms from the registry (a legacy row stated the other way round is
    flipped, the registry's ``sign``); its estimate (``_est``), per-seed effects (``_eff``) and whether an arm
    collapsed (``_collapsed``, ``_why``) are kept for the next steps."""
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


def _add_test(o: dict, effects: pd.DataFrame, sizes: dict[str, int]) -> None:
    """Row ``o``'s paper effect and its source, family and level (a primary row: its paper's family at
    ALPHA/m; any other row: unadjusted at ALPHA, direction alone), δ, p-values, ratio, effect and 95% interval."""
    c = registry.CLAIMS.get(o["id"])
    prim = o["role"] == "primary"
    known = prim and o["id"] in effects.index
    pe = _f(effects.loc[o["id"], "paper_effect"]) if known else math.nan
    o["paper_effect"] = pe
    o["paper_source"] = (
        f"{effects.loc[o['id'], 'source']}, {effects.loc[o['id'], 'backbone']}, "
        f"{effects.loc[o['id'], 'dataset']}: {effects.loc[o['id'], 'computation']}"
        if known
        else ""
    )
    decided = o["kind"] in ("direction", "equivalence")
    fam = family_of(c.paper if c else o["paper"]) if prim and decided and not o["_collapsed"] else ""
    m = sizes.get(fam, 1) if fam else 1
    o["family"], o["family_size"] = fam, (m if fam else math.nan)
    o["_alpha"] = family_alpha(m) if fam else ALPHA
    o["level"] = 1 - o["_alpha"] if decided else math.nan
    o["delta"] = smallest_effect(pe if prim else math.nan, o["tolerance"], o["kind"])
    est = o["_est"]
    if o["kind"] == "equivalence":
        o["p_unadj"] = est.p_equivalent(o["delta"]) if o["delta"] > 0 else math.nan
    elif o["kind"] == "direction":
        o["p_unadj"] = est.p_zero()
    else:
        o["p_unadj"] = math.nan
    o["p_adj"] = bonferroni(o["p_unadj"], m) if fam else math.nan
    ok_ratio = prim and c is not None and c.primary.ratio and np.isfinite(pe) and pe != 0
    o["ratio"] = est.effect / pe if ok_ratio and np.isfinite(est.effect) else math.nan
    o["effect"] = est.effect
    o["seed_sd"], o["query_var"] = est.seed_sd, est.query_var
    o["seed_effects"] = ";".join(f"{x:.6g}" for x in o["_eff"]) if o["_eff"] is not None else ""
    o["ci95_low"], o["ci95_high"] = est.interval(0.95)


def _no_verdict_reason(o: dict) -> str:
    """Why row ``o`` is ``inconclusive`` without applying the rule, or "": a placeholder (no notebook row), an
    identity or an equivalence row without a tolerance."""
    if o.get("_missing"):
        return o["_missing"]
    if o["kind"] == "identity" and (o["tolerance"] is None or not np.isfinite(o["tolerance"])):
        return "identity row without a tolerance"
    if o["kind"] == "equivalence" and not o["delta"] > 0:
        return "equivalence row without a tolerance"
    return ""


def _decide_row(o: dict) -> None:
    """Row ``o``'s verdict, reason and interval (:func:`reproduce.protocol.ledger.decide`), or ``inconclusive`` with
    :func:`_no_verdict_reason`. The reason says when the interval is over seeds only or unadjusted (not a
    primary row) (:func:`_interval_notes`)."""
    why = _no_verdict_reason(o)
    if why:
        o.update(verdict="inconclusive", reason=why, ci_low=math.nan, ci_high=math.nan)
        return
    kind, est = o["kind"], o["_est"]
    v, why, lo, hi = decide(
        kind,
        est,
        alpha=o["_alpha"],
        delta=o["delta"],
        paper_effect=o["paper_effect"],
        collapsed=o["_collapsed"],
        collapse_reason=o["_why"],
        tolerance=o["tolerance"] if kind == "identity" else None,
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
    return notes


def _power_columns(o: dict) -> None:
    """A primary row's power at 1× the paper's effect and the seeds for POWER (direction rows with a paper
    effect and an interval), *underpowered* (inconclusive below POWER: the reason says so and why), and
    its stability; a row stored only as an interval (an older claim file) is resampled from
    :func:`_pseudo_effects`: n values with its mean and seed sd."""
    est, pe = o["_est"], o["paper_effect"]
    o.update(power=math.nan, seeds_for_power=math.nan, power_note="", underpowered=None)
    o.update(stability=math.nan, fragile=None)
    if o["kind"] not in ("direction", "equivalence") or o["_collapsed"] or est.n < 2 or not np.isfinite(est.se):
        return
    if o["kind"] == "direction" and np.isfinite(pe) and pe != 0:
        sd = est.seed_sd
        o["power"] = float(power_at(abs(pe), sd, est.query_var, est.n, o["_alpha"]))
        n, why = seeds_for_power(abs(pe), sd, est.query_var, o["_alpha"])
        o["seeds_for_power"] = n if n is not None else math.nan
        o["power_note"] = why
        o["underpowered"] = bool(o["power"] < POWER)
        if o["verdict"] == "inconclusive" and o["underpowered"]:
            o["reason"] += (
                f"; underpowered: {100 * o['power']:.0f}% power at the paper's effect with {est.n} seeds ("
                + (f"{n} seeds would give {POWER:.0%})" if n is not None else f"{why})")
            )
    elif o["kind"] == "direction":
        o["power_note"] = "direction alone: the paper gives no effect to plan for"
    eff = o["_eff"] if o["_eff"] is not None else _pseudo_effects(est)
    s = stability(o["kind"], eff, est.query_var, o["_alpha"], o["delta"], o["verdict"])
    o.update(stability=s, fragile=bool(s < STABLE))


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


def _pseudo_effects(est: Estimate) -> list[float]:
    """n values with the estimate's mean and seed sd (an old claim file kept only its interval);
    only their spread enters the stability resamples."""
    sd = est.se * math.sqrt(est.n)
    z = np.arange(est.n) - (est.n - 1) / 2
    z = z / z.std(ddof=1)
    return list(est.effect + sd * z)


def collect(results_dir: str | os.PathLike, collapsed: dict | None = None, stale: dict | None = None) -> pd.DataFrame:
    """Gather every notebook's claim rows into ``claims.csv`` / ``claims.md`` (and ``power.md``) under the one rule.

    Exactly one primary row per claim id and data set (a placeholder ``inconclusive`` row says why
    when no notebook row is the registry's primary contrast). ``stale``: {claim file: reason} of files
    no current execution wrote; their rows are marked ``STALE`` in the note column."""
    results_dir = Path(results_dir)
    rows = _read_notebook_rows(results_dir, stale)
    df = build_ledger(rows, collapsed=collapsed)
    health_known = collapsed is not None or any("collapsed" in r for r in rows)
    df["health_evaluated"] = health_known
    atomic_write_text(results_dir / "claims.csv", df.to_csv(index=False))
    banner = smoke_banner(results_dir)
    atomic_write_text(results_dir / "claims.md", banner + markdown(df, health_known=health_known))
    atomic_write_text(results_dir / "power.md", banner + power_markdown(df))
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


def power_cell(r) -> str:
    """Power at 1× the paper's effect with the row's seeds, and the seeds that would give POWER (or why none do)."""
    pw = _f(r.get("power"))
    if not np.isfinite(pw):
        return "—"
    n = _f(r.get("seeds_for_power"))
    if np.isfinite(n):
        need = f"{int(n)} seeds for {POWER:.0%}"
    elif "not reachable" in str(r.get("power_note") or ""):
        need = "not reachable: test-set variance"
    else:
        need = f"> {SEED_CAP} seeds"
    return f"{100 * pw:.0f}% ({need})"


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
    """The verdict in bold with its tags: *underpowered* (inconclusive rows below POWER at the paper's effect),
    *smaller than the paper* and *larger than the paper — check the baseline* (reproduced rows), and the
    *stale* mark of a row from an earlier run (:func:`is_stale`)."""
    v = f"**{r['verdict']}**"
    if r["verdict"] == "inconclusive" and _flag(r.get("underpowered")):
        v += " (underpowered)"
    if _flag(r.get("smaller_than_paper")):
        v += " (smaller than the paper)"
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


def legend_markdown() -> str:
    lines = [
        "## Legend",
        "",
        f"Rule (`reproduce/protocol/ledger.py`): {RULE} Effects are oriented so that the claim predicts > 0 (A − B). "
        "A primary row's interval is its family's simultaneous interval; secondary rows show an unadjusted 95% "
        "interval, are decided on direction alone and never decide a claim.",
        "",
    ]
    lines += [f"- **{v}** — {LEGEND[v]}" for v in LEGEND]
    lines += [
        "",
        f"**δ** — the smallest effect of interest, half the paper's effect. **Power** — the chance that the row's "
        f"interval lies above 0 if the paper's effect were true, at the row's measured seed sd and test-set "
        f"variance; beside it the seeds that would give {POWER:.0%} (cap {SEED_CAP}; `power.md`). "
        "**Stability** — share of bootstrap resamples (seeds and test queries together) with the same verdict; "
        f"*fragile* below {STABLE:.0%}. A reproduced effect more than {LARGER_THAN_PAPER:g}× the paper's is "
        "flagged *larger than the paper — check the baseline*. Formulas in `reproduce/protocol/ledger.py`.",
    ]
    return "\n".join(lines) + "\n"


NO_HEALTH = (
    "**Training health was not evaluated for this ledger** (no collapse information reached it): "
    "a verdict whose arm collapsed reads as a method effect here but would be `not testable` — read such "
    "rows as provisional."
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
        "| id | claim | data | metric (unit; direction) | our effect [simultaneous interval] | paper's effect | "
        "δ | ratio | power at the paper's effect | stability | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in df[df["role"] == "primary"].to_dict("records"):
        pe = (
            f"{fmt_num(r['paper_effect'])} ({_cell(r['paper_source']).split(',')[0]})"
            if np.isfinite(_f(r["paper_effect"]))
            else "— (no number in the paper's text)"
        )
        out.append(
            f"| {r['id']} | {_cell(r['statement'])} | {r['dataset']} | {_cell(r['metric'])} "
            f"({_cell(r['unit'])}; {_cell(r['direction'])}) | {_cell(effect_cell(r))} | {pe} | {fmt_num(r['delta'])} | "
            f"{fmt_num(r['ratio'], 2) if np.isfinite(_f(r['ratio'])) else '—'} | {power_cell(r)} | "
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
            "| id | statement | data | metric | arms | effect [95% interval] | verdict |",
            "|---|---|---|---|---|---|---|",
        ]
        for r in sub.to_dict("records"):
            out.append(
                f"| {r['id']} | {_cell(r['statement'])} | {r['dataset'] or '—'} | {_cell(r['metric'])} | "
                f"{_cell(r['arms'])} | {_cell(effect_cell(r))} | {r['verdict']} |"
            )
    return "\n".join(out) + "\n\n" + legend_markdown()


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
    "reversed",
    "ruled out",
    "inconclusive (underpowered)",
    "inconclusive",
    "not testable",
    STALE,
)


def summary_counts(df: pd.DataFrame) -> pd.DataFrame:
    """Primary rows per data set (rows) and category (columns, :data:`SUMMARY_CATEGORIES`): the verdicts,
    with ``inconclusive`` split into *underpowered* (the underpowered flag) and the rest; a stale row
    (:func:`is_stale`) counts as *stale*, whatever its earlier verdict."""
    prim = df[df["role"] == "primary"]
    under = prim["underpowered"].map(_flag).eq(True) if "underpowered" in prim else False
    cat = prim["verdict"].where(~((prim["verdict"] == "inconclusive") & under), SUMMARY_CATEGORIES[3])
    cat = cat.where(~_stale_mask(prim), STALE)
    t = pd.crosstab(prim["dataset"], cat).reindex(columns=list(SUMMARY_CATEGORIES), fill_value=0)
    return t.reindex(list(dict.fromkeys(prim["dataset"]))).fillna(0).astype(int)


def caveat(df: pd.DataFrame) -> str:
    """The one caveat sentence of the plain summary, chosen by a stated rule: of three shares over the
    primary rows of all data sets — (a) reproduced rows flagged *larger than the paper*, among reproduced
    rows; (b) *fragile* rows, among decided rows (reproduced, reversed, ruled out); (c) *underpowered* rows
    (below 80% power at the paper's effect), among the primary rows with a paper effect — the largest one
    (ties in the order a, b, c) is stated, stale rows (:func:`is_stale`) left out. Empty when all three are 0."""
    prim = df[df["role"] == "primary"]
    prim = prim[~_stale_mask(prim)]
    flag = {
        c: (prim[c].map(_flag).eq(True) if c in prim else pd.Series(False, index=prim.index))
        for c in ("larger_than_paper", "fragile", "underpowered")
    }
    planned = prim["power"].map(_f).map(np.isfinite) if "power" in prim else pd.Series(False, index=prim.index)
    rep = prim["verdict"] == "reproduced"
    decided = prim["verdict"].isin(["reproduced", "reversed", "ruled out"])
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
            int(flag["underpowered"].sum()),
            int(planned.sum()),
            f"primary rows with a paper effect had less than {POWER:.0%} power to reproduce it with their seeds "
            "(`power.md` gives the seeds each would need)",
        ),
    ]
    k, n, text = max(cands, key=lambda c: c[0] / c[1] if c[1] else 0.0)
    if not n or not k:
        return ""
    return f"Caveat: {k} of {n} {text}."


def plain_summary(df: pd.DataFrame) -> str:
    """The README's plain summary: per data set, how many primary rows are reproduced / reversed / ruled out /
    inconclusive and underpowered / inconclusive (not testable and stale rows when there are any), then the
    :func:`caveat` sentence and the rule that chose it. Empty without primary rows."""
    if not len(df) or not (df["role"] == "primary").any():
        return ""
    counts = summary_counts(df)
    lines = [
        f"- **{d}** ({int(row.sum())} claims): "
        + ", ".join(f"{int(row[c])} {c}" for i, c in enumerate(SUMMARY_CATEGORIES) if i < 5 or row[c])
        for d, row in counts.iterrows()
    ]
    cav = caveat(df)
    rule = (
        " _(The caveat is the largest of three shares: reproduced effects more than "
        f"{LARGER_THAN_PAPER:g}× the paper's, fragile decided verdicts, underpowered rows — "
        "`reproduce.protocol.ledger_io.caveat`.)_"
    )
    return "**In short.**\n\n" + "\n".join(lines) + ("\n\n" + cav + rule if cav else "") + "\n"


def power_markdown(df: pd.DataFrame) -> str:
    """``power.md``: every primary direction row with a paper effect — its measured seed sd and test-set sd,
    its power at 1× the paper's effect with the seeds it has, and the seeds that would give POWER (cap
    SEED_CAP), or why no seed count does (rules in :mod:`reproduce.protocol.ledger`)."""
    prim = df[(df["role"] == "primary") & df["power"].map(_f).map(np.isfinite)] if len(df) else df
    lines = [
        "# Power at the papers' effects",
        "",
        f"For each primary row with a paper effect: the chance that its interval (its family's, at 1 − {ALPHA:g}/m) "
        f"lies above 0 if the paper's effect were true, at the row's measured per-seed sd and test-set "
        f"variance, with the seeds it has; and the fewest seeds that give {POWER:.0%} (cap {SEED_CAP}). The test-set "
        "variance does not shrink with seeds: where it alone is too large, no seed count reaches "
        f"{POWER:.0%} and more test queries would be needed. The sd of 5 seeds is uncertain (its 95% interval spans "
        "about 0.6–2.9× the estimate): read the seed counts as a plan. Rule and formulas: "
        "`reproduce/protocol/ledger.py`.",
        "",
        "| id | data | metric | paper's effect | seeds | sd per seed | test-set sd | power now | seeds for "
        f"{POWER:.0%} | verdict |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in prim.to_dict("records"):
        n = _f(r["seeds_for_power"])
        qv = _f(r["query_var"])
        need = str(int(n)) if np.isfinite(n) else _cell(r.get("power_note"))
        lines.append(
            f"| {r['id']} | {r['dataset']} | {_cell(r['metric'])} | {fmt_num(r['paper_effect'])} | {r['n_seeds']} | "
            f"{fmt_num(r['seed_sd'])} | {fmt_num(math.sqrt(qv)) if np.isfinite(qv) and qv > 0 else '0'} | "
            f"{100 * _f(r['power']):.0f}% | {need} | {verdict_cell(r)} |"
        )
    return "\n".join(lines) + "\n"


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


def update_readme(
    df: pd.DataFrame, profile: str, readme: Path = ROOT / "README.md", by: str = "`make reproduce`"
) -> None:
    """Replace the summary table between the ledger markers of README.md (primary rows only; stale rows
    without their earlier verdicts, :func:`primary_table`); ``by``: what generated it."""
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
        f"{by} (library source hash {source_hash()}). One line per claim: its ONE primary row per "
        f"data set (declared in `reproduce/data/claims.toml`), our effect with its simultaneous interval and the "
        f"verdict by the rule in `reproduce/protocol/ledger.py` ({RULE.rstrip('.')}), and the ratio of our effect to "
        f"the paper's. Secondary rows, the papers' effects, power, stability and "
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
    ``estimate``: the plan's estimated against its actual wall time (``reproduce.protocol.progress.finish``)."""
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


REDECIDED_BY = "`python -m reproduce.protocol.ledger_io`, from the claim files of the notebooks' last executions"


def previous_health(claims_csv: Path) -> dict | None:
    """The collapse information a re-decision can reuse from the ledger it replaces: ``{}`` when that ledger
    evaluated training health and found no collapsed arm (no ``not testable`` row), None when it did not
    evaluate it (or there is none). A ledger with ``not testable`` rows is refused: their reasons are
    the run cache's, so only ``make reproduce`` can redo them."""
    if not claims_csv.exists():
        return None
    old = pd.read_csv(claims_csv)
    if "health_evaluated" not in old or not old["health_evaluated"].map(_flag).eq(True).all():
        return None
    if old["verdict"].eq("not testable").any():
        raise ValueError(
            f"{claims_csv}: has 'not testable' rows whose collapsed arms only the run cache knows; "
            "re-decide it with `make reproduce` (which reads the cache), not from the claim files alone"
        )
    return {}


def main(argv=None) -> int:
    """Re-decide the ledger (``claims.csv``, ``claims.md``, ``power.md``) and the README's ledger block from
    the claim files on disk under the current rule: nothing is trained or executed, the effects and
    intervals are the notebooks' last ones, and the README says so."""
    ap = argparse.ArgumentParser(prog="python -m reproduce.protocol.ledger_io", description=main.__doc__)
    ap.add_argument("--profile", default="default", help="whose results folder (default: %(default)s)")
    args = ap.parse_args(argv)
    base = ROOT / get_profile(args.profile).results_dir
    try:
        collapsed = previous_health(base / "claims.csv")
    except ValueError as e:
        print(f"{ap.prog}: error: {e}", file=sys.stderr)
        return 2
    table = collect(base, collapsed=collapsed)
    if args.profile != "smoke":
        update_readme(table, args.profile, by=REDECIDED_BY)
    print(summary_counts(table).to_string())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
