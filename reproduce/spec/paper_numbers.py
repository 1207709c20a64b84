"""The papers' published numbers, read from data files — never typed into a notebook.

One CSV per paper, ``reproduce/data/paper_tables/<paper>.csv``, long format, one number per line::

    table,source,row,column,value
    table8,"paper: Flickr30K 1K test, VSE++ ResNet",Triplet-HN,i2t_r1,48.9

* ``table`` — a short name the notebook asks for (``table8``, ``fig5`` …);
* ``source`` — where the number comes from: the paper's table/figure, data set and backbone, as the
  reader should see it beside ours;
* ``row`` / ``column`` — the arm (our arm name where one exists) and the metric key of
  :mod:`reproduce.spec.labels` (so the paper's rows line up with ours);
* ``value`` — the number as printed (empty: the paper gives none).

:func:`table` returns ``{source: DataFrame(rows × columns)}`` in file order, ready for
:func:`reproduce.present.report.side_by_side`.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

FOLDER = Path(__file__).resolve().parents[1] / "data" / "paper_tables"
COLUMNS = ["table", "source", "row", "column", "value"]


def _read(paper: str) -> pd.DataFrame:
    path = FOLDER / f"{paper}.csv"
    if not path.is_file():
        raise FileNotFoundError(f"no paper numbers for {paper!r}: expected {path}")
    df = pd.read_csv(path, dtype={"table": str, "source": str, "row": str, "column": str})
    if list(df.columns) != COLUMNS:
        raise ValueError(f"{path}: columns {list(df.columns)}, expected {COLUMNS}")
    dup = df[df.duplicated(["table", "source", "row", "column"], keep=False)]
    if len(dup):
        r = dup.iloc[0]
        raise ValueError(
            f"{path}, line {int(dup.index[0]) + 2}: {r['table']}/{r['source']}/{r['row']}/{r['column']} appears twice"
        )
    bad = pd.to_numeric(df["value"], errors="coerce").isna() & df["value"].notna()
    if bad.any():
        i = int(bad.idxmax())
        raise ValueError(f"{path}, line {i + 2}: value {df.loc[i, 'value']!r} is not a number")
    return df


def tables(paper: str) -> list[str]:
    """The table names of ``paper``'s file, in file order."""
    return list(dict.fromkeys(_read(paper)["table"]))


def table(paper: str, name: str) -> dict[str, pd.DataFrame]:
    """``{source: rows × columns}`` of the paper's table ``name`` (rows and columns in file order)."""
    df = _read(paper)
    sub = df[df["table"] == name]
    if sub.empty:
        raise KeyError(f"paper {paper!r} has no table {name!r}; it has {tables(paper)}")
    out = {}
    for source, g in sub.groupby("source", sort=False):
        wide = g.pivot(index="row", columns="column", values="value")
        wide = wide.reindex(index=list(dict.fromkeys(g["row"])), columns=list(dict.fromkeys(g["column"])))
        wide.index.name, wide.columns.name = "arm", None
        out[source] = wide.astype(float)
    return out
