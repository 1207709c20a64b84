"""BCLS — Li et al., *Image-Text Retrieval with Binary and Continuous Label Supervision* (``01_bcls``).

What the notebook computes beyond reading runs, one function each, tested in
``tests/reproduce/present/analyses/test_analyses_bcls.py``: the direction-averaged Kendall τ (Eq. 2, Fig. 5b), the
Fig. 4 convergence contrast (B1), the Table VI arm picks (B4), semantic retrieval against the yardstick (Tables VII,
IX; B8), the within-image caption-similarity std behind α (Sec. III-C; B5), the α peak and β stride contrasts (Fig. 5;
B5, B6), the loss-cost slopes of the micro-benchmark (Sec. III-D; B7, ``benchmarks/bench_kendall_scaling.py``), the
pseudo-label agreement per image fold (Table II; B9), and the figures that add a reference arm to a sweep.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import display
from matplotlib.ticker import NullFormatter

from coherent_itr import data as data_mod
from coherent_itr.losses.kendall import KendallSWHSLoss
from coherent_itr.metrics.human import HumanJudgements, as_judgements, provider_agreement

from reproduce.spec import labels

from reproduce.present import report
from reproduce.spec import claims as registry
from reproduce.protocol.claim_files import mean_ci
from reproduce.spec.paths import ROOT
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses import plotting

HN, KA, SN, BC = "Triplet-HN", "Kendall SW-HS alone", "Triplet-SN", "BCLS"  # Table VIII arms (experiments.py)
FULL = "w/o SW-HS (full Kendall)"  # Fig. 5c–d: the O(N³) Kendall loss of Eq. 17
BENCH_CSV = ROOT / "results" / "benchmarks" / "kendall_scaling.csv"  # written by benchmarks/bench_kendall_scaling.py
BENCH_FULL, BENCH_SWHS = "full Kendall (Eq. 17)", "SW-HS β=0.1"  # B7's two losses in that file
SEMANTIC = {"mapr": "mAP@R", "rprec": "R-Precision", "r1": "R@1"}  # Tables VII, IX
ALL_IMAGES = "all test images"
POOLED_STD = "std of within-image caption cosine (pooled pairs)"  # the α rule's std (Sec. III-C)


def _default_beta() -> float:
    return float(inspect.signature(KendallSWHSLoss.__init__).parameters["beta"].default)


# --- derived columns and labels --------------------------------------------------------------------
def add_tau(df: pd.DataFrame, yard: str) -> pd.DataFrame:
    """A copy with ``tau_sbert`` (Kendall τ of Eq. 2 on the S-BERT pseudo labels, mean of I→T and T→I — the
    one τ of Fig. 5b) and ``tau_yard`` (the same against the yardstick ``yard``; on Flickr8k, whose record
    has no ``tau_*_expert``, the Kendall τ-b of the similarity with the expert scores, ``expert_kendall_all``)."""
    out = df.copy()
    out["tau_sbert"] = (out["tau_i2t_sbert"] + out["tau_t2i_sbert"]) / 2
    if f"tau_i2t_{yard}" in out:
        out["tau_yard"] = (out[f"tau_i2t_{yard}"] + out[f"tau_t2i_{yard}"]) / 2
    else:
        out["tau_yard"] = out["expert_kendall_all"]
    return out


def tau_yard_text(human: bool) -> tuple[str, str]:
    """(what ``tau_yard`` of :func:`add_tau` is, its axis label) — Table VI's τ against the yardstick."""
    if human:
        return (
            "Kendall τ-b of the similarity vs mean expert score, judged pairs",
            "Kendall τ-b, expert (unitless)",
        )
    return "Kendall τ vs true relevance r*, mean of I→T and T→I", "Kendall τ, true r* (unitless)"


def column_label(key: str, human: bool) -> str:
    """The readable header of a column: :func:`reproduce.spec.labels.label`, the derived τ columns of
    :func:`add_tau` (Eq. 2), or the key itself for a column the label map does not know."""
    derived = {
        "tau_sbert": "Kendall τ over all candidates, mean of I→T and T→I (Sentence-BERT pseudo labels) [−1…1] ↑",
        "tau_yard": tau_yard_text(human)[0] + " [−1…1] ↑",
    }
    if key in derived:
        return derived[key]
    base = key[:-4] if key.endswith("_std") else key
    if base in derived:
        return "std over seeds of " + derived[base]
    return labels.label(key) if labels.has_label(key) else key


def headers(df: pd.DataFrame, human: bool) -> pd.DataFrame:
    """``df`` with readable column headers (:func:`column_label`) — for displayed and Markdown tables."""
    return df.rename(columns=lambda c: column_label(str(c), human))


def show_table(pg, frame, cols, name, artefact, what, units, paper=None, rows=None, digits=1) -> pd.DataFrame:
    """One table of the notebook (Tables VI–IX, Fig. 5 data): :func:`reproduce.present.report.summary` of ``cols`` per
    arm (in ``rows`` order when given) → ``mean ± std`` text with the ‡ collapse marks
    (:func:`reproduce.present.report.pretty`) → the paper's blocks below ours
    (:func:`reproduce.present.report.side_by_side`)
    → readable headers (:func:`headers`) → ``<name>_<data>.csv`` (numbers) and ``.md`` (caption, with the
    collapse note when a row collapsed) under the page's results, and displayed. Returns the summary."""
    summ = report.summary(frame, cols)
    summ = summ if rows is None else summ.reindex(rows)
    view = report.pretty(summ, cols, digits)
    view = headers(view if paper is None else report.side_by_side(view, paper, pg.ours), pg.human)
    cap = report.caption(artefact, what, units, pg.setup) + collapse_note_if(summ)
    report.publish(pg, name, summ, report.flat(view), cap)
    _display(view)
    return summ


def _display(obj) -> None:
    display(obj)


def collapse_note_if(summary: pd.DataFrame) -> str:
    """``" " + report.collapse_note()`` when a row of a :func:`reproduce.present.report.summary` table has a
    collapsed run (it is marked ‡ by :func:`reproduce.present.report.pretty`), else ``""`` — for captions."""
    n = summary.get("n_collapsed")
    return " " + report.collapse_note() if n is not None and (n > 0).any() else ""


def primary_text(cid: str, data: str) -> dict:
    """``statement``, ``metric`` and ``arms`` of a notebook-measured primary row of ``cid`` on ``data``: the
    registry's statement and its ``legacy`` metric / arms texts (``reproduce/data/claims.toml``), so the row is
    recognised as the primary (``reproduce.protocol.ledger_rows.build_ledger``) and nothing is retyped."""
    p = registry.claim(cid).primary
    if p.measure != "notebook":
        raise ValueError(f"{cid}: its primary is an arm contrast, added by Page.finish(); do not write it")
    leg = p.legacy_for(data)
    return {"statement": p.statement, "metric": leg["metric"], "arms": leg["arms"]}


def fmt_set(values) -> str:
    """``{0, 0.1, 0.4}``: swept values as the claim texts write them."""
    return "{" + ", ".join(f"{float(v):g}" for v in values) + "}"


def single_value(blocks: dict) -> float:
    """The one number of a one-cell paper table (:func:`reproduce.spec.paper_numbers.table`), e.g. the
    within-image caption-similarity std BCLS quotes (Sec. III-C)."""
    (frame,) = blocks.values()
    if frame.shape != (1, 1):
        raise ValueError(f"expected a one-cell paper table, got shape {frame.shape}")
    return float(frame.iloc[0, 0])


# --- B1: Fig. 4 ------------------------------------------------------------------------------------
def early_val_rsum(hist: pd.DataFrame) -> tuple[pd.DataFrame, int, int]:
    """B1's convergence contrast (Fig. 4): per (arm, seed) the mean validation RSUM over epochs
    1..⌊E/2⌋ (at least epoch 1), E the last epoch in ``hist`` (``Study.histories``). Returns that frame
    (``arm, seed, val_rsum``), ⌊E/2⌋ and E."""
    n_epochs = int(hist["epoch"].max())
    first_half = max(1, n_epochs // 2)
    early = hist[hist["epoch"] <= first_half].groupby(["arm", "seed"], as_index=False)["val_rsum"].mean()
    return early, first_half, n_epochs


def fig4(hist: pd.DataFrame, arms: list[str], title: str):
    """Fig. 4 analogue: training loss per batch (log scale: a warm-up epoch on all negatives sums ~100× the
    loss of the others) and validation RSUM per epoch of ``arms`` (mean over seeds with a 95% band,
    :func:`reproduce.present.report.curves`); warm-up epochs (``hist.warmup``) shaded grey and named in the legend; one
    legend outside the panels, integer epochs."""
    sub = hist[hist["arm"].isin(arms)]
    fig = report.curves(
        sub,
        [("train_loss", "training loss per batch (unitless, log scale)"), ("val_rsum", "validation RSUM (%)")],
        title=title,
    )
    loss_ax = fig.axes[0]
    if (sub["train_loss"] > 0).all():
        loss_ax.set_yscale("log")
    warm = sub[sub["warmup"].fillna(False).astype(bool)] if "warmup" in sub else sub.iloc[:0]
    if len(warm):
        who = ", ".join(dict.fromkeys(warm["arm"]))
        for ax in fig.axes:
            for e in sorted(warm["epoch"].unique()):
                ax.axvspan(
                    e - 0.5, e + 0.5, color="grey", alpha=0.15, lw=0, label=f"warm-up epoch on all negatives ({who})"
                )
    plotting.legend_outside(report.int_epochs(fig))
    return plotting.fit_text(fig)


# --- B4 / B8: Tables VI, VII, IX ---------------------------------------------------------------------
def table6_arms(ov: pd.DataFrame) -> dict[str, str]:
    """Table VI's rows → the shared fair-comparison arm (``Study.results("overview")``): VSE++ (the first arm
    named ``VSE++…``), CVSE++ manual / adaptive ladder, VSE++ + SAM, VSE++ + BCLS (by loss); the first arm of
    each, in ``ov``'s order. A missing one is an error naming the arms there are."""
    loss_of = dict(zip(ov["arm"], ov["loss"]))
    picks = {
        "VSE++": lambda a: a.startswith("VSE++"),
        "CVSE++ (ladder, manual)": lambda a: loss_of[a] == "ladder",
        "CVSE++ (ladder, adaptive)": lambda a: loss_of[a] == "adaptive_ladder",
        "VSE++ + SAM": lambda a: loss_of[a] == "sam",
        "VSE++ + BCLS": lambda a: loss_of[a] == "bcls",
    }
    out = {}
    for row, pred in picks.items():
        hit = [a for a in dict.fromkeys(ov["arm"]) if pred(a)]
        if not hit:
            raise KeyError(f"no overview arm for Table VI row {row!r}; arms: {sorted(set(ov['arm']))}")
        out[row] = hit[0]
    return out


def semantic_keys(columns, yard: str) -> list[str]:
    """Tables VII / IX metric keys against ``yard``'s semantic positives present in ``columns``: mAP@R,
    R-Precision, R@1, image→text then text→image."""
    have = set(columns)
    return [k for d in ("i2t", "t2i") for m in SEMANTIC if (k := f"{m}_{d}_{yard}") in have]


def on_yardstick(blocks: dict, yard: str) -> dict:
    """The paper's ECCV-Caption columns (``mapr_i2t`` …) renamed to our yardstick's keys (``mapr_i2t_true``
    …): ECCV Caption's semantic positives play the role of ``yard``'s in Tables VII and IX."""
    return {src: b.rename(columns=lambda c: f"{c}_{yard}") for src, b in blocks.items()}


def semantic_effect(df: pd.DataFrame, what: str, yard: str, arm_a: str, arm_b: str) -> tuple[list[float], list]:
    """B8 (Tables VII, IX): per-seed ``arm_a − arm_b`` of ``what`` (``mapr`` / ``rprec`` / ``r1``) against
    ``yard``'s positives, averaged over the directions the record has; returns (effects, keys used)."""
    cols = [c for c in (f"{what}_i2t_{yard}", f"{what}_t2i_{yard}") if c in df.columns]
    if not cols:
        raise KeyError(f"no {what} keys against {yard!r} in the results")
    return paired_effect(df.assign(_m=df[cols].mean(axis=1)), "_m", arm_a, arm_b), cols


# --- B5 / B6: Fig. 5 --------------------------------------------------------------------------------
def within_image_similarity(caption_matrix, n_images: int, cpi: int) -> np.ndarray:
    """The similarities of each image's ``cpi`` captions to each other (upper triangle, ``cpi·(cpi−1)/2``
    per image) as an (n_images, pairs) array — what BCLS sets α to the std of (Sec. III-C).
    ``caption_matrix(rows, cols)`` gives the provider's caption × caption relevance (captions grouped by
    image, as in every split)."""
    iu = np.triu_indices(cpi, k=1)
    idx = [np.arange(i * cpi, (i + 1) * cpi) for i in range(n_images)]
    return np.stack([np.asarray(caption_matrix(c, c))[iu] for c in idx])


def alpha_std_table(within: np.ndarray, paper_blocks: dict) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Sec. III-C: std of the pooled within-image caption similarities (:func:`within_image_similarity`,
    ddof 1), the mean per-image std, the mean similarity, the counts, and the paper's value(s). Returns
    (numbers, the same as readable text: counts as integers, the rest to 4 significant digits)."""
    rows = {
        POOLED_STD: (float(within.std(ddof=1)), "ratio"),
        "mean per-image std": (float(within.std(axis=1, ddof=1).mean()), "ratio"),
        "mean within-image caption cosine": (float(within.mean()), "ratio"),
        "train images": (within.shape[0], "count"),
        "caption pairs": (within.size, "count"),
        **{src: (single_value({src: b}), "ratio") for src, b in paper_blocks.items()},
    }
    nums = pd.DataFrame({"value": [float(v) for v, _ in rows.values()]}, index=list(rows))
    text = pd.DataFrame({"value": [labels.fmt_number(v, k) for v, k in rows.values()]}, index=list(rows))
    return nums, text


def show_alpha_std(pg, within: np.ndarray, paper_blocks: dict) -> float:
    """:func:`alpha_std_table` saved as ``alpha_std_<data>`` and displayed; returns the pooled std (Sec. III-C)."""
    nums, text = alpha_std_table(within, paper_blocks)
    cap = (
        f"Within-image Sentence-BERT caption similarity on the {pg.data} TRAIN split (cosine, unitless; "
        f"off-diagonal pairs of each image's captions, {within.shape[1]} pairs per image); last row: the paper's value."
    )
    report.save_table(nums, pg.out, pg.paper, f"alpha_std_{pg.data}", cap, text)
    _display(text)
    return float(nums.loc[POOLED_STD, "value"])


def sweep_value(df: pd.DataFrame, symbol: str) -> pd.Series:
    """The swept value in an arm name (``α=0.2`` → 0.2, ``β=0.05`` → 0.05); NaN for other arms."""
    return df["arm"].str.extract(rf"{re.escape(symbol)}=([\d.]+)")[0].astype(float)


def peak_setup(grid, std: float) -> tuple[float, list[float]]:
    """B5 (Fig. 5a,b): the grid α nearest the measured ``std`` (the smaller on a tie) and the others."""
    grid = sorted(float(a) for a in grid)
    star = min(grid, key=lambda a: abs(a - std))
    return star, [a for a in grid if a != star]


def peak_effect(df: pd.DataFrame, col: str, star: float, others: list[float], x: str = "alpha") -> list[float]:
    """B5's peak contrast per seed: ``col`` at ``x = star`` minus its mean over ``x ∈ others`` (seeds
    lacking a value are dropped)."""
    piv = df.pivot_table(index="seed", columns=x, values=col)
    return list((piv[star] - piv[others].mean(axis=1)).dropna())


def stride_points(betas, default: float | None = None) -> tuple[float, float, float]:
    """B6 (Fig. 5c,d): the smallest and largest β of the sweep and the reference β for the cost contrast
    (the loss's default β when swept, else the middle value)."""
    betas = sorted(float(b) for b in betas)
    default = _default_beta() if default is None else default
    return betas[0], betas[-1], default if default in betas else betas[len(betas) // 2]


def arm_at(df: pd.DataFrame, x: str, value: float) -> str:
    """The arm whose swept ``x`` equals ``value``."""
    hit = df.loc[df[x] == value, "arm"]
    if hit.empty:
        raise KeyError(f"no arm with {x} = {value}; values: {sorted(df[x].dropna().unique())}")
    return str(hit.iloc[0])


def sweep_figure(df, ref, x, ys, xlabel, ref_label, sweep_label, title, logx=False, marks=None):
    """Fig. 5 analogue: ``ys`` vs the swept ``x`` (mean over seeds with 95% CI bars,
    :func:`reproduce.present.report.sweep_plot`, ``marks`` as grey vertical lines named in the legend) and, per panel,
    the reference arm ``ref`` (rows of another arm) as a dotted line at its mean with its 95% Student-t band over
    seeds; one legend outside the panels."""
    fig = report.sweep_plot(df, x, ys, xlabel, logx=logx, title=title, marks=marks)
    values = sorted(df[x].unique())
    for ax, (col, _) in zip(fig.axes, ys):
        if logx:
            ax.set_xticks(values, [f"{v:g}" for v in values])
            ax.xaxis.set_minor_formatter(NullFormatter())
        m, lo, hi = mean_ci(ref[col])
        ax.axhline(m, ls=":", c="C3")
        if np.isfinite(lo):
            ax.axhspan(lo, hi, color="C3", alpha=0.12)
    handles = [plt.Line2D([], [], marker="o", c="C0"), plt.Line2D([], [], ls=":", c="C3")]
    names = [sweep_label, ref_label + ", mean ± 95% CI"]
    for h, name in zip(*fig.axes[0].get_legend_handles_labels()):  # the marks of sweep_plot
        handles.append(h)
        names.append(name)
    for ax in fig.axes:
        if ax.get_legend() is not None:
            ax.get_legend().remove()
    fig.axes[-1].legend(handles, names, fontsize=8, **plotting.LEGEND_RIGHT)
    return plotting.fit_text(fig)


# --- B7: Sec. III-D micro-benchmark ------------------------------------------------------------------
def read_bench(path: Path | str = BENCH_CSV) -> pd.DataFrame | None:
    """The Kendall-loss timings of ``benchmarks/bench_kendall_scaling.py`` (columns ``rep, loss, N, ms``),
    or None when the file is missing."""
    path = Path(path)
    if not path.is_file():
        return None
    df = pd.read_csv(path)
    missing = {"rep", "loss", "N", "ms"} - set(df.columns)
    if missing:
        raise ValueError(f"{path}: columns {sorted(missing)} missing (have {list(df.columns)})")
    return df


def loglog_slopes(bench: pd.DataFrame) -> pd.DataFrame:
    """Per (repetition, loss) the least-squares slope of log(time) vs log(N) — the exponent of the cost's
    growth with the batch size (Sec. III-D: ≈ 3 for the full Kendall loss, ≈ 2 for SW-HS)."""
    rows = [
        {"rep": rep, "loss": loss, "slope": float(np.polyfit(np.log(g["N"]), np.log(g["ms"]), 1)[0])}
        for (rep, loss), g in bench.groupby(["rep", "loss"], sort=True)
    ]
    return pd.DataFrame(rows)


def b7_table(bench: pd.DataFrame, slopes: pd.DataFrame) -> pd.DataFrame:
    """B7's table: median ms per loss and N over repetitions, and the mean and std over repetitions of the
    log–log slope (:func:`loglog_slopes`)."""
    t = bench.pivot_table(index="loss", columns="N", values="ms", aggfunc="median")
    t.columns = [f"N={n} (ms)" for n in t.columns]
    return t.join(slopes.groupby("loss")["slope"].agg(["mean", "std"]).add_prefix("log-log slope "))


def b7_effects(slopes: pd.DataFrame, full: str = BENCH_FULL, swhs: str = BENCH_SWHS) -> list[float]:
    """B7 per repetition: slope(full Kendall) − slope(SW-HS), in repetition order (> 0: SW-HS grows slower)."""
    piv = slopes.pivot(index="rep", columns="loss", values="slope").sort_index()
    return list(piv[full] - piv[swhs])


def show_b7(pg, bench: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """B7's table (:func:`b7_table`) and figure (:func:`b7_figure`) saved as ``b7_complexity_<data>`` and
    shown; returns (table, :func:`loglog_slopes`)."""
    slopes = loglog_slopes(bench)
    t = b7_table(bench, slopes)
    cap = (
        f"B7: forward + backward time of the Kendall losses on one CPU thread, median over {bench['rep'].nunique()} "
        "repetitions (each the median of 3 calls, 1 call above 0.2 s), in ms; log–log slope of time vs N per "
        "repetition (mean, std). Random inputs, seed 0; independent of the data set "
        "(benchmarks/bench_kendall_scaling.py)."
    )
    report.save_table(t, pg.out, pg.paper, f"b7_complexity_{pg.data}", cap, t.round(3))
    _display(t.round(3))
    fig = b7_figure(bench, "B7: Kendall loss cost vs batch size (1 CPU thread)")
    report.save_figure(fig, pg.out, pg.paper, f"b7_complexity_{pg.data}")
    plt.show()
    return t, slopes


def b7_note(bench: pd.DataFrame, table: pd.DataFrame) -> str:
    """The note of B7's row: where the timings come from, N, repetitions and the two mean slopes."""
    return (
        f"micro-benchmark (benchmarks/bench_kendall_scaling.py), N ∈ {sorted(int(n) for n in bench['N'].unique())}, "
        f"{bench['rep'].nunique()} repetitions (the 'seeds'); slopes full "
        f"{table.loc[BENCH_FULL, 'log-log slope mean']:.2f}, SW-HS {table.loc[BENCH_SWHS, 'log-log slope mean']:.2f}"
    )


def b7_figure(bench: pd.DataFrame, title: str):
    """B7: forward + backward time vs N per loss on log–log axes (mean over repetitions with a 95% band)."""
    fig, ax = plt.subplots(figsize=(6, 4))
    sns.lineplot(data=bench, x="N", y="ms", hue="loss", **plotting.BANDS, marker="o", ax=ax)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("batch size N (pairs)")
    ax.set_ylabel("forward + backward time (ms, log scale)")
    ax.set_title(title)
    ax.legend(fontsize=8, title=None, **plotting.LEGEND_RIGHT)
    return plotting.fit_text(fig)


# --- B9: Table II -----------------------------------------------------------------------------------
def fold_indices(n_images: int, n_folds: int = 5, seed: int = 0) -> list[np.ndarray]:
    """Disjoint folds of the test images (a seeded permutation split in ``n_folds``): B9's "seeds"."""
    return np.array_split(np.random.default_rng(seed).permutation(n_images), n_folds)


def _pearson(x, y) -> float:
    return float(np.corrcoef(x, y)[0, 1]) if len(x) > 1 and np.ptp(x) > 0 and np.ptp(y) > 0 else np.nan


def pseudo_label_agreement(providers: dict, split, folds: list) -> pd.DataFrame:
    """Table II analogue: Pearson r of each pseudo-label provider (name → images × captions matrix) and
    of the binary ground truth with the yardstick, on all test images and per fold of :func:`fold_indices`,
    over all pairs and the non-ground-truth pairs. Yardstick: the human judgements in ``split.extras``
    (``expert``, ``crowd``; judged pairs, :func:`coherent_itr.metrics.human.provider_agreement`) when
    present, else the true relevance r* of every pair. The binary indicator is constant on non-GT pairs:
    NaN there. Rows: ``yardstick, fold, provider, pairs, pearson, n_pairs``."""
    ioc = np.asarray(split.image_of_caption)
    parts = [(ALL_IMAGES, None)] + [(f"fold {k}", f) for k, f in enumerate(folds)]
    human = {k: as_judgements(split.extras[k], k) for k in ("expert", "crowd") if k in split.extras}
    rows = []
    for src, j in human.items():
        for fold, imgs in parts:
            keep = np.ones(len(j), bool) if imgs is None else np.isin(j.image_idx, imgs)
            sub = HumanJudgements(j.image_idx[keep], j.caption_idx[keep], j.score[keep], j.name, j.positive_threshold)
            ag = provider_agreement(providers, sub, ioc)
            for p in [*providers, "binary"]:
                for pairs in ("all", "nongt"):
                    r = np.nan if (p, pairs) == ("binary", "nongt") else ag[f"{src}_{p}_pearson_{pairs}"]
                    n = ag[f"{src}_{p}_n_{pairs}"]
                    rows.append(dict(yardstick=src, fold=fold, provider=p, pairs=pairs, pearson=r, n_pairs=n))
    if not human:
        true = split.true_relevance
        if true is None:
            true = data_mod.relevance_provider("true", split).matrix()
        gt = ioc[None, :] == np.arange(split.n_images)[:, None]
        mats = {**providers, "binary": gt.astype(np.float32)}
        for fold, imgs in parts:
            imgs = np.arange(split.n_images) if imgs is None else imgs
            for p, m in mats.items():
                for pairs in ("all", "nongt"):
                    mask = np.ones((len(imgs), split.n_captions), bool) if pairs == "all" else ~gt[imgs]
                    r = _pearson(m[imgs][mask], true[imgs][mask])
                    rows.append(
                        dict(yardstick="true", fold=fold, provider=p, pairs=pairs, pearson=r, n_pairs=float(mask.sum()))
                    )
    return pd.DataFrame(rows)


def table2(agree: pd.DataFrame) -> pd.DataFrame:
    """Table II analogue from :func:`pseudo_label_agreement`: per (yardstick, provider) Pearson r and the
    number of pairs on all test images, and the std of r over the folds; all pairs and non-GT pairs."""
    names = {"all": "all pairs", "nongt": "non-GT pairs"}
    full = agree[agree["fold"] == ALL_IMAGES].pivot_table(
        index=["yardstick", "provider"], columns="pairs", values=["pearson", "n_pairs"], sort=False
    )
    out = pd.DataFrame(index=full.index)
    for pairs in ("all", "nongt"):
        if ("pearson", pairs) in full:
            out[f"Pearson r, {names[pairs]}"] = full[("pearson", pairs)]
    sd = agree[agree["fold"] != ALL_IMAGES].groupby(["yardstick", "provider", "pairs"])["pearson"].std()
    for pairs in ("all", "nongt"):
        out[f"std over folds, {names[pairs]}"] = sd.xs(pairs, level="pairs").reindex(out.index)
    for pairs in ("all", "nongt"):
        out[f"pairs, {names[pairs]}"] = full[("n_pairs", pairs)].round().astype("Int64")
    return out


def show_table2(pg, agree: pd.DataFrame, paper_blocks: dict) -> pd.DataFrame:
    """:func:`table2` saved as ``table2_<data>`` (the paper's Pearson r listed in the caption) and shown beside
    the paper's table; returns it."""
    t = table2(agree)
    ((src, paper),) = paper_blocks.items()
    yard = "expert / crowd human judgements" if pg.human else "true relevance r*"
    cap = (
        f"Table II analogue ({pg.data}, test split): Pearson r (unitless) of pseudo-label providers with the {yard}; "
        "'binary' is the ground-truth indicator (undefined, –, on non-GT pairs); std over "
        f"{agree['fold'].nunique() - 1} disjoint image folds. {src}: "
        + ", ".join(f"{k} {v:.3f}" for k, v in paper.iloc[:, 0].items())
        + "."
    )
    report.save_table(t, pg.out, pg.paper, f"table2_{pg.data}", cap, labels.readable(t, arms=False))
    _display(labels.readable(t, arms=False))
    _display(paper.rename(columns={paper.columns[0]: f"Pearson r ({src})"}))
    return t


def b9_effects(agree: pd.DataFrame, yard: str, pairs: str) -> list[float]:
    """B9 per fold: Pearson r of S-BERT minus that of CIDEr-D with ``yard`` on ``pairs`` (``all`` / ``nongt``)."""
    fa = agree[(agree["yardstick"] == yard) & (agree["fold"] != ALL_IMAGES) & (agree["pairs"] == pairs)]
    piv = fa.pivot(index="fold", columns="provider", values="pearson")
    return list((piv["sbert"] - piv["cider"]).dropna())
