"""The rows of claims S1–S5 that 03_sam writes, the primary roles among them, and how closely our numbers
resemble the paper's (:func:`resemblance`), from the frames of :mod:`reproduce.present.analyses.sam`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from reproduce.spec import claims as registry
from reproduce.protocol import claim_rows
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses.sam import NOTE_BACKBONE, VARIANT, arm_name
from reproduce.present.analyses.sam_agreement import ARMS_100


# --- claims S1–S5 -------------------------------------------------------------------------------------------
def _row(cid, source, statement, metric, arms, effects, note="", failures=None):
    row = dict(cid=cid, source=source, statement=statement, metric=metric, arms=arms, effects=list(effects), note=note)
    return {**row, "failures": failures} if failures is not None else row


def fraction_claims(df: pd.DataFrame, metrics: list[tuple[str, str]]) -> list[dict]:
    """S1 (SAM Table 2: 10% / 25% of the data, a large gain) and S2 (Table 3: all data, a small gain): + SAM −
    Triplet-HN per seed on each ``(metric, readable name)``, for SAM as written and as the authors coded it."""
    rows = []
    for cid, fracs, size in (("S1", ("10%", "25%"), "large"), ("S2", ("100%",), "small")):
        for frac in fracs:
            for loss, who in (("sam", "SAM"), ("sam_authors", "SAM as the authors coded it")):
                for metric, mlabel in metrics:
                    a, b = arm_name(frac, loss), arm_name(frac, "triplet")
                    note = ("random subset with the run seed (authors: first P%); " if frac != "100%" else "") + (
                        NOTE_BACKBONE
                    )
                    rows.append(
                        _row(
                            cid,
                            f"Table {2 if cid == 'S1' else 3}",
                            f"With {frac} of the training data, adding {who} gives a {size} gain in {mlabel}",
                            metric,
                            f"{a} vs {b}",
                            paired_effect(df, metric, a, b),
                            note,
                        )
                    )
    return rows


def sampling_series(grid: pd.DataFrame, other: str, metric: str = "rsum", best: str = "SN") -> tuple[pd.Series, int]:
    """S3 (SAM Tables 4–5): per seed (the index, in order), the mean over the τ × keep-triplet cells of ``best`` −
    ``other`` sampling; and the number of cells. Empty when a sampling is missing."""
    if grid.empty:
        return pd.Series(dtype=float), 0
    piv = grid.pivot_table(index=["seed", "tau", "keep"], columns="sampling", values=metric)
    n_cells = piv.reset_index()[["tau", "keep"]].drop_duplicates().shape[0]
    if not {best, other} <= set(piv.columns):
        return pd.Series(dtype=float), n_cells
    return (piv[best] - piv[other]).groupby("seed").mean(), n_cells


def sampling_effects(grid: pd.DataFrame, other: str, metric: str = "rsum", best: str = "SN") -> tuple[list, int]:
    """S3 (SAM Tables 4–5): :func:`sampling_series`'s per-seed effects as a list, and the number of cells."""
    eff, n_cells = sampling_series(grid, other, metric, best)
    return eff.tolist(), n_cells


def grid_failures(grid: pd.DataFrame, samplings, seeds) -> dict | None:
    """The failure cells of a grid contrast (:func:`reproduce.protocol.claim_rows.failure_cells`): the failed seeds
    of every cell (arm) of ``grid`` with one of ``samplings``, over ``seeds``; None when ``grid`` carries no runs'
    health (a frame without ``collapsed``) or no seed."""
    seeds = [int(s) for s in seeds]
    if "collapsed" not in grid.columns or "arm" not in grid.columns or not seeds:
        return None
    arms = list(dict.fromkeys(grid.loc[grid["sampling"].isin(list(samplings)), "arm"]))
    return claim_rows.failure_cells(grid, arms, seeds) or None


def keep_effects(grid: pd.DataFrame, metric: str = "rsum") -> list:
    """S3 (SAM Tables 4–5, column T): per seed, the mean over τ × sampling of keep-triplet − SAM only."""
    if grid.empty:
        return []
    pk = grid.pivot_table(index=["seed", "tau", "sampling"], columns="keep", values=metric)
    return (pk[True] - pk[False]).groupby("seed").mean().tolist() if {True, False} <= set(pk.columns) else []


def grid_claims(grid: pd.DataFrame) -> list[dict]:
    """S3 rows for each variant present: SN beats HN and RS on average over τ × keep, and keeping the triplet
    helps on average over τ × sampling (RSUM, SAM Tables 4–5). The authors' sampling names are their code's:
    "SN" its "soft" (near-hardest) negative, "HN" its "hard" (near-easiest) one."""
    rows = []
    for loss, variant in VARIANT.items():
        g = grid[grid["variant"] == variant]
        if g.empty:
            continue
        taus = ", ".join(f"{t:g}" for t in sorted(g["tau"].unique()))
        who, tag = ("", "SAM") if loss == "sam" else (", SAM as the authors coded it", "SAM (authors' code)")
        note = (
            f"τ run: {taus}; sampling names as in the paper (HN most similar, SN least similar), the authors' "
            "code swaps them"
            if loss == "sam"
            else f"τ run: {taus}; SN / HN = the code's 'soft' (near-hardest) / 'hard' (near-easiest) negative"
        )
        for other in ("HN", "RS"):
            eff, n = sampling_series(g, other)
            rows.append(
                _row(
                    "S3",
                    "Tables 4, 5",
                    f"SN sampling beats {other} on average over τ × keep-triplet (RSUM){who}",
                    "rsum",
                    f"{tag} SN vs {other}, mean over {n} cells",
                    eff.tolist(),
                    note,
                    failures=grid_failures(g, ("SN", other), eff.index),
                )
            )
        rows.append(
            _row(
                "S3",
                "Tables 4, 5",
                f"Keeping the original triplet helps SAM on average (RSUM){who}",
                "rsum",
                f"{tag} keep-triplet vs SAM only, mean over τ × sampling",
                keep_effects(g),
                note if loss == "sam_authors" else "",
            )
        )
    return rows


def agreement_claims(wide: pd.DataFrame, human: bool, yard_name: str) -> list[dict]:
    """S4 (SAM Table 1): per fold, Pearson r of the CIDEr-D relevance (NCS φ) minus that of the binary GT
    indicator, against the yardstick, for every pair set × subset of :func:`agreement_wide`."""
    rows = []
    for name, g in wide.groupby("row", sort=False):
        set_name, subset = name.split(" · ")
        yard = f"{set_name.split('-')[0]} judgements" if human else yard_name
        rows.append(
            _row(
                "S4",
                "Table 1",
                f"NCS relevance (CIDEr-D) correlates with {yard} better than the binary GT indicator "
                f"({set_name}, {subset})",
                f"Pearson r difference vs {yard}",
                "CIDEr-D φ vs binary GT indicator",
                (g["cider"] - g["binary"]).tolist(),
                f"'seeds' = {g['fold'].nunique()} disjoint folds of test images (model-free); paper uses SPICE/CIDEr "
                "on Criss-Crossed; binary r on non-GT pairs is 0 by definition",
            )
        )
    return rows


def per_query_claims(pq: pd.DataFrame) -> list[dict]:
    """S4, model-based variant (SAM Table 1): per fold, the Pearson r (averaged over run seeds) of NCS@5
    minus that of binary R^V@5 with the true relevance of the retrieved top 5, per model."""
    rows = []
    for label, g in pq.groupby("model", sort=False):
        w = g.groupby(["fold", "metric"])["pearson"].mean().unstack("metric")
        rows.append(
            _row(
                "S4",
                "Table 1 (model-based variant)",
                f"Per query, NCS@5 (CIDEr-D) tracks the true relevance of the retrieved top 5 better than binary "
                f"R^V@5 ({label})",
                "Pearson r difference across queries",
                "NCS@5 vs R^V@5",
                (w["NCS@5 (CIDEr-D)"] - w["binary R^V@5"]).tolist(),
                f"'seeds' = {len(w)} disjoint folds of test queries, r averaged over run seeds",
            )
        )
    return rows


def fig3_claims(df: pd.DataFrame, rels, arms: dict = ARMS_100) -> list[dict]:
    """S5 (SAM Fig. 3): per seed, as m grows 5 → 20, the hit rate of G̃ in the top 5 rises (``srhit5m20 −
    srhit5m5``) and Semantic Recall@5 falls (``sr5m5 − sr5m20``); both directions for CIDEr-D, image→text for
    the yardstick."""
    names = {"cider": "CIDEr-D", "true": "true relevance r*", "expert": "expert judgements"}
    rows = []
    for r in rels:
        for d in ("i2t", "t2i") if r == "cider" else ("i2t",):
            for label, arm in arms.items():
                sub = df[df["arm"] == arm].set_index("seed")
                rise = (sub[f"srhit5m20_{d}_{r}"] - sub[f"srhit5m5_{d}_{r}"]).tolist()
                fall = (sub[f"sr5m5_{d}_{r}"] - sub[f"sr5m20_{d}_{r}"]).tolist()
                for what, eff, metric in (
                    ("R@5 (hit of G̃) rises", rise, f"srhit5m20−srhit5m5 {d} {r}"),
                    ("Semantic Recall@5 falls", fall, f"sr5m5−sr5m20 {d} {r}"),
                ):
                    rows.append(
                        _row(
                            "S5",
                            "Fig. 3",
                            f"As m grows 5→20, {what} ({label}, {d}, G̃ by {names.get(r, r)})",
                            metric,
                            arm,
                            eff,
                            "paper Fig. 3: text→image, six published models, G̃ by SPICE",
                        )
                    )
    return rows


def primary_roles(rows: list[dict], data: str) -> list[dict]:
    """The claim rows to write on ``data``: a row that is its claim's registry primary (matched by the
    registry's legacy texts, :meth:`reproduce.spec.claims.Contrast.matches`) is dropped when that primary is an arm
    contrast (``Page.finish`` adds it by claim id, with the test images' variance) and gets ``role="primary"``
    and the registry's statement when the primary is measured in the notebook."""
    out = []
    for r in rows:
        c = registry.claim(r["cid"])
        probe = {"id": r["cid"], "metric": r["metric"], "arms": r["arms"], "statement": r["statement"]}
        if c.primary.matches(data, row=probe):
            if c.primary.measure == "arms":
                continue
            r = {**r, "role": "primary", "statement": c.primary.statement}
        out.append(r)
    return out


# --- which variant resembles the paper? ---------------------------------------------------------------------
def _paper_fraction_gain(blocks: dict, frac: str) -> float:
    """Mean over the paper's blocks (backbone × data set) that have ``frac``: + SAM − baseline RSUM."""
    a, b = arm_name(frac, "sam"), arm_name(frac, "triplet")
    d = [p.loc[a, "rsum"] - p.loc[b, "rsum"] for p in blocks.values() if a in p.index and b in p.index]
    return float(np.mean(d)) if d else np.nan


def _paper_grid_gain(paper: pd.DataFrame, taus, pairs) -> float:
    """Mean over ``pairs`` of (cell A, cell B) arm-name pairs at our τ values of the paper's RSUM A − B."""
    d = [paper.loc[a, "rsum"] - paper.loc[b, "rsum"] for t in taus for a, b in pairs(t) if {a, b} <= set(paper.index)]
    return float(np.mean(d)) if d else np.nan


def _mean(values) -> float:
    return float(np.mean(values)) if len(values) else np.nan


def resemblance(df_frac: pd.DataFrame, grid: pd.DataFrame, t2: dict, t3: dict, t45: dict) -> pd.DataFrame:
    """The S1–S3 contrasts in RSUM points: the paper's (SAM Tables 2–3: mean over its backbones and data sets
    at that fraction; Tables 4–5: Flickr30K, CVSE, at our τ values) beside ours for SAM as written and as the
    authors coded it (mean over seeds), and whether ours has the paper's sign."""
    taus = sorted(grid["tau"].unique()) if len(grid) else []
    paper45 = next((v for k, v in t45.items() if "Flickr30K" in k), pd.DataFrame(columns=["rsum"]))
    by_variant = {v: grid[grid["variant"] == v] for v in VARIANT.values()}
    lines = []
    for frac, blocks in (("10%", t2), ("25%", t2), ("100%", t3)):
        base = arm_name(frac, "triplet")
        ours = {v: _mean(paired_effect(df_frac, "rsum", arm_name(frac, loss), base)) for loss, v in VARIANT.items()}
        lines.append(
            {"contrast": f"{frac} data: + SAM − Triplet-HN", "paper": _paper_fraction_gain(blocks, frac), **ours}
        )
    for other in ("HN", "RS"):
        pairs = lambda t, o=other: [(f"τ={t:g} SN keep={k}", f"τ={t:g} {o} keep={k}") for k in (True, False)]
        lines.append(
            {
                "contrast": f"SN − {other} (mean over τ × keep)",
                "paper": _paper_grid_gain(paper45, taus, pairs),
                **{v: _mean(sampling_effects(g, other)[0]) for v, g in by_variant.items()},
            }
        )
    pairs = lambda t: [(f"τ={t:g} {s} keep=True", f"τ={t:g} {s} keep=False") for s in ("RS", "HN", "SN")]
    lines.append(
        {
            "contrast": "triplet kept − SAM only (mean over τ × sampling)",
            "paper": _paper_grid_gain(paper45, taus, pairs),
            **{v: _mean(keep_effects(g)) for v, g in by_variant.items()},
        }
    )
    out = pd.DataFrame(lines).set_index("contrast")
    for v in VARIANT.values():
        out[f"{v}: paper's sign"] = np.where(
            out[v].notna() & out["paper"].notna(), np.sign(out[v]) == np.sign(out["paper"]), None
        )
    return out


def resemblance_sentence(table: pd.DataFrame) -> str:
    """One sentence: for each variant, on how many of the S1–S3 contrasts (both numbers present) its sign is
    the paper's."""
    parts = []
    for v in VARIANT.values():
        s = table[f"{v}: paper's sign"].dropna()
        parts.append(f"SAM {v} has the paper's sign on {int(s.astype(bool).sum())} of {len(s)} contrasts")
    return "; ".join(parts) + "."
