"""reproduce.present.analyses.bcls against explicit loops, scipy and planted frames (no runs, no run cache)."""

from __future__ import annotations

import re
from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy import stats

from reproduce.spec import labels

from reproduce.present import report
from reproduce.present.analyses import bcls

matplotlib.use("Agg")


def _loop_paired(df, col, a, b):
    out = []
    for s in sorted(set(df[df.arm == a].seed) & set(df[df.arm == b].seed)):
        out.append(
            float(df[(df.arm == a) & (df.seed == s)][col].iloc[0] - df[(df.arm == b) & (df.seed == s)][col].iloc[0])
        )
    return out


# --- derived columns, labels, registry --------------------------------------------------------------
def test_add_tau_means_directions_and_falls_back_to_expert_kendall():
    df = pd.DataFrame(
        {
            "tau_i2t_sbert": [0.1, 0.3],
            "tau_t2i_sbert": [0.3, 0.5],
            "tau_i2t_true": [0.2, 0.0],
            "tau_t2i_true": [0.4, 1.0],
        }
    )
    out = bcls.add_tau(df, "true")
    assert out["tau_sbert"].tolist() == pytest.approx([0.2, 0.4])
    assert out["tau_yard"].tolist() == pytest.approx([0.3, 0.5])
    assert "tau_sbert" not in df  # a copy
    fl = bcls.add_tau(df.assign(expert_kendall_all=[0.7, 0.8]), "expert")
    assert fl["tau_yard"].tolist() == [0.7, 0.8]


def test_column_label_uses_the_label_map_and_names_derived_columns():
    assert bcls.column_label("rsum", False) == labels.label("rsum")
    assert "Sentence-BERT" in bcls.column_label("tau_sbert", False)
    assert "true relevance" in bcls.column_label("tau_yard", False)
    assert "expert" in bcls.column_label("tau_yard", True)
    assert bcls.column_label("tau_yard_std", True).startswith("std over seeds of Kendall τ-b")
    assert bcls.column_label("N=32 (ms)", False) == "N=32 (ms)"
    h = bcls.headers(pd.DataFrame(columns=["i2t_r1", "tau_sbert"]), False)
    assert list(h.columns) == [labels.label("i2t_r1"), bcls.column_label("tau_sbert", False)]


def test_primary_text_is_the_registrys_and_refuses_arm_contrasts():
    from reproduce.spec import claims
    from reproduce.protocol.ledger_rows import build_ledger

    t = bcls.primary_text("B9", "flickr8k")
    assert t == {
        "statement": claims.claim("B9").primary.statement,
        "metric": "Pearson(provider, expert), all pairs",
        "arms": "sbert vs cider",
    }
    row = {"id": "B9", "dataset": "flickr8k", **t, "role": "primary", "seed_effects": "0.1;0.2", "_file": "x"}
    led = build_ledger([row], datasets=("flickr8k",))
    b9 = led[(led.id == "B9") & (led.dataset == "flickr8k")]
    assert len(b9) == 1 and b9.role.iloc[0] == "primary" and b9.n_seeds.iloc[0] == 2
    assert bcls.primary_text("B7", "synthetic")["metric"] == "log-log slope of ms vs N"
    with pytest.raises(ValueError, match="arm contrast"):
        bcls.primary_text("B1", "synthetic")
    assert bcls.fmt_set([0.0, 0.1, 0.4]) == "{0, 0.1, 0.4}"


def test_single_value_reads_a_one_cell_table_only():
    assert bcls.single_value({"p": pd.DataFrame({"value": [0.2]}, index=["x"])}) == 0.2
    with pytest.raises(ValueError, match="one-cell"):
        bcls.single_value({"p": pd.DataFrame({"a": [1.0, 2.0]})})


def test_collapse_note_only_when_a_row_collapsed():
    s = pd.DataFrame({"rsum": [1.0, 2.0], "n_collapsed": [0, 0]})
    assert bcls.collapse_note_if(s) == "" and bcls.collapse_note_if(s.drop(columns="n_collapsed")) == ""
    assert bcls.collapse_note_if(s.assign(n_collapsed=[0, 1])) == " " + report.collapse_note()


# --- B1 ---------------------------------------------------------------------------------------------
def test_early_val_rsum_averages_the_first_half_per_run():
    rng = np.random.default_rng(0)
    rows = [
        {"arm": a, "seed": s, "epoch": e, "val_rsum": float(rng.uniform(0, 100))}
        for a in ("A", "B")
        for s in (0, 1)
        for e in range(1, 6 if a == "A" else 4)  # early stopping: B ran 3 epochs
    ]
    hist = pd.DataFrame(rows)
    early, half, n = bcls.early_val_rsum(hist)
    assert (half, n) == (2, 5)
    for r in early.itertuples():
        want = np.mean([x["val_rsum"] for x in rows if x["arm"] == r.arm and x["seed"] == r.seed and x["epoch"] <= 2])
        assert r.val_rsum == pytest.approx(want)
    _, half1, _ = bcls.early_val_rsum(hist[hist.epoch == 1])
    assert half1 == 1


# --- B4 / B8 ----------------------------------------------------------------------------------------
def test_table6_arms_picks_by_name_and_loss():
    ov = pd.DataFrame(
        {
            "arm": ["Triplet-SN", "VSE++ (Triplet-HN)", "Ladder m", "Ladder a", "SAM x", "BCLS y", "VSE++ other"],
            "loss": ["triplet_sn", "triplet", "ladder", "adaptive_ladder", "sam", "bcls", "triplet"],
        }
    )
    t6 = bcls.table6_arms(ov)
    assert t6 == {
        "VSE++": "VSE++ (Triplet-HN)",
        "CVSE++ (ladder, manual)": "Ladder m",
        "CVSE++ (ladder, adaptive)": "Ladder a",
        "VSE++ + SAM": "SAM x",
        "VSE++ + BCLS": "BCLS y",
    }
    with pytest.raises(KeyError, match="VSE\\+\\+ \\+ SAM"):
        bcls.table6_arms(ov[ov.loss != "sam"])


def test_semantic_keys_yardstick_columns_and_effect():
    cols = ["mapr_i2t_true", "mapr_t2i_true", "r1_i2t_true", "rprec_t2i_true", "mapr_i2t_sbert"]
    assert bcls.semantic_keys(cols, "true") == ["mapr_i2t_true", "r1_i2t_true", "mapr_t2i_true", "rprec_t2i_true"]
    blocks = bcls.on_yardstick({"p": pd.DataFrame({"mapr_i2t": [1.0], "r1_t2i": [2.0]})}, "expert")
    assert list(blocks["p"].columns) == ["mapr_i2t_expert", "r1_t2i_expert"]
    rng = np.random.default_rng(1)
    df = pd.DataFrame(
        {"arm": ["A"] * 3 + ["B"] * 2, "seed": [0, 1, 2, 0, 2], "r1_i2t_true": rng.uniform(0, 100, 5), "x": 0}
    )
    df["r1_t2i_true"] = rng.uniform(0, 100, 5)
    eff, used = bcls.semantic_effect(df, "r1", "true", "A", "B")
    assert used == ["r1_i2t_true", "r1_t2i_true"]
    want = _loop_paired(df.assign(m=(df.r1_i2t_true + df.r1_t2i_true) / 2), "m", "A", "B")
    assert eff == pytest.approx(want) and len(eff) == 2
    eff1, used1 = bcls.semantic_effect(df.drop(columns="r1_t2i_true"), "r1", "true", "A", "B")
    assert used1 == ["r1_i2t_true"] and eff1 == pytest.approx(_loop_paired(df, "r1_i2t_true", "A", "B"))
    with pytest.raises(KeyError, match="mapr"):
        bcls.semantic_effect(df, "mapr", "true", "A", "B")


# --- B5 / B6 ----------------------------------------------------------------------------------------
def test_within_image_similarity_and_alpha_table_match_a_loop():
    rng = np.random.default_rng(2)
    n_img, cpi = 4, 5
    x = rng.normal(size=(n_img * cpi, 8))
    full = np.corrcoef(x)
    seen = []

    def caption_matrix(rows, cols):
        seen.append((tuple(rows), tuple(cols)))
        return full[np.ix_(rows, cols)]

    w = bcls.within_image_similarity(caption_matrix, n_img, cpi)
    assert w.shape == (n_img, 10) and len(seen) == n_img
    for i in range(n_img):
        want = [full[i * cpi + a, i * cpi + b] for a in range(cpi) for b in range(a + 1, cpi)]
        assert sorted(w[i]) == pytest.approx(sorted(want))
    pooled = [v for row in w for v in row]
    nums, text = bcls.alpha_std_table(w, {"paper: ≈": pd.DataFrame({"value": [0.2]}, index=["std"])})
    assert nums.loc[bcls.POOLED_STD, "value"] == pytest.approx(np.std(pooled, ddof=1))
    assert nums.loc["mean per-image std", "value"] == pytest.approx(np.mean([np.std(r, ddof=1) for r in w]))
    assert nums.loc["mean within-image caption cosine", "value"] == pytest.approx(np.mean(pooled))
    assert nums.loc["paper: ≈", "value"] == 0.2
    assert text.loc["train images", "value"] == "4" and text.loc["caption pairs", "value"] == "40"


def test_sweep_values_peak_and_stride_contrasts_match_a_loop():
    rng = np.random.default_rng(3)
    grid = [0.0, 0.1, 0.2, 0.4]
    df = pd.DataFrame(
        [{"arm": f"α={a:g}", "seed": s, "rsum": float(rng.uniform(300, 400))} for a in grid for s in (0, 1, 2)]
        + [{"arm": "Triplet-SN", "seed": 0, "rsum": 1.0}]
    )
    df["alpha"] = bcls.sweep_value(df, "α")
    assert df.alpha.iloc[:-1].tolist() == [a for a in grid for _ in range(3)] and np.isnan(df.alpha.iloc[-1])
    star, others = bcls.peak_setup(grid, 0.17)
    assert (star, others) == (0.2, [0.0, 0.1, 0.4])
    assert bcls.peak_setup([0.5, 0.0], 0.25)[0] == 0.0  # an exact tie → the smaller α
    eff = bcls.peak_effect(df.dropna(subset=["alpha"]), "rsum", star, others)
    for s, e in zip((0, 1, 2), eff):
        at = {a: df[(df.alpha == a) & (df.seed == s)].rsum.iloc[0] for a in grid}
        assert e == pytest.approx(at[0.2] - (at[0.0] + at[0.1] + at[0.4]) / 3)
    assert bcls.arm_at(df, "alpha", 0.4) == "α=0.4"
    with pytest.raises(KeyError, match="alpha = 0.3"):
        bcls.arm_at(df, "alpha", 0.3)
    assert bcls.stride_points([0.4, 0.05, 0.1, 0.2]) == (0.05, 0.4, 0.1)
    assert bcls.stride_points([0.05, 0.2, 0.4]) == (0.05, 0.4, 0.2)  # default not swept → the middle value
    from coherent_itr.losses.kendall import KendallSWHSLoss

    assert bcls.stride_points([0.05, 0.4], default=None)[2] in (0.05, 0.4)
    assert bcls._default_beta() == KendallSWHSLoss().beta


# --- B7 ---------------------------------------------------------------------------------------------
def _bench(noise=0.0, reps=3):
    rng = np.random.default_rng(4)
    rows = []
    for r in range(reps):
        for n in (32, 64, 128, 256):
            for loss, p, c in ((bcls.BENCH_FULL, 3.0, 1e-4), (bcls.BENCH_SWHS, 2.0, 1e-3)):
                rows.append({"rep": r, "loss": loss, "N": n, "ms": c * n**p * float(np.exp(noise * rng.normal()))})
    return pd.DataFrame(rows)


def test_loglog_slopes_recover_planted_exponents_and_match_scipy():
    exact = bcls.loglog_slopes(_bench())
    assert exact.set_index(["rep", "loss"]).slope.xs(bcls.BENCH_FULL, level="loss").tolist() == pytest.approx([3.0] * 3)
    assert bcls.b7_effects(exact) == pytest.approx([1.0, 1.0, 1.0])
    noisy = _bench(noise=0.2)
    sl = bcls.loglog_slopes(noisy)
    for r in sl.itertuples():
        g = noisy[(noisy.rep == r.rep) & (noisy.loss == r.loss)]
        assert r.slope == pytest.approx(stats.linregress(np.log(g.N), np.log(g.ms)).slope)
    eff = bcls.b7_effects(sl)
    want = [
        sl[(sl.rep == k) & (sl.loss == bcls.BENCH_FULL)].slope.iloc[0]
        - sl[(sl.rep == k) & (sl.loss == bcls.BENCH_SWHS)].slope.iloc[0]
        for k in range(3)
    ]
    assert eff == pytest.approx(want)
    t = bcls.b7_table(noisy, sl)
    assert t.loc[bcls.BENCH_SWHS, "N=64 (ms)"] == pytest.approx(
        np.median(noisy[(noisy.loss == bcls.BENCH_SWHS) & (noisy.N == 64)].ms)
    )
    assert t.loc[bcls.BENCH_FULL, "log-log slope mean"] == pytest.approx(
        np.mean(want) + np.mean(sl[sl.loss == bcls.BENCH_SWHS].slope)
    )
    assert t.loc[bcls.BENCH_FULL, "log-log slope std"] == pytest.approx(
        np.std(sl[sl.loss == bcls.BENCH_FULL].slope, ddof=1)
    )


def test_read_bench_missing_bad_and_roundtrip(tmp_path):
    assert bcls.read_bench(tmp_path / "none.csv") is None
    (tmp_path / "bad.csv").write_text("rep,loss,ms\n0,a,1\n")
    with pytest.raises(ValueError, match=r"bad.csv: columns \['N'\] missing"):
        bcls.read_bench(tmp_path / "bad.csv")
    _bench().to_csv(tmp_path / "ok.csv", index=False)
    assert bcls.read_bench(tmp_path / "ok.csv").shape == (24, 4)


# --- B9 ---------------------------------------------------------------------------------------------
def test_fold_indices_are_disjoint_and_cover():
    f = bcls.fold_indices(23, 5)
    assert len(f) == 5 and sorted(np.concatenate(f).tolist()) == list(range(23))
    assert [a.tolist() for a in f] == [a.tolist() for a in bcls.fold_indices(23, 5)]  # seeded


def _split(n_img=12, cpi=3, human=False):
    rng = np.random.default_rng(5)
    ioc = np.arange(n_img * cpi) // cpi
    true = rng.uniform(0, 1, (n_img, n_img * cpi))
    extras = {}
    if human:
        pairs = rng.choice(n_img * n_img * cpi, size=150, replace=False)
        extras["expert"] = pd.DataFrame(
            {
                "image_idx": pairs // (n_img * cpi),
                "caption_idx": pairs % (n_img * cpi),
                "score": rng.integers(1, 5, 150),
            }
        )
    split = SimpleNamespace(
        image_of_caption=ioc,
        n_images=n_img,
        n_captions=n_img * cpi,
        true_relevance=None if human else true,
        extras=extras,
    )
    prov = {"sbert": true + rng.normal(0, 0.2, true.shape), "cider": true + rng.normal(0, 0.6, true.shape)}
    return split, prov, true


def test_agreement_with_true_relevance_matches_scipy_on_each_fold():
    split, prov, true = _split()
    folds = bcls.fold_indices(split.n_images, 3)
    ag = bcls.pseudo_label_agreement(prov, split, folds)
    assert len(ag) == 4 * 3 * 2  # (all + 3 folds) × (2 providers + binary) × 2 pair sets
    for k, imgs in enumerate(folds):
        for p in ("sbert", "cider"):
            x, y = [], []
            for i in imgs:
                for c in range(split.n_captions):
                    if split.image_of_caption[c] != i:
                        x.append(prov[p][i, c])
                        y.append(true[i, c])
            row = ag[(ag.fold == f"fold {k}") & (ag.provider == p) & (ag.pairs == "nongt")].iloc[0]
            assert row.pearson == pytest.approx(stats.pearsonr(x, y)[0])
            assert row.n_pairs == len(x)
    b = ag[(ag.provider == "binary") & (ag.pairs == "nongt")]
    assert b.pearson.isna().all()  # the GT indicator is constant off the ground truth
    eff = bcls.b9_effects(ag, "true", "all")
    piv = ag[(ag.fold != bcls.ALL_IMAGES) & (ag.pairs == "all")].pivot(
        index="fold", columns="provider", values="pearson"
    )
    assert eff == pytest.approx([piv.loc[f"fold {k}", "sbert"] - piv.loc[f"fold {k}", "cider"] for k in range(3)])
    assert all(e > 0 for e in eff)  # planted: S-BERT is the less noisy provider
    t2 = bcls.table2(ag)
    assert t2.loc[("true", "sbert"), "Pearson r, all pairs"] == pytest.approx(
        stats.pearsonr(prov["sbert"].ravel(), true.ravel())[0]
    )
    assert t2.loc[("true", "cider"), "pairs, all pairs"] == true.size
    assert str(t2["pairs, all pairs"].dtype) == "Int64"
    sd = np.std([piv.loc[f"fold {k}", "cider"] for k in range(3)], ddof=1)
    assert t2.loc[("true", "cider"), "std over folds, all pairs"] == pytest.approx(sd)


def test_agreement_with_human_judgements_uses_the_judged_pairs_of_each_fold():
    split, prov, _ = _split(human=True)
    folds = bcls.fold_indices(split.n_images, 2)
    ag = bcls.pseudo_label_agreement(prov, split, folds)
    assert set(ag.yardstick) == {"expert"}
    j = split.extras["expert"]
    for k, imgs in enumerate(folds):
        sub = j[j.image_idx.isin(imgs)]
        x = prov["cider"][sub.image_idx, sub.caption_idx]
        row = ag[(ag.fold == f"fold {k}") & (ag.provider == "cider") & (ag.pairs == "all")].iloc[0]
        assert row.pearson == pytest.approx(stats.pearsonr(x, sub.score)[0]) and row.n_pairs == len(sub)
    assert ag[(ag.provider == "binary") & (ag.pairs == "nongt")].pearson.isna().all()
    assert len(bcls.b9_effects(ag, "expert", "nongt")) == 2


# --- figures ----------------------------------------------------------------------------------------
def test_fig4_puts_one_legend_outside():
    import matplotlib.pyplot as plt

    hist = pd.DataFrame(
        [
            {"arm": a, "seed": s, "epoch": e, "train_loss": 1.0 / e + s, "val_rsum": 10.0 * e + s}
            for a in ("A", "B", "C")
            for s in (0, 1)
            for e in (1, 2, 3)
        ]
    )
    fig = bcls.fig4(hist, ["A", "B"], "t")
    legends = [ax.get_legend() for ax in fig.axes]
    assert legends[0] is None and legends[-1] is not None
    assert [t.get_text() for t in legends[-1].get_texts()] == ["A", "B"]
    plt.close(fig)


def test_sweep_figure_draws_the_reference_band_and_b7_is_log_log():
    import matplotlib.pyplot as plt

    df = pd.DataFrame([{"beta": b, "seed": s, "rsum": b + s} for b in (0.05, 0.1, 0.4) for s in (0, 1)])
    ref = pd.DataFrame({"rsum": [1.0, 2.0, 3.0]})
    fig = bcls.sweep_figure(df, ref, "beta", [("rsum", "RSUM")], "β", "ref", "SW-HS", "t", logx=True)
    ax = fig.axes[0]
    assert ax.get_legend() is not None and ax.get_legend().get_bbox_to_anchor() is not None
    lo, hi = ax.patches[-1].get_y(), ax.patches[-1].get_y() + ax.patches[-1].get_height()
    clo, chi = stats.t.interval(0.95, 2, loc=2.0, scale=stats.sem([1.0, 2.0, 3.0]))
    assert (lo, hi) == pytest.approx((clo, chi))
    assert [float(t) for t in ax.get_xticks()] == pytest.approx([0.05, 0.1, 0.4])
    plt.close(fig)
    fig = bcls.b7_figure(_bench(), "t")
    assert fig.axes[0].get_xscale() == "log" and fig.axes[0].get_legend() is not None
    plt.close(fig)


# --- what the notebook shows and saves ------------------------------------------------------------------
@pytest.fixture
def page(tmp_path):
    return SimpleNamespace(out=tmp_path, paper="bcls", data="synthetic", human=False, ours="ours", setup="toy setup")


def test_show_table_saves_numbers_marks_collapsed_rows_and_puts_the_paper_below(page):
    df = pd.DataFrame(
        {
            "arm": ["B", "B", "A", "A"],
            "seed": [0, 1, 0, 1],
            "rsum": [10.0, 14.0, 1.0, 3.0],
            "collapsed": [False, True, False, False],
        }
    )
    paper = {"paper: T": pd.DataFrame({"rsum": [400.0]}, index=pd.Index(["A"], name="arm"))}
    summ = bcls.show_table(page, df, ["rsum"], "t", "Table X", "what", "%", paper, rows=["A", "B"])
    assert list(summ.index) == ["A", "B"] and summ.loc["B", "rsum"] == 12.0
    assert summ.loc["B", "rsum_std"] == pytest.approx(np.std([10.0, 14.0], ddof=1))
    saved = pd.read_csv(page.out / "bcls" / "t_synthetic.csv", index_col=0)
    assert saved.loc["A", "rsum"] == 2.0 and saved.loc["B", "n_collapsed"] == 1
    md = (page.out / "bcls" / "t_synthetic.md").read_text()
    assert md.startswith("Table X (toy setup): what.") and report.collapse_note() in md
    assert "B ‡ 1/2 collapsed" in md and "paper: T · A" in md and labels.label("rsum") in md
    assert md.index("ours · A") < md.index("paper: T · A")
    bcls.show_table(page, df.assign(collapsed=False), ["rsum"], "u", "Table X", "what", "%")
    assert report.collapse_note() not in (page.out / "bcls" / "u_synthetic.md").read_text()


def test_show_alpha_b7_and_table2_write_their_files(page):
    w = np.array([[0.1, 0.3, 0.5], [0.2, 0.2, 0.8]])
    std = bcls.show_alpha_std(page, w, {"paper: ≈": pd.DataFrame({"value": [0.2]}, index=["std"])})
    assert std == pytest.approx(np.std(w, ddof=1))
    assert "| caption pairs" in (page.out / "bcls" / "alpha_std_synthetic.md").read_text()
    bench = _bench(noise=0.1)
    t, slopes = bcls.show_b7(page, bench)
    assert (page.out / "bcls" / "b7_complexity_synthetic.png").is_file()
    assert t.loc[bcls.BENCH_FULL, "log-log slope mean"] == pytest.approx(
        slopes[slopes.loss == bcls.BENCH_FULL].slope.mean()
    )
    note = bcls.b7_note(bench, t)
    assert "N ∈ [32, 64, 128, 256], 3 repetitions" in note
    assert f"slopes full {t.loc[bcls.BENCH_FULL, 'log-log slope mean']:.2f}" in note
    split, prov, _ = _split()
    ag = bcls.pseudo_label_agreement(prov, split, bcls.fold_indices(split.n_images, 3))
    paper = {"paper: CxC": pd.DataFrame({"pearson_all": [0.877, 0.738]}, index=["sbert", "cider"])}
    tab = bcls.show_table2(page, ag, paper)
    md = (page.out / "bcls" / "table2_synthetic.md").read_text()
    assert "std over 3 disjoint image folds. paper: CxC: sbert 0.877, cider 0.738." in md
    assert re.search(rf"\|\s+{split.n_images * split.n_captions} \|", md) and ".0 |" not in md  # integer counts
    assert pd.isna(tab.loc[("true", "binary"), "Pearson r, non-GT pairs"]) and "| –" in md
