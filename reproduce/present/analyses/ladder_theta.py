"""The ladder's threshold θ against the relevance of training batches, what 02_ladder shows of it: Fig. 6 (relevance
degrees and the size of ladder level 1 in a batch, the levels the adaptive ladder picks), θ calibrated to the relevance
model (Sec. V-B's scope-of-interest shares) and the calibrated-θ arms beside the literal ones they re-run. The rest of
the notebook's tables and figures are :mod:`reproduce.present.analyses.ladder`'s (which re-exports these names).
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

from reproduce.present.analyses import plotting


LEGEND = dict(loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=7, title=None)


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
