"""Every figure function of the study, drawn on small planted data with the notebooks' own titles, labels and footer
(the longest the study writes: :data:`reproduce.present.page.FIGURE_TITLES` on the data set with the longest name, the
footer line :func:`reproduce.present.page.setup_line` of the profile with the most seed policies and the most seeds a
power analysis may ask for), has no overprinted text, no text off the canvas, no annotation or legend over the data, a
title of one line (two for several panels), every panel at least 2.5 in wide and tall and no y label wrapped word by
word (:func:`reproduce.present.analyses.plotting.layout_problems`, boxes from matplotlib's renderer). The checker
itself is shown to fail on planted broken figures, and source scans make sure no figure function and no title is left
out."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from coherent_itr.data.base import CaptionedImages  # noqa: E402
from reproduce.spec import labels, power_seeds
from reproduce.spec.claim_data import DATASETS
from reproduce.spec.profiles import profile_for
from reproduce.present import page, qualitative
from reproduce.present import report  # noqa: E402
from reproduce.present.analyses import bcls, ladder, ladder_theta, listwise, plotting, sam, unified  # noqa: E402

# the data set whose name makes the longest title, and the longest footer the notebooks write (Page.setup: every seed
# policy of the default profile and the most seeds the power analysis may give an arm)
DATA = max(DATASETS, key=lambda d: len(page.data_name(d)))
FOOTER = max(
    (
        page.setup_line(d, "default", p.seeds, p.sweep_seeds, bool(p.seed0_groups), power_seeds.SEED_CAP)
        for d in DATASETS
        for p in [profile_for("default", d)]
    ),
    key=len,
)
NO_FOOTER = {"qualitative", "bcls_b7", "sweep_plot"}  # saved without Page.setup: own caption, a benchmark, a helper
SEEDS = (0, 1, 2)


def title(paper: str, figure: str) -> str:
    """The notebook's title of ``paper``'s figure ``figure`` (Page.title) on :data:`DATA`."""
    return page.figure_title(page.FIGURE_TITLES[paper][figure], DATA)


def yard_labels(cols):
    """``(column, label)`` of the yardstick columns ``cols`` (``…_{yard}``) on the yardstick of the longer labels."""
    return max(
        ([(c.format(yard=y), labels.label(c.format(yard=y))) for c in cols] for y in ("expert", "true")),
        key=lambda ys: sum(len(lab) for _, lab in ys),
    )


RNG = np.random.default_rng(0)


@pytest.fixture(autouse=True)
def _style_and_close():
    report.setup_plotting()  # the notebooks' style (font sizes decide the layout)
    yield
    plt.close("all")


def noise(scale=1.0):
    return float(RNG.normal(0, scale))


# --- planted frames ------------------------------------------------------------------------------------
def history(arms, cols, epochs=(1, 2, 3), spike=None):
    """arm × seed × epoch rows; ``spike`` = (arm, column, value) sets epoch 1 of one arm (a warm-up epoch)."""
    rows = []
    for i, a in enumerate(arms):
        for s in SEEDS:
            for e in epochs:
                row = {"arm": a, "seed": s, "epoch": e}
                for j, c in enumerate(cols):
                    row[c] = 50.0 + 30 * i + 20 * e + 3 * j + noise()
                if spike and a == spike[0] and e == 1:
                    row[spike[1]] = spike[2] + noise(20)
                rows.append(row)
    return pd.DataFrame(rows)


def ladder_frame(arms, yard="true", with_yard=True):
    keys = [f"cs{k}_{d}_sbert" for k in (100, 200, 1000) for d in ("i2t", "t2i")] + ["rsum"]
    if with_yard:
        keys += [f"cs{k}_{d}_{yard}" for k in (100, 200, 1000) for d in ("i2t", "t2i")]
    rows = [
        {"arm": a, "seed": s, **{k: (300 + 10 * i if k == "rsum" else 0.05 + 0.02 * i) + noise(0.01) for k in keys}}
        for i, a in enumerate(arms)
        for s in SEEDS
    ]
    df = pd.DataFrame(rows)
    if not with_yard:
        df["expert_kendall_nongt"] = 0.15 + RNG.normal(0, 0.01, len(df))
    return df


class Train:
    n_images, captions_per_image, n_captions = 60, 5, 300


class CosineProvider:
    def __init__(self, n=300):
        v = np.random.default_rng(1).normal(size=(n, 8)) + 0.6
        self.v = v / np.linalg.norm(v, axis=1, keepdims=True)

    def batch(self, img, cap):
        x = self.v[np.asarray(cap)]
        return x @ x.T


class Adaptive:
    def __call__(self, sim, rel):
        self.diagnostics = {"levels_per_row_i2t": [2 + (i % 3) for i in range(sim.shape[0])]}


def qualitative_split(n_img=6, cpi=5):
    caps = [
        f"a {['brown', 'black', 'small'][k % 3]} dog runs across the {['grass', 'snow', 'beach'][k % 3]} "
        f"towards a person holding a red ball number {k}"
        for k in range(n_img * cpi)
    ]
    feats = np.random.default_rng(0).normal(size=(n_img, 4)).astype(np.float32)
    return CaptionedImages("toy/test", feats, caps, [f"{1000 + i}_abc.jpg" for i in range(n_img)], cpi)


# --- every figure function, as its notebook calls it ---------------------------------------------------
def fig_curves():
    h = history(["Triplet (mean)", "S-NDCG alone", "Triplet + S-NDCG"], ["train_loss", "val_rsum"])
    return report.curves(h, [(k, labels.label(k)) for k in ("train_loss", "val_rsum")], title=title("listwise", "fig5"))


def fig_listwise_fig5():  # 04_listwise: curves + legends_outside(int_epochs(...))
    return listwise.legends_outside(report.int_epochs(fig_curves()))


def fig_sweep_plot():
    df = pd.DataFrame(
        [{"x": x, "seed": s, "rsum": 400 - (x - 0.2) ** 2 * 50 + noise()} for x in (0, 0.1, 0.2, 0.4) for s in SEEDS]
    )
    return report.sweep_plot(df, "x", [("rsum", "test RSUM (%)")], "relaxation α", title="t", marks={"std": 0.17})


def fig_bcls_fig4():
    h = history([bcls.HN, bcls.SN, bcls.BC], ["train_loss", "val_rsum"], spike=(bcls.HN, "train_loss", 4800.0))
    h.loc[h.arm != bcls.HN, "train_loss"] = 60 - 5 * h.loc[h.arm != bcls.HN, "epoch"]
    h.loc[h.arm == bcls.SN, "val_rsum"] = h.loc[h.arm == bcls.BC, "val_rsum"].to_numpy() + 0.5  # two close curves
    h.loc[(h.arm == bcls.HN) & (h.epoch > 1), "train_loss"] = 40.0
    h["warmup"] = (h.arm == bcls.HN) & (h.epoch == 1)
    return bcls.fig4(h, [bcls.HN, bcls.SN, bcls.BC], title("bcls", "fig4"))


def fig_bcls_fig5ab():
    rows = [
        {
            "arm": f"α={a:g}",
            "alpha": a,
            "seed": s,
            "rsum": 418 - 60 * (a - 0.1) ** 2 + noise(2),
            "tau_sbert": 0.40 + 0.1 * a - 0.3 * (a - 0.2) ** 2 + noise(0.003),
            "tau_yard": 0.381 - 0.05 * a**2 + noise(0.002),
        }
        for a in (0.0, 0.1, 0.2, 0.4)
        for s in SEEDS
    ]
    df = pd.DataFrame(rows)
    ref = pd.DataFrame({"rsum": [380.0, 383, 385], "tau_sbert": [0.34, 0.342, 0.344], "tau_yard": [0.34, 0.345, 0.35]})
    ys = [
        ("rsum", "test RSUM (%)"),
        ("tau_sbert", "Kendall τ, S-BERT (unitless)"),
        ("tau_yard", "Kendall τ, true r* (unitless)"),
    ]
    return bcls.sweep_figure(
        df,
        ref,
        "alpha",
        ys,
        "relaxation α (S-BERT cosine units)",
        "w/o BCLS (Triplet-SN)",
        "BCLS, mean ± 95% CI",
        title("bcls", "fig5ab"),
        marks={"measured std = 0.167": 0.167},
    )


def fig_bcls_fig5cd():
    rows = [
        {"arm": f"β={b:g}", "beta": b, "seed": s, "rsum": 410 + noise(3), "time_train_s_per_epoch": 30 + noise()}
        for b in (0.01, 0.05, 0.1, 0.2)
        for s in SEEDS
    ]
    ref = pd.DataFrame({"rsum": [400.0, 402, 404], "time_train_s_per_epoch": [60.0, 62, 61]})
    return bcls.sweep_figure(
        pd.DataFrame(rows),
        ref,
        "beta",
        [("rsum", "test RSUM (%)"), ("time_train_s_per_epoch", "training time per epoch (s)")],
        "stride β (S-BERT cosine units)",
        "w/o SW-HS (full Kendall, O(N³))",
        "SW-HS, mean ± 95% CI",
        title("bcls", "fig5cd"),
        logx=True,
    )


def fig_bcls_b7():
    rows = [
        {"rep": r, "loss": loss, "N": n, "ms": (n / 16) ** p * (1 + noise(0.05))}
        for r in range(3)
        for loss, p in ((bcls.BENCH_FULL, 3), (bcls.BENCH_SWHS, 2))
        for n in (16, 32, 64, 128)
    ]
    return bcls.b7_figure(pd.DataFrame(rows), "B7: Kendall loss cost vs batch size (1 CPU thread)")


TABLE1_TITLE = title("ladder", "table1_cs")


def fig_ladder_cs_bars():
    return ladder.cs_bars(
        ladder_frame(["VSE++", "Ladder (manual)", "Ladder (adaptive)"]), "true", "true relevance r*", TABLE1_TITLE
    )


def fig_ladder_cs_bars_flickr8k():  # no K-specific yardstick: the expert τ on non-GT pairs stands in
    df = ladder_frame(["VSE++", "Ladder (manual)", "Ladder (adaptive)"], with_yard=False)
    return ladder.cs_bars(df, "expert", "Flickr8k expert judgements", TABLE1_TITLE)


def fig_ladder_beta2():
    arms = [f"{s} β₂={b:g}" for b in (0.0, 0.25, 0.5, 1.0) for s in ("manual", "auto(2,2)")]
    return ladder.sweep_view(
        "beta2",
        ladder_frame(arms),
        "true",
        "true relevance r*",
        title("ladder", "beta2"),
    )


def fig_ladder_levels():
    return ladder.sweep_view(
        "levels",
        ladder_frame(["L=1", "L=2", "L=3", "L=4"]),
        "true",
        "true relevance r*",
        title("ladder", "levels"),
    )


def fig_ladder_lminmax():
    arms = ["(1,1)", "(2,2)", "(3,3)", "(2,3)", "(2,4)", "(2,5)"]
    return ladder.sweep_view(
        "lminmax",
        ladder_frame(arms),
        "true",
        "true relevance r*",
        title("ladder", "lminmax"),
    )


def fig_ladder_fig6():
    f6 = ladder_theta.fig6_batches(Train(), CosineProvider(), "images", Adaptive(), n_batches=3, batch_size=40)
    return ladder_theta.fig6_figure(f6, title("ladder", "fig6"))


def fig_ladder_theta():
    cal = ladder_theta.theta_calibration(CosineProvider(), Train(), n_batches=3, batch_size=40)
    prof = tuple(cal["thetas"])  # the runs use the calibration measured here: same values twice
    cal = ladder_theta.theta_calibration(CosineProvider(), Train(), profile_theta=prof, n_batches=3, batch_size=40)
    return ladder_theta.theta_figure(cal["values"], cal["table"], title("ladder", "theta_calibration"))


LW_ARMS = [listwise.TRIP, listwise.ALONE, listwise.BOTH]


def fig_listwise_tables5_7():
    cols = ["rsum", "mapr_i2t_expert", "mapr_t2i_expert"]
    rows = [
        {"arm": a, "seed": s, **{c: (100 + 40 * i if c == "rsum" else 2 + 4 * i) + noise() for c in cols}}
        for i, a in enumerate(LW_ARMS)
        for s in SEEDS
    ]
    return listwise.fig_tables5_7(pd.DataFrame(rows), "expert", title("listwise", "table5_7"))


def fig_listwise_fig6():
    rows = [
        {
            "arm": a,
            "seed": s,
            "epoch": e,
            "direction": d,
            listwise.HAT: 0.5 + 0.05 * e + noise(0.01),
            listwise.HARD: 0.48 + 0.05 * e + noise(0.01),
        }
        for a in (listwise.BOTH, listwise.ALONE)
        for s in SEEDS
        for e in (1, 2, 3)
        for d in ("i2t", "t2i")
    ]
    return listwise.fig6(pd.DataFrame(rows), title("listwise", "fig6"))


def fig_listwise_fig7():
    ep = [
        {"arm": f"τ={t:g}", "seed": s, "epoch": e, "error": t * (1.5 - 0.1 * e) * (1 + noise(0.05)), "τ": f"{t:g}"}
        for t in listwise.TAUS
        for s in SEEDS
        for e in (1, 2, 3)
    ]
    srcs = ("trained Triplet + S-NDCG (test embeddings)", "random unit embeddings (untrained)")
    direct = [
        {"source": src, "τ": t, "seed": s, "error": t * (1 + noise(0.05))}
        for src in srcs
        for t in listwise.TAUS
        for s in SEEDS
    ]
    return listwise.fig7(pd.DataFrame(ep), pd.DataFrame(direct), 128, title("listwise", "fig7"))


def tau_sweep(figure: str, ys):
    """Figs. 8–9 as 04_listwise draws them: one panel per ``(column, label)`` of ``ys``."""
    rows = [
        {"arm": f"τ={t:g}", "seed": s, **{c: (160 if c == "rsum" else 12) + noise(3) for c, _ in ys}}
        for t in listwise.TAUS
        for s in SEEDS
    ]
    dft = listwise.with_tau(pd.DataFrame(rows))
    base = pd.Series({c: 100.0 if c == "rsum" else 3.0 for c, _ in ys})
    return listwise.fig_tau(dft, ys, base, title("listwise", figure))


def fig_listwise_fig8():  # one panel: RSUM
    return tau_sweep("fig8", [("rsum", labels.label("rsum"))])


def fig_listwise_fig9():  # mAP@R of both directions against the yardstick
    return tau_sweep("fig9", yard_labels(["mapr_i2t_{yard}", "mapr_t2i_{yard}"]))


SAM_METHODS = list(sam.METHOD.values())


def fig_sam_fraction():
    cols = ["rsum", "nsum_cider", "nsum_true"]
    rows = [
        {"method": m, "fraction_pct": f, "seed": s, **{c: 100 + f + 5 * i + noise() for c in cols}}
        for i, m in enumerate(SAM_METHODS)
        for f in (10, 25, 100)
        for s in SEEDS
    ]
    panels = [
        ("rsum", "RSUM (%)"),
        ("nsum_cider", "Nsum, CIDEr-D φ (%)"),
        ("nsum_true", "Nsum against the true relevance r* (%)"),
    ]
    return sam.fraction_figure(pd.DataFrame(rows), panels, title("sam", "fig_fraction"))


def fig_sam_grid():
    rows = [
        {
            "variant": v,
            "keep": k,
            "tau": t,
            "sampling": sp,
            "seed": s,
            "rsum": 300 + 10 * t + noise(),
            "nsum_cider": 50 + t + noise(),
            "nsum_true": 40 + t + noise(),
        }
        for v in ("as written", "authors' code")
        for k in (True, False)
        for t in (1, 3, 10)
        for sp in ("RS", "HN", "SN")
        for s in SEEDS
    ]
    panels = [("rsum", "RSUM (%)"), ("nsum_cider", "Nsum, CIDEr-D φ (%)"), ("nsum_true", "Nsum vs r* (%)")]
    return sam.grid_figure(pd.DataFrame(rows), panels, title("sam", "fig_grid"))


def fig_sam_margins():
    phi = [np.random.default_rng(b).uniform(0, 1, size=(30, 30)) for b in range(3)]
    return sam.margin_figure(phi, (1, 3, 10), title("sam", "fig_margins"))


def fig_sam_fig3():
    def planted(col, i):  # the hit rate rises with m, Semantic Recall falls
        m = int(col.split("m")[-1].split("_")[0])
        return 30 + 10 * i + (m if col.startswith("srhit") else -m) + noise()

    cols = [
        f"{q}5m{m}_{d}_{r}" for q in ("srhit", "sr") for m in sam.MS for d in ("i2t", "t2i") for r in ("cider", "true")
    ]
    rows = [
        {"method": meth, "seed": s, **{c: planted(c, i) for c in cols}}
        for i, meth in enumerate(SAM_METHODS[:2])
        for s in SEEDS
    ]
    f3 = sam.fig3_long(pd.DataFrame(rows), ["cider", "true"])
    return sam.fig3_figure(f3, title("sam", "fig3"))


U_COLS = ["train_loss", "val_rsum", "val_pos_sim", "val_hardneg_sim"]
U_GRADS = [c for c, _ in unified.GRADS]


def u_hist():
    h = history(unified.ARMS, U_COLS)
    h["train_loss"] = h["train_loss"] * np.where(h.arm == "VLC", 60.0, 1.0)
    h[["val_pos_sim", "val_hardneg_sim"]] = RNG.uniform(0.1, 0.6, size=(len(h), 2))
    return unified.with_relative_loss(h)


def u_iterations():
    rows = [
        {
            "arm": a,
            "seed": s,
            "step": st,
            "epoch": 1 + st // 20,
            "warmup": a == "Triplet-HN" and st < 20,
            "pos_sim": 0.5 + noise(0.02),
            "hardneg_sim": 0.3 + noise(0.02),
            **{g: 10 ** (i + noise(0.1)) for g in U_GRADS},
        }
        for i, a in enumerate(unified.ARMS)
        for s in SEEDS
        for st in range(0, 60, 5)
    ]
    return pd.DataFrame(rows)


def fig_unified_fig3():
    return unified.fig3(u_hist(), page.data_name(DATA))


def fig_unified_fig4_similarity():
    return unified.fig4_similarity(u_hist(), u_iterations(), page.data_name(DATA))


def fig_unified_fig4_gradients():
    return unified.fig4_gradients(u_iterations(), 60.0, page.data_name(DATA))


def fig_unified_fig5():
    arms = [("table1", a) for a in unified.ARMS] + [("margin", f"m={m:g}") for m in (0, 0.1, 0.2, 0.4)]
    arms += [("gamma", a) for a in ("γ=20", "γ=60", "γ=100", unified.INF)]
    df = pd.DataFrame(
        [
            {"group": g, "arm": a, "seed": s, "rsum": 300 + 5 * k + noise(3), "collapsed": False}
            for k, (g, a) in enumerate(arms)
            for s in SEEDS
        ]
    )
    t1 = df[df.group == "table1"]
    return unified.fig5(unified.margin_sweep(df), unified.gamma_sweep(df), t1, 60.0, page.data_name(DATA))


def fig_qualitative():
    split = qualitative_split()
    rng = np.random.default_rng(7)
    sims = {
        "Triplet-HN": rng.normal(size=(6, 30)),
        "BCLS": rng.normal(size=(6, 30)),
        "Triplet-SN": rng.normal(size=(6, 30)),
    }
    rel = rng.uniform(size=(6, 30))
    human = pd.DataFrame({"image_idx": [0, 1], "caption_idx": [0, 7], "score": [3.0, 1.5]})
    return qualitative.figure_qualitative(
        sims,
        split,
        [0, 1, 2],
        relevance={"sbert": rel, "true": rel**2},
        human=human,
        rule="Images: the 3 test images whose top-5 lists under the first two arms overlap least.",
    )


FIGURES = {f.__name__[4:]: f for f in [v for k, v in dict(globals()).items() if k.startswith("fig_")]}

# figure function (module.name) → the cases above that draw it
COVERS = {
    "report.curves": ["curves", "listwise_fig5"],
    "report.sweep_plot": ["sweep_plot", "bcls_fig5ab"],
    "bcls.fig4": ["bcls_fig4"],
    "bcls.sweep_figure": ["bcls_fig5ab", "bcls_fig5cd"],
    "bcls.b7_figure": ["bcls_b7"],
    "ladder.cs_bars": ["ladder_cs_bars", "ladder_cs_bars_flickr8k"],
    "ladder.sweep_figure": ["ladder_beta2"],
    "ladder.sweep_view": ["ladder_beta2", "ladder_levels", "ladder_lminmax"],
    "ladder_theta.fig6_figure": ["ladder_fig6"],
    "ladder_theta.theta_figure": ["ladder_theta"],
    "listwise.fig_tables5_7": ["listwise_tables5_7"],
    "listwise.legends_outside": ["listwise_fig5"],
    "listwise.fig6": ["listwise_fig6"],
    "listwise.fig7": ["listwise_fig7"],
    "listwise.fig_tau": ["listwise_fig8", "listwise_fig9"],
    "sam.fraction_figure": ["sam_fraction"],
    "sam.grid_figure": ["sam_grid"],
    "sam.margin_figure": ["sam_margins"],
    "sam.fig3_figure": ["sam_fig3"],
    "unified.fig3": ["unified_fig3"],
    "unified.fig4_similarity": ["unified_fig4_similarity"],
    "unified.fig4_gradients": ["unified_fig4_gradients"],
    "unified.fig5": ["unified_fig5"],
    "qualitative.figure_qualitative": ["qualitative"],
    "qualitative.figure_disagreement": ["qualitative"],  # figure_qualitative on a study's cached embeddings
}
MODULES = {
    "report": report,
    "bcls": bcls,
    "ladder": ladder,
    "ladder_theta": ladder_theta,
    "listwise": listwise,
    "sam": sam,
    "unified": unified,
    "qualitative": qualitative,
}
DRAWS = (
    "plt.subplots",
    "plt.figure",
    "sns.relplot",
    "report.curves",
    "report.sweep_plot",
    "figure_qualitative(",
    "legend_outside",
    "fig.suptitle",
)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_has_no_overlapping_or_clipped_text_and_room_for_its_panels(name):
    fig = FIGURES[name]()
    if name not in NO_FOOTER:
        plotting.footer(fig, FOOTER)  # as report.save_figure(..., footer=pg.setup) adds it
    problems = plotting.layout_problems(fig)
    assert not problems, f"{name}:\n" + "\n".join(problems)


def test_every_figure_function_is_drawn_here():
    """A source scan: every function of the figure modules that draws (makes a figure or ends one) is in
    COVERS, and every case named there exists — a new figure function without a case fails here."""
    found = set()
    for mod_name, mod in MODULES.items():
        for fname, fn in inspect.getmembers(mod, inspect.isfunction):
            if fn.__module__ != mod.__name__ or fname.startswith("_"):
                continue
            src = inspect.getsource(fn)
            if any(d in src for d in DRAWS) and "def " + fname in src:
                found.add(f"{mod_name}.{fname}")
    skip = {"unified.legend_outside", "bcls.show_b7", "qualitative.explorer"}  # helpers / widgets, drawn via others
    missing = sorted(found - set(COVERS) - skip)
    assert not missing, f"figure functions without a planted case in {Path(__file__).name}: {missing}"
    assert {c for cases in COVERS.values() for c in cases} <= set(FIGURES)


def test_every_figure_title_of_the_notebooks_is_drawn_here():
    """A source scan: every title of :data:`reproduce.present.page.FIGURE_TITLES` (what ``Page.title`` gives the
    notebooks) is drawn by a case above, and the notebooks title those figures through ``pg.title``."""
    import re

    drawn = set(re.findall(r'title\("(\w+)", "(\w+)"\)', Path(__file__).read_text(encoding="utf-8")))
    drawn |= {("listwise", f) for f in re.findall(r'tau_sweep\("(\w+)"', Path(__file__).read_text(encoding="utf-8"))}
    wanted = {(paper, f) for paper, figs in page.FIGURE_TITLES.items() if paper != "overview" for f in figs}
    assert wanted - drawn == set()
    notebooks = Path(__file__).parents[3] / "notebooks"
    code = "".join(
        "".join(c["source"]) + "\n"
        for nb in notebooks.glob("*.ipynb")
        for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]
        if c["cell_type"] == "code"
    )
    titled = set(re.findall(r'pg\.title\("(\w+)"\)', code)) | ({"fig8", "fig9"} if "pg.title(stem)" in code else set())
    assert {f for figs in page.FIGURE_TITLES.values() for f in figs} <= titled
    assert '({pg.setup})")' not in code and "analogue ({pg.setup}" not in code  # no setup line in a figure title


def test_fig8_has_one_title_line_and_a_panel_of_room():
    """Listwise Fig. 8 (one panel and a legend outside) used to keep its 4.6 in width: the legend took half of it,
    the panel was 0.5 × 0.9 in and its title and y label wrapped to five and six lines."""
    fig = FIGURES["listwise_fig8"]()
    plotting.footer(fig, FOOTER)
    fig.canvas.draw()
    box = fig.axes[0].get_window_extent(fig.canvas.get_renderer())
    assert min(box.width, box.height) / fig.dpi >= plotting.MIN_AXES_IN - 0.005
    assert fig._suptitle.get_text() == "Fig. 8 analogue — τ sweep, " + page.data_name(DATA)
    assert len(fig.axes[0].get_ylabel().split("\n")) <= 2


# --- the checker can fail -------------------------------------------------------------------------------
def test_size_problems_finds_a_long_title_a_small_panel_and_a_y_label_one_word_a_line():
    fig, ax = plt.subplots(figsize=(2.2, 2.0))
    ax.plot([1, 2, 3], [3, 1, 2])
    ax.set_ylabel("\n".join("RSUM (sum of R@1,5,10 both directions, %)".split()))
    fig.suptitle("a title\nof two lines")
    problems = plotting.size_problems(fig)
    assert "figure title runs to 2 lines (at most 1)" in problems
    assert any(p.startswith("axes 0 is ") and "(at least 2.5 × 2.5)" in p for p in problems)
    assert "axes 0 y label runs to 7 lines (at most 3)" in problems


def test_legend_outside_widens_the_figure_and_fit_text_grows_small_panels():
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    ax.plot([0, 1], [0, 1], label="Triplet (mean) (mean over seeds), a long legend entry")
    plotting.legend_outside(fig)
    assert fig.get_size_inches()[0] > 4.6 + 1.5  # the legend's width added, not taken from the panel
    plotting.legend_outside(fig)  # a second call replaces the widening, it does not add to it
    wide = fig.get_size_inches()[0]
    plotting.legend_outside(fig)
    assert fig.get_size_inches()[0] == pytest.approx(wide)
    plotting.fit_text(fig)
    assert plotting.size_problems(fig) == []


def test_layout_problems_finds_overprinted_tick_labels_and_a_clipped_title():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.bar(range(4), [1, 2, 3, 4])
    ax.set_xticks(range(4), [f"a long category name {i}" for i in range(4)])
    fig.suptitle("a title far longer than this small figure is wide: it leaves the canvas on both sides")
    problems = plotting.layout_problems(fig)
    assert any("x tick" in p and "overlaps" in p and "x tick" in p.split("overlaps")[1] for p in problems)
    assert any(p.startswith("figure title") and "leaves the canvas" in p for p in problems)
    plotting.fit_text(fig)  # wrapped and rotated, nothing overprints or leaves the canvas ...
    left = plotting.layout_problems(fig)
    assert left and all(p.startswith("figure title runs to") for p in left)  # ... but a wrapped title is too long
    fig.suptitle("a short title")
    plotting.fit_text(fig)
    assert plotting.layout_problems(fig) == []


def test_layout_problems_finds_a_long_y_label_crossing_the_title_and_a_legend_on_ticks():
    fig, axes = plt.subplots(1, 2, figsize=(8, 3))
    for ax in axes:
        ax.plot([1, 2, 3], [3, 1, 2], label="a series")
        ax.set_ylabel("training loss (mean over the epoch's batches, the unit of the loss) ↓")
    fig.suptitle("Fig. 5 (flickr8k, profile default, seeds [0, 1, 2])")
    fig.tight_layout()
    axes[0].legend(loc="upper left", bbox_to_anchor=(0, -0.1))  # below the panel: on the x tick labels
    problems = plotting.layout_problems(fig)
    assert any("y label" in p and "figure title" in p for p in problems)
    assert any("legend" in p and "x tick" in p for p in problems)


def test_layout_problems_finds_an_annotation_and_a_legend_over_the_data():
    fig, ax = plt.subplots(figsize=(4, 3))
    ax.plot([0, 1, 2], [0, 1, 2], label="data")
    ax.text(1, 1, "a note", ha="center", va="center")
    ax.legend(loc="center left", bbox_to_anchor=(0.3, 0.45))  # on the diagonal
    problems = plotting.layout_problems(fig)
    assert any("annotation 'a note' is drawn over a line" in p for p in problems)
    assert any(p.startswith("legend is drawn over a line") for p in problems)


def test_layout_problems_finds_a_legend_entry_listed_twice():
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.axvline(0.5, label="calibrated θ = 0.508")
    ax.axvline(0.5, label="calibrated θ = 0.508")
    ax.legend(**plotting.LEGEND_RIGHT)
    fig.tight_layout()
    assert plotting.layout_problems(fig) == ["legend lists ['calibrated θ = 0.508'] more than once"]


def test_theta_figure_draws_a_shared_value_once():
    table = pd.DataFrame(
        {"value": [0.4, 0.35, 0.508, 0.447, 0.508, 0.447]},
        index=[
            "paper θ₁",
            "paper θ₂",
            "calibrated θ₁ (measured here)",
            "calibrated θ₂ (measured here)",
            "calibrated θ₁ (profile: the runs)",
            "calibrated θ₂ (profile: the runs)",
        ],
    )
    assert ladder_theta.theta_lines(table)[2] == (
        ["calibrated θ₁ (measured here)", "calibrated θ₁ (profile: the runs)"],
        0.508,
    )
    fig = ladder_theta.theta_figure(np.linspace(-0.2, 0.9, 500), table, "t")
    names = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "calibrated θ₁ (measured here; profile: the runs) = 0.508" in names and len(fig.axes[0].lines) == 4


def test_bcls_fig4_puts_the_loss_on_a_log_axis_and_shades_the_warm_up():
    fig = fig_bcls_fig4()
    loss_ax = fig.axes[0]
    assert loss_ax.get_yscale() == "log"
    spans = [p for ax in fig.axes for p in ax.patches if p.get_label().startswith("warm-up epoch")]
    assert len(spans) == 2  # epoch 1 in both panels
    x0, x1 = spans[0].get_x(), spans[0].get_x() + spans[0].get_width()
    assert (x0, x1) == (0.5, 1.5)
    styles = {line.get_label(): (line.get_marker(), line.get_linestyle()) for line in loss_ax.lines if line.get_label()}
    shown = [styles[a] for a in (bcls.HN, bcls.SN, bcls.BC) if a in styles]
    assert len(set(shown)) == len(shown) == 3  # a marker and a dash per arm: a curve under another still shows


def test_sweep_marks_are_named_in_the_legend_not_written_on_the_data():
    fig = fig_bcls_fig5ab()
    assert not any(ax.texts for ax in fig.axes)
    names = [t.get_text() for t in fig.axes[-1].get_legend().get_texts()]
    assert "measured std = 0.167 (grey line)" in names


def test_layout_problems_is_empty_for_a_clean_figure():
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.plot([0, 1, 2], [0, 1, 2], label="data")
    ax.set(xlabel="x", ylabel="y", title="t")
    plotting.legend_outside(fig)
    fig.tight_layout()
    assert plotting.layout_problems(fig) == []


def test_legend_outside_keeps_each_label_once_right_of_the_top_right_panel():
    fig, axes = plt.subplots(2, 2)
    for i, ax in enumerate(axes.flat):
        ax.plot([0, 1], [0, i], label="same")
        ax.plot([0, 1], [1, i], label=f"own {i}")
        ax.legend()
    plotting.legend_outside(fig)
    legends = [(ax, ax.get_legend()) for ax in fig.axes if ax.get_legend() is not None]
    assert len(legends) == 1 and legends[0][0] is axes[0, 1]
    assert [t.get_text() for t in legends[0][1].get_texts()] == ["same", "own 0", "own 1", "own 2", "own 3"]


def test_wrap_keeps_words_and_width():
    s = "a  long\nlabel with several words in it"
    out = plotting.wrap(s, 12)
    assert out.replace("\n", " ") == "a long label with several words in it"
    assert max(len(line) for line in out.split("\n")) <= 12
    assert plotting.wrap("supercalifragilistic word", 8).split("\n")[0] == "supercalifragilistic"


def test_the_same_results_draw_the_same_pixels():
    """Seaborn's 95% bands are bootstrapped; unseeded, the ladder's Fig. 6 view drew other pixels at every call."""
    f6 = ladder_theta.fig6_batches(Train(), CosineProvider(), "images", Adaptive(), n_batches=3, batch_size=40)
    drawn = []
    for _ in range(2):
        fig = ladder_theta.fig6_figure(f6.copy(), "Fig. 6 analogue")
        fig.canvas.draw()
        drawn.append(bytes(fig.canvas.buffer_rgba()))
        plt.close(fig)
    assert drawn[0] == drawn[1]
