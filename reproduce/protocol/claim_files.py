"""The notebooks' claim files: what a notebook writes and the ledger reads.

A notebook writes its claim rows to ``<results>/<paper>/claims_<data>.csv`` (``<results>/flickr8k/<paper>/…`` for
Flickr8k) with :func:`write_claims`: :class:`ClaimResult` objects (per-seed effects and the preliminary
:func:`verdict` beside them) and/or rows of :func:`reproduce.protocol.claim_rows.primary_row`, in the columns
:data:`NOTEBOOK_COLUMNS` and those of :data:`EXTRA_NOTEBOOK_COLUMNS` a row has. The ledger
(:mod:`reproduce.protocol.ledger_rows`) finds them (:func:`claim_files`), reads their rows (:func:`_read_notebook_rows`:
a stale file's rows marked, :func:`is_stale`) and parses their cells (:func:`as_float`, :func:`row_estimate`,
:func:`_seed_list`); the verdict itself is the ledger's (:func:`reproduce.protocol.ledger.decide`).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

from coherent_itr.io import atomic_write_text

from reproduce.protocol.ledger import KINDS, Estimate, estimate, estimate_from_interval


# --- the notebooks' row ---------------------------------------------------------------------------
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
    """Preliminary per-row verdict a notebook writes beside its effect (seed-only 95% interval, no family, no
    δ: direction alone). The ledger's verdict is :func:`reproduce.protocol.ledger.decide` — see its module doc."""
    if kind not in KINDS:
        raise ValueError(f"claim kind {kind!r} unknown; choose one of {KINDS}")
    if kind == "identity":
        if tolerance is None:
            raise ValueError("an identity claim needs a tolerance")
        dev = np.abs(np.asarray(effects, dtype=float))
        worst = float(dev.max()) if dev.size else math.nan
        ok = dev.size > 0 and np.isfinite(worst) and worst <= tolerance
        return ("reproduced" if ok else "ruled out"), worst, math.nan, math.nan
    m, lo, hi = mean_ci(effects)
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return "inconclusive", m, lo, hi
    if kind == "direction":
        if lo > 0:
            return "reproduced", m, lo, hi
        if hi < 0:
            return "reversed", m, lo, hi
        return "inconclusive", m, lo, hi
    if tolerance is None or tolerance <= 0:
        raise ValueError("an equivalence claim needs a positive tolerance")
    if -tolerance < lo and hi < tolerance:
        return "reproduced", m, lo, hi
    if lo >= tolerance or hi <= -tolerance:
        return "ruled out", m, lo, hi
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
    failures: dict = field(default_factory=dict)  # the cells seeds, failed_seeds, failures (claim_rows.failure_cells)

    def row(self) -> dict:
        v, m, lo, hi = verdict(self.kind, self.effects, self.tolerance)
        d = asdict(self)
        eff = d.pop("effects")
        cells = d.pop("failures")
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
            **cells,
        }


# --- the files --------------------------------------------------------------------------------------
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
    """Write a notebook's claim rows and return them: :class:`ClaimResult` objects (per-seed effects
    included) and/or rows of :func:`reproduce.protocol.claim_rows.primary_row` (dicts, role "primary").
    The verdict column is the notebook's preliminary one; the ledger's verdict is decided in
    :func:`reproduce.driver.ledger_files.collect`."""
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


def _seed_list(row: dict, key: str) -> tuple[int, ...] | None:
    """A claim file's ';'-separated seed numbers (``seeds``, ``failed_seeds``): None where the cell is missing (a file
    written before the failure rate), () where it is empty."""
    if key not in row:
        return None
    cell = row.get(key)
    if cell is None or (isinstance(cell, float) and not np.isfinite(cell)) or str(cell).strip() == "":
        return ()
    return tuple(_semicolon_list(row, key, lambda x: int(float(x)), "seeds"))


def is_stale(r) -> bool:
    """Whether the row comes from a claim file no execution with the current inputs wrote (its note starts
    ``STALE``, :func:`_read_notebook_rows`): an earlier run's numbers."""
    return str(r.get("note") or "").startswith(STALE_PREFIX)
