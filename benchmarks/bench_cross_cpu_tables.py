"""How far the study's tables move when its committed runs are drawn on another CPU: every CSV table of two
results folders, each rebuilt by ``make reproduce`` from the same committed runs (``--runs-from committed``), one on
each CPU kind, compared column by column.

The runs are the same bits on both sides; what differs is what the notebooks compute from the data on the machine
that executes them (caption embeddings, relevance, image features: float32 kernels that differ in their last bits
between instruction sets). A second CPU kind on one machine is torch's DEFAULT kernels instead of its AVX2/AVX-512
ones (``ATEN_CPU_CAPABILITY=default``; the project's caches name it as another CPU).

    python benchmarks/bench_cross_cpu_tables.py RESULTS_A RESULTS_B [--label-a A --label-b B] [--out PREFIX]

writes ``PREFIX.md`` and ``PREFIX.csv`` (default ``results/benchmarks/cross_cpu_tables``): per table, the largest
absolute change of any numeric cell, where, and how many cells moved; the ledger's verdicts side by side.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

import pandas as pd

from reproduce.protocol import ledger_compare

ROOT = Path(__file__).resolve().parents[1]
SKIP = {"manifest.json"}
# columns that are bookkeeping, not results: a timing differs run to run on any CPU
VOLATILE = ("time", "seconds", "_s", "ms", "finished", "started", "elapsed")


def tables(folder: Path) -> dict[str, Path]:
    """``{relative path: file}`` of every CSV table under ``folder`` (run archives and the site left out)."""
    out = {}
    for p in sorted(folder.rglob("*.csv")):
        rel = p.relative_to(folder)
        if rel.parts[0] in ("runs", "site", "smoke", "pilot", "benchmarks"):
            continue
        out[str(rel)] = p
    return out


def _text(col: pd.Series) -> pd.Series:
    """A column as text, a missing cell as the empty string."""
    return col.astype(object).where(col.notna(), "").astype(str)


def compare_table(a: pd.DataFrame, b: pd.DataFrame) -> dict:
    """The largest absolute change of a numeric cell between two versions of one table (same shape expected), the
    column and row label where it is, the number of numeric cells and of those that differ, and whether the
    non-numeric cells are equal."""
    if a.shape != b.shape or list(a.columns) != list(b.columns):
        return {"comparable": False, "why": f"shape {a.shape} vs {b.shape}"}
    worst, where, cells, moved, text_equal = 0.0, "", 0, 0, True
    label = a.columns[0]
    for col in a.columns:
        va, vb = pd.to_numeric(a[col], errors="coerce"), pd.to_numeric(b[col], errors="coerce")
        numeric = va.notna() | vb.notna()
        if not numeric.any():
            text_equal &= _text(a[col]).equals(_text(b[col]))
            continue
        if any(v in str(col).lower() for v in VOLATILE):
            continue
        for i in range(len(a)):
            x, y = va.iloc[i], vb.iloc[i]
            if isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y):
                continue
            cells += 1
            d = abs(float(y) - float(x)) if not (pd.isna(x) or pd.isna(y)) else math.inf
            if d > 0:
                moved += 1
            if d > worst:
                worst, where = d, f"{col} @ {a[label].iloc[i]}"
    return {"comparable": True, "max_abs_change": worst, "where": where, "cells": cells, "moved": moved,
            "text_equal": bool(text_equal)}  # fmt: skip


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("a", type=Path)
    ap.add_argument("b", type=Path)
    ap.add_argument("--label-a", default="A")
    ap.add_argument("--label-b", default="B")
    ap.add_argument("--out", type=Path, default=ROOT / "results" / "benchmarks" / "cross_cpu_tables")
    args = ap.parse_args(argv)
    ta, tb = tables(args.a), tables(args.b)
    rows = []
    for name in sorted(set(ta) | set(tb)):
        if name not in ta or name not in tb:
            rows.append({"table": name, "comparable": False, "why": "in one folder only"})
            continue
        rows.append({"table": name, **compare_table(pd.read_csv(ta[name]), pd.read_csv(tb[name]))})
    df = pd.DataFrame(rows)
    df.to_csv(args.out.with_suffix(".csv"), index=False)
    change = ledger_compare.compare(pd.read_csv(args.a / "claims.csv"), pd.read_csv(args.b / "claims.csv"))
    ok = df[df["comparable"] == True]  # noqa: E712 (a column of bools and NaN)
    flipped = ", ".join(f"{r}: {a} → {b}" for r, a, b in change.verdicts)
    lines = [
        f"# The study's tables drawn on two CPU kinds: {args.label_a} vs {args.label_b}",
        "",
        f"Every CSV table of two results folders ({args.label_a}; {args.label_b}), each rebuilt by `make reproduce` "
        "from the same "
        "committed runs (`benchmarks/bench_cross_cpu_tables.py`). Ledger rows compared: "
        f"{change.rows}; verdicts that differ: {len(change.verdicts)}"
        + (f" ({flipped})" if flipped else "")
        + f". Tables: {len(df)}; with a moved cell: {int((ok['moved'] > 0).sum())}; whose text differs: "
        f"{int((ok['text_equal'] == False).sum())}; not comparable: {int((df['comparable'] == False).sum())}.",  # noqa: E712
        "",
        "| table | numeric cells | moved | largest change (its own units) | where |",
        "|---|---|---|---|---|",
    ]
    for r in df.sort_values("table").itertuples():
        if r.comparable is True:
            lines.append(f"| {r.table} | {r.cells} | {r.moved} | {r.max_abs_change:.3g} | {r.where} |")
        else:
            lines.append(f"| {r.table} | — | — | not comparable: {r.why} | |")
    args.out.with_suffix(".md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines[:4]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
