"""The main comparison (X1 arms) reported as Agarwal et al. (2021) recommend for few-run studies.

Agarwal, Schwarzer, Castro, Courville, Bellemare, "Deep Reinforcement Learning at the Edge of the
Statistical Precipice", NeurIPS 2021: report the **mean** and the **interquartile mean** (IQM, the
mean of the middle 50% of runs, Sec. 4.3) with **95% stratified-bootstrap confidence intervals**
(Sec. 4.1: runs are resampled with replacement within each stratum — here each arm's seeds on one
data set — and the interval is the percentile interval of the statistic over the resamples), and the
**probability of improvement** (Sec. 4.4)

    P(X > Y) = 1/(N·M) Σ_i Σ_j S(x_i, y_j),  S(x, y) = 1 if x > y, ½ if x = y, 0 otherwise,

of an arm X (N seeds) over the baseline Y (M seeds, VSE++), with its interval from the same
resamples (X's and Y's seeds resampled independently: the runs are not paired). One data set is one
task, so the paper's average over tasks is the single task's value.
"""

from __future__ import annotations

import textwrap

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
from scipy import stats

from reproduce.protocol import scale
from reproduce.spec.labels import arm_label

BASE = "VSE++ (Triplet-HN)"
N_BOOT = 2000
LEVEL = 0.95
PAPER_COLOUR = "0.2"  # the papers' size in the forest plot: open dark-grey markers beside our coloured ones
COLUMNS = [
    "n_seeds",
    "mean",
    "mean_low",
    "mean_high",
    "iqm",
    "iqm_low",
    "iqm_high",
    "poi",
    "poi_low",
    "poi_high",
]


def iqm(scores, axis: int = -1):
    """Interquartile mean: the mean after cutting 25% of the scores at each end
    (``scipy.stats.trim_mean(·, 0.25)``, as ``rliable``'s IQM)."""
    return stats.trim_mean(np.asarray(scores, dtype=float), 0.25, axis=axis)


def probability_of_improvement(x, y):
    """P(X > Y) of the module doc. ``x`` (…, N) and ``y`` (…, M): leading axes are resamples."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape[-1] == 0 or y.shape[-1] == 0:
        raise ValueError(f"probability of improvement needs scores for both arms, got {x.shape[-1]} and {y.shape[-1]}")
    gt = (x[..., :, None] > y[..., None, :]).mean(axis=(-2, -1))
    eq = (x[..., :, None] == y[..., None, :]).mean(axis=(-2, -1))
    return gt + 0.5 * eq


def stratified_resamples(scores: dict[str, np.ndarray], n_boot: int = N_BOOT, seed: int = 0) -> dict:
    """``{arm: (n_boot, n_arm) array}``: every arm's scores drawn with replacement within that arm."""
    rng = np.random.default_rng(seed)
    out = {}
    for arm, s in scores.items():
        s = np.asarray(s, dtype=float)
        out[arm] = s[rng.integers(0, s.size, size=(n_boot, s.size))]
    return out


def percentile_interval(samples, level: float = LEVEL) -> tuple[float, float]:
    """The ``level`` percentile interval of bootstrap ``samples``."""
    lo, hi = np.percentile(np.asarray(samples, dtype=float), [50 * (1 - level), 50 * (1 + level)])
    return float(lo), float(hi)


def main_comparison(
    df: pd.DataFrame,
    metric: str = "rsum",
    base: str = BASE,
    arms: list[str] | None = None,
    n_boot: int = N_BOOT,
    seed: int = 0,
    level: float = LEVEL,
) -> pd.DataFrame:
    """Per arm (index, first-seen order, ``base`` first): mean and IQM of ``metric`` over seeds with their
    stratified-bootstrap intervals, and the probability of improvement over ``base`` with its interval
    (empty for ``base``); an arm with one seed gets no interval. ``df``: one row per run with columns
    ``arm``, ``seed`` and ``metric`` (``Study.results("overview")``)."""
    for col in ("arm", metric):
        if col not in df.columns:
            raise KeyError(f"main comparison: the results have no column {col!r} (columns: {list(df.columns)})")
    arms = list(dict.fromkeys(df["arm"])) if arms is None else list(arms)
    if base not in arms or base not in set(df["arm"]):
        raise ValueError(f"main comparison: the baseline {base!r} has no runs (arms: {arms})")
    arms = [base, *[a for a in arms if a != base]]
    scores = {}
    for a in arms:
        s = pd.to_numeric(df.loc[df["arm"] == a, metric], errors="coerce").to_numpy(dtype=float)
        s = s[np.isfinite(s)]
        if not s.size:
            raise ValueError(f"main comparison: arm {a!r} has no finite {metric!r}")
        scores[a] = s
    boot = stratified_resamples(scores, n_boot, seed)
    rows = []
    for a in arms:
        s, b = scores[a], boot[a]
        row = {
            "arm": a,
            "n_seeds": s.size,
            "mean": float(s.mean()),
            "iqm": float(iqm(s)),
        }
        one = s.size < 2  # one seed: a bootstrap interval would be a point, not an interval
        row["mean_low"], row["mean_high"] = (np.nan, np.nan) if one else percentile_interval(b.mean(axis=1), level)
        row["iqm_low"], row["iqm_high"] = (np.nan, np.nan) if one else percentile_interval(iqm(b, axis=1), level)
        if a == base:
            row["poi"] = row["poi_low"] = row["poi_high"] = np.nan
        else:
            row["poi"] = float(probability_of_improvement(s, scores[base]))
            row["poi_low"], row["poi_high"] = (
                (np.nan, np.nan)
                if one or scores[base].size < 2
                else percentile_interval(probability_of_improvement(b, boot[base]), level)
            )
        rows.append(row)
    return pd.DataFrame(rows).set_index("arm")[COLUMNS]


def _ci(x, lo, hi, digits: int) -> str:
    if not np.isfinite(x):
        return "—"
    if not (np.isfinite(lo) and np.isfinite(hi)):
        return f"{x:.{digits}f} [— one seed]"
    return f"{x:.{digits}f} [{lo:.{digits}f}, {hi:.{digits}f}]"


def _whiskers(res: pd.DataFrame, stat: str, rows=slice(None)) -> list:
    """Error-bar lengths below and above ``stat`` (0 where the row has no interval)."""
    lo = (res[stat] - res[f"{stat}_low"]).to_numpy(dtype=float)[rows]
    hi = (res[f"{stat}_high"] - res[stat]).to_numpy(dtype=float)[rows]
    return [np.nan_to_num(lo), np.nan_to_num(hi)]


def comparison_table(res: pd.DataFrame, base_label: str = "VSE++") -> pd.DataFrame:
    """The readable table of :func:`main_comparison`: four short columns (seeds, mean, IQM, P(improvement))
    with their 95% intervals in brackets."""
    out = pd.DataFrame(
        {
            "seeds": res["n_seeds"].to_numpy(dtype=int),
            "mean [95% CI]": [_ci(*r, 1) for r in res[["mean", "mean_low", "mean_high"]].to_numpy()],
            "IQM [95% CI]": [_ci(*r, 1) for r in res[["iqm", "iqm_low", "iqm_high"]].to_numpy()],
            f"P(> {base_label}) [95% CI]": [_ci(*r, 2) for r in res[["poi", "poi_low", "poi_high"]].to_numpy()],
        },
        index=[arm_label(a) for a in res.index],
    )
    out.index.name = "arm"
    return out


def robust_limits(res: pd.DataFrame) -> tuple[float, float]:
    """x-limits for :func:`forest_plot`'s left panel: every arm's IQM, and its interval as far as it stays within one
    spread of the IQMs on either side, with a 5 % margin. A mean or a whisker that a collapsed seed pulls far out
    (VSE++ without warm-up on Flickr8k: an interval from 71) would otherwise squeeze the arms that matter into a
    few pixels; it is drawn to the edge and labelled with its value."""
    pts = res["iqm"].to_numpy(dtype=float)
    pts = pts[np.isfinite(pts)]
    if not len(pts):
        return 0.0, 1.0
    p_lo, p_hi = float(pts.min()), float(pts.max())
    spread = max(p_hi - p_lo, 1.0)
    lows, highs = (res[c].to_numpy(dtype=float) for c in ("iqm_low", "iqm_high"))
    lo = max(np.nanmin(np.append(lows, p_lo)), p_lo - spread)
    hi = min(np.nanmax(np.append(highs, p_hi)), p_hi + spread)
    pad = 0.05 * (hi - lo)
    return lo - pad, hi + pad


def _seeds_text(n_seeds) -> str:
    """``n_seeds`` of several arms in words: ``"5 seeds"``, ``"3–5 seeds"``."""
    n = sorted({int(x) for x in pd.to_numeric(pd.Series(n_seeds), errors="coerce").dropna()})
    if not n:
        return "seeds unknown"
    return f"{n[0]} seed{'s' * (n[0] != 1)}" if len(n) == 1 else f"{n[0]}–{n[-1]} seeds"


def _paper_lane(ax, paper: pd.DataFrame, stat: str, y, fmt: str, label: str | None = None) -> np.ndarray:
    """The papers'-size lane of one panel: ``stat`` of the arms that have it, open markers ``fmt`` with their
    intervals (``label``'s ``{seeds}``: their seed counts in words). Returns which arms have it."""
    has = np.isfinite(paper[stat].to_numpy(dtype=float))
    seeds = _seeds_text(paper["n_seeds"][has])
    ax.errorbar(
        paper[stat][has],
        y[has],
        xerr=_whiskers(paper, stat, has),
        fmt=fmt,
        mfc="white",
        color=PAPER_COLOUR,
        capsize=3,
        **({"label": label.format(seeds=seeds)} if label else {}),
    )
    return has


def forest_plot(
    res: pd.DataFrame,
    metric_label: str,
    title: str = "",
    base_label: str = "VSE++",
    paper: pd.DataFrame | str | None = None,
):
    """Two panels sharing the arms: IQM (filled) and mean (open) with their 95% intervals, and the probability
    of improvement over the baseline with its interval (dashed line: ½, no improvement).

    ``paper``: the same comparison at the papers' size (:func:`reproduce.protocol.scale.papers_size_arms`). A table
    adds, under each arm it has, a lane of its own: its IQM (open diamond) and its probability of improvement over
    its own baseline (open square), with their intervals; a text (why there is none) is a short note above the right
    panel; ``None`` draws nothing more (the figure is then the one without the argument)."""
    scaled = isinstance(paper, pd.DataFrame)
    if scaled:
        paper = paper.reindex(res.index)  # aligned to the arms drawn; an arm it lacks is NaN and draws nothing
    n = len(res)
    y = np.arange(n)[::-1]
    fig, (ax1, ax2) = plt.subplots(
        1,
        2,
        figsize=(11, 1.2 + (0.6 if scaled else 0.45) * n),
        sharey=True,
        gridspec_kw={"width_ratios": [3, 2]},
        layout="constrained",
    )
    off = 0.25 if scaled else 0.15
    # lanes of one arm: (table, statistic, offset, colour); with the papers' size, ours above and theirs below
    lanes = [(res, "iqm", off, "C0"), (res, "mean", 0.0 if scaled else -off, "C1")]
    ax1.errorbar(
        res["iqm"],
        y + lanes[0][2],
        xerr=_whiskers(res, "iqm"),
        fmt="o",
        color="C0",
        capsize=3,
        label="IQM",
    )
    ax1.errorbar(
        res["mean"],
        y + lanes[1][2],
        xerr=_whiskers(res, "mean"),
        fmt="o",
        mfc="white",
        color="C1",
        capsize=3,
        label="mean",
    )
    if scaled:
        lanes.append((paper, "iqm", -off, PAPER_COLOUR))
        has_p = _paper_lane(ax1, paper, "iqm", y - off, "D", f"{scale.SCALE_LABEL}:\nIQM, {{seeds}}")
        for i in np.flatnonzero(~has_p):  # an arm the papers' size has not trained: said in its lane
            ax1.annotate(
                f"{scale.SCALE_LABEL}: {scale.NOT_MEASURED}",
                (0.0, y[i] - off),
                xycoords=("axes fraction", "data"),
                xytext=(4, 0),
                textcoords="offset points",
                ha="left",
                va="center",
                fontsize="x-small",
                color=PAPER_COLOUR,
            )
    lo, hi = robust_limits(pd.concat([res, paper]) if scaled else res)
    ax1.set_xlim(lo, hi)
    sides = (("left", lo, -1, "<", 6), ("right", hi, 1, ">", -6))  # side, edge, outward sign, marker, text offset
    for frame, stat, dy, color in lanes:  # what lies beyond the limits, at the edge
        for yi, (x, x_lo, x_hi) in zip(y + dy, frame[[stat, f"{stat}_low", f"{stat}_high"]].to_numpy(dtype=float)):
            for (side, edge, sign, marker, dx), end in zip(sides, (x_lo, x_hi)):
                parts = [f"{end:.0f}"] if np.isfinite(end) and sign * (end - edge) > 0 else []
                if np.isfinite(x) and sign * (x - edge) > 0:
                    ax1.plot([edge], [yi], marker=marker, color=color, ms=7, clip_on=False)
                    parts.append(f"{stat} {x:.0f}")
                if parts:
                    text = " · ".join(parts)
                    ax1.annotate(
                        f"◂ {text}" if sign < 0 else f"{text} ▸",
                        (edge, yi),
                        xytext=(dx, 0),
                        textcoords="offset points",
                        ha=side,
                        va="center",
                        fontsize="x-small",
                        color=color,
                        bbox={"fc": "white", "ec": "none", "pad": 0.5},
                    )
    ax1.set_yticks(y, [arm_label(a) for a in res.index])
    ax1.set_xlabel(
        textwrap.fill(f"test {metric_label}", 50)
        + "\nwhiskers: 95% stratified-bootstrap CI\n◂ n ▸: a value beyond the axis, at its edge"
    )
    ax1.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncol=3 if scaled else 2, frameon=False, fontsize="small")
    has = np.isfinite(res["poi"].to_numpy(dtype=float))
    ax2.errorbar(
        res["poi"][has],
        (y + (off if scaled else 0.0))[has],
        xerr=_whiskers(res, "poi", has),
        fmt="s",
        color="C2",
        capsize=3,
    )
    if scaled:
        _paper_lane(ax2, paper, "poi", y - off, "s")
    ax2.axvline(0.5, ls="--", color="grey", lw=1)
    ax2.set_xlim(-0.03, 1.03)
    ax2.set_xlabel(
        f"P(arm > {base_label})\nwhiskers: 95% CI"
        + (f"\nopen: the papers' size,\nagainst its own {base_label}" if scaled else "")
    )
    ax2.tick_params(axis="y", left=False)
    for i in np.flatnonzero(~has):
        ax2.text(
            0.5,
            y[i],
            "baseline",
            ha="center",
            va="center",
            fontsize="small",
            color="grey",
            bbox={"fc": "white", "ec": "none"},
        )
    if isinstance(paper, str):
        ax2.annotate(
            f"{scale.SCALE_LABEL}: {paper}",
            (1.0, 1.0),
            xycoords="axes fraction",
            xytext=(0, 4),
            textcoords="offset points",
            ha="right",
            va="bottom",
            fontsize="small",
            color="grey",
        )
    if title:
        fig.suptitle(title)
    return fig
