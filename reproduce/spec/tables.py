"""Markdown tables a person can read: the one cell escape (:func:`md_cell`), short headers with a legend
(:func:`short_header`) and tables split at :data:`MAX_MD_COLUMNS` columns (:func:`markdown_table`).

Pure formatting, no knowledge of the study: the notebooks' tables (:mod:`reproduce.present.report`), the label map
(:mod:`reproduce.spec.labels`), the tuning summary and the claims ledger all write their Markdown through it.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import get_profile

MAX_MD_COLUMNS = 9  # columns of a Markdown table a person reads (row labels included); the CSV keeps them all
SHORT_HEADER = 18  # characters: a longer header is shortened in the table and spelled out in the legend below it
_SHORTER = [("image→text", "i→t"), ("text→image", "t→i"), ("Sentence-BERT", "SBERT"), ("both directions", "both dirs")]


def md_cell(value) -> str:
    """``value`` as one Markdown table cell: ``|`` escaped (``\\|``), line breaks as spaces, a missing value
    (None, NaN) as "–". The one escape every Markdown table of the study goes through."""
    if value is None or (isinstance(value, (float, np.floating)) and np.isnan(value)):
        return "–"
    text = " ".join(str(value).split())
    return text.replace("\\|", "|").replace("|", "\\|")


def short_header(name) -> str:
    """A table header of at most :data:`SHORT_HEADER` characters: units in brackets and the ↑/↓ marks dropped,
    directions and Sentence-BERT abbreviated, then a parenthesis dropped, then cut with "…"."""
    text = " ".join(str(name).split())
    if len(text) <= SHORT_HEADER:
        return text
    text = re.sub(r"\s*\[[^\]]*\]", "", text).replace("↑", "").replace("↓", "").strip()
    for long, short in _SHORTER:
        text = text.replace(long, short)
    if len(text) > SHORT_HEADER:
        text = re.sub(r"\s*\([^)]*\)", "", text).strip() or text
    if len(text) > SHORT_HEADER:
        text = text[: SHORT_HEADER - 1].rstrip() + "…"
    return text


def markdown_table(df: pd.DataFrame, index: bool = True, max_columns: int = MAX_MD_COLUMNS) -> str:
    """``df`` as Markdown a person can read: every cell through :func:`md_cell`; headers longer than
    :data:`SHORT_HEADER` shortened (:func:`short_header`, made unique) and spelled out in a legend below the
    table; more than ``max_columns`` columns (row labels included) split into several tables that repeat the
    row labels. MultiIndex rows become one column per level, MultiIndex columns are joined with " · "."""
    d = df.copy()
    if isinstance(d.columns, pd.MultiIndex):
        d.columns = [" · ".join(str(x) for x in c if str(x)) for c in d.columns]
    if index:
        names = [n if n is not None else "" for n in d.index.names]
        keys = pd.DataFrame(
            [list(i) if isinstance(i, tuple) else [i] for i in d.index], columns=range(len(names))
        ).astype(object)
        keys.columns = names
        d = d.reset_index(drop=True)
        lead = list(keys.columns)
        parts_src = [(f"_k{i}", keys.iloc[:, i]) for i in range(keys.shape[1])]
    else:
        lead, parts_src = [], []
    headers = {f"_k{i}": str(n) for i, n in enumerate(lead)}
    data_cols = [f"_c{i}" for i in range(d.shape[1])]
    headers |= {k: str(c) for k, c in zip(data_cols, d.columns)}
    cells = {k: list(v) for k, v in parts_src} | {k: list(d.iloc[:, i]) for i, k in enumerate(data_cols)}
    shown, legend, used = {}, [], set()
    for k, h in headers.items():
        s = short_header(h)
        base, n = s, 2
        while s in used:
            s, n = f"{base} ({n})", n + 1
        used.add(s)
        shown[k] = s
        if s != " ".join(h.split()):
            legend.append(f"* **{md_cell(s)}**: {md_cell(h)}")
    keys_cols = [f"_k{i}" for i in range(len(lead))]
    per_part = max(1, max_columns - len(keys_cols))
    chunks = [data_cols[i : i + per_part] for i in range(0, len(data_cols), per_part)] or [[]]
    tables = []
    for chunk in chunks:
        cols = keys_cols + chunk
        lines = ["| " + " | ".join(md_cell(shown[c]) or " " for c in cols) + " |", "|" + "---|" * len(cols)]
        for r in range(len(d)):
            lines.append("| " + " | ".join(md_cell(cells[c][r]) for c in cols) + " |")
        tables.append("\n".join(lines))
    out = "\n\n".join(tables)
    if legend:
        out += "\n\nColumns:\n\n" + "\n".join(legend)
    return out


def round_significant(df: pd.DataFrame, digits: int = 4) -> pd.DataFrame:
    """A copy of ``df`` whose float cells are rounded to ``digits`` significant digits (for Markdown)."""

    def sig(x):
        return float(f"{x:.{digits}g}") if isinstance(x, (float, np.floating)) and np.isfinite(x) else x

    out = df.copy()
    for c in out.columns:
        if pd.api.types.is_float_dtype(out[c]) or out[c].dtype == object:
            out[c] = out[c].map(sig)
    return out


SMOKE_BANNER = (
    "> **Pipeline check at toy size (profile `smoke`), not evidence**: one seed, tiny models and data. Its "
    "numbers and verdicts say only that the pipeline runs end to end; many arms do not learn at this size."
)


def smoke_banner(results_dir) -> str:
    """:data:`SMOKE_BANNER` and a blank line for a file under the ``smoke`` profile's results folder, else ""."""
    smoke = (ROOT / get_profile("smoke").results_dir).resolve()
    where = Path(results_dir).resolve()
    return SMOKE_BANNER + "\n\n" if where == smoke or smoke in where.parents else ""


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
