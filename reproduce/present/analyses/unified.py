"""Notebook 05 (Unified — Li et al., *Unified Loss of Pair Similarity Optimization*): derived columns,
effects, figures.

Everything here reads the frames of :class:`reproduce.protocol.study.Study` — ``results`` (one row per arm and seed),
``histories`` (one row per arm, seed and epoch) and :func:`iterations` (one row per arm, seed and sampled training
step) — and returns frames or figures (the claim rows: :mod:`reproduce.present.analyses.unified_claims`); nothing
trains. The identity checks of claim U6 live in the library (:mod:`coherent_itr.losses.identities`), shared with
``tests/lib/losses/test_losses_identities.py``.
"""

from __future__ import annotations

import IPython.display  # display looked up when called: tests replace it
import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import seaborn as sns

from coherent_itr.losses import identities

from reproduce.spec import labels

from reproduce.present import report
from reproduce.protocol.claim_files import mean_ci
from reproduce.protocol.study import paired_effect
from reproduce.present.analyses import plotting

ARMS = ["Triplet-HN", "VLC", "Unified"]  # Tables 1–2: the three losses, in the paper's order
INF = "γ=∞ (Triplet-HN)"  # the γ → ∞ end of the scale sweep (Fig. 5b)
M_BEST = "m=0.2"  # the paper's margin (Fig. 5a)
# U6: random float64 similarity matrices (B × B), seeds, the γ of the two limits and of γ·Unified(m=0) = VLC
ID_B, ID_SEEDS, ID_GAMMAS = 32, range(5), (1e2, 1e3, 1e4, 1e5)
ID_VLC_GAMMAS = (10.0, 100.0)  # besides the study's γ
# Fig. 4: the tangent-gradient diagnostics of coherent_itr.gradients (Unified Eqs. 11–12, 17–18)
GRADS = [
    ("grad_anchor", "anchor ‖P_v ∂L/∂v_i‖"),
    ("grad_hardneg", "hardest negative |∂L/∂s_iĵ|·sin θ"),
    ("grad_negatives", "all negatives Σ_j |∂L/∂s_ij|·sin θ"),
]
FIG4_COLUMNS = [
    "pos_sim",
    "hardneg_sim",
    "val_pos_sim",
    "val_hardneg_sim",
    "grad_anchor",
    "grad_hardneg",
    "grad_negatives",
]
PAIR_NAMES = {
    "val_pos_sim": "positive s_ii",
    "pos_sim": "positive s_ii",
    "val_hardneg_sim": "hardest negative max_{j≠i} s_ij",
    "hardneg_sim": "hardest negative max_{j≠i} s_ij",
}
# Paper rows whose baseline is the model's own triplet loss (BFAN*, SGRAF*) stand in for Triplet-HN
STAND_IN = {"Triplet-HN": "original loss (triplet)"}
DELTAS = [("Unified", "Triplet-HN"), ("Unified", "VLC"), ("VLC", "Triplet-HN")]
IDENTITY_COLUMNS = {
    "γ": "γ",
    "gap_min": "gap a − b, min (loss units)",
    "gap_max": "gap a − b, max (loss units)",
    "bound": "analytic bound of the gap",
    "value_dev_max": "relative value deviation, max",
    "grad_dev_max": "relative gradient deviation, max",
    "control_dev_min": "control (β₂ = 0.25) deviation, min",
}


# --------------------------------------------------------------------------------------------------
# Reading the runs
# --------------------------------------------------------------------------------------------------
def iterations(study, paper: str = "unified", group: str | None = "table1") -> pd.DataFrame:
    """One row per (arm, seed, sampled training step) of ``record["iterations"]`` (every
    ``grad_diag_every``-th step: ``step``, ``epoch``, ``warmup``, ``train_loss``, the tangent gradients of
    Unified Eqs. 11–12, 17–18 and the batch's ``pos_sim`` / ``hardneg_sim`` — the per-iteration
    quantities of the paper's Fig. 4). Cached runs are read; a missing one is trained like
    :meth:`Study.results` does."""
    rows = []
    for arm, cfg, res in study._runs(paper, group):
        for it in res.record.get("iterations", []):
            rows.append({"paper": arm.paper, "group": arm.group, "arm": arm.name, "seed": cfg.seed, **it})
    return pd.DataFrame(rows)


def coherence_columns(results: pd.DataFrame, yard: str) -> list[str]:
    """The metrics against relevance no loss trains on (``yard``: ``true`` or ``expert``) that
    ``results`` has: CS@100/1000 and Kendall τ (coherence), NDCG@100, mAP@R and R-Precision, image→text,
    and the agreement with Flickr8k's expert judgements (beyond the paper's Tables 1–2)."""
    keys = [
        labels.key("cs", "i2t", yard, k=100),
        labels.key("cs", "i2t", yard, k=1000),
        labels.key("tau", "i2t", yard),
        labels.key("ndcg", "i2t", yard, k=100),
        labels.key("mapr", "i2t", yard),
        labels.key("rprec", "i2t", yard),
        "expert_kendall_nongt",
        "expert_pearson_nongt",
    ]
    return [k for k in keys if k in results.columns]


def with_relative_loss(hist: pd.DataFrame) -> pd.DataFrame:
    """``hist`` with ``train_loss_rel`` = training loss ÷ the same run's first-epoch loss (Fig. 3: the
    three losses live on scales γ apart, VLC = γ · Unified(m = 0), Eqs. 7, 23)."""
    first = hist.groupby(["arm", "seed"]).train_loss.transform("first")
    return hist.assign(train_loss_rel=hist.train_loss / first)


def with_vlc_scaled(frame: pd.DataFrame, gamma: float, cols) -> pd.DataFrame:
    """``frame`` plus a copy of its VLC rows with ``cols`` divided by γ, arm "VLC ÷ γ (γ=…)": VLC is
    γ · Unified(m = 0) (Eqs. 7, 23), so its gradients are γ× larger; ÷ γ puts them on Unified's scale."""
    scaled = frame[frame.arm == "VLC"].copy()
    for c in cols:
        scaled[c] = scaled[c] / gamma
    scaled["arm"] = vlc_scaled_name(gamma)
    return pd.concat([frame, scaled], ignore_index=True)


def vlc_scaled_name(gamma: float) -> str:
    """The arm label of :func:`with_vlc_scaled`'s rows."""
    return f"VLC ÷ γ (γ={gamma:g})"


def margin_sweep(results: pd.DataFrame) -> pd.DataFrame:
    """The margin sweep of Fig. 5a (group ``margin``) with its margin ``m`` parsed from the arm name."""
    mg = results[results.group == "margin"]
    return mg.assign(m=mg.arm.str.split("=").str[1].astype(float))


def gamma_sweep(results: pd.DataFrame) -> pd.DataFrame:
    """The scale sweep of Fig. 5b (group ``gamma``) with ``g`` = γ parsed from the arm name (∞ for the
    Triplet-HN end, Eqs. 6, 21)."""
    gm = results[results.group == "gamma"]
    g = [np.inf if a == INF else float(a.split("=")[1]) for a in gm.arm]
    return gm.assign(g=g)


# --------------------------------------------------------------------------------------------------
# Tables
# --------------------------------------------------------------------------------------------------
def ci_text(effects, digits: int = 1) -> str:
    """``+m [lo, hi]``: mean of per-seed ``effects`` and its 95% Student-t interval
    (:func:`reproduce.protocol.claim_files.mean_ci`); one seed: ``+m (1 seed, no CI)``."""
    m, lo, hi = mean_ci(effects)
    if not np.isfinite(lo):
        return f"{m:+.{digits}f} ({len(effects)} seed, no CI)"
    return f"{m:+.{digits}f} [{lo:+.{digits}f}, {hi:+.{digits}f}]"


def rsum_deltas(results: pd.DataFrame, paper_blocks: dict, ours_label: str, pairs=DELTAS) -> pd.DataFrame:
    """The RSUM differences the claims are about (Tables 1–2): one column per "A − B" of ``pairs``; our row
    is the mean over seeds with its 95% interval (:func:`ci_text`), each paper block (``{source: rows ×
    metrics}`` of :func:`reproduce.spec.paper_numbers.table`) gives its published difference (one run, "–" where
    the block lacks an arm; :data:`STAND_IN` names the model's own triplet loss as Triplet-HN's stand-in)."""
    out = {ours_label: {f"{a} − {b}": ci_text(paired_effect(results, "rsum", a, b)) for a, b in pairs}}
    for source, block in paper_blocks.items():
        row = {}
        for a, b in pairs:
            a_, b_ = (x if x in block.index else STAND_IN.get(x, x) for x in (a, b))
            ok = a_ in block.index and b_ in block.index
            row[f"{a} − {b}"] = f"{block.loc[a_, 'rsum'] - block.loc[b_, 'rsum']:+.1f}" if ok else "–"
        out[source] = row
    df = pd.DataFrame.from_dict(out, orient="index")
    df.index.name = "source"
    return df


def first_last(hist: pd.DataFrame) -> pd.DataFrame:
    """Fig. 4's quantities at the first and the last epoch of the histories, mean over seeds, per arm:
    training-batch and validation positive / hardest-negative cosines and the tangent gradient norms."""
    last = int(hist.epoch.max())
    cols = [c for c in FIG4_COLUMNS if c in hist.columns]
    return hist[hist.epoch.isin([1, last])].groupby(["arm", "epoch"], sort=False)[cols].mean()


def sweep_summary(mg: pd.DataFrame, gm: pd.DataFrame, t1: pd.DataFrame, gamma: float) -> pd.DataFrame:
    """Fig. 5's numbers: test RSUM per setting of the margin sweep (γ fixed), the scale sweep (m = 0.2)
    and VLC as the reference, via :func:`reproduce.present.report.summary` (mean, std, seeds, collapsed runs)."""
    parts = [
        mg.assign(sweep=f"margin m (γ={gamma:g})"),
        gm.assign(sweep="scale γ (m=0.2)"),
        t1[t1.arm == "VLC"].assign(sweep="reference"),
    ]
    return report.summary(pd.concat(parts, ignore_index=True), ["rsum"], by=["sweep", "arm"])


def pretty(summary_df: pd.DataFrame, metrics: list[str]) -> pd.DataFrame:
    """:func:`reproduce.present.report.pretty` with each number formatted by its metric's kind
    (:func:`reproduce.spec.labels.fmt_number`: % with one decimal, τ with three …)."""
    return report.pretty(summary_df, metrics, number=_by_kind)


def _by_kind(value: float, metric: str) -> str:
    return labels.fmt_number(value, labels.kind_of(metric))


def collapse_caption(summary_df: pd.DataFrame) -> str:
    """ " " + :func:`reproduce.present.report.collapse_note` when a row of ``summary_df`` has collapsed runs,
    else ""."""
    n = summary_df.get("n_collapsed")
    return " " + report.collapse_note() if n is not None and (n > 0).any() else ""


def show(pg, name: str, caption: str, numbers: pd.DataFrame, view: pd.DataFrame | None = None) -> None:
    """:func:`reproduce.present.report.publish` of ``numbers`` with ``view`` (default ``numbers``; headers and
    numbers through :func:`reproduce.spec.labels.readable`) as ``<results>/unified/<name>_<data>.{csv,md}``, shown."""
    view = labels.readable(numbers if view is None else view)
    IPython.display.display(report.publish(pg, name, numbers, view, caption))


# --------------------------------------------------------------------------------------------------
# U6: the identities
# --------------------------------------------------------------------------------------------------
def identity_frame(gamma: float) -> pd.DataFrame:
    """Every U6 check of :func:`coherent_itr.losses.identities.all_checks` (Unified Eqs. 6–7, 21–23; BCLS
    Eqs. 10–11, 16; ladder Sec. III-B) on :data:`ID_B` × :data:`ID_B` matrices, seeds :data:`ID_SEEDS`;
    γ·Unified(m = 0) = VLC at γ = 10, the study's ``gamma`` and 100."""
    vlc = (ID_VLC_GAMMAS[0], gamma, ID_VLC_GAMMAS[1])
    return pd.DataFrame(identities.all_checks(ID_B, ID_SEEDS, ID_GAMMAS, vlc))


def identity_table(ident: pd.DataFrame) -> pd.DataFrame:
    """Per identity and γ (in the checks' order): min / max gap, the analytic bound, the max relative
    value and gradient deviations and the min control deviation over the seeds (U6 table); γ "—" where the
    identity has no scale."""
    order = {k: i for i, k in enumerate(ident.identity.unique())}
    tab = (
        ident.assign(gamma=ident.gamma.fillna(0), _o=ident.identity.map(order))
        .sort_values(["_o", "gamma"], kind="stable")
        .groupby(["identity", "gamma"], sort=False)
        .agg(
            gap_min=("gap", "min"),
            gap_max=("gap", "max"),
            bound=("bound", "max"),
            value_dev_max=("value_dev", "max"),
            grad_dev_max=("grad_dev", "max"),
            control_dev_min=("control_dev", "min"),
        )
        .reset_index()
    )
    tab["gamma"] = ["—" if g == 0 else f"{g:g}" for g in tab.gamma]
    return tab.rename(columns={"gamma": "γ"}).set_index("identity")


def identity_view(tab: pd.DataFrame) -> pd.DataFrame:
    """:func:`identity_table` for reading: 3 significant digits (scientific: the deviations are ~1e-15),
    blanks where a column does not apply, readable headers."""
    view = tab.map(lambda v: "" if pd.isna(v) else (v if isinstance(v, str) else f"{v:.3g}"))
    return view.rename(columns=IDENTITY_COLUMNS)


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------
def legend_outside(fig, ax=None):
    """One legend for ``fig`` outside the data (:func:`reproduce.present.analyses.plotting.legend_outside`), text fitted
    (:func:`reproduce.present.analyses.plotting.fit_text`). Returns ``fig``."""
    plotting.legend_outside(fig, ax=ax)
    return plotting.fit_text(fig)


def epoch_marks(ax, its: pd.DataFrame) -> None:
    """Dotted vertical lines at the first sampled step of every epoch after the first, and a grey band
    over the warm-up epochs (all negatives; to the first step after them), labelled with the arms that
    have one, on a per-step axis."""
    if its.empty:
        return
    starts = its.groupby("epoch").step.min()
    for s in starts[starts.index > 1]:
        ax.axvline(s, ls=":", lw=0.8, c="grey")
    warm = its[its.warmup.astype(bool)] if "warmup" in its else its.iloc[:0]
    if len(warm):
        after = starts[starts.index > warm.epoch.max()]
        end = float(after.iloc[0]) if len(after) else float(warm.step.max())
        arms = ", ".join(dict.fromkeys(warm.arm)) if "arm" in warm else ""
        ax.axvspan(warm.step.min(), end, color="grey", alpha=0.12, label=f"warm-up on all negatives ({arms})")


def fig3(hist: pd.DataFrame, data: str):
    """Fig. 3 analogue: training loss (log scale), validation RSUM and the loss relative to its first epoch
    (:func:`with_relative_loss`) per epoch, mean over seeds with 95% bands; titled with the data set ``data`` (a
    reader's name: :func:`reproduce.present.page.data_name`)."""
    fig = report.curves(
        hist,
        [
            ("train_loss", "training loss per batch\n(sum over anchors, log scale)"),
            ("val_rsum", "validation RSUM (%)"),
            ("train_loss_rel", "training loss ÷ its epoch-1 value"),
        ],
        title=f"Fig. 3 analogue — loss and validation RSUM per epoch, {data}",
    )
    fig.axes[0].set_yscale("log")
    return legend_outside(report.int_epochs(fig))


def fig4_similarity(hist: pd.DataFrame, its: pd.DataFrame, data: str, arms=ARMS):
    """Fig. 4 analogue, similarities: per arm, the mean positive and hardest-negative cosines on the
    validation set after each epoch (top) and in the sampled training batches at each sampled step
    (bottom; :func:`iterations`), mean over seeds with 95% bands."""
    order = ["positive s_ii", "hardest negative max_{j≠i} s_ij"]

    def long(frame, x, cols):
        d = frame.melt(id_vars=["arm", "seed", x], value_vars=cols, var_name="pair", value_name="cosine")
        return d.assign(pair=d.pair.map(PAIR_NAMES))

    val, tr = long(hist, "epoch", ["val_pos_sim", "val_hardneg_sim"]), long(its, "step", ["pos_sim", "hardneg_sim"])
    fig, axes = plt.subplots(2, len(arms), figsize=(4.6 * len(arms), 6.8), sharey=True, squeeze=False)
    for c, arm in enumerate(arms):
        top, bottom = axes[0, c], axes[1, c]
        sns.lineplot(
            data=val[val.arm == arm],
            x="epoch",
            y="cosine",
            hue="pair",
            hue_order=order,
            **plotting.BANDS,
            marker="o",
            ax=top,
        )
        sns.lineplot(
            data=tr[tr.arm == arm],
            x="step",
            y="cosine",
            hue="pair",
            hue_order=order,
            **plotting.BANDS,
            ax=bottom,
        )
        epoch_marks(bottom, its[its.arm == arm])
        top.set_title(f"{arm} — validation set, per epoch", fontsize=10)
        bottom.set_title(f"{arm} — training batches, per sampled step", fontsize=10)
        top.set_xlabel("epoch")
        bottom.set_xlabel("training step")
        for ax in (top, bottom):
            ax.set_ylabel("mean cosine similarity (unitless)")
    fig.suptitle(f"Fig. 4 analogue — positive vs hardest-negative similarity, {data}")
    return legend_outside(report.int_epochs(fig))


def fig4_gradients(its: pd.DataFrame, gamma: float, data: str):
    """Fig. 4 analogue, gradients: the tangent gradient norms of :data:`GRADS` (Unified Eqs. 11–12, 17–18)
    at every sampled training step, mean over seeds with 95% bands, log scale; VLC also ÷ γ (dashed,
    :func:`with_vlc_scaled`)."""
    g = with_vlc_scaled(its, gamma, [c for c, _ in GRADS])
    scaled = vlc_scaled_name(gamma)
    dashes = {a: ((4, 2) if a == scaled else "") for a in g.arm.unique()}
    fig, axes = plt.subplots(1, len(GRADS), figsize=(4.8 * len(GRADS), 3.8), squeeze=False)
    for ax, (col, label) in zip(axes.flat, GRADS):
        sns.lineplot(
            data=g,
            x="step",
            y=col,
            hue="arm",
            style="arm",
            dashes=dashes,
            **plotting.BANDS,
            ax=ax,
        )
        epoch_marks(ax, its)
        ax.set_yscale("log")
        ax.set_xlabel("training step")
        ax.set_ylabel(f"{label}\n(tangent norm, loss units; log scale)")
    fig.suptitle(f"Fig. 4 analogue — tangent gradient norms per training step, {data}")
    return legend_outside(fig)


def fig5(mg: pd.DataFrame, gm: pd.DataFrame, t1: pd.DataFrame, gamma: float, data: str):
    """Fig. 5 analogue: test RSUM along (a) the margin sweep at the study's γ and (b) the scale sweep at
    m = 0.2 with γ = ∞ (Triplet-HN) at the right end; points: mean over seeds with 95% interval bars;
    dashed lines: VLC and Triplet-HN of Tables 1–2 (mean) with their 95% Student-t band over seeds."""

    def ref_line(ax, arm, color, label):
        m, lo, hi = mean_ci(t1[t1.arm == arm].rsum)
        ax.axhline(m, color=color, ls="--", lw=1.2, label=f"{label} (mean)")
        if np.isfinite(lo):
            ax.axhspan(lo, hi, color=color, alpha=0.12, label=f"{label} (95% interval)")

    finite = gm[np.isfinite(gm.g)]
    x_inf = float(finite.g.max()) + 40.0
    inf_rows = gm[~np.isfinite(gm.g)].assign(g=x_inf)
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    point = dict(x="m", y="rsum", **plotting.BANDS, native_scale=True, capsize=0.1)
    sns.pointplot(data=mg, ax=a, color="C0", label=f"Unified, γ={gamma:g}", **point)
    ref_line(a, "VLC", "C3", f"VLC (γ={gamma:g})")
    ref_line(a, "Triplet-HN", "C7", "Triplet-HN")
    a.set_xlabel("margin m (cosine units)")
    a.set_title(f"(a) margin sweep at γ = {gamma:g}")
    point["x"] = "g"
    sns.pointplot(data=finite, ax=b, color="C0", label="Unified, m=0.2", **point)
    if len(inf_rows):
        sns.pointplot(data=inf_rows, ax=b, color="C3", markers="D", label=INF, **point)
    ticks = sorted(finite.g.unique()) + [x_inf]
    b.set_xticks(ticks)
    b.set_xticklabels([f"{t:g}" for t in ticks[:-1]] + ["∞"])
    b.set_xlabel("scale γ (1/temperature, unitless)")
    b.set_title("(b) scale sweep at m = 0.2")
    for ax in (a, b):
        ax.set_ylabel("test RSUM (%)")
    fig.suptitle(f"Fig. 5 analogue — margin and scale sweeps, {data}")
    return legend_outside(fig)
