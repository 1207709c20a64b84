"""What 02_ladder computes: the columns of the ladder paper's tables and its figures; Fig. 6's batch statistics and the
θ calibration view are :mod:`reproduce.present.analyses.ladder_theta`'s (re-exported here), the rows of claims L1–L6
:mod:`reproduce.present.analyses.ladder_claims`'s.

The ladder paper is CVSE++ (Zhou et al., *Ladder Loss for Coherent Visual-Semantic Embedding*, and its
adaptive-ladder journal version): Tables I/III (VSE++ vs ladder vs adaptive ladder: CS@K and R@K), IV/V (β₂),
VI/VII (number of levels L), VIII/IX (adaptive bounds (L_MIN, L_MAX)), XI (image→text mAP) and Fig. 6
(relevance degrees within a batch). CS@K is Eq. 13: Kendall τ-b between the model's top-K ranking and the
relevance ranking. The notebook only declares and draws; everything that derives a number lives here.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from reproduce.spec import labels, paper_numbers

from reproduce.present import report
from reproduce.present.analyses import plotting
from reproduce.present.analyses.ladder_theta import (  # Fig. 6 and θ, re-exported for notebook 02_ladder
    LEGEND,
    batch_stats as batch_stats,
    fig6_batches as fig6_batches,
    fig6_figure as fig6_figure,
    literal_of as literal_of,
    theta_arms as theta_arms,
    theta_calibration as theta_calibration,
    theta_deltas as theta_deltas,
    theta_figure as theta_figure,
    theta_label as theta_label,
    theta_lines as theta_lines,
)

PAPER = "ladder"
DIRS = ("i2t", "t2i")
RECALLS = (1, 5, 10)
CIRCULAR = "circular: the ladder trains on Sentence-BERT"


# --- columns ---------------------------------------------------------------------------------------------
def present(columns, keys) -> list[str]:
    """``keys`` that are in ``columns``, first occurrence only, in the order given (None is skipped)."""
    cols = set(columns)
    return list(dict.fromkeys(k for k in keys if k is not None and k in cols))


def yard_key(columns, k: int, d: str, yard: str) -> str | None:
    """The independent counterpart of CS@k in direction ``d`` (Eq. 13 against a relevance no loss trains on):
    ``cs{k}_{d}_{yard}`` when the record has it (synthetic: true relevance r*); otherwise the expert agreement
    ``expert_kendall_nongt`` (Flickr8k: no full relevance matrix, so not K- or direction-specific); else None."""
    cols = set(columns)
    key = f"cs{k}_{d}_{yard}"
    if key in cols:
        return key
    return "expert_kendall_nongt" if "expert_kendall_nongt" in cols else None


def table_columns(columns, yard: str, ks=(100, 1000)) -> list[str]:
    """Every column of a ladder table (Tables I/III–IX layout) that the results have: per direction CS@K
    against Sentence-BERT and against ``yard``, mean rank, R@1/5/10; then RSUM and the expert agreements."""
    cols = []
    for d in DIRS:
        cols += [f"cs{k}_{d}_sbert" for k in ks] + [f"cs{k}_{d}_{yard}" for k in ks]
        cols += [f"{d}_meanr"] + [f"{d}_r{r}" for r in RECALLS]
    cols += ["rsum", "expert_kendall_nongt", "expert_pearson_nongt"]
    return present(columns, cols)


def paper_columns(ks=(100, 1000)) -> list[str]:
    """The paper's column layout (Tables I/III–IX) in our metric keys: per direction CS@K (the paper's CS is
    against Sentence-BERT), mean rank, R@1/5/10; then RSUM."""
    cols = []
    for d in DIRS:
        cols += [f"cs{k}_{d}_sbert" for k in ks] + [f"{d}_meanr"] + [f"{d}_r{r}" for r in RECALLS]
    return cols + ["rsum"]


def with_rsum(block: pd.DataFrame) -> pd.DataFrame:
    """``block`` with ``rsum`` = the sum of the six R@K (R@1/5/10 in both directions), which the paper's tables
    do not print; NaN where one of them is missing."""
    rk = [f"{d}_r{r}" for d in DIRS for r in RECALLS]
    out = block.copy()
    out["rsum"] = out.reindex(columns=rk).sum(axis=1, min_count=len(rk))
    return out


def paper_blocks(name: str) -> dict[str, pd.DataFrame]:
    """The paper's table ``name`` (``reproduce/data/paper_tables/ladder.csv``: table1 = Tables I/III, table4 =
    IV/V, table6 = VI/VII, table8 = VIII/IX, table11 = XI) per source, with RSUM added where R@K are given."""
    return {s: with_rsum(b) if "i2t_r1" in b.columns else b for s, b in paper_numbers.table(PAPER, name).items()}


def pretty(summ: pd.DataFrame, cols: list[str]) -> pd.DataFrame:
    """:func:`reproduce.present.report.pretty` (mean ± std, ‡ marks of collapsed rows) with each column's decimals
    set by its kind in :mod:`reproduce.spec.labels`: 3 for correlations and 0–1 fractions (CS@K, τ, mAP), 1
    otherwise; no columns: an empty frame on the summary's rows."""
    if not cols:
        return pd.DataFrame(index=summ.index)
    return report.pretty(summ, cols, number=_decimals_by_kind)


def _decimals_by_kind(value: float, col: str) -> str:
    return f"{value:.{3 if labels.kind_of(col) in ('correlation', 'unit') else 1}f}"


def markdown(df: pd.DataFrame) -> str:
    """``df`` as Markdown with readable headers (:func:`reproduce.spec.labels.readable`; MultiIndex rows flattened;
    :func:`reproduce.present.report.markdown_table`: cells escaped, at most 9 columns per table, short headers)."""
    return report.markdown_table(labels.readable(report.flat(df)))


def publish(pg, name: str, numbers: pd.DataFrame, shown: pd.DataFrame | None = None, caption: str = ""):
    """:func:`reproduce.present.report.publish` of ``numbers`` with ``shown`` (default ``numbers``) under readable
    headers, MultiIndex rows flattened, as ``<results>/<paper>/<name>_<data>.{csv,md}``; returns the Markdown."""
    return report.publish(pg, name, numbers, labels.readable(report.flat(numbers if shown is None else shown)), caption)


def yardstick_label(key: str, yard_name: str) -> str:
    """Legend text of a metric key by what it is scored against: Sentence-BERT (circular — the ladder trains on
    it), binary ground truth (RSUM), the expert judgements or ``yard_name`` (independent)."""
    if key.endswith("_sbert"):
        return "Sentence-BERT (circular)"
    if key == "rsum":
        return "RSUM (binary ground truth)"
    if key.startswith("expert_"):
        return "expert τ, non-GT pairs (independent)"
    return f"{yard_name} (independent)"


def long_form(df: pd.DataFrame, keys, x=None) -> pd.DataFrame:
    """Per-seed results of ``keys`` melted into (arm, seed, ``x`` …, metric, value)."""
    ids = ["arm", "seed"] + ([x] if isinstance(x, str) else list(x or []))
    return df.melt(id_vars=ids, value_vars=list(keys), var_name="metric", value_name="value")


def sweep_values(df: pd.DataFrame, group: str) -> pd.DataFrame:
    """The swept value of an arm as a column: ``beta2`` (float) and ``selection`` for Tables IV/V
    ("manual β₂=0.5" → manual, 0.5), ``L`` (int) for Tables VI/VII ("L=3"), ``bounds`` (ordered categorical,
    arms' order) for Tables VIII/IX ("(2,4)")."""
    out = df.copy()
    if group == "beta2":
        out["selection"] = out.arm.str.split(" β₂=").str[0]
        out["beta2"] = out.arm.str.split("β₂=").str[1].astype(float)
    elif group == "levels":
        out["L"] = out.arm.str.split("=").str[1].astype(int)
    elif group == "lminmax":
        out["bounds"] = pd.Categorical(out.arm, categories=list(out.arm.unique()), ordered=True)
    else:
        raise ValueError(f"sweep_values: unknown group {group!r} (beta2, levels, lminmax)")
    return out


def fixed_bounds(arms) -> list[str]:
    """The (k, k) arms of Tables VIII/IX (a fixed number of levels, adaptive thresholds), in order."""
    return [a for a in arms if (m := re.fullmatch(r"\((\d+),(\d+)\)", a)) and m[1] == m[2]]


def identity_check(df: pd.DataFrame, arms, reference: str, metric: str = "rsum") -> pd.DataFrame:
    """Tables IV/V: β₂ = 0 turns the ladder into the triplet loss (the second ladder has weight 0), so each of
    ``arms`` should equal ``reference`` (VSE++) seed by seed — when both train at the same tuned setting.
    Per arm: the largest |Δ metric| over common seeds, the seeds compared and whether lr and warm-up agree."""
    ref = df[df.arm == reference].set_index("seed")
    rows = []
    for a in arms:
        sub = df[df.arm == a].set_index("seed")
        common = sorted(set(sub.index) & set(ref.index))
        diff = (sub.loc[common, metric] - ref.loc[common, metric]).abs()
        same = all(
            col not in df.columns or (sub.loc[common, col].values == ref.loc[common, col].values).all()
            for col in ("lr", "warmup_epochs")
        )
        rows.append(
            {
                "arm": a,
                "largest absolute difference": float(diff.max()) if common else np.nan,
                "seeds": len(common),
                "same lr and warm-up": bool(same),
            }
        )
    return pd.DataFrame(rows).set_index("arm")


# --- figures ---------------------------------------------------------------------------------------------
def cs_bars(df: pd.DataFrame, yard: str, yard_name: str, title: str, ks=(100, 1000)):
    """Tables I/III as bars: one panel per CS@k and direction, each arm's CS against Sentence-BERT (circular)
    beside the independent yardstick (``cs<k>_<dir>_<yard>``); when the results have no K-specific yardstick
    but the expert τ on non-GT pairs (``expert_kendall_nongt``, Flickr8k), one more panel shows that; when they
    have neither, the title says so. Bars = mean, whiskers = 95% CI over seeds; one legend outside."""
    order = list(df.arm.unique())
    panels = {
        f"CS@{k} {labels.DIRECTIONS[d]}": present(df.columns, [f"cs{k}_{d}_sbert", f"cs{k}_{d}_{yard}"])
        for d in DIRS
        for k in ks
    }
    k_specific = any(len(keys) > 1 for keys in panels.values())
    if not k_specific and "expert_kendall_nongt" in df.columns:
        panels["expert τ-b, non-GT pairs"] = ["expert_kendall_nongt"]
    elif not k_specific:
        title += f" — no {yard_name} in these results"
    panels = {name: keys for name, keys in panels.items() if keys}
    fig, axes = plt.subplots(1, len(panels), figsize=(4.2 * len(panels), 3.8), sharey=True, squeeze=False)
    hue_order = list(dict.fromkeys(yardstick_label(k, yard_name) for keys in panels.values() for k in keys))
    for ax, (name, keys) in zip(axes.flat, panels.items()):
        lf = long_form(df, keys)
        lf["yardstick"] = [yardstick_label(k, yard_name) for k in lf.metric]
        sns.barplot(
            data=lf,
            x="arm",
            y="value",
            hue="yardstick",
            hue_order=hue_order,
            order=order,
            **plotting.BANDS,
            ax=ax,
        )
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("")
        ax.set_ylabel("coherent score (Kendall τ-b, −1…1)")
    fig.suptitle(title)
    plotting.legend_outside(fig, fontsize=7)
    return plotting.fit_text(fig)


def sweep_figure(df: pd.DataFrame, x: str, panels, hue: str, xlabel: str, title: str, yard_name: str, order=None):
    """Tables IV–IX as sweeps: one panel per ``(keys, ylabel, title)``; points = mean, bars = 95% CI over seeds.
    With one key and ``hue`` a column (e.g. ``selection``), one line per hue value; with several keys, one line
    per yardstick (× hue value when there are several). One legend right of the last panel when every panel has the
    same series, else each panel's to its right."""
    fig, axes = plt.subplots(1, len(panels), figsize=(6.6 * len(panels), 3.8), squeeze=False)
    for ax, (keys, ylabel, ptitle) in zip(axes.flat, panels):
        by_col = hue in df.columns
        lf = long_form(df, keys, x=[x] + ([hue] if by_col else []))
        lf["yardstick"] = [yardstick_label(k, yard_name) for k in lf.metric]
        h = hue if by_col and len(keys) == 1 else "yardstick"
        if by_col and len(keys) > 1 and lf[hue].nunique() > 1:
            lf["series"] = lf[hue].astype(str) + " · " + lf["yardstick"].str.split(" \\(").str[0]
            h = "series"
        many = lf[h].nunique() > 1
        sns.pointplot(
            data=lf,
            x=x,
            y="value",
            hue=h,
            order=order,
            **plotting.BANDS,
            dodge=plotting.DODGE if many else False,
            capsize=0.08,
            ax=ax,
        )
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_title(ptitle, fontsize=10)
        ax.legend(**LEGEND)
    fig.suptitle(title)
    names = [tuple(t.get_text() for t in ax.get_legend().get_texts()) for ax in axes.flat if ax.get_legend()]
    if len(set(names)) == 1:  # every panel has the same series: one legend, right of the last panel
        plotting.legend_outside(fig, ax=axes.flat[-1], fontsize=7)
    return plotting.fit_text(fig)


SWEEPS = {  # group → (x column, hue, x label, CS@K of its panels): Tables IV/V, VI/VII, VIII/IX
    "beta2": ("beta2", "selection", "β₂ (weight of the second ladder)", (100,)),
    "levels": ("L", "yardstick", "number of ladder levels L", (100, 200, 1000)),
    "lminmax": ("bounds", "yardstick", "(L_MIN, L_MAX)", (100, 1000)),
}


def sweep_view(group: str, df: pd.DataFrame, yard: str, yard_name: str, title: str):
    """The figure of a sweep table (:data:`SWEEPS`): β₂ (one panel per yardstick, a line per selection rule),
    L and (L_MIN, L_MAX) (one panel per CS@K, a line per yardstick); the last panel is RSUM. Points = mean,
    bars = 95% CI over seeds. (L_MIN, L_MAX): a dotted line parts the fixed (k, k) from the adaptive (2, L_MAX)."""
    x, hue, xlabel, ks = SWEEPS[group]
    d = sweep_values(df, group)
    if group == "beta2":
        panels = [
            (["cs100_i2t_sbert"], "CS@100 image→text (τ-b, −1…1)", "CS@100 vs Sentence-BERT (circular)"),
            (present(d.columns, [yard_key(d.columns, 100, "i2t", yard)]), "τ-b, −1…1", f"vs {yard_name} (indep.)"),
        ]
    else:
        panels = [
            (present(d.columns, [f"cs{k}_i2t_sbert", yard_key(d.columns, k, "i2t", yard)]), "τ-b, −1…1", f"CS@{k} i2t")
            for k in ks
        ]
    panels = [p for p in panels if p[0]] + [(["rsum"], "RSUM (%, sum of six R@K)", "binary retrieval")]
    order = list(d[x].cat.categories) if group == "lminmax" else None
    fig = sweep_figure(d, x, panels, hue, xlabel, title, yard_name, order=order)
    if group == "lminmax":
        split = len(fixed_bounds(order)) - 0.5
        for ax in fig.axes:
            ax.tick_params(axis="x", rotation=45)
            ax.axvline(split, ls=":", c="grey")
        plotting.fit_text(fig)
    return fig
