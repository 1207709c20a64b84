"""The papers' size beside ours: the primary rows that the ``paper`` profile decides again at the size the papers
report (GRU-1024, a 1024-d joint space, on Flickr8k), read from that profile's own ledger.

The study's verdicts are measured at GRU-128; whether a verdict holds at the papers' size is the first question a
retrieval reader asks. The ``paper`` profile trains the main comparison's arms (``--papers overview``) at that size
on Flickr8k — on a GPU (``scripts/gpu_study.sh``: its runs come back as an archive) — and its notebooks write a
ledger of their own under the profile's results folder. :func:`papers_size` puts, on each primary row of
:data:`SCALE_ROWS`, the verdict and interval of the same claim at the papers' size where that ledger has it, and
says that it is not yet measured where it does not; the default's verdict stays the row's verdict.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import get_profile

#: the primary rows the papers' size decides again (the main comparison's claims)
SCALE_ROWS = ("B1", "B2", "U1", "N1", "S2", "X1")
#: the data set the ``paper`` profile trains
SCALE_DATA = "flickr8k"
NOT_MEASURED = "not yet measured"
NOT_PLANNED = "Flickr8k only"  # the paper profile trains no other data set
_NEED = ("id", "role", "dataset", "verdict", "effect", "ci_low", "ci_high")


def paper_ledger_path(root: Path = ROOT) -> Path:
    """Where the ``paper`` profile's ledger is written (its results folder's ``claims.csv``)."""
    return Path(root) / get_profile("paper").results_dir / "claims.csv"


def read_paper_ledger(path: Path | None = None) -> pd.DataFrame | None:
    """The papers'-size ledger at ``path`` (default :func:`paper_ledger_path`), or ``None`` when there is none;
    ``ValueError`` naming the file and the columns it lacks when it is not a ledger."""
    path = paper_ledger_path() if path is None else Path(path)
    if not path.is_file():
        return None
    df = pd.read_csv(path)
    missing = [c for c in _NEED if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not a claims ledger, columns {missing} missing (expected reproduce's claims.csv)")
    return df


def papers_size(df: pd.DataFrame, paper: pd.DataFrame | None) -> list[dict | str | None]:
    """Per row of the ledger ``df``: ``None`` for a row the papers' size does not decide again; else the papers'-size
    primary row of the same claim and data set (a dict with its verdict, effect and interval), or why there is none
    (:data:`NOT_MEASURED`, :data:`NOT_PLANNED`)."""
    primary = {}
    if paper is not None and len(paper):
        for r in paper[paper["role"] == "primary"].to_dict("records"):
            primary[(r["id"], r["dataset"])] = r
    out: list[dict | str | None] = []
    for r in df.to_dict("records"):
        if r.get("role") != "primary" or r.get("id") not in SCALE_ROWS:
            out.append(None)
        elif r.get("dataset") != SCALE_DATA:
            out.append(NOT_PLANNED)
        else:
            out.append(primary.get((r["id"], r["dataset"]), NOT_MEASURED))
    return out
