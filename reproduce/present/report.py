"""Tables and figures for the notebooks: summaries over seeds, stable file names, PNG + SVG.

Compute (training, evaluation) lives in the library and the run cache; this module only reads
results and draws, so editing a figure never retrains anything.
"""

from __future__ import annotations

import io
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown
from matplotlib.ticker import MaxNLocator

from coherent_itr import health as h
from coherent_itr.io import atomic_write_bytes, atomic_write_text

from reproduce.present.analyses import plotting
from reproduce.spec.tables import MAX_MD_COLUMNS, SHORT_HEADER, markdown_table, md_cell, short_header  # noqa: F401 (report.md_cell …)
from reproduce.spec.tables import smoke_banner
from reproduce.spec.tables import round_significant as readable  # noqa: F401 (report.readable, used by notebooks)

RECALL_COLUMNS = ["i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5", "t2i_r10", "rsum"]


COLLAPSE_MARK = "‡"


def summary(df: pd.DataFrame, metrics: list[str], by: str | list[str] = "arm") -> pd.DataFrame:
    """Mean, std and seed count of ``metrics`` per ``by`` (keeps the arms' first-seen order); with a
    ``collapsed`` column (``Study.results``), ``n_collapsed`` counts the collapsed runs of each row."""
    by = [by] if isinstance(by, str) else by
    g = df.groupby(by, sort=False)[metrics]
    mean, std, n = g.mean(), g.std(ddof=1), g.size().rename("n_seeds")
    out = pd.concat({"mean": mean, "std": std}, axis=1)
    out.columns = [f"{m}" if s == "mean" else f"{m}_std" for s, m in out.columns]
    out = out.join(n)
    if "collapsed" in df.columns:
        out = out.join(
            df.assign(_c=df["collapsed"].fillna(False).astype(bool))
            .groupby(by, sort=False)["_c"]
            .sum()
            .rename("n_collapsed")
            .astype(int)
        )
    return out


def pretty(summary_df: pd.DataFrame, metrics: list[str], digits: int = 1, *, number=None) -> pd.DataFrame:
    """``mean ± std`` strings for a Markdown table (std omitted with one seed). ``number(value, metric)`` writes
    one number (default: ``digits`` decimals; e.g. :func:`reproduce.spec.labels.fmt_number` by the metric's
    kind). A row with collapsed runs (``n_collapsed`` of :func:`summary`) gets ``‡ k/n collapsed`` after its
    label (see :func:`collapse_note`); columns keep the metric keys."""
    number = number or (lambda v, _m: f"{v:.{digits}f}")
    out = {}
    for m in metrics:
        sd = summary_df.get(f"{m}_std")
        out[m] = [
            number(v, m) + ("" if s is None or pd.isna(s) else f" ± {number(s, m)}")
            for v, s in zip(summary_df[m], sd if sd is not None else [None] * len(summary_df))
        ]
    res = pd.DataFrame(out, index=summary_df.index)
    if "n_collapsed" in summary_df.columns and (summary_df["n_collapsed"] > 0).any():
        labels = [
            _mark(i, int(k), int(n))
            for i, k, n in zip(summary_df.index, summary_df["n_collapsed"], summary_df["n_seeds"])
        ]
        res.index = (
            pd.MultiIndex.from_tuples(labels, names=res.index.names)
            if isinstance(res.index, pd.MultiIndex)
            else pd.Index(labels, name=res.index.name)
        )
    return res


def publish(pg, name: str, numbers: pd.DataFrame, view: pd.DataFrame, caption: str = "", *, stem: str | None = None):
    """The one way a notebook publishes a table: ``numbers`` (CSV, full precision) and the readable ``view``
    (Markdown under ``caption``, headers as given) as ``<results>/<paper>/<stem>.{csv,md}`` (``stem``: default
    ``<name>_<data>``) through :func:`save_table`; returns the captioned Markdown table for ``display``."""
    save_table(numbers, pg.out, pg.paper, stem or f"{name}_{pg.data}", caption, view)
    text = markdown_table(view)
    return Markdown(f"{caption}\n\n{text}" if caption else text)


def _mark(label, k: int, n: int):
    if not k:
        return label
    tag = f" {COLLAPSE_MARK} {k}/{n} collapsed"
    return (*label[:-1], f"{label[-1]}{tag}") if isinstance(label, tuple) else f"{label}{tag}"


def collapse_note() -> str:
    """The caption sentence that explains the ‡ mark (``coherent_itr.health.is_collapsed``)."""
    return (
        f"{COLLAPSE_MARK} k/n collapsed: k of the row's n runs ended collapsed at the selected checkpoint "
        f"(validation RSUM ≤ {h.COLLAPSE_RSUM_FACTOR:g}× chance, or diverged; a narrow cone of the embeddings "
        "is shown but never counts) — such a row measures a training failure, not the method; the ledger decides "
        "a primary claim on all seeds and again without the failed ones, unless the claim predicts that failure."
    )


def int_epochs(fig):
    """Integer ticks on every x-axis labelled "epoch" of ``fig``; returns ``fig``."""
    for ax in fig.axes:
        if ax.get_xlabel() == "epoch":
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    return fig


def side_by_side(ours: pd.DataFrame, paper_blocks: dict, ours_label: str) -> pd.DataFrame:
    """Our rows (e.g. :func:`pretty` ``mean ± std`` strings) above each paper block of
    :func:`reproduce.spec.paper_numbers.table` (``{source: rows × columns}``), on our columns; "–" where the
    paper gives no number. Index: (source, arm)."""
    parts = {ours_label: ours}
    for label, p in paper_blocks.items():
        parts[label] = p.reindex(columns=ours.columns).map(lambda v: "–" if pd.isna(v) else f"{v:g}")
    return pd.concat(parts, names=["source", "arm"])


def flat(df: pd.DataFrame) -> pd.DataFrame:
    """A copy whose MultiIndex is joined into one readable label ("source · arm") for Markdown."""
    out = df.copy()
    if isinstance(out.index, pd.MultiIndex):
        out.index = [" · ".join(map(str, t)) for t in out.index]
    return out


def caption(artefact: str, what: str, units: str, setup: str) -> str:
    """A table caption: what it is, the set-up (data set, profile, seeds), that cells are mean ± std over
    seeds, and the units."""
    return f"{artefact} ({setup}): {what}. Mean ± std over seeds. Units: {units}."


def save_table(
    df: pd.DataFrame, results_dir, paper: str, name: str, caption: str = "", pretty_df: pd.DataFrame | None = None
) -> Path:
    """``<results>/<paper>/<name>.csv`` (numbers, full precision) and ``.md`` (caption + readable
    table: ``pretty_df`` as given, else ``df`` with floats rounded to 4 significant digits; at most
    :data:`MAX_MD_COLUMNS` columns per table with short headers and a legend, :func:`markdown_table`)."""
    out = Path(results_dir) / paper
    atomic_write_text(out / f"{name}.csv", df.to_csv())
    md = (
        smoke_banner(out)
        + (f"{caption}\n\n" if caption else "")
        + markdown_table(pretty_df if pretty_df is not None else readable(df))
        + "\n"
    )
    atomic_write_text(out / f"{name}.md", md)
    return out / f"{name}.csv"


def save_figure(fig, results_dir, paper: str, name: str, footer: str = "") -> Path:
    """``<results>/<paper>/<name>.png`` and ``.svg`` (written atomically), byte-identical when the figure is: no
    date in the metadata, the SVG's element ids salted with the figure's name instead of a random salt. ``footer``:
    a small line under the panels (:func:`reproduce.present.analyses.plotting.footer`) naming what the one-line title
    leaves out — data set, profile, seeds (``Page.setup``) — so that the file reads alone."""
    if footer:
        plotting.footer(fig, footer)
    out = Path(results_dir) / paper
    for fmt in ("png", "svg"):
        buf = io.BytesIO()
        with plt.rc_context({"svg.hashsalt": f"{paper}/{name}"}):
            fig.savefig(buf, format=fmt, dpi=130, bbox_inches="tight", metadata={"Date": None} if fmt == "svg" else {})
        atomic_write_bytes(out / f"{name}.{fmt}", buf.getvalue())
    return out / f"{name}.png"


def setup_plotting():
    """Seaborn's readable defaults for every figure of the study."""
    sns.set_theme(context="notebook", style="whitegrid")
    return sns


def curves(hist: pd.DataFrame, ys: list[tuple[str, str]], hue: str = "arm", title: str = "", ncols: int | None = None):
    """One panel per ``(column, axis label)`` in ``ys``: mean over seeds per epoch with a 95% band, each ``hue``
    value its own colour, marker and dash; one legend
    right of the panels; labels wrapped to fit (:func:`reproduce.present.analyses.plotting.fit_text`)."""
    ncols = ncols or len(ys)
    nrows = int(np.ceil(len(ys) / ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.6 * ncols, 3.4 * nrows), squeeze=False)
    for ax, (col, label) in zip(axes.flat, ys):
        sns.lineplot(
            data=hist,
            x="epoch",
            y=col,
            hue=hue,
            style=hue,
            markers=True,
            **plotting.BANDS,
            ax=ax,
        )  # a marker shape and a dash per series: a curve under another still shows
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
    for ax in list(axes.flat)[len(ys) :]:
        ax.set_visible(False)
    if title:
        fig.suptitle(title)
    plotting.legend_outside(fig)
    return plotting.fit_text(fig)


def sweep_plot(
    df: pd.DataFrame,
    x: str,
    ys: list[tuple[str, str]],
    xlabel: str,
    logx: bool = False,
    title: str = "",
    marks: dict | None = None,
):
    """Metric vs a swept value: mean over seeds with 95% interval bars; optional vertical marks ``{label:
    x}`` (dashed grey lines, named in the legend, not written over the data)."""
    fig, axes = plt.subplots(1, len(ys), figsize=(4.6 * len(ys), 3.4), squeeze=False)
    for ax, (col, label) in zip(axes.flat, ys):
        sns.pointplot(data=df, x=x, y=col, **plotting.BANDS, native_scale=True, ax=ax, capsize=0.1)
        if logx:
            ax.set_xscale("log")
        for k, (name, val) in enumerate((marks or {}).items()):
            ax.axvline(val, ls=("--", "-.", ":")[k % 3], c="grey", label=f"{name} (grey line)")
        ax.set_xlabel(xlabel)
        ax.set_ylabel(label)
    if title:
        fig.suptitle(title)
    if marks:
        plotting.legend_outside(fig)
    return plotting.fit_text(fig)
