"""The papers' size beside ours: the primary rows that the ``paper`` profile decides again at the size the papers
report (GRU-1024, a 1024-d joint space, on Flickr8k), read from that profile's own ledger.

The study's verdicts are measured at GRU-128; whether a verdict holds at the papers' size is the first question a
retrieval reader asks. The ``paper`` profile trains the main comparison's arms (``--papers overview``) at that size
on Flickr8k — on a GPU (``scripts/gpu_study.sh``: its runs come back as an archive) — and its notebooks write a
ledger of their own under the profile's results folder. :func:`papers_size` puts, on each primary row of
:data:`SCALE_ROWS`, the verdict and interval of the same claim at the papers' size where that ledger has it, and
says that it is not yet measured where it does not; the default's verdict stays the row's verdict.
:func:`papers_size_arms` reads the same profile's X1 main comparison per arm (the overview notebook's
``x1_main_flickr8k.csv``) for the default's forest plot (:func:`reproduce.protocol.main_comparison.forest_plot`).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from reproduce.spec.paths import ROOT
from reproduce.spec.profiles import PROFILES, get_profile, profile_for

#: the primary rows the papers' size decides again (the main comparison's claims)
SCALE_ROWS = ("B1", "B2", "U1", "N1", "S2", "X1")
#: the data set the ``paper`` profile trains
SCALE_DATA = "flickr8k"
NOT_MEASURED = "not yet measured"
NOT_PLANNED = "Flickr8k only"  # the paper profile trains no other data set
_NEED = ("id", "role", "dataset", "verdict", "effect", "ci_low", "ci_high")
#: the papers' size in words: the paper profile's text encoder
SCALE_MODEL = f"GRU-{PROFILES['paper'].model['text_hidden']}"
SCALE_LABEL = f"papers' size ({SCALE_MODEL})"
#: the columns of the X1 main comparison (reproduce.protocol.main_comparison.COLUMNS) a forest plot draws
_NEED_ARMS = ("n_seeds", "iqm", "iqm_low", "iqm_high", "poi", "poi_low", "poi_high")


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


def paper_main_path(root: Path = ROOT) -> Path:
    """Where the ``paper`` profile's overview notebook writes the X1 main comparison of :data:`SCALE_DATA`
    (``Page.out / "overview" / "x1_main_<data>.csv"``, :func:`reproduce.present.report.save_table`)."""
    return Path(root) / profile_for("paper", SCALE_DATA).results_dir / "overview" / f"x1_main_{SCALE_DATA}.csv"


def papers_size_arms(data: str, profile: str, arms=None, path: Path | None = None) -> pd.DataFrame | str | None:
    """The X1 main comparison at the papers' size, for the forest plot of ``profile`` on ``data``.

    ``None`` where the papers' size has nothing to add: the ``paper`` profile's own figure, or a data set the paper
    profile does not train (only :data:`SCALE_DATA`). :data:`NOT_MEASURED` where its table (``path``, default
    :func:`paper_main_path`) is absent or holds none of ``arms``. Else that table (index: arm; the columns of
    :func:`reproduce.protocol.main_comparison.main_comparison`, its interval and probability of improvement over
    its own VSE++), restricted to ``arms`` (default: every arm) in their order. ``ValueError`` naming the file and
    the columns it lacks when it is not such a table."""
    if profile == "paper" or data != SCALE_DATA:
        return None
    path = paper_main_path() if path is None else Path(path)
    if not path.is_file():
        return NOT_MEASURED
    df = pd.read_csv(path)
    missing = [c for c in ("arm", *_NEED_ARMS) if c not in df.columns]
    if missing:
        raise ValueError(f"{path}: not an X1 main comparison, columns {missing} missing (expected x1_main_*.csv)")
    df = df.set_index("arm")
    if arms is not None:
        df = df.loc[[a for a in arms if a in df.index]]
    return df if len(df) else NOT_MEASURED
