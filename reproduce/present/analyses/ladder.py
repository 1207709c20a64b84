"""What 02_ladder computes: the columns of the ladder paper's tables, its figures, Fig. 6's batch statistics,
the θ calibration view (the rows of claims L1–L6: :mod:`reproduce.present.analyses.ladder_claims`).

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
import torch

from coherent_itr import losses

from reproduce.protocol import calibration

from reproduce.spec import labels, paper_numbers

from reproduce.present import report
from reproduce.present.analyses import plotting

PAPER = "ladder"
DIRS = ("i2t", "t2i")
RECALLS = (1, 5, 10)
CIRCULAR = "circular: the ladder trains on Sentence-BERT"
LEGEND = dict(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, title=None)


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


# --- Fig. 6: relevance degrees in training batches ----------------------------------------------------
def batch_stats(rel: np.ndarray, theta: float, levels: np.ndarray) -> dict:
    """Fig. 6 statistics of one batch's relevance matrix ``rel`` (B × B, paired caption i on the diagonal) and
    the adaptive ladder's chosen level count per row: share of off-diagonal pairs ≥ θ, relevance mean/std,
    per-row count n≥θ of candidates reaching θ (mean, std), the binomial std √((B−1)p(1−p)) expected if every
    row had the batch's share p, their ratio (overdispersion), rows with an empty level 1, the modal level
    count and the share of rows that pick another count."""
    n = rel.shape[0]
    off = ~np.eye(n, dtype=bool)
    vals = rel[off]
    above = (rel >= theta)[off].reshape(n, n - 1).sum(axis=1)
    p = above.sum() / (n * (n - 1))
    k = np.asarray(levels)
    modal = int(np.bincount(k).argmax())
    binom = np.sqrt((n - 1) * p * (1 - p))
    return {
        "share ≥ θ (%)": 100 * p,
        "mean rel": float(vals.mean()),
        "std rel": float(vals.std()),
        "mean n≥θ per row": above.mean(),
        "std n≥θ per row": above.std(ddof=1),
        "binomial std": binom,
        "overdispersion": above.std(ddof=1) / binom if 0 < p < 1 else np.nan,
        "rows with no candidate ≥ θ (%)": 100 * float((above == 0).mean()),
        "modal levels": modal,
        "rows ≠ modal levels (%)": 100 * float((k != modal).mean()),
    }


def fig6_batches(train, provider, sampling: str, adaptive=None, n_batches=20, batch_size=128, theta=None, seed=6):
    """Fig. 6 on ``n_batches`` random training batches drawn like the profile's sampler (``sampling="images"``:
    one random caption per image; ``"captions"``: random captions), relevance = ``provider.batch`` (the
    ladder's Sentence-BERT signal). Returns ``{"dens", "counts", "levels", "stats"}``: per batch the density of
    off-diagonal relevance on 0.05 bins over [−0.4, 1], each row's n≥θ, the share of rows for which the adaptive
    ladder (``adaptive``, default the paper's (L_MIN, L_MAX) = (2, 4): its forward on a random similarity matrix;
    the levels depend on relevance only) picks 2,
    3 or 4 levels, :func:`batch_stats`, and the ``batch_size`` and ``theta`` used (default θ: the paper's
    θ₁ = 0.40, ``calibration.PAPER_THETAS``)."""
    theta = calibration.PAPER_THETAS[0] if theta is None else theta
    if adaptive is None:
        adaptive = losses.build("adaptive_ladder", l_min=2, l_max=4)

    cpi = train.captions_per_image
    rng = np.random.default_rng(seed)
    gen = torch.Generator().manual_seed(seed)
    bins = np.round(np.arange(-0.4, 1.0001, 0.05), 3)
    centers = (bins[:-1] + bins[1:]) / 2
    dens, counts, levels, stats = [], [], [], []
    for b in range(n_batches):
        if sampling == "images":
            img = rng.choice(train.n_images, size=min(batch_size, train.n_images), replace=False)
            cap = img * cpi + rng.integers(0, cpi, size=len(img))
        else:
            cap = rng.choice(train.n_captions, size=min(batch_size, train.n_captions), replace=False)
            img = cap // cpi
        n = len(img)
        rel = provider.batch(img, cap)
        off = ~np.eye(n, dtype=bool)
        h, _ = np.histogram(rel[off], bins=bins, density=True)
        dens += [{"batch": b, "relevance": c, "density": v} for c, v in zip(centers, h)]
        above = (rel >= theta)[off].reshape(n, n - 1).sum(axis=1)
        counts += [{"batch": b, "row": i, "n_above": int(a)} for i, a in enumerate(above)]
        adaptive(torch.randn(n, n, generator=gen), torch.from_numpy(rel))
        k = np.asarray(adaptive.diagnostics["levels_per_row_i2t"])
        levels += [{"batch": b, "levels": int(v), "share": float((k == v).mean() * 100)} for v in (2, 3, 4)]
        stats.append({"batch": b, **batch_stats(rel, theta, k)})
    return {
        "dens": pd.DataFrame(dens),
        "counts": pd.DataFrame(counts),
        "levels": pd.DataFrame(levels),
        "stats": pd.DataFrame(stats),
        "batch_size": batch_size,
        "theta": theta,
    }


def _legends_and_title(fig, axes, title: str):
    """``fig`` with each panel's legend to its right (:data:`LEGEND`), the title and its text fitted
    (:func:`reproduce.present.analyses.plotting.fit_text`)."""
    for ax in axes:
        ax.legend(**LEGEND)
    fig.suptitle(title)
    return plotting.fit_text(fig)


def fig6_figure(f6: dict, title: str, clip: int = 30):
    """Fig. 6 analogue in three panels: the density of off-diagonal relevance (mean over batches, 95% band)
    with θ; the share of rows per n≥θ (counts above ``clip`` pooled; mean, 95% band over batches); the share of
    rows per number of levels the adaptive ladder picks (bars: mean, 95% CI over batches)."""
    theta, batch_size = f6["theta"], f6["batch_size"]
    fig, axes = plt.subplots(1, 3, figsize=(19, 3.8))
    sns.lineplot(
        data=f6["dens"],
        x="relevance",
        y="density",
        **plotting.BANDS,
        drawstyle="steps-mid",
        label="off-diagonal pairs (mean over batches)",
        ax=axes[0],
    )
    axes[0].axvline(theta, ls="--", c="crimson", label=f"θ = {theta:.2f} (manual ladder)")
    axes[0].set(
        xlabel="Sentence-BERT cosine relevance (unitless)",
        ylabel="density (per unit relevance)",
        title="relevance degrees in a batch",
    )
    cnt = f6["counts"].assign(n_above=f6["counts"].n_above.clip(upper=clip))
    share = (
        cnt.groupby(["batch", "n_above"]).size().unstack(fill_value=0).reindex(columns=range(clip + 1), fill_value=0)
    ).div(cnt.groupby("batch").size(), axis=0) * 100
    rows = share.stack().rename("pct").reset_index()
    sns.lineplot(
        data=rows,
        x="n_above",
        y="pct",
        **plotting.BANDS,
        marker="o",
        markersize=3,
        label="rows (mean over batches)",
        ax=axes[1],
    )
    axes[1].set(
        xlabel=f"candidates with relevance ≥ θ per query row (count; {clip} = ≥ {clip})",
        ylabel="share of rows (%)",
        title=f"size of ladder level 1 per row (B = {batch_size})",
    )
    sns.barplot(
        data=f6["levels"],
        x="levels",
        y="share",
        **plotting.BANDS,
        ax=axes[2],
        color="C2",
        label="adaptive ladder (2, 4)",
    )
    axes[2].set(
        xlabel="number of levels picked per row (count)",
        ylabel="share of rows (%)",
        title="adaptive ladder: levels per row",
    )
    return _legends_and_title(fig, axes, title)


# --- θ calibrated to the relevance model (calibration.py) ------------------------------------------------
def theta_calibration(provider, train, profile_theta=None, n_batches=50, batch_size=128, seed=0) -> dict:
    """θ₁ / θ₂ at the scope-of-interest shares of Sec. V-B (top 1.9 % / 3.9 % of off-diagonal relevance,
    :mod:`reproduce.protocol.calibration`), measured on ``n_batches`` training batches, and the relevance distribution
    against every θ in play: the paper's literal (0.40, 0.35), the calibration measured here and the profile's
    (the θ the calibrated runs train with). Returns ``values`` (every off-diagonal relevance), ``thetas``
    (measured θ₁, θ₂) and ``table`` (per θ: which, share of pairs ≥ θ, rows with an empty level 1, in %)."""
    mats = calibration.relevance_batches(
        provider, train.n_images, train.captions_per_image, batch_size=batch_size, n_batches=n_batches, seed=seed
    )
    thetas = calibration.calibrated_thetas(mats)
    named = {f"paper θ{'₁₂'[i]}": t for i, t in enumerate(calibration.PAPER_THETAS)}
    named |= {f"calibrated θ{'₁₂'[i]} (measured here)": t for i, t in enumerate(thetas)}
    named |= {f"calibrated θ{'₁₂'[i]} (profile: the runs)": t for i, t in enumerate(profile_theta or ())}
    tab = calibration.theta_table(mats, list(named.values()))
    tab.insert(0, "θ", list(named))
    tab = tab.rename(
        columns={
            "theta": "value",
            "share_pairs_at_or_above": "pairs ≥ θ (%)",
            "share_rows_empty_level1": "rows with an empty level 1 (%)",
        }
    )
    tab[["pairs ≥ θ (%)", "rows with an empty level 1 (%)"]] *= 100
    return {"values": calibration.off_diagonal(mats), "thetas": thetas, "table": tab.set_index("θ")}


def theta_lines(table: pd.DataFrame, digits: int = 3) -> list[tuple[list[str], float]]:
    """The vertical lines of :func:`theta_figure`: the θ of ``table`` (index = name, column ``value``) with the
    same kind (paper / calibrated) and the same value at ``digits`` decimals merged into one line (e.g. the θ
    measured here and the profile's, when the runs use that very calibration), in table order."""
    merged: dict = {}
    for name, v in table["value"].items():
        kind = "paper" if str(name).startswith("paper") else "calibrated"
        merged.setdefault((kind, round(float(v), digits)), ([], float(v)))[0].append(str(name))
    return list(merged.values())


def theta_label(names: list[str]) -> str:
    """One legend label for θ names that share a line: "calibrated θ₁ (measured here; profile: the runs)"."""
    if len(names) == 1:
        return names[0]
    head = names[0].split(" (")[0]
    notes = [n[len(head) :].strip().strip("()") for n in names]
    return f"{head} ({'; '.join(n for n in notes if n)})"


def theta_figure(values: np.ndarray, table: pd.DataFrame, title: str):
    """The relevance distribution against θ: left, the density of off-diagonal relevance; right, the share of
    pairs ≥ t (log scale) with the scope-of-interest shares (1.9 % / 3.9 %, Sec. V-B) — a calibrated θ sits
    where that curve crosses its share. Vertical lines: every θ of ``table`` (:func:`theta_calibration`)."""
    fig, axes = plt.subplots(1, 2, figsize=(16, 3.8))
    axes[0].hist(values, bins=70, density=True, color="C0", alpha=0.6, label="off-diagonal pairs")
    t = np.sort(values)
    surv = 1.0 - np.arange(len(t)) / len(t)
    axes[1].plot(t, 100 * surv, c="C0", label="pairs ≥ t")
    for s, ls in zip(calibration.SCOPE_SHARES, (":", "-.")):
        axes[1].axhline(100 * s, c="grey", ls=ls, lw=1, label=f"scope share {100 * s:.1f} %")
    styles = {"paper": ("crimson", "--"), "calibrated": ("black", "-")}
    for names, v in theta_lines(table):
        c, ls = styles["paper" if names[0].startswith("paper") else "calibrated"]
        for ax in axes:
            ax.axvline(
                v,
                c=c,
                ls=ls,
                lw=1,
                alpha=0.5 if all("profile" in n for n in names) else 0.9,
                label=f"{theta_label(names)} = {v:.3f}" if ax is axes[0] else None,
            )
    axes[0].set(
        xlabel="Sentence-BERT cosine relevance (unitless)",
        ylabel="density (per unit relevance)",
        title="relevance of off-diagonal batch pairs",
    )
    axes[1].set(
        xlabel="threshold t (Sentence-BERT cosine)",
        ylabel="pairs ≥ t (%, log scale)",
        yscale="log",
        title="share of pairs a threshold admits",
    )
    return _legends_and_title(fig, axes, title)


def literal_of(arm: str) -> str | None:
    """The literal-θ arm (θ = 0.40 / 0.35) that a calibrated-θ arm of ``experiments.ladder_calibrated_arms``
    re-runs: "Ladder (manual, θ=0.508 calibrated)" → "Ladder (manual)", "L=3 (θ calibrated)" → "L=3",
    "manual β₂=0.5 (θ calibrated)" → "manual β₂=0.5"; None for an arm that is not calibrated."""
    if re.fullmatch(r"Ladder \(manual, θ=[\d.]+ calibrated\)", arm):
        return "Ladder (manual)"
    m = re.fullmatch(r"(.+) \(θ calibrated\)", arm)
    return m[1] if m else None


def theta_arms(df: pd.DataFrame) -> pd.DataFrame:
    """The runs of every calibrated-θ arm and of the literal arm it re-runs (Tables I, IV/V, VI/VII settings),
    with ``setting`` (the literal arm's name) and ``θ`` ("literal" / "calibrated"), settings in the order of the
    calibrated arms. Empty when the profile runs no calibrated arms (Flickr8k, smoke)."""
    pairs = {literal_of(a): a for a in df.arm.unique() if literal_of(a)}
    rows = []
    for lit, cal in pairs.items():
        rows.append(df[df.arm == lit].assign(setting=lit, θ="literal"))
        rows.append(df[df.arm == cal].assign(setting=lit, θ="calibrated"))
    if not rows:
        return df.iloc[:0].assign(setting=[], θ=[])
    return pd.concat(rows, ignore_index=True)


def theta_deltas(cal: pd.DataFrame, metrics) -> pd.DataFrame:
    """Per setting of :func:`theta_arms`: the mean over seeds of the paired difference calibrated − literal of
    each metric (seeds present in both), ± its std over seeds, and the number of seeds."""
    out = {}
    for s, g in cal.groupby("setting", sort=False):
        lit, c = g[g["θ"] == "literal"].set_index("seed"), g[g["θ"] == "calibrated"].set_index("seed")
        seeds = sorted(set(lit.index) & set(c.index))
        d = c.loc[seeds, metrics] - lit.loc[seeds, metrics]
        out[s] = {
            **{m: d[m].mean() for m in metrics},
            **{f"{m}_std": d[m].std(ddof=1) for m in metrics},
            "n_seeds": len(seeds),
        }
    res = pd.DataFrame.from_dict(out, orient="index")
    res.index.name = "arm"
    return res
