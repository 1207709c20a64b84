"""Listwise paper (Li et al., *Integrating Listwise Ranking into Pairwise-based Image-Text Retrieval*):
what ``notebooks/04_listwise.ipynb`` computes — Table I (RSC relevance vs the binary annotation as rankers of semantic
positives), Fig. 5 (early convergence), Figs. 6–7 (NDCG-hat vs the true batch NDCG, the approximation error per τ),
Figs. 8–9 (τ sweep) and Table VIII (cost of the listwise term, with ``benchmarks/bench_listwise_overhead.py``). The
notebook declares the claims and draws; every number it shows comes from a function here, each tested in
``tests/reproduce/present/analyses/test_analyses_listwise.py``.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns
from IPython.display import Markdown, display

from coherent_itr import metrics, tie_aware
from coherent_itr import data as data_mod
from coherent_itr.evaluation import TRUE_POSITIVE_THRESHOLD

from reproduce.protocol import claim_rows

from reproduce.spec import labels

from reproduce.present import report
from reproduce.spec.paths import ROOT
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses import plotting

# Fig. 7 (b), computed also where a run is exported (re-exported: the notebook reads them as lw.<name>)
from reproduce.present.analyses.sndcg_error import (
    DIRECTIONS as DIRECTIONS,
    FIG7B as FIG7B,
    SOURCES as SOURCES,
    TAUS as TAUS,
    batch_errors as batch_errors,
    direct_errors as direct_errors,
    error_arrays as error_arrays,
    run_errors as run_errors,
    seed_errors as seed_errors,
    study_direct_errors as study_direct_errors,
    training_relevance as training_relevance,
)

TRIP, ALONE, BOTH = "Triplet (mean)", "S-NDCG alone", "Triplet + S-NDCG"
SEMANTIC = {"mapr": "mAP@R", "rprec": "R-P", "r1": "R@1"}  # Table I / VII metric families → the paper's names
N3_TAU = 1e-3  # N3 is tested inside the paper's range "τ < 1e-2" (Sec. IV-C3)
HAT, HARD = "NDCG-hat (smooth ranks)", "NDCG (hard ranks)"
TIES = {"pessimistic": "pessimistic (package rule)", "expected": "expected over tied orders"}
# Table I columns that are not metric keys of reproduce.spec.labels (counts and shares of the positive sets)
T1_EXTRA = {
    "positives_per_image": "positives per image (count)",
    "own_caption_share_of_positives": "image's own captions among its positives (%)",
}
# the micro-benchmark's columns (benchmarks/bench_listwise_overhead.py, overhead_benchmark)
BENCH_NAMES = {
    "size": "model size",
    "text_hidden": "GRU hidden units",
    "batch_size": "batch size",
    "step_triplet_ms": "Triplet (mean) step [ms]",
    "step_listwise_ms": "Triplet + S-NDCG step [ms]",
    "sndcg_ms": "S-NDCG term alone, forward + backward [ms]",
    "overhead_ms": "overhead per step [ms]",
    "overhead_share_pct": "overhead share of the listwise step [%]",
    "sndcg_share_pct": "S-NDCG term share of the listwise step [%]",
    "rounds": "timed rounds",
}
# Fig. 7 (b) summary columns (error_table)
ERROR_NAMES = {
    "mean": "mean |NDCG-hat − NDCG|",
    "std": "std over batches",
    "max": "max",
    "count": "batches",
}


# --- Table I -------------------------------------------------------------------------------------------
def positives(test, human: bool) -> tuple[np.ndarray | None, str]:
    """The yardstick's positive matrix (images × captions) of Table I / VII and its definition in words:
    on the synthetic world true relevance r* ≥ ``TRUE_POSITIVE_THRESHOLD``; with human judgements
    (``human``) the judged pairs whose expert mean score ≥ ``EXPERT_POSITIVE_THRESHOLD`` (the stand-in
    for the paper's ECCV Caption positives, Table I); ``None`` when the split has no such judgements."""
    shape = (test.n_images, test.n_captions)
    if human:
        if "expert" not in test.extras:
            return None, "no expert judgements on this split"
        pos = metrics.positive_matrix(metrics.human.as_judgements(test.extras["expert"], "expert"), shape)
        return pos, f"expert mean score ≥ {metrics.EXPERT_POSITIVE_THRESHOLD:g} (judged pairs only)"
    true_rel = data_mod.relevance_provider("true", test).matrix()
    return true_rel >= TRUE_POSITIVE_THRESHOLD, f"true relevance r* ≥ {TRUE_POSITIVE_THRESHOLD}"


def binary_annotation(image_of_caption, n_images: int) -> np.ndarray:
    """Table I's "pairwise annotation": 1 for an image's own captions, 0 elsewhere (images × captions)."""
    ioc = np.asarray(image_of_caption)
    out = np.zeros((n_images, len(ioc)), dtype=np.float32)
    out[ioc, np.arange(len(ioc))] = 1.0
    return out


def rankers(test) -> dict[str, np.ndarray]:
    """Table I's score matrices: the binary annotation and RSC relevance (Listwise Eq. 8, Sentence-BERT
    on the unit scale r = (1 + s)/2) as the paper's text (``paired``) and the authors' code (``max5``)."""
    out = {"binary annotation": binary_annotation(test.image_of_caption, test.n_images)}
    for mode in ("paired", "max5"):
        out[f"RSC ({mode})"] = data_mod.relevance_provider("sbert", test, mode=mode, scale="unit").matrix()
    return out


def table1_folds(pos: np.ndarray, scores: dict, image_of_caption, yard: str, n_folds: int = 5) -> pd.DataFrame:
    """Table I per fold: mAP@R, R-P, R@1 (%, ``coherent_itr.metrics.positive_set_metrics``) of ranking the
    positives ``pos`` by each score matrix, on ``n_folds`` disjoint folds of images (with their captions),
    under the package's pessimistic tie rule and as the exact expectation over every order of the tied scores
    (``coherent_itr.tie_aware.positive_set_metrics``, scores within ``tie_aware.TIE_TOL`` tied);
    plus the positives per image and the share (%) of positives that are the image's own captions.
    Metric columns are ``<family>_<direction>_<yard>`` (``yard`` names the yardstick ``pos`` comes from)."""
    ioc = np.asarray(image_of_caption)
    binary = binary_annotation(ioc, pos.shape[0]) > 0
    keys = [f"{m}_{d}" for d in DIRECTIONS for m in SEMANTIC]  # positive_set_metrics' keys
    rows = []
    for f, images in enumerate(np.array_split(np.arange(pos.shape[0]), n_folds)):
        caps = np.flatnonzero(np.isin(ioc, images))
        sub = np.ix_(images, caps)
        sub_img = np.searchsorted(images, ioc[caps])
        p = pos[sub]
        for name, score in scores.items():
            s = score[sub].astype(np.float64)
            for ties, m in (
                (TIES["pessimistic"], metrics.positive_set_metrics(s, sub_img, p)),
                (TIES["expected"], tie_aware.positive_set_metrics(s, p)),
            ):
                rows.append(
                    {
                        "fold": f,
                        "ranker": name,
                        "ties": ties,
                        **{f"{k}_{yard}": m[k] for k in keys},
                        "positives_per_image": p.sum(axis=1).mean(),
                        "own_caption_share_of_positives": 100 * (p & binary[sub]).sum() / max(1, p.sum()),
                        "queries_i2t": m["mapr_i2t_nq"],
                        "queries_t2i": m["mapr_t2i_nq"],
                    }
                )
    return pd.DataFrame(rows)


def n6_gaps(t1: pd.DataFrame, yard: str) -> pd.DataFrame:
    """N6 (Table I): per RSC mode and metric family, the per-fold gap RSC − binary annotation of the
    direction-averaged metric ((i2t + t2i)/2), as the expectation over tied orders (``expected``, the tested
    effects) and under the pessimistic rule (``pessimistic``, stated in the note). One row per (mode, family)."""
    rows = []
    by_rule = {rule: t1[t1["ties"] == label].set_index(["ranker", "fold"]) for rule, label in TIES.items()}
    for mode in ("paired", "max5"):
        for met, name in SEMANTIC.items():
            gap = {}
            for rule, tab in by_rule.items():
                both = (tab[f"{met}_i2t_{yard}"] + tab[f"{met}_t2i_{yard}"]) / 2
                gap[rule] = (both.loc[f"RSC ({mode})"] - both.loc["binary annotation"]).tolist()
            rows.append({"mode": mode, "metric": met, "name": name, **gap})
    return pd.DataFrame(rows)


def on_yardstick(blocks: dict, yard: str) -> dict:
    """Paper blocks (``paper_numbers.table``) whose semantic columns ``mapr_i2t`` … (the paper's ECCV
    Caption positives, Tables I, VII) are renamed to our keys against ``yard`` (``mapr_i2t_true`` …)."""
    ren = {f"{m}_{d}": f"{m}_{d}_{yard}" for m in SEMANTIC for d in DIRECTIONS}
    return {src: b.rename(columns=ren) for src, b in blocks.items()}


def headers(df: pd.DataFrame) -> pd.DataFrame:
    """A display copy with readable column headers: ``reproduce.spec.labels`` for metric keys, :data:`T1_EXTRA`,
    :data:`BENCH_NAMES` and :data:`ERROR_NAMES` for this notebook's own columns; any other keeps its name."""
    own = {**T1_EXTRA, **BENCH_NAMES, **ERROR_NAMES}
    return df.rename(columns=lambda c: labels.label(c) if labels.has_label(str(c)) else own.get(c, c))


def legends_outside(fig):
    """One legend for ``fig`` right of its panels (every panel's entries, each label once;
    :func:`reproduce.present.analyses.plotting.legend_outside`), text fitted; returns ``fig``."""
    plotting.legend_outside(fig, fontsize=7)
    return plotting.fit_text(fig)


# --- Tables V–VII ------------------------------------------------------------------------------------------
def semantic_columns(df: pd.DataFrame, yard: str, families=tuple(SEMANTIC)) -> list[str]:
    """Table VII's columns present in ``df``: ``<family>_<direction>_<yard>``, families outer, i2t first."""
    return [c for d in DIRECTIONS for m in families if (c := f"{m}_{d}_{yard}") in df]


def ndcg_columns_of(df: pd.DataFrame, yard: str) -> list[str]:
    """Table VII's NDCG@100 columns present: against Sentence-BERT (the training signal) and ``yard``."""
    want = [f"ndcg100_{d}_{r}" for r in ("sbert", yard) for d in DIRECTIONS]
    return [c for c in want if c in df]


def direction_mean(df: pd.DataFrame, family: str, yard: str) -> pd.Series:
    """Per row, the mean of ``<family>_i2t_<yard>`` and ``<family>_t2i_<yard>`` (Table VII's two
    directions, as the claims N2 / N4 average them); all-NaN when neither column is present."""
    cols = [c for c in (f"{family}_{d}_{yard}" for d in DIRECTIONS) if c in df]
    return df[cols].mean(axis=1) if cols else pd.Series(np.nan, index=df.index)


def fig_tables5_7(df5: pd.DataFrame, yard: str, title: str):
    """Tables V–VII as bars: test RSUM per arm (left) and mAP@R against ``yard`` positives per direction
    (right, one group per direction); bars are means over seeds, error bars 95% bootstrap intervals over seeds
    (seaborn); one legend outside."""
    maps = semantic_columns(df5, yard, ("mapr",))
    long = df5.melt(id_vars=["arm", "seed"], value_vars=["rsum", *maps], var_name="metric", value_name="value")
    rs = long["metric"] == "rsum"
    long["direction"] = long["metric"].map(lambda m: labels.DIRECTIONS.get(m.split("_")[1], m) if m != "rsum" else "")
    arms = list(dict.fromkeys(long["arm"]))
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.2, 1.4]})
    sns.barplot(
        data=long[rs],
        x="arm",
        y="value",
        hue="arm",
        order=arms,
        hue_order=arms,
        **plotting.BANDS,
        capsize=0.1,
        ax=axes[0],
        legend=False,
    )
    axes[0].set(ylabel="test RSUM (%, sum of six R@K)", xlabel="")
    sns.barplot(
        data=long[~rs],
        x="direction",
        y="value",
        hue="arm",
        hue_order=arms,
        **plotting.BANDS,
        capsize=0.1,
        ax=axes[1],
    )
    axes[1].set(ylabel=f"mAP@R against {yard} positives (%)", xlabel="retrieval direction")
    fig.suptitle(title)
    plotting.legend_outside(fig)
    return plotting.fit_text(fig)


# --- Figs. 5–7 -----------------------------------------------------------------------------------------------
def early_val_rsum(hist: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """Per (arm, seed) the mean validation RSUM over epochs 1 … max(1, ⌊E/2⌋), E = the last epoch
    logged by any run (warm-up epochs included); returns (that frame, the last epoch used)."""
    half = max(1, int(hist["epoch"].max()) // 2)
    early = hist[hist["epoch"] <= half].groupby(["arm", "seed"], as_index=False)["val_rsum"].mean()
    return early, half


def n7_effects(hist: pd.DataFrame, a: str = BOTH, b: str = TRIP) -> tuple[list[float], pd.DataFrame, str]:
    """N7 (Fig. 5b, "converges quickly"), the primary contrast: per seed the area under the validation
    RSUM curve after the warm-up (mean per epoch over the epochs after the longest warm-up of ``a`` or
    ``b`` that both reached, :func:`reproduce.protocol.claim_rows.curve_mean`), ``a`` − ``b``. Returns the effects,
    the per (arm, seed) frame (``val_rsum``) and the window as text ("epochs 2–6")."""
    area, win = claim_rows.curve_mean(hist[hist["arm"].isin([a, b])], "val_rsum")
    area = area.rename(columns={"value": "val_rsum"})
    if win[0] > win[1]:
        return [], area, "no epoch after the warm-up"
    return paired_effect(area, "val_rsum", a, b), area, claim_rows.window_text(win)


def ndcg_columns(hist: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6: long table (arm, seed, epoch, direction, NDCG-hat, NDCG) of the S-NDCG diagnostics logged
    per epoch — smooth NDCG-hat (Eq. 18) and the hard-rank NDCG of the same batch — under either
    diagnostic prefix (``loss_sndcg/`` inside the composite listwise loss, ``loss_`` for S-NDCG alone)."""
    out = []
    for prefix in ("loss_sndcg/", "loss_"):
        for d in DIRECTIONS:
            hat, true = f"{prefix}ndcg_hat_{d}", f"{prefix}ndcg_{d}"
            if hat in hist and true in hist:
                part = hist[hist[hat].notna()][["arm", "seed", "epoch", hat, true]]
                out.append(part.rename(columns={hat: HAT, true: HARD}).assign(direction=d))
    return pd.concat(out, ignore_index=True) if out else pd.DataFrame(columns=["arm", "seed", "epoch", HAT, HARD])


def tracking_correlations(nd: pd.DataFrame, arm: str = BOTH, min_epochs: int = 3) -> list[float]:
    """N3 (Fig. 6, "NDCG-hat tracks NDCG"): per seed of ``arm``, the Pearson r over epochs of the
    direction-averaged epoch means of NDCG-hat and NDCG; seeds with < ``min_epochs`` epochs or a
    constant series are left out."""
    g = nd[nd["arm"] == arm].groupby(["seed", "epoch"])[[HAT, HARD]].mean()
    out = []
    for _, s in g.groupby(level="seed"):
        if len(s) >= min_epochs and s.std().min() > 0:
            out.append(float(np.corrcoef(s[HAT], s[HARD])[0, 1]))
    return out


def tau_of(arm: str) -> float:
    """The τ of a τ-sweep arm name (``"τ=0.01"`` → 0.01; Figs. 7–9)."""
    return float(arm.split("=")[1])


def training_errors(hist_tau: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7 (a): per (arm, seed, epoch) of the τ-sweep runs, |NDCG-hat − NDCG| of the epoch means,
    averaged over the two directions, with the run's τ as text (``"0.01"``)."""
    ndt = ndcg_columns(hist_tau)
    ndt["error"] = (ndt[HAT] - ndt[HARD]).abs()
    err = ndt.groupby(["arm", "seed", "epoch"], as_index=False)["error"].mean()
    err["τ"] = err["arm"].map(lambda a: f"{tau_of(a):g}")
    return err


def error_table(err_direct: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7 (b) as a table: per (source, τ) the mean, std and max of |NDCG-hat − NDCG| over the
    batches of every seed model, and the number of batches."""
    return err_direct.groupby(["source", "τ"])["error"].agg(["mean", "std", "max", "count"])


def n3_margins(err_direct: pd.DataFrame, tau: float | None = None) -> list[float]:
    """N3 (Fig. 7, "when τ < 1e-2 the approximation error can be stabilized below 0.01"), the primary
    contrast: 0.01 − |NDCG-hat − NDCG| per test batch of the trained models' embeddings
    (:func:`direct_errors`, sources starting "trained") at ``tau`` (default :data:`N3_TAU`, inside the
    paper's range)."""
    tau = N3_TAU if tau is None else tau
    sel = err_direct[np.isclose(err_direct["τ"], tau) & err_direct["source"].str.startswith("trained")]
    return [float(0.01 - e) for e in sel["error"]]


def fig6(nd: pd.DataFrame, title: str):
    """Fig. 6: epoch means of NDCG-hat and NDCG per listwise arm (one panel each), per direction; lines
    are means over seeds, bands 95% bootstrap intervals over seeds (seaborn); one legend outside the panels."""
    long = nd.melt(id_vars=["arm", "seed", "epoch", "direction"], var_name="quantity", value_name="value")
    arms = list(dict.fromkeys(long["arm"]))
    fig, axes = plt.subplots(1, len(arms), figsize=(4.4 * len(arms), 3.4), sharey=True, squeeze=False)
    for ax, arm in zip(axes.flat, arms):
        sns.lineplot(
            data=long[long["arm"] == arm],
            x="epoch",
            y="value",
            hue="quantity",
            style="direction",
            marker="o",
            **plotting.BANDS,
            ax=ax,
        )
        ax.set(title=f"arm = {arm}", xlabel="epoch", ylabel="batch NDCG (0–1, epoch mean)")
    report.int_epochs(fig)
    fig.suptitle(title)
    plotting.legend_outside(fig, fontsize=7)
    return plotting.fit_text(fig)


def fig7(err_epoch: pd.DataFrame, err_direct: pd.DataFrame, batch_size: int, title: str):
    """Fig. 7: |NDCG-hat − NDCG| (log scale) (a) per epoch of the τ-sweep runs, (b) per τ on test batches
    of trained and random embeddings; points are means, bars/bands 95% bootstrap intervals (over seeds in
    (a), over seeds × batches in (b)); dashed line at 0.01 (the paper's bound); each panel's legend right of it."""
    fig, axes = plt.subplots(1, 2, figsize=(13, 3.8))
    sns.lineplot(
        data=err_epoch,
        x="epoch",
        y="error",
        hue="τ",
        marker="o",
        **plotting.BANDS,
        ax=axes[0],
    )
    axes[0].set(ylabel="|NDCG-hat − NDCG| (epoch means, log scale)", title="(a) during training (τ-sweep runs)")
    sns.pointplot(
        data=err_direct,
        x="τ",
        y="error",
        hue="source",
        native_scale=True,
        **plotting.BANDS,
        capsize=0.1,
        ax=axes[1],
    )
    axes[1].set_xscale("log")
    axes[1].set(
        xlabel="τ (sigmoid temperature, log scale)",
        ylabel="|NDCG-hat − NDCG| per batch (log scale)",
        title=f"(b) 10 batches of {batch_size} per seed model",
    )
    for ax, legend_title in zip(axes, ("τ", None)):
        ax.set_yscale("log")
        ax.axhline(0.01, ls="--", c="grey", label="0.01 (the paper's bound)")
        handles, names = ax.get_legend_handles_labels()
        names = [plotting.wrap(n, 28) for n in names]
        ax.legend(handles, names, title=legend_title, fontsize=7, **plotting.LEGEND_RIGHT)
    fig.suptitle(title)
    report.int_epochs(fig)
    return plotting.fit_text(fig)


# --- Figs. 8–9 -----------------------------------------------------------------------------------------------
def fig_tau(dft: pd.DataFrame, ys: list, baseline: pd.Series, title: str):
    """Figs. 8–9: metric vs τ (log scale; :func:`reproduce.present.report.sweep_plot`: mean over seeds, 95%
    interval bars) with the Triplet (mean) mean as a dashed line (``baseline[column]``); legend outside."""
    fig = report.sweep_plot(dft, "τ", ys, "τ (sigmoid temperature, log scale)", logx=True, title=title)
    for ax, (col, _) in zip(fig.axes, ys):
        ax.axhline(baseline[col], ls="--", c="grey", label=f"{TRIP} (mean over seeds)")
    plotting.legend_outside(fig, fontsize=7)
    return plotting.fit_text(fig)


def flat_below(dft: pd.DataFrame, ref: float = 1e-2) -> tuple[list[str], float]:
    """N4 (Fig. 8, "flat for τ ≤ 1e-2"): the sweep's arms with τ < ``ref`` (ascending τ) and the
    equivalence tolerance, 2% of the mean RSUM of the τ = ``ref`` arm."""
    taus = {tau_of(a): a for a in dft["arm"].unique()}
    ref_arm = taus[ref]
    tol = 0.02 * float(dft[dft["arm"] == ref_arm]["rsum"].mean())
    return [taus[t] for t in sorted(t for t in taus if t < ref)], tol


# --- Table VIII (N5) ---------------------------------------------------------------------------------------
def overheads(df5: pd.DataFrame, a: str = BOTH, b: str = TRIP) -> tuple[pd.Series, pd.Series]:
    """N5 (Table VIII): per seed, the relative training-time overhead ``t_a / t_b − 1`` of seconds per
    epoch, and the same of the test encoding time (seeds present in both arms)."""
    ta, tb = df5[df5["arm"] == a].set_index("seed"), df5[df5["arm"] == b].set_index("seed")
    train = (ta["time_train_s_per_epoch"] / tb["time_train_s_per_epoch"] - 1.0).dropna()
    enc = (ta["time_test_encode_s"] / tb["time_test_encode_s"] - 1.0).dropna()
    return train, enc


def paper_overhead(blocks: dict) -> float:
    """The paper's relative training-time overhead of the listwise term (Table VIII: "+ Listwise" seconds
    per epoch over the baseline's − 1), from ``paper_numbers.table("listwise", "table8")``."""
    t = next(iter(blocks.values()))["time_train_s_per_epoch"]
    return float(t.iloc[1] / t.iloc[0] - 1.0)


BENCH_CSV = ROOT / "results" / "benchmarks" / "listwise_overhead.csv"


def overhead_benchmark(path=BENCH_CSV) -> pd.DataFrame | None:
    """The micro-benchmark of ``benchmarks/bench_listwise_overhead.py`` (one row per size and timed
    round: ``step_triplet_ms``, ``step_listwise_ms``, ``sndcg_ms``) summarised per model size: median ms
    of a Triplet (mean) step, of a Triplet + S-NDCG step and of the S-NDCG term alone (forward + backward
    on the B×B similarities), the absolute overhead per step (ms) and its share of the listwise step
    (%) — Table VIII at the study's size beside the papers' GRU-1024. ``None`` when the CSV is missing."""
    path = Path(path)
    if not path.is_file():
        return None
    raw = pd.read_csv(path)
    g = raw.groupby(["size", "text_hidden", "batch_size"], sort=False)
    out = g[["step_triplet_ms", "step_listwise_ms", "sndcg_ms"]].median()
    out["overhead_ms"] = out["step_listwise_ms"] - out["step_triplet_ms"]
    out["overhead_share_pct"] = 100 * out["overhead_ms"] / out["step_listwise_ms"]
    out["sndcg_share_pct"] = 100 * out["sndcg_ms"] / out["step_listwise_ms"]
    out["rounds"] = g.size()
    return out.reset_index()


def step_overheads(path=BENCH_CSV, size: str = "papers") -> list[float]:
    """Per timed round of the benchmark at ``size``: the relative step overhead
    ``step_listwise / step_triplet − 1`` (N5 at the papers' GRU-1024 size); [] when the CSV is missing."""
    path = Path(path)
    if not path.is_file():
        return []
    raw = pd.read_csv(path)
    raw = raw[raw["size"] == size]
    return list(raw["step_listwise_ms"] / raw["step_triplet_ms"] - 1.0)


def table_beside_paper(summ, cols, blocks, ours_label, out, name, caption, digits: int = 2, show: bool = True):
    """One table of this notebook, shown and saved: ``mean ± std`` of ``cols`` (:func:`reproduce.present.report.pretty`,
    collapsed rows marked ‡), our rows above the paper's ``blocks`` (``paper_numbers.table``; ``None``: ours
    only), readable headers (:func:`headers`); ``caption`` gets :func:`reproduce.present.report.collapse_note` when a
    row has collapsed runs. Saves ``<out>/listwise/<name>.csv`` (``summ``'s columns of ``cols``, their stds,
    seed and collapse counts) and ``.md`` (caption + the shown table); displays both. Returns the shown table."""
    ours = report.flat(report.pretty(summ, cols, digits))
    view = headers(report.flat(report.side_by_side(ours, blocks, ours_label)) if blocks else ours)
    if "n_collapsed" in summ and (summ["n_collapsed"] > 0).any():
        caption = f"{caption} {report.collapse_note()}"
    keep = [c for c in summ if c.removesuffix("_std") in cols or c in ("n_seeds", "n_collapsed")]
    report.save_table(summ[keep], out, "listwise", name, caption, view)
    if show:
        display(Markdown(caption), view)
    return view


def with_tau(dft: pd.DataFrame) -> pd.DataFrame:
    """The τ-sweep results (Figs. 8–9) with a numeric ``τ`` column parsed from the arm names."""
    return dft.assign(**{"τ": dft["arm"].map(tau_of)})
