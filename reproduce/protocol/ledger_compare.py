"""A ledger against another one (the committed ``results/claims.csv``): are the verdicts the same, and how far did
each effect move, in its metric's own units.

``make reproduce`` rebuilds every number from the committed runs, but what the local machine computes itself (caption
embeddings, relevance, image features) may differ from the committed files in its last bits; :func:`compare` says
whether that moved a verdict and by how much the effects moved, and :func:`summary_lines` says it in a few lines.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

#: the columns that name one row of the ledger (a claim's primary or secondary contrast on one data set)
ROW = ("id", "dataset", "role", "metric", "arms", "statement")


@dataclass
class LedgerChange:
    """What changed from one ledger to another: ``verdicts`` ``[(row name, before, after)]``, ``largest``
    ``{unit: (|Δ effect|, row name, before, after)}`` over the rows of both, ``rows`` the rows compared, ``added`` /
    ``removed`` the names of rows in only one of them."""

    rows: int = 0
    verdicts: list = field(default_factory=list)
    largest: dict = field(default_factory=dict)
    added: list = field(default_factory=list)
    removed: list = field(default_factory=list)

    @property
    def same_verdicts(self) -> bool:
        return not (self.verdicts or self.added or self.removed)

    def as_dict(self) -> dict:
        return {
            "rows_compared": self.rows,
            "verdicts_equal": self.same_verdicts,
            "verdicts_changed": [{"row": r, "before": a, "after": b} for r, a, b in self.verdicts],
            "largest_effect_change": {
                u: {"abs_change": d, "row": r, "before": a, "after": b} for u, (d, r, a, b) in self.largest.items()
            },
            "rows_added": self.added,
            "rows_removed": self.removed,
        }


def _name(row) -> str:
    extra = "" if row["role"] == "primary" else f" ({row['role']}: {row['metric']}, {row['arms']})"
    return f"{row['id']} {row['dataset']}{extra}"


def _keyed(df: pd.DataFrame) -> pd.DataFrame:
    df = df.copy()
    for c in ROW:
        df[c] = df[c].fillna("").astype(str) if c in df else ""
    df = df.drop_duplicates(list(ROW), keep="first")
    return df.set_index(list(ROW))


def compare(before: pd.DataFrame, after: pd.DataFrame) -> LedgerChange:
    """:class:`LedgerChange` from ``before`` to ``after`` (two ledgers as ``results/claims.csv`` holds them)."""
    a, b = _keyed(before), _keyed(after)
    out = LedgerChange()
    common = a.index.intersection(b.index, sort=False)
    out.rows = len(common)
    out.added = [_name(dict(zip(ROW, k))) for k in b.index.difference(a.index, sort=False)]
    out.removed = [_name(dict(zip(ROW, k))) for k in a.index.difference(b.index, sort=False)]
    for k in common:
        ra, rb = a.loc[k], b.loc[k]
        name = _name(dict(zip(ROW, k)))
        va, vb = str(ra.get("verdict", "")), str(rb.get("verdict", ""))
        if va != vb:
            out.verdicts.append((name, va, vb))
        ea, eb = pd.to_numeric(ra.get("effect"), errors="coerce"), pd.to_numeric(rb.get("effect"), errors="coerce")
        if not (math.isfinite(ea) and math.isfinite(eb)):
            continue
        unit = next((str(u) for u in (rb.get("unit"), ra.get("unit")) if isinstance(u, str) and u), "unitless")
        d = abs(float(eb) - float(ea))
        if unit not in out.largest or d > out.largest[unit][0]:
            out.largest[unit] = (d, name, float(ea), float(eb))
    return out


def summary_lines(change: LedgerChange, what: str = "the committed ledger", show: int = 5) -> list[str]:
    """A few lines for a person: the verdicts, then the largest effect change of each unit (largest first)."""
    if change.same_verdicts:
        head = f"every verdict equal to {what} ({change.rows} rows)"
    else:
        head = (
            f"{len(change.verdicts)} verdict(s) differ from {what} ({change.rows} rows compared"
            + (f"; {len(change.added)} row(s) new" if change.added else "")
            + (f"; {len(change.removed)} row(s) gone" if change.removed else "")
            + ")"
        )
    lines = [f"ledger: {head}"]
    lines += [f"ledger:   {r}: {a} → {b}" for r, a, b in change.verdicts[:show]]
    lines += [f"ledger:   new row {r}" for r in change.added[:show]]
    lines += [f"ledger:   row gone {r}" for r in change.removed[:show]]
    moved = sorted(
        ((u, v) for u, v in change.largest.items() if v[0] > 0), key=lambda kv: -kv[1][0] / (abs(kv[1][2]) + 1e-12)
    )
    same = len(change.largest) - len(moved)
    if moved:
        parts = [f"{unit} {d:.3g} ({r}: {a:.4g} → {b:.4g})" for unit, (d, r, a, b) in moved[:show]]
        rest = len(moved) - len(parts)
        lines.append(
            "ledger: largest effect change, in its metric's units (largest relative change first): "
            + "; ".join(parts)
            + (f"; {rest} more unit(s) moved" if rest else "")
            + (f"; {same} unit(s) unchanged" if same else "")
        )
    elif change.largest:
        lines.append(f"ledger: every effect unchanged, in each of its {same} units")
    return lines
