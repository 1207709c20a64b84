"""SAM / NCS — Biten et al., "Is An Image Worth Five Sentences?" (WACV 2022): what notebook 03_sam computes.

Derived columns of the study's runs (Tables 2–5), Fig. 3's curves, SAM's margins on real batches (Eq. 7) and the
figures; the agreement of relevance with the yardstick (Table 1, per pair and per query) is
:mod:`reproduce.present.analyses.sam_agreement`'s (re-exported here for the notebook), the claim rows of S1–S5
:mod:`reproduce.present.analyses.sam_claims`'s. SAM runs in two variants: ``sam`` — SAM *as written* (SN = the
furthest negative, no clamp, weight 1) — and ``sam_authors`` — SAM *as the authors coded it* (their "soft" =
near-hardest negative, margin clamped at 1, weight 5); see :mod:`coherent_itr.losses.sam`.
"""

from __future__ import annotations

import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from coherent_itr import data as data_mod

from reproduce.protocol import calibration

from reproduce.spec import labels

from reproduce.present import report
from reproduce.present.analyses import plotting
from reproduce.present.analyses.sam_agreement import (  # Table 1, re-exported for notebook 03_sam
    ARMS_100 as ARMS_100,
    N_FOLDS as N_FOLDS,
    PER_QUERY as PER_QUERY,
    RELEVANCE,
    agreement_folds as agreement_folds,
    agreement_table as agreement_table,
    agreement_wide as agreement_wide,
    ncs_identity as ncs_identity,
    per_query_agreement as per_query_agreement,
    per_query_table as per_query_table,
)

METHOD = {
    "triplet": "VSE++ (Triplet-HN)",
    "sam": "VSE++ + SAM (as written)",
    "sam_authors": "VSE++ + SAM (authors' code)",
}
VARIANT = {"sam": "as written", "sam_authors": "authors' code"}
FRACTIONS = {"10%": 0.1, "25%": 0.25, "100%": 1.0}
NCS_COLUMNS = [f"ncs{k}_{d}_cider" for d in ("i2t", "t2i") for k in (1, 5, 10)] + ["nsum_cider"]
GRID_DIAGNOSTICS = {
    "sam_active_pct": "SAM hinges active at the last epoch (%)",
    "sam_margin": "mean SAM margin Δφ/τ at the last epoch (cosine units)",
    "sam_clamped_pct": "margins clamped at 1 at the last epoch (%, authors' code only)",
}
YARD_STATEMENT = {
    "nsum_true": "Nsum against the true relevance r*",
    "mapr_i2t_expert": "mAP@R image→text against expert-judged positives",
}
MARGIN_COLUMNS = {
    "n": "pairs",
    "median": "median α",
    "mean": "mean α",
    "q25": "1st quartile of α",
    "q75": "3rd quartile of α",
    "share_above_1": "share α > 1 (clamped by the authors' code)",
    "share_below_0": "share α < 0",
}
MS = (5, 10, 20)
NOTE_BACKBONE = "VSE++ GRU backbone, not CVSE/SGR/VSRN; NCS φ = CIDEr-D (paper evaluates with SPICE)"


# --- Tables 2 and 3: reduced and full training data, ± SAM --------------------------------------------------
def arm_name(fraction: str, loss: str) -> str:
    """The fraction-group arm (``reproduce.spec.experiments.sam_arms``) of ``loss`` trained on ``fraction`` of the
    training images (SAM Tables 2–3: "10%", "25%", "100%")."""
    return {
        "triplet": f"{fraction} data, Triplet-HN",
        "sam": f"{fraction} data, + SAM",
        "sam_authors": f"{fraction} data, + SAM (authors' code)",
    }[loss]


def fraction_columns(df: pd.DataFrame) -> pd.DataFrame:
    """SAM Tables 2–3 rows with ``fraction`` ("10%" …, from the arm name), ``fraction_pct`` (10, 25, 100) and
    ``method`` (VSE++ / + SAM as written / + SAM as the authors coded it, from the loss)."""
    out = df.copy()
    out["fraction"] = out["arm"].str.split(" ").str[0]
    out["fraction_pct"] = out["fraction"].map(FRACTIONS) * 100
    out["method"] = out["loss"].map(METHOD)
    return out


def yard_columns(df: pd.DataFrame, yard: str) -> list[str]:
    """The independent-yardstick columns present in ``df`` (SAM Tables 2–3 beside the paper's NCS): Nsum and
    Nsum(N) against r* (synthetic), mAP@R against expert-judged positives (Flickr8k, whose judgements are too
    sparse for a dense NCS). The first one is the yardstick of the S1/S2 rows and the figures."""
    return [c for c in (f"nsum_{yard}", f"nsumngt_{yard}", f"mapr_i2t_{yard}", f"mapr_t2i_{yard}") if c in df]


def beside_paper(
    df: pd.DataFrame, cols: list[str], blocks: dict, ours_label: str, by: str = "arm", digits: int = 1
) -> tuple[pd.DataFrame, pd.DataFrame, bool]:
    """Our rows (mean ± std over seeds per ``by``, ‡ on rows with collapsed runs) above the paper's blocks
    (:func:`reproduce.spec.paper_numbers.table`): (numbers for the CSV, readable table, any row collapsed)."""
    summ = report.summary(df, cols, by=by)
    pretty = report.side_by_side(report.pretty(summ, cols, digits=digits), blocks, ours_label)
    numbers = pd.concat({ours_label: summ, **{k: v.reindex(columns=cols) for k, v in blocks.items()}})
    return numbers, pretty, bool(summ.get("n_collapsed", pd.Series([0])).gt(0).any())


def headers(df: pd.DataFrame) -> pd.DataFrame:
    """Readable column headers (:mod:`reproduce.spec.labels`, SAM's own diagnostics and Table 1 relevances)."""

    def name(c):
        return labels.label(c) if labels.has_label(c) else {**GRID_DIAGNOSTICS, **RELEVANCE, **MARGIN_COLUMNS}.get(c, c)

    return report.flat(df).rename(columns=name)


def publish(pg, name: str, numbers: pd.DataFrame, table: pd.DataFrame, caption: str):
    """:func:`reproduce.present.report.publish` of ``numbers`` with the readable ``table`` (headers by
    :func:`headers`) as ``<results>/sam/<name>.{csv,md}``; returns the captioned Markdown table to display."""
    view = headers(table).astype(object)  # object cells: an integer column stays integer in the Markdown
    return report.publish(pg, name, numbers, view, caption, stem=name)


def fraction_figure(df: pd.DataFrame, panels: list[tuple[str, str]], title: str):
    """SAM Tables 2–3 as curves: each metric against the share of training images (log axis), one line per
    method, mean over seeds with a 95% interval band."""
    fig, axes = plt.subplots(1, len(panels), figsize=(4.4 * len(panels), 3.6), squeeze=False)
    for ax, (col, label) in zip(axes.flat, panels):
        sns.lineplot(
            data=df,
            x="fraction_pct",
            y=col,
            hue="method",
            **plotting.BANDS,
            marker="o",
            ax=ax,
        )
        ax.set_xscale("log")
        ax.set_xticks([10, 25, 100], labels=["10", "25", "100"])
        ax.set_xlabel("training images used (%, log scale)")
        ax.set_ylabel(label)
    fig.suptitle(title)
    plotting.legend_outside(fig)
    return plotting.fit_text(fig)


# --- Tables 4 and 5: τ × sampling × keep-triplet ------------------------------------------------------------
def cell_label(arm: str) -> str:
    """ "τ=3 · SN · triplet kept" for a grid arm of either variant (``τ=3 SN keep=True``, ``authors τ=3 …``;
    SAM Tables 4–5: temperature, negative sampling, column T)."""
    m = re.fullmatch(r"(?:authors )?τ=(?P<tau>[\d.]+) (?P<s>RS|HN|SN) keep=(?P<keep>True|False)", arm)
    if not m:
        raise ValueError(f"not a SAM grid arm: {arm!r}")
    return f"τ={m['tau']} · {m['s']} · " + ("triplet kept" if m["keep"] == "True" else "SAM only")


def grid_columns(df: pd.DataFrame, arms) -> pd.DataFrame:
    """SAM Tables 4–5 rows with ``tau``, ``sampling``, ``keep`` (from each arm's loss parameters), ``variant``
    (as written / authors' code, from the loss) and ``cell`` (:func:`cell_label`)."""
    params = {a.name: a.overrides["loss_params"] for a in arms}
    out = df.copy()
    out["tau"] = [float(params[a]["tau"]) for a in out["arm"]]
    out["sampling"] = [params[a]["sampling"] for a in out["arm"]]
    out["keep"] = [bool(params[a]["keep_triplet"]) for a in out["arm"]]
    out["variant"] = out["loss"].map(VARIANT)
    out["cell"] = out["arm"].map(cell_label)
    return out


def last_epoch_diagnostics(hist: pd.DataFrame) -> pd.DataFrame:
    """SAM's own training diagnostics at each run's last epoch (per arm and seed): share of active SAM hinges
    (%, mean of both directions), mean margin α = Δφ/τ (Eq. 7, mean of both directions) and, for the authors'
    code, the share of margins clamped at 1 (%)."""
    last = hist.sort_values("epoch").groupby(["arm", "seed"]).tail(1)
    out = last[["arm", "seed"]].copy()
    out["sam_active_pct"] = 50 * (last["loss_active_fraction_i2t"] + last["loss_active_fraction_t2i"])
    out["sam_margin"] = (last["loss_margin_mean_i2t"] + last["loss_margin_mean_t2i"]) / 2
    out["sam_clamped_pct"] = 100 * last.get("loss_margin_clamped_fraction", pd.Series(np.nan, index=last.index))
    return out.reset_index(drop=True)


def grid_table(df: pd.DataFrame, cols: list[str], blocks: dict, ours_label: str) -> tuple:
    """SAM Tables 4–5: per variant, every τ × sampling × keep cell (mean ± std over seeds; the diagnostics with
    two decimals) above the paper's rows, all indexed by :func:`cell_label`. Returns (numbers, readable table,
    any row collapsed)."""
    diag = [c for c in GRID_DIAGNOSTICS if c in df and df[c].notna().any()]
    ours, numbers, collapsed = {}, {}, False
    for variant, g in df.groupby("variant", sort=False):
        summ = report.summary(g, cols + diag, by="cell")
        view = report.pretty(summ, cols, 1).join(report.pretty(summ, diag, 2).replace("nan", "–"))
        ours[f"{ours_label}, SAM {variant}"] = view
        numbers[f"{ours_label}, SAM {variant}"] = summ
        collapsed |= bool(summ.get("n_collapsed", pd.Series([0])).gt(0).any())
    paper = {k: v.rename(index=cell_label).reindex(columns=cols) for k, v in blocks.items()}
    shown = {k: v.map(lambda x: "–" if pd.isna(x) else f"{x:g}") for k, v in paper.items()}
    table = pd.concat({**ours, **shown}, names=["source", "cell"]).reindex(columns=cols + diag).fillna("–")
    return pd.concat({**numbers, **paper}, names=["source", "cell"]), table, collapsed


def grid_figure(df: pd.DataFrame, panels: list[tuple[str, str]], title: str):
    """SAM Tables 4–5 as a figure: each metric against τ, one line per sampling (RS / HN / SN), one row of
    panels per variant × keep-triplet; mean over seeds with 95% interval bars (none with one seed)."""
    rows = list(df.groupby(["variant", "keep"], sort=False).groups)
    fig, axes = plt.subplots(
        len(rows), len(panels), figsize=(4.4 * len(panels), 3.3 * len(rows)), squeeze=False, sharey="col"
    )
    for (variant, keep), axrow in zip(rows, axes):
        sub = df[(df["variant"] == variant) & (df["keep"] == keep)]
        for ax, (col, label) in zip(axrow, panels):
            sns.pointplot(
                data=sub,
                x="tau",
                y=col,
                hue="sampling",
                hue_order=["RS", "HN", "SN"],
                linestyles=[":", "--", "-"],
                markers=["s", "^", "o"],
                **plotting.BANDS,
                dodge=plotting.DODGE,
                capsize=0.05,
                ax=ax,
            )
            ax.set_xlabel("temperature τ (margin = Δφ / τ)")
            ax.set_ylabel(label)
            ax.set_title(f"SAM {variant}, " + ("triplet kept (T ✓)" if keep else "SAM only (T ✗)"), fontsize=10)
    fig.suptitle(title)
    plotting.legend_outside(fig, ax=axes[0, -1], title="sampling")
    return plotting.fit_text(fig)


# --- SAM margins on real batches (Eq. 7) --------------------------------------------------------------------
def margin_values(phi_matrices, tau: float) -> np.ndarray:
    """Every SAM margin α = (φ(G_p, c_p) − φ(G_p, c_j)) / τ (SAM Eq. 7, image→text) over the off-diagonal pairs
    of the batches — the values :func:`reproduce.protocol.calibration.margin_distribution` summarises."""
    out = []
    for m in phi_matrices:
        m = np.asarray(m, dtype=np.float64)
        out.append(((np.diag(m)[:, None] - m) / tau)[~np.eye(m.shape[0], dtype=bool)])
    return np.concatenate(out)


def margin_batches(split, batch_size: int, n_batches: int = 50, seed: int = 0) -> list[np.ndarray]:
    """φ = CIDEr-D (candidate among the references, as the study trains SAM) of ``n_batches`` random training
    batches drawn as the training loop draws them (:func:`reproduce.protocol.calibration.relevance_batches`)."""
    provider = data_mod.relevance_provider("cider", split, include_candidate=True)
    return calibration.relevance_batches(
        provider, split.n_images, split.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )


def margin_table(phi_matrices, taus) -> pd.DataFrame:
    """:func:`reproduce.protocol.calibration.margin_distribution` for every τ (SAM Eq. 7 margins of a uniformly random
    negative): quartiles, mean, share above 1 (where the authors' clamp bites) and below 0, pair count."""
    return pd.DataFrame([calibration.margin_distribution(phi_matrices, t) for t in taus]).set_index("tau")


def margin_figure(phi_matrices, taus, title: str):
    """Histogram of the SAM Eq. 7 margins on real batches for every τ, with the authors' clamp at α = 1."""
    fig, ax = plt.subplots(figsize=(6.4, 3.6))
    for t in taus:
        ax.hist(margin_values(phi_matrices, t), bins=80, histtype="step", density=True, label=f"τ = {t:g}")
    ax.axvline(1.0, ls="--", c="grey", label="α = 1: the authors' clamp")
    ax.set_xlabel("margin α = (φ(G_p, c⁺) − φ(G_p, c⁻)) / τ  (cosine units)")
    ax.set_ylabel("density")
    ax.legend(**plotting.LEGEND_RIGHT)
    ax.set_title(title, fontsize=10)
    return plotting.fit_text(fig)


# --- Fig. 3: R@5 and Semantic Recall@5 as m grows -----------------------------------------------------------
def fig3_long(df: pd.DataFrame, rels, ms=MS) -> pd.DataFrame:
    """SAM Fig. 3 data, one row per (run, relevance, direction, m): the hit rate of G̃ in the top 5
    (``srhit5m{m}``, the paper's "R@5") and Semantic Recall@5 (``sr5m{m}``, Eq. 4)."""
    names = {"cider": "CIDEr-D", "true": "true relevance r*", "expert": "expert judgements"}
    out = []
    for _, row in df.iterrows():
        for r in rels:
            for d, dname in (("i2t", "image→text"), ("t2i", "text→image")):
                for m in ms:
                    out.append(
                        {
                            "method": row["method"],
                            "seed": row["seed"],
                            "G̃ from": names.get(r, r),
                            "direction": dname,
                            "m": m,
                            "R@5 hit": row[f"srhit5m{m}_{d}_{r}"],
                            "SR@5": row[f"sr5m{m}_{d}_{r}"],
                        }
                    )
    return pd.DataFrame(out)


def fig3_table(f3: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SAM Fig. 3 as numbers: mean over seeds of the hit rate and Semantic Recall@5 per relevance, direction,
    method and m. Returns (numbers with (quantity, m) columns, readable table with "SR@5, m=10" headers)."""
    t = f3.groupby(["G̃ from", "direction", "method", "m"], sort=False)[["R@5 hit", "SR@5"]].mean().unstack("m")
    view = t.round(1).map(lambda v: f"{v:.1f}")
    view.columns = [f"{q}, m={m}" for q, m in view.columns]
    return t, view


def fig3_figure(f3: pd.DataFrame, title: str, ms=MS):
    """SAM Fig. 3: R@5 (hit of G̃) rises and Semantic Recall@5 falls as m grows; mean over seeds with 95%
    interval bands, one row of panels per relevance that ranks G̃."""
    rels = list(dict.fromkeys(f3["G̃ from"]))
    fig, axes = plt.subplots(len(rels), 2, figsize=(11, 3.8 * len(rels)), squeeze=False)
    for axrow, rname in zip(axes, rels):
        sub = f3[f3["G̃ from"] == rname]
        for ax, (col, label) in zip(
            axrow, [("R@5 hit", "R@5: any of G̃ in the top 5 (%)"), ("SR@5", "SR@5: share of G̃ in the top 5 (%)")]
        ):
            sns.lineplot(
                data=sub,
                x="m",
                y=col,
                hue="method",
                style="direction",
                **plotting.BANDS,
                markers=True,
                ax=ax,
            )
            ax.set_xticks(list(ms))
            ax.set_xlabel("m = |G̃| (relevant non-GT items per query)")
            ax.set_ylabel(label)
            ax.set_title(f"G̃ ranked by {rname}", fontsize=10)
    fig.suptitle(title)
    plotting.legend_outside(fig, ax=axes[0, -1])
    return plotting.fit_text(fig)
