"""reproduce.present.analyses.sam (notebook 03_sam) on planted frames and matrices, against explicit loops and scipy."""

from __future__ import annotations

from types import SimpleNamespace

import matplotlib
import numpy as np
import pandas as pd
import pytest
from scipy.stats import pearsonr

from coherent_itr import metrics
from coherent_itr.data.base import CaptionedImages
from reproduce.protocol import calibration
from reproduce.spec import claims as registry
from reproduce.present.analyses import sam, sam_agreement, sam_claims
from reproduce.spec.experiments import Arm

matplotlib.use("Agg")

LOSSES = ("triplet", "sam", "sam_authors")


def fraction_frame(gain=None, seeds=(0, 1, 2)) -> pd.DataFrame:
    """rsum = 100 + fraction·100 + the loss's planted gain + seed; nsum_cider = rsum / 2."""
    gain = gain or {"triplet": 0.0, "sam": 10.0, "sam_authors": -5.0}
    rows = []
    for frac, f in sam.FRACTIONS.items():
        for loss in LOSSES:
            for s in seeds:
                r = 100 + 100 * f + gain[loss] + s * (1 if loss == "sam" else 0)
                rows.append(
                    dict(arm=sam.arm_name(frac, loss), loss=loss, seed=s, rsum=r, nsum_cider=r / 2, collapsed=False)
                )
    return pd.DataFrame(rows)


def grid_arms():
    arms = []
    for tau in (3.0, 10.0):
        for s in ("RS", "HN", "SN"):
            for keep in (True, False):
                p = {"tau": tau, "sampling": s, "keep_triplet": keep}
                arms.append(Arm("sam", "grid", f"τ={tau:g} {s} keep={keep}", {"loss": "sam", "loss_params": p}))
                arms.append(
                    Arm(
                        "sam",
                        "grid_authors",
                        f"authors τ={tau:g} {s} keep={keep}",
                        {"loss": "sam_authors", "loss_params": p},
                    )
                )
    return arms


def grid_frame(seeds=(0, 1, 2), rng_seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(rng_seed)
    rows = [
        dict(arm=a.name, loss=a.overrides["loss"], seed=s, rsum=float(rng.normal(400, 20)), collapsed=False)
        for a in grid_arms()
        for s in seeds
    ]
    return sam.grid_columns(pd.DataFrame(rows), grid_arms())


# --- Tables 2–3 ---------------------------------------------------------------------------------------------
def test_fraction_columns_name_fraction_and_method_by_loss():
    df = sam.fraction_columns(fraction_frame())
    r = df[df["arm"] == "25% data, + SAM (authors' code)"].iloc[0]
    assert (r["fraction"], r["fraction_pct"], r["method"]) == ("25%", 25.0, "VSE++ + SAM (authors' code)")
    assert set(df.loc[df["loss"] == "triplet", "method"]) == {"VSE++ (Triplet-HN)"}
    assert set(df.loc[df["loss"] == "sam", "method"]) == {"VSE++ + SAM (as written)"}


def test_yard_columns_keep_the_present_ones_in_order():
    df = pd.DataFrame(columns=["mapr_t2i_expert", "mapr_i2t_expert", "rsum"])
    assert sam.yard_columns(df, "expert") == ["mapr_i2t_expert", "mapr_t2i_expert"]
    assert sam.yard_columns(pd.DataFrame(columns=["nsumngt_true", "nsum_true"]), "true") == [
        "nsum_true",
        "nsumngt_true",
    ]


def test_beside_paper_means_stds_paper_rows_and_collapse_mark():
    df = fraction_frame()
    df.loc[(df["arm"] == "10% data, + SAM") & (df["seed"] == 1), "collapsed"] = True
    sub = df[df["arm"].str.startswith("10%")]
    blocks = {"paper X": pd.DataFrame({"rsum": [1.5, np.nan]}, index=["10% data, Triplet-HN", "10% data, + SAM"])}
    num, shown, collapsed = sam.beside_paper(sub, ["rsum", "nsum_cider"], blocks, "ours")
    sam_runs = sub[sub["arm"] == "10% data, + SAM"]["rsum"]
    assert num.loc[("ours", "10% data, + SAM"), "rsum"] == pytest.approx(sam_runs.mean())
    assert num.loc[("ours", "10% data, + SAM"), "rsum_std"] == pytest.approx(sam_runs.std(ddof=1))
    assert collapsed
    assert ("ours", "10% data, + SAM ‡ 1/3 collapsed") in shown.index
    assert shown.loc[("paper X", "10% data, Triplet-HN"), "rsum"] == "1.5"
    assert shown.loc[("paper X", "10% data, + SAM"), "rsum"] == "–"
    assert shown.loc[("paper X", "10% data, + SAM"), "nsum_cider"] == "–"


def test_headers_use_labels_and_sam_names():
    t = pd.DataFrame(columns=["rsum", "sam_margin", "cider", "share_above_1", "other"])
    h = sam.headers(t)
    assert list(h.columns)[0].startswith("RSUM") and list(h.columns)[-1] == "other"
    assert sam.GRID_DIAGNOSTICS["sam_margin"] in h.columns and sam_agreement.RELEVANCE["cider"] in h.columns
    assert sam.MARGIN_COLUMNS["share_above_1"] in h.columns


def test_publish_writes_csv_and_markdown(tmp_path):
    pg = SimpleNamespace(out=tmp_path, paper="sam")
    md = sam.publish(pg, "t_x", pd.DataFrame({"rsum": [1.23456]}), pd.DataFrame({"rsum": ["1.2"]}), "cap.")
    assert (tmp_path / "sam" / "t_x.csv").read_text().splitlines()[1].endswith("1.23456")
    assert (tmp_path / "sam" / "t_x.md").read_text().startswith("cap.")
    assert "RSUM" in md.data and "1.2" in md.data


# --- Tables 4–5 ---------------------------------------------------------------------------------------------
def test_cell_label_and_grid_columns():
    assert sam.cell_label("τ=3 SN keep=True") == "τ=3 · SN · triplet kept"
    assert sam.cell_label("authors τ=10 HN keep=False") == "τ=10 · HN · SAM only"
    with pytest.raises(ValueError, match="not a SAM grid arm"):
        sam.cell_label("10% data, + SAM")
    g = grid_frame()
    r = g[g["arm"] == "authors τ=10 RS keep=False"].iloc[0]
    assert (r["tau"], r["sampling"], r["keep"], r["variant"]) == (10.0, "RS", False, "authors' code")
    assert set(g.loc[g["loss"] == "sam", "variant"]) == {"as written"}


def test_last_epoch_diagnostics_take_each_runs_last_epoch():
    hist = pd.DataFrame(
        [
            dict(arm="a", seed=0, epoch=2, loss_active_fraction_i2t=0.5, loss_active_fraction_t2i=1.0,
                 loss_margin_mean_i2t=0.2, loss_margin_mean_t2i=0.4, loss_margin_clamped_fraction=0.25),
            dict(arm="a", seed=0, epoch=1, loss_active_fraction_i2t=0.0, loss_active_fraction_t2i=0.0,
                 loss_margin_mean_i2t=9.0, loss_margin_mean_t2i=9.0, loss_margin_clamped_fraction=0.0),
            dict(arm="b", seed=1, epoch=1, loss_active_fraction_i2t=0.1, loss_active_fraction_t2i=0.3,
                 loss_margin_mean_i2t=1.0, loss_margin_mean_t2i=3.0, loss_margin_clamped_fraction=np.nan),
        ]
    )  # fmt: skip
    d = sam.last_epoch_diagnostics(hist).set_index(["arm", "seed"])
    assert d.loc[("a", 0), "sam_active_pct"] == pytest.approx(75.0)
    assert d.loc[("a", 0), "sam_margin"] == pytest.approx(0.3)
    assert d.loc[("a", 0), "sam_clamped_pct"] == pytest.approx(25.0)
    assert d.loc[("b", 1), "sam_active_pct"] == pytest.approx(20.0) and np.isnan(d.loc[("b", 1), "sam_clamped_pct"])
    no_clamp = sam.last_epoch_diagnostics(hist.drop(columns="loss_margin_clamped_fraction"))
    assert no_clamp["sam_clamped_pct"].isna().all()


def test_sampling_and_keep_effects_against_a_loop():
    g = grid_frame()
    w = g[g["variant"] == "as written"]
    val = {(r.seed, r.tau, r.keep, r.sampling): r.rsum for r in w.itertuples()}
    for other in ("HN", "RS"):
        eff, n = sam_claims.sampling_effects(w, other)
        assert n == 4
        want = [
            np.mean([val[(s, t, k, "SN")] - val[(s, t, k, other)] for t in (3.0, 10.0) for k in (True, False)])
            for s in (0, 1, 2)
        ]
        assert eff == pytest.approx(want)
    want = [
        np.mean([val[(s, t, True, x)] - val[(s, t, False, x)] for t in (3.0, 10.0) for x in ("RS", "HN", "SN")])
        for s in (0, 1, 2)
    ]
    assert sam_claims.keep_effects(w) == pytest.approx(want)
    assert sam_claims.sampling_effects(w[w["sampling"] != "HN"], "HN")[0] == []
    assert sam_claims.sampling_effects(w.iloc[:0], "HN") == ([], 0) and sam_claims.keep_effects(w.iloc[:0]) == []


def test_grid_table_puts_both_variants_above_the_paper_rows():
    g = grid_frame().assign(sam_margin=0.5, sam_active_pct=100.0, sam_clamped_pct=np.nan)
    g.loc[g["variant"] == "authors' code", "sam_clamped_pct"] = 40.0
    paper = {"paper T4": pd.DataFrame({"rsum": [479.1]}, index=["τ=3 SN keep=True"])}
    num, shown, collapsed = sam.grid_table(g, ["rsum"], paper, "ours")
    assert not collapsed
    assert list(shown.index.get_level_values(0).unique()) == [
        "ours, SAM as written",
        "ours, SAM authors' code",
        "paper T4",
    ]
    cell = "τ=3 · SN · triplet kept"
    w = g[(g["variant"] == "as written") & (g["cell"] == cell)]["rsum"]
    assert num.loc[("ours, SAM as written", cell), "rsum"] == pytest.approx(w.mean())
    assert shown.loc[("paper T4", cell), "rsum"] == "479.1"
    assert shown.loc[("ours, SAM as written", cell), "sam_clamped_pct"] == "–"
    assert shown.loc[("ours, SAM authors' code", cell), "sam_clamped_pct"].startswith("40.00")


# --- margins ------------------------------------------------------------------------------------------------
def phi_batches(n=4, b=6, seed=3):
    rng = np.random.default_rng(seed)
    return [rng.uniform(0, 3, (b, b)) + np.eye(b) * 4 for _ in range(n)]


def test_margin_values_against_a_loop_and_the_calibration_summary():
    mats = phi_batches()
    a = sam.margin_values(mats, 3.0)
    want = [(m[i, i] - m[i, j]) / 3.0 for m in mats for i in range(6) for j in range(6) if i != j]
    assert a == pytest.approx(want)
    d = calibration.margin_distribution(mats, 3.0)
    assert d["median"] == pytest.approx(np.median(a)) and d["share_above_1"] == pytest.approx((a > 1).mean())
    t = sam.margin_table(mats, [3.0, 10.0])
    assert list(t.index) == [3.0, 10.0]
    assert t.loc[10.0, "mean"] == pytest.approx(np.mean(sam.margin_values(mats, 10.0)))


def test_margin_batches_are_cider_of_training_batches():
    caps = ["a red car on a road", "a car that is red", "two dogs play", "dogs playing in grass", "a cat sleeps",
            "the cat is asleep", "a man rides a bike", "a bike and a man"]  # fmt: skip
    split = CaptionedImages("toy/train", np.zeros((4, 1), np.float32), caps, list("abcd"), captions_per_image=2)
    phi = sam.margin_batches(split, batch_size=4, n_batches=5, seed=0)
    assert len(phi) == 2 and all(m.shape == (4, 4) for m in phi)  # 8 captions → 2 full batches of 4
    from coherent_itr import data as data_mod

    batches = list(calibration.training_batches(4, 2, batch_size=4, n_batches=5, seed=0))
    for include, same in ((True, True), (False, False)):  # φ as SAM trains: the candidate among the references
        prov = data_mod.relevance_provider("cider", split, include_candidate=include)
        want = [prov.batch(i, c) for i, c in batches]
        assert all(np.allclose(m, w) for m, w in zip(phi, want)) == same


# --- Table 1 ------------------------------------------------------------------------------------------------
def toy_world(n_images=10, cpi=2, seed=0):
    rng = np.random.default_rng(seed)
    ioc = np.repeat(np.arange(n_images), cpi)
    gt = sam_agreement.gt_matrix(ioc, n_images)
    yard = np.clip(0.3 * rng.random((n_images, n_images * cpi)) + 0.6 * gt, 0, 1)
    cider = yard + 0.2 * rng.random(yard.shape)
    return ioc, gt, yard, cider


def test_folds_and_gt_matrix():
    assert sam_agreement.folds(10, 5).tolist() == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
    assert sam_agreement.folds(7, 2).tolist() == [0, 0, 0, 0, 1, 1, 1]
    g = sam_agreement.gt_matrix([0, 0, 1], 2)
    assert g.tolist() == [[True, True, False], [False, False, True]]


def test_agreement_folds_synthetic_against_scipy():
    ioc, gt, yard, cider = toy_world()
    long = sam_agreement.agreement_folds(ioc, 10, {"cider": cider}, yard, None, n_folds=2)
    assert set(long["pair set"]) == {"every pair", "CxC-like mix (57% GT)"}
    assert not ((long["pair set"] != "every pair") & (long["subset"] == "non-GT pairs")).any()
    rows = np.arange(5)  # fold 0
    ii, jj = np.meshgrid(rows, np.arange(20), indexing="ij")
    x, y, g = cider[ii, jj].ravel(), yard[ii, jj].ravel(), gt[ii, jj].ravel()
    f0 = long[(long["fold"] == 0) & (long["pair set"] == "every pair")].set_index(["subset", "relevance"])
    assert f0.loc[("all pairs", "cider"), "pearson"] == pytest.approx(pearsonr(x, y)[0])
    assert f0.loc[("all pairs", "binary"), "pearson"] == pytest.approx(pearsonr(g.astype(float), y)[0])
    assert f0.loc[("non-GT pairs", "cider"), "pearson"] == pytest.approx(pearsonr(x[~g], y[~g])[0])
    assert f0.loc[("non-GT pairs", "binary"), "pearson"] == 0.0
    mix = long[(long["fold"] == 0) & (long["pair set"] != "every pair") & (long["relevance"] == "cider")]
    assert int(mix["n_pairs"].iloc[0]) == 10 + round(10 * 19 / 25)  # all 10 GT pairs of fold 0 + the non-GT share


def test_agreement_folds_human_uses_the_judged_pairs_of_each_fold():
    ioc, gt, yard, cider = toy_world()
    img = np.array([0, 0, 1, 2, 3, 5, 6, 7, 8, 9, 9, 4])
    cap = np.array([0, 5, 2, 9, 6, 10, 3, 14, 16, 18, 1, 8])
    score = np.array([4, 1, 3, 2, 4, 1, 2, 4, 3, 4, 1, 3], dtype=float)
    hum = {"expert": {"image_idx": img, "caption_idx": cap, "score": score}}
    long = sam_agreement.agreement_folds(ioc, 10, {"cider": cider}, None, hum, n_folds=2)
    assert set(long["pair set"]) == {"expert-judged pairs"}
    k = img < 5
    f0 = long[(long["fold"] == 0) & (long["subset"] == "all pairs")].set_index("relevance")
    assert f0.loc["cider", "pearson"] == pytest.approx(pearsonr(cider[img[k], cap[k]], score[k])[0])
    assert f0.loc["cider", "n_pairs"] == k.sum()


def test_agreement_wide_table_and_claims():
    ioc, gt, yard, cider = toy_world()
    long = sam_agreement.agreement_folds(ioc, 10, {"cider": cider, "sbert": yard}, yard, None, n_folds=2)
    wide = sam_agreement.agreement_wide(long)
    assert list(wide["row"].unique()) == [
        "every pair · all pairs",
        "every pair · non-GT pairs",
        "CxC-like mix (57% GT) · all pairs",
    ]
    sel = long[(long["fold"] == 1) & (long["pair set"] == "every pair") & (long["subset"] == "all pairs")]
    w1 = wide[(wide["fold"] == 1) & (wide["row"] == "every pair · all pairs")].iloc[0]
    assert w1["cider"] == pytest.approx(float(sel.loc[sel["relevance"] == "cider", "pearson"].iloc[0]))
    assert w1["pairs per fold"] == 100
    num, shown = sam_agreement.agreement_table(
        wide, {"paper T1": pd.DataFrame({"cider": [0.734]}, index=["all pairs"])}, "ours"
    )
    assert list(shown.columns) == ["binary", "cider", "sbert", "spice", "pairs per fold"]
    assert shown.loc[("ours", "every pair · all pairs"), "pairs per fold"] == "100"
    assert shown.loc[("paper T1", "all pairs"), "cider"] == "0.734"
    rows = sam_claims.agreement_claims(wide, False, "true relevance r*")
    r0 = rows[0]
    assert r0["metric"] == "Pearson r difference vs true relevance r*"
    assert r0["statement"].endswith("(every pair, all pairs)")
    sub = wide[wide["row"] == "every pair · all pairs"]
    assert r0["effects"] == pytest.approx((sub["cider"] - sub["binary"]).tolist())


# --- Table 1, per query -------------------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(8))
def test_ncs_per_query_is_a_loop_of_sam_eq_5(seed):
    """NCS@K per query from SAM's definition (Sec. 3.3, ground truth kept): 100 · the relevance of the model's top K
    over the relevance of the ideal top K, NaN where the ideal sum is 0; the model's order is the package's tie rule
    (score descending, then relevance ascending, then index: a tie never flatters the model)."""
    rng = np.random.default_rng(seed)
    n_img, cpi = int(rng.integers(3, 12)), int(rng.integers(1, 5))
    ioc = np.repeat(np.arange(n_img), cpi)
    sim = rng.normal(size=(n_img, n_img * cpi)).astype(np.float32)
    if seed % 3 == 0:
        sim = np.round(sim)  # many tied scores
    rel = rng.random((n_img, n_img * cpi))
    rel = np.round(rel, 1) if seed % 2 else rel
    rel[0] = 0.0  # an image query with nothing relevant: undefined
    for k in (1, 5, 10):
        for d in ("i2t", "t2i"):
            s, r = (sim, rel) if d == "i2t" else (sim.T, rel.T)
            want = []
            for q in range(s.shape[0]):
                order = sorted(range(s.shape[1]), key=lambda j: (-s[q, j], r[q, j], j))
                ideal = sum(sorted(r[q], reverse=True)[:k])
                want.append(100 * sum(r[q, j] for j in order[:k]) / ideal if ideal > 0 else np.nan)
            got = sam_agreement.ncs_per_query(sim, ioc, rel, k, d)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"seed {seed} k {k} {d}")


def test_ncs_per_query_is_the_library_ncs_per_query():
    rng = np.random.default_rng(5)
    ioc = np.repeat(np.arange(6), 5)
    sim, rel = rng.normal(size=(6, 30)), rng.random((6, 30))
    rel[4] = 0.0  # undefined query: no relevance at all
    v = sam_agreement.ncs_per_query(sim, ioc, rel, k=5)
    for q in range(6):
        top = np.argsort(-sim[q])[:5]
        ideal = np.sort(rel[q])[::-1][:5].sum()
        if q == 4:
            assert np.isnan(v[q])
        else:
            assert v[q] == pytest.approx(100 * rel[q, top].sum() / ideal)
    assert np.nanmean(v) == pytest.approx(metrics.ncs(sim, ioc, rel, ks=(5,))["ncs5_i2t"])
    t2i = sam_agreement.ncs_per_query(sim, ioc, rel, k=1, direction="t2i")
    assert len(t2i) == 30 and t2i[0] == pytest.approx(100 * rel[np.argmax(sim[:, 0]), 0] / rel[:, 0].max())


def test_per_query_metrics_and_fold_pearson_against_loops():
    rng = np.random.default_rng(6)
    ioc = np.repeat(np.arange(8), 5)
    sim, phi, quality = rng.normal(size=(8, 40)), rng.random((8, 40)), rng.random((8, 40))
    pq = sam_agreement.per_query_metrics(sim, ioc, phi, quality, 5)
    for q in range(8):
        top = np.argsort(-sim[q])[:5]
        gt = ioc[top] == q
        assert pq.loc[q, "quality"] == pytest.approx(quality[q, top].mean())
        assert pq.loc[q, "binary R^V@5"] == float(gt.any()) and pq.loc[q, "R@5 (Eq. 1)"] == gt.sum() / 5
    fp = sam_agreement.fold_pearson(pq, sam_agreement.folds(8, 2)).set_index(["fold", "metric"])
    half = pq.iloc[4:]
    assert fp.loc[(1, "NCS@5 (CIDEr-D)"), "pearson"] == pytest.approx(
        pearsonr(half["NCS@5 (CIDEr-D)"], half["quality"])[0]
    )
    const = pq.assign(**{"binary R^V@5": 1.0})
    assert (
        sam_agreement.fold_pearson(const, sam_agreement.folds(8, 2)).query("metric == 'binary R^V@5'")["pearson"] == 0.0
    ).all()


def test_per_query_metrics_rank_ties_by_the_library_rule_per_column():
    """On ties every column ranks the less relevant candidate first, relevance being what the column measures
    (the yardstick for quality, the GT flag for the recalls): written here as a loop over each query's candidates
    sorted by (−score, relevance, index); NCS@5 is the library's own."""
    rng = np.random.default_rng(8)
    ioc = np.repeat(np.arange(8), 5)
    sim = np.round(rng.normal(size=(8, 40)), 0)  # integer scores: long tie runs across place 5
    sim[:, :5] = np.round(sim[:, :5])  # GT captions of image 0 tie with others too
    phi, quality = rng.random((8, 40)), rng.random((8, 40))
    pq = sam_agreement.per_query_metrics(sim, ioc, phi, quality, 5)
    crossing = 0
    for q in range(8):
        order = sorted(range(40), key=lambda c: -sim[q, c])
        crossing += sim[q, order[4]] == sim[q, order[5]]
        by_quality = sorted(range(40), key=lambda c: (-sim[q, c], quality[q, c], c))[:5]
        by_gt = sorted(range(40), key=lambda c: (-sim[q, c], ioc[c] == q, c))[:5]
        gt = ioc[by_gt] == q
        assert pq.loc[q, "quality"] == pytest.approx(quality[q, by_quality].mean())
        assert pq.loc[q, "binary R^V@5"] == float(gt.any()) and pq.loc[q, "R@5 (Eq. 1)"] == gt.sum() / 5
    assert crossing >= 4  # the case is exercised
    assert np.allclose(pq["NCS@5 (CIDEr-D)"], sam_agreement.ncs_per_query(sim, ioc, phi), equal_nan=True)
    flat = sam_agreement.per_query_metrics(np.zeros((8, 40)), ioc, phi, quality, 5)  # a constant model never looks good
    assert (flat["binary R^V@5"] == 0).all() and flat["quality"].tolist() == pytest.approx(
        np.sort(quality, axis=1)[:, :5].mean(axis=1)
    )


def test_per_query_agreement_reads_every_seed_of_each_arm_and_checks_the_record():
    rng = np.random.default_rng(7)
    ioc = np.repeat(np.arange(10), 2)
    split = SimpleNamespace(n_images=10, image_of_caption=ioc, captions_per_image=2)
    phi, quality = rng.random((10, 20)), rng.random((10, 20))
    emb = {
        (a, s): (rng.normal(size=(10, 4)), rng.normal(size=(20, 4)))
        for a in sam_agreement.ARMS_100.values()
        for s in (0, 1)
    }
    arms = [SimpleNamespace(name=a) for a in sam_agreement.ARMS_100.values()]
    cache = SimpleNamespace(
        get_or_train=lambda cfg, progress: SimpleNamespace(
            arrays={"test_img": emb[(cfg.arm, cfg.seed)][0], "test_cap": emb[(cfg.arm, cfg.seed)][1]}
        )
    )
    study = SimpleNamespace(
        arms=lambda paper: arms,
        configs=lambda arm: [SimpleNamespace(arm=arm.name, seed=s) for s in (0, 1)],
        cache=cache,
    )
    pq, check = sam_agreement.per_query_agreement(study, "sam", sam_agreement.ARMS_100, split, phi, quality, n_folds=2)
    assert len(pq) == 2 * 2 * 2 * len(sam_agreement.PER_QUERY) and set(pq["model"]) == set(sam_agreement.ARMS_100)
    img, cap = emb[("100% data, + SAM", 1)]
    sim = img.astype(np.float32) @ cap.astype(np.float32).T
    want = np.nanmean(sam_agreement.ncs_per_query(sim, ioc, phi))
    got = check.set_index(["model", "seed"]).loc[("VSE++ + SAM", 1), "mean per-query NCS@5"]
    assert got == pytest.approx(want)
    rec = pd.DataFrame(
        [
            dict(arm=sam_agreement.ARMS_100[r["model"]], seed=r["seed"], ncs5_i2t_cider=r["mean per-query NCS@5"])
            for r in check.to_dict("records")
        ]
    )
    assert sam_agreement.ncs_identity(check, rec) == pytest.approx(0.0)
    rec.loc[0, "ncs5_i2t_cider"] += 0.1
    with pytest.raises(AssertionError, match="does not average"):
        sam_agreement.ncs_identity(check, rec)
    t = sam_agreement.per_query_table(pq)
    fold_mean = pq[(pq["model"] == "VSE++ + SAM") & (pq["metric"] == "R@5 (Eq. 1)")].groupby("fold")["pearson"].mean()
    assert t.loc["VSE++ + SAM", "R@5 (Eq. 1)"] == pytest.approx(fold_mean.mean())
    assert t.loc["VSE++ + SAM", "R@5 (Eq. 1)_std"] == pytest.approx(fold_mean.std(ddof=1))
    rows = sam_claims.per_query_claims(pq)
    w = pq[pq["model"] == "VSE++ (Triplet-HN)"].groupby(["fold", "metric"])["pearson"].mean().unstack()
    assert rows[0]["effects"] == pytest.approx((w["NCS@5 (CIDEr-D)"] - w["binary R^V@5"]).tolist())


# --- Fig. 3 -------------------------------------------------------------------------------------------------
def fig3_frame():
    rows = []
    for arm, loss in (("100% data, Triplet-HN", "triplet"), ("100% data, + SAM", "sam")):
        for s in (0, 1):
            r = dict(arm=arm, loss=loss, seed=s, method=sam.METHOD[loss])
            for d in ("i2t", "t2i"):
                for m in sam.MS:
                    r[f"srhit5m{m}_{d}_cider"] = 10 + m + s
                    r[f"sr5m{m}_{d}_cider"] = 30 - m - s * (d == "t2i")
            rows.append(r)
    return pd.DataFrame(rows)


def test_fig3_long_table_and_claims():
    df = fig3_frame()
    f3 = sam.fig3_long(df, ["cider"])
    assert len(f3) == 4 * 2 * len(sam.MS)
    num, view = sam.fig3_table(f3)
    assert num.loc[("CIDEr-D", "image→text", "VSE++ (Triplet-HN)"), ("R@5 hit", 20)] == pytest.approx(30.5)
    assert "SR@5, m=10" in view.columns
    rows = {(r["metric"], r["arms"]): r for r in sam_claims.fig3_claims(df, ["cider"])}
    assert rows[("srhit5m20−srhit5m5 i2t cider", "100% data, + SAM")]["effects"] == [15, 15]
    assert rows[("sr5m5−sr5m20 t2i cider", "100% data, Triplet-HN")]["effects"] == [15, 15]
    assert len(rows) == 2 * 2 * 2


# --- claims -------------------------------------------------------------------------------------------------
def test_fraction_claims_both_variants_against_explicit_differences():
    df = fraction_frame()
    rows = sam_claims.fraction_claims(df, [("rsum", "RSUM"), ("nsum_cider", "Nsum")])
    assert len(rows) == 3 * 2 * 2
    by = {(r["arms"], r["metric"]): r for r in rows}
    r = by[("10% data, + SAM vs 10% data, Triplet-HN", "rsum")]
    assert r["cid"] == "S1" and r["effects"] == pytest.approx([10, 11, 12])
    r = by[("100% data, + SAM (authors' code) vs 100% data, Triplet-HN", "nsum_cider")]
    assert r["cid"] == "S2" and r["effects"] == pytest.approx([-2.5] * 3) and "authors coded" in r["statement"]


def test_grid_claims_rows_per_variant():
    rows = sam_claims.grid_claims(grid_frame())
    arms = [r["arms"] for r in rows]
    assert arms == [
        "SAM SN vs HN, mean over 4 cells",
        "SAM SN vs RS, mean over 4 cells",
        "SAM keep-triplet vs SAM only, mean over τ × sampling",
        "SAM (authors' code) SN vs HN, mean over 4 cells",
        "SAM (authors' code) SN vs RS, mean over 4 cells",
        "SAM (authors' code) keep-triplet vs SAM only, mean over τ × sampling",
    ]
    g = grid_frame()
    assert rows[3]["effects"] == pytest.approx(sam_claims.sampling_effects(g[g["variant"] == "authors' code"], "HN")[0])
    assert len(sam_claims.grid_claims(g[g["variant"] == "as written"])) == 3
    assert rows[0]["failures"] == {"seeds": "0;1;2", "failed_seeds": "", "failures": "0 of 3 seeds"}  # zero stated
    assert "failures" not in sam_claims.grid_claims(g.drop(columns="collapsed"))[0]  # health unknown: not claimed


def test_primary_roles_drop_arm_primaries_and_mark_notebook_primaries():
    rows = sam_claims.fraction_claims(fraction_frame(), [("rsum", "RSUM")]) + sam_claims.grid_claims(grid_frame())
    out = sam_claims.primary_roles(rows, "synthetic")
    arms = [r["arms"] for r in out]
    assert "10% data, + SAM vs 10% data, Triplet-HN" not in arms  # S1's primary: added by Page.finish
    assert "100% data, + SAM vs 100% data, Triplet-HN" not in arms  # S2's
    assert "25% data, + SAM vs 25% data, Triplet-HN" in arms
    assert "10% data, + SAM (authors' code) vs 10% data, Triplet-HN" in arms
    prim = [r for r in out if r.get("role") == "primary"]
    assert [r["arms"] for r in prim] == ["SAM SN vs HN, mean over 4 cells"]
    assert prim[0]["statement"] == registry.claim("S3").primary.statement
    assert len(out) == len(rows) - 2


# --- resemblance and figures --------------------------------------------------------------------------------
def test_resemblance_signs_against_planted_gains():
    df = fraction_frame()
    g = grid_frame()
    t2 = {"p": pd.DataFrame({"rsum": [100.0, 150.0]}, index=["10% data, Triplet-HN", "10% data, + SAM"])}
    t3 = {"p": pd.DataFrame({"rsum": [400.0, 390.0]}, index=["100% data, Triplet-HN", "100% data, + SAM"])}
    cells = [f"τ={t:g} {s} keep={k}" for t in (3.0, 5.0, 10.0) for s in ("RS", "HN", "SN") for k in (True, False)]
    vals = {c: 400.0 + 10 * ("SN" in c) + 3 * ("True" in c) + 100 * ("τ=5" in c) for c in cells}
    t45 = {
        "paper Tables 4 and 5: Flickr30K, CVSE": pd.DataFrame({"rsum": vals}),
        "paper Table 4: MS-COCO": pd.DataFrame(),
    }
    res = sam_claims.resemblance(df, g, t2, t3, t45)
    assert res.loc["10% data: + SAM − Triplet-HN", "paper"] == 50.0
    assert res.loc["10% data: + SAM − Triplet-HN", "as written"] == pytest.approx(11.0)
    assert res.loc["10% data: + SAM − Triplet-HN", "authors' code"] == pytest.approx(-5.0)
    assert np.isnan(res.loc["25% data: + SAM − Triplet-HN", "paper"])
    row = res.loc["100% data: + SAM − Triplet-HN"]  # paper −10; ours: as written +10…12, authors' −5
    assert not row["as written: paper's sign"] and row["authors' code: paper's sign"]
    assert res.loc["SN − HN (mean over τ × keep)", "paper"] == pytest.approx(10.0)  # τ = 5 is not run: left out
    assert res.loc["triplet kept − SAM only (mean over τ × sampling)", "paper"] == pytest.approx(3.0)
    w = g[g["variant"] == "as written"]
    assert res.loc["SN − RS (mean over τ × keep)", "as written"] == pytest.approx(
        np.mean(sam_claims.sampling_effects(w, "RS")[0])
    )
    s = sam_claims.resemblance_sentence(res)
    n_ok = int(res["authors' code: paper's sign"].dropna().astype(bool).sum())
    assert f"SAM authors' code has the paper's sign on {n_ok} of 5 contrasts" in s


def legend_outside(fig) -> bool:
    import matplotlib.pyplot as plt

    leg = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    ok = len(leg) == 1 and leg[0].get_bbox_to_anchor().x0 > fig.axes[0].get_position().x0
    plt.close(fig)
    return ok


def test_fraction_figure_draws_every_panel_with_one_legend_outside():
    fig = sam.fraction_figure(sam.fraction_columns(fraction_frame()), [("rsum", "RSUM"), ("nsum_cider", "Nsum")], "t")
    assert len(fig.axes) == 2 and fig.axes[0].get_legend() is None
    assert legend_outside(fig)


def test_grid_figure_has_a_row_per_variant_and_keep():
    fig = sam.grid_figure(grid_frame(seeds=(0, 1)), [("rsum", "RSUM")], "t")
    assert len(fig.axes) == 4  # 2 variants × keep T/F
    assert legend_outside(fig)


def test_fig3_and_margin_figures():
    fig = sam.fig3_figure(sam.fig3_long(fig3_frame(), ["cider"]), "t")
    assert len(fig.axes) == 2 and legend_outside(fig)
    fig = sam.margin_figure(phi_batches(), [3.0, 10.0], "t")
    assert len(fig.axes[0].patches) == 2 and legend_outside(fig)
