"""The baselines of the δ sensitivity column: for each RSUM claim with a paper effect, the arm its effect is
measured from (the comparator arm B of the primary contrast), its RSUM in the paper's table and in ours.

δ is half the paper's effect in absolute RSUM points, carried from the papers' models (RSUM 390–480 on
Flickr30K) to ours (≈ 220 on Flickr8k, ≈ 480 on the synthetic set). The sensitivity column reads the paper's
effect as a share of its baseline instead: δ_scaled = ½ × paper effect × our baseline ÷ the paper's baseline
(:func:`reproduce.protocol.ledger.scaled_delta`). Only RSUM claims have a baseline on a common scale: a
Kendall τ, a CS@K or an mAP@R against another relevance source is not a share of a model's score, and the
claims without a paper effect have no δ to scale; their sensitivity cell says "—" with :func:`why_none`.

The paper's baseline is read from ``reproduce/data/paper_tables/<file>.csv`` (the mean of ``paper_rows`` of
``paper_source``, the numbers the paper's effect is computed from); ours from the notebook's table of arm means
``<results>/[<data>/]<folder>/<table>_<data>.csv`` (the mean RSUM of ``our_rows`` over the arm's seeds; a
table with a ``source`` column or index: the rows of the first source that starts with ``ours`` and contains
``our_source``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from reproduce.spec import claims as registry
from reproduce.spec.paper_numbers import _read as read_paper_numbers


@dataclass(frozen=True)
class Baseline:
    """Where a claim's baseline RSUM is, in the paper's table and in ours (module doc)."""

    folder: str  # the paper's file in paper_tables/ and its notebook's folder under results/
    paper_table: str
    paper_source: str
    paper_rows: tuple[str, ...]
    our_table: str
    our_rows: tuple[str, ...]
    column: str = "rsum"
    our_source: str = ""
    label: str = ""  # what the baseline is, where it is not one arm

    @property
    def name(self) -> str:
        return self.label or self.our_rows[0]


_S3_PAPER = tuple(f"τ={t} HN keep={k}" for t in (3, 10) for k in (True, False))
_S3_OURS = tuple(f"τ={t} · HN · {k}" for t in (3, 10) for k in ("triplet kept", "SAM only"))

BASELINES: dict[str, Baseline] = {
    "B1": Baseline("bcls", "table8", "paper: Table VIII, Flickr30K 1K test, VSE++ ResNet", ("Triplet-HN",), "table8",
                   ("Triplet-HN",)),
    "B2": Baseline("bcls", "table8", "paper: Table VIII, Flickr30K 1K test, VSE++ ResNet", ("Triplet-SN",), "table8",
                   ("Triplet-SN",)),
    "B3": Baseline("bcls", "table8", "paper: Table VIII, Flickr30K 1K test, VSE++ ResNet", ("Kendall SW-HS alone",),
                   "table8", ("Kendall SW-HS alone",)),
    "S1": Baseline("sam", "table2", "paper Table 2: Flickr30K, CVSE", ("10% data, Triplet-HN",), "table2",
                   ("10% data, Triplet-HN",)),
    "S2": Baseline("sam", "table3", "paper Table 3: Flickr30K, CVSE", ("100% data, Triplet-HN",), "table3",
                   ("100% data, Triplet-HN",)),
    "S3": Baseline("sam", "table45", "paper Tables 4 and 5: Flickr30K, CVSE", _S3_PAPER, "table45", _S3_OURS,
                   our_source="SAM as written",
                   label="HN sampling, mean of its τ × keep-triplet cells"),
    "N1": Baseline("listwise", "table5", "paper Tables V–VI: Flickr30K 1K test, VSE++ with BUTD features",
                   ("Triplet (mean)",), "table5", ("Triplet (mean)",)),
    "U1": Baseline("unified", "table1", "paper Tab. 1: Flickr30K 1K, VSE++ (BUTD)", ("Triplet-HN",), "table1",
                   ("Triplet-HN",)),
}  # fmt: skip


def paper_baseline(cid: str) -> float:
    """The paper's baseline RSUM of claim ``cid`` (mean of its declared rows); NaN without a declaration."""
    b = BASELINES.get(cid)
    if b is None:
        return math.nan
    df = read_paper_numbers(b.folder)
    sub = df[(df["table"] == b.paper_table) & (df["source"] == b.paper_source) & (df["column"] == b.column)]
    vals = sub.set_index("row")["value"].astype(float)
    missing = [r for r in b.paper_rows if r not in vals.index]
    if missing:
        raise KeyError(f"{cid}: paper_tables/{b.folder}.csv has no {b.column} of {missing} in {b.paper_source!r}")
    return float(vals[list(b.paper_rows)].mean())


def our_table_path(results_dir: Path, b: Baseline, dataset: str) -> Path | None:
    """Our table of arm means for ``dataset``: under ``<results>/<folder>/`` or ``<results>/<data>/<folder>/``."""
    name = f"{b.our_table}_{dataset}.csv"
    for p in (Path(results_dir) / b.folder / name, Path(results_dir) / dataset / b.folder / name):
        if p.is_file():
            return p
    return None


def our_baseline(results_dir: Path, cid: str, dataset: str) -> float:
    """Our baseline RSUM of claim ``cid`` on ``dataset`` from the notebook's table of arm means (module doc);
    NaN when the claim has no declaration or the table (or one of its rows) is missing."""
    b = BASELINES.get(cid)
    path = our_table_path(results_dir, b, dataset) if b is not None else None
    if path is None:
        return math.nan
    df = pd.read_csv(path)
    if "source" not in df.columns and str(df.columns[0]).startswith("Unnamed"):
        df = df.rename(columns={df.columns[0]: "source"})  # a table indexed by its source (ours and the paper's)
    if "source" in df.columns:
        ours = [s for s in dict.fromkeys(df["source"].astype(str)) if s.startswith("ours") and b.our_source in s]
        if not ours:
            return math.nan
        df = df[df["source"].astype(str) == ours[0]]
    label = next((c for c in ("arm", "cell") if c in df.columns), None)
    if label is None or b.column not in df.columns:
        return math.nan
    vals = df.set_index(label)[b.column].astype(float)
    if any(r not in vals.index for r in b.our_rows) or not vals.index.is_unique:
        return math.nan
    return float(vals[list(b.our_rows)].mean())


def why_none(cid: str) -> str:
    """Why claim ``cid`` has no scaled δ (its sensitivity cell is "—"), or "" when it has a declaration."""
    if cid in BASELINES:
        return ""
    c = registry.CLAIMS.get(cid)
    if c is None:
        return "not a claim of the registry"
    pe = c.paper_effect.get("paper_effect")
    if pe is None or not math.isfinite(float(pe)):
        return "no paper effect: no δ to scale"
    if c.primary.kind != "direction":
        return f"{c.primary.kind} claim: decided without a δ from the paper"
    if any(c.primary.metric_for(d) != "rsum" for d in registry.DATASETS):
        return "not an RSUM claim: no baseline on a common scale"
    return "no baseline declared"


def baselines(results_dir: Path, datasets) -> dict[tuple[str, str], tuple[float, float]]:
    """``{(claim id, data set): (our baseline, the paper's baseline)}`` of every declared claim."""
    return {(cid, d): (our_baseline(results_dir, cid, d), paper_baseline(cid)) for cid in BASELINES for d in datasets}
