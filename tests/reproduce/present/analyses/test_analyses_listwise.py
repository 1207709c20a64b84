"""reproduce.present.analyses.listwise against independent computations: explicit loops, scipy, planted frames."""

from __future__ import annotations

import itertools
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from reproduce.present.analyses import listwise as lw  # noqa: E402


def _split(n_images=6, cpi=2, seed=0):
    rng = np.random.default_rng(seed)
    ioc = np.repeat(np.arange(n_images), cpi)
    return SimpleNamespace(
        name="test",
        n_images=n_images,
        n_captions=n_images * cpi,
        captions_per_image=cpi,
        image_of_caption=ioc,
        true_relevance=rng.random((n_images, n_images * cpi)).astype(np.float32),
        extras={},
    )


# --- Table I ----------------------------------------------------------------------------------------------
def test_binary_annotation_is_the_own_caption_indicator():
    ioc = np.array([0, 0, 1, 2, 2, 2])
    got = lw.binary_annotation(ioc, 3)
    for i in range(3):
        for j in range(6):
            assert got[i, j] == (1.0 if ioc[j] == i else 0.0)


def test_positives_synthetic_thresholds_true_relevance():
    test = _split()
    pos, what = lw.positives(test, human=False)
    assert (pos == (test.true_relevance >= 0.8)).all()
    assert "0.8" in what


def test_positives_expert_judgements_and_missing():
    test = _split()
    test.extras["expert"] = pd.DataFrame(
        {"image_idx": [0, 0, 1, 3], "caption_idx": [1, 4, 2, 0], "score": [3.0, 2.5, 4.0, 1.0]}
    )
    pos, what = lw.positives(test, human=True)
    want = np.zeros((6, 12), dtype=bool)
    want[0, 1] = want[1, 2] = True  # mean expert score ≥ 3
    assert (pos == want).all() and "expert" in what
    del test.extras["expert"]
    assert lw.positives(test, human=True)[0] is None


def test_rankers_builds_binary_and_both_rsc_modes(monkeypatch):
    from coherent_itr import data as data_mod

    asked = []

    def fake(name, split, **kw):
        asked.append((name, kw))
        return SimpleNamespace(
            matrix=lambda: np.full((split.n_images, split.n_captions), kw["mode"] == "paired", float)
        )

    monkeypatch.setattr(data_mod, "relevance_provider", fake)
    r = lw.rankers(_split())
    assert list(r) == ["binary annotation", "RSC (paired)", "RSC (max5)"]
    assert asked == [("sbert", {"mode": m, "scale": "unit"}) for m in ("paired", "max5")]
    assert r["RSC (paired)"].all() and not r["RSC (max5)"].any()


def _reference_ranking_metrics(score, pos):
    """mAP@R, R-P, R@1 (%) of ranking each row's columns by score (no ties), rows without a positive skipped."""
    out = {"mapr": [], "rprec": [], "r1": []}
    for s, p in zip(score, pos):
        if not p.any():
            continue
        order = np.argsort(-s)
        hits = p[order]
        r = int(p.sum())
        prec = [hits[: i + 1].sum() / (i + 1) for i in range(r)]
        out["mapr"].append(sum(prec[i] for i in range(r) if hits[i]) / r)
        out["rprec"].append(hits[:r].sum() / r)
        out["r1"].append(float(hits[0]))
    return {k: 100 * float(np.mean(v)) for k, v in out.items()}


def test_table1_folds_against_an_explicit_ranking_loop():
    rng = np.random.default_rng(3)
    n_img, cpi = 8, 3
    ioc = np.repeat(np.arange(n_img), cpi)
    pos = rng.random((n_img, n_img * cpi)) > 0.6
    pos[0, 0] = True
    score = rng.random((n_img, n_img * cpi))  # distinct scores: the tie rule plays no role
    t1 = lw.table1_folds(pos, {"s": score}, ioc, "true", n_folds=2)
    assert len(t1) == 2 * 2  # folds × tie rules
    for f, images in enumerate(np.array_split(np.arange(n_img), 2)):
        caps = np.flatnonzero(np.isin(ioc, images))
        p, s = pos[np.ix_(images, caps)], score[np.ix_(images, caps)]
        want_i2t, want_t2i = _reference_ranking_metrics(s, p), _reference_ranking_metrics(s.T, p.T)
        for rule in lw.TIES.values():
            row = t1[(t1.fold == f) & (t1.ties == rule)].iloc[0]
            for m in lw.SEMANTIC:
                assert row[f"{m}_i2t_true"] == pytest.approx(want_i2t[m], abs=1e-9)
                assert row[f"{m}_t2i_true"] == pytest.approx(want_t2i[m], abs=1e-9)
            assert row["positives_per_image"] == pytest.approx(p.sum() / len(images))
            own = sum(p[a, b] and ioc[caps[b]] == images[a] for a in range(len(images)) for b in range(len(caps)))
            assert row["own_caption_share_of_positives"] == pytest.approx(100 * own / p.sum())


def test_table1_folds_with_ties_average_over_every_tied_order_whatever_the_last_bits():
    """The binary annotation ties each image's own captions at 1 and every other caption at 0: the expected R@1 of
    an image query is the share of positives among its own captions, its mAP@R the mean over every order of the
    tie groups (enumerated). The same scores moved by a few float32 ulps give the same expected rows."""
    rng = np.random.default_rng(4)
    n_img, cpi = 4, 3
    ioc = np.repeat(np.arange(n_img), cpi)
    pos = rng.random((n_img, n_img * cpi)) > 0.5
    pos[np.arange(n_img), np.arange(n_img) * cpi] = True
    binary = lw.binary_annotation(ioc, n_img)
    noisy = binary + rng.integers(-3, 4, size=binary.shape).astype(np.float32) * np.float32(6e-8)
    t1 = lw.table1_folds(pos, {"b": binary, "noisy": noisy}, ioc, "true", n_folds=1)
    row = t1[(t1.ties == lw.TIES["expected"]) & (t1.ranker == "b")].iloc[0]
    own = binary > 0
    assert row["r1_i2t_true"] == pytest.approx(100 * np.mean([pos[i][own[i]].mean() for i in range(n_img)]))

    def mapr_over_orders(s, p):
        groups = [np.flatnonzero(s == v) for v in sorted(set(s), reverse=True)]
        vals = []
        for parts in itertools.product(*(itertools.permutations(g) for g in groups)):
            hits, r = p[[c for part in parts for c in part]], int(p.sum())
            vals.append(sum(hits[: i + 1].sum() / (i + 1) for i in range(r) if hits[i]) / r)
        return np.mean(vals)

    want = np.mean([mapr_over_orders(binary[i], pos[i]) for i in range(n_img)])
    assert row["mapr_i2t_true"] == pytest.approx(100 * want, abs=1e-9)
    moved = t1[(t1.ties == lw.TIES["expected"]) & (t1.ranker == "noisy")].iloc[0]
    for m in lw.SEMANTIC:
        for d in ("i2t", "t2i"):
            assert moved[f"{m}_{d}_true"] == pytest.approx(row[f"{m}_{d}_true"], abs=1e-9)


def test_n6_gaps_planted_frame():
    rows = []
    for f in range(3):
        for ranker, base in (("binary annotation", 10.0), ("RSC (paired)", 20.0), ("RSC (max5)", 15.0)):
            for rule, label in lw.TIES.items():
                shift = 1.0 if rule == "expected" else 0.0
                vals = {
                    f"{m}_{d}_expert": base + f + shift + (2.0 if d == "t2i" else 0.0)
                    for m in lw.SEMANTIC
                    for d in "i2t t2i".split()
                }
                rows.append({"fold": f, "ranker": ranker, "ties": label, **vals})
    g = lw.n6_gaps(pd.DataFrame(rows), "expert")
    assert len(g) == 6
    paired = g[(g["mode"] == "paired") & (g["metric"] == "mapr")].iloc[0]
    assert paired["expected"] == [10.0, 10.0, 10.0] and paired["pessimistic"] == [10.0, 10.0, 10.0]
    assert g[g["mode"] == "max5"].iloc[0]["expected"] == [5.0, 5.0, 5.0]
    assert paired["name"] == "mAP@R"


def test_on_yardstick_and_headers():
    b = {"src": pd.DataFrame({"mapr_i2t": [1.0], "rsum": [2.0]}, index=["a"])}
    out = lw.on_yardstick(b, "true")["src"]
    assert list(out.columns) == ["mapr_i2t_true", "rsum"]
    h = lw.headers(pd.DataFrame(columns=["rsum", "positives_per_image", "whatever"]))
    assert h.columns[0].startswith("RSUM") and h.columns[1] == lw.T1_EXTRA["positives_per_image"]
    assert h.columns[2] == "whatever"


# --- Tables V–VII --------------------------------------------------------------------------------------------
def test_semantic_columns_direction_mean_and_ndcg_columns():
    df = pd.DataFrame(
        {
            "mapr_i2t_true": [1.0, 3.0],
            "mapr_t2i_true": [3.0, 5.0],
            "r1_i2t_true": [0.0, 0.0],
            "ndcg100_t2i_true": [0.5, 0.5],
        }
    )
    assert lw.semantic_columns(df, "true") == ["mapr_i2t_true", "r1_i2t_true", "mapr_t2i_true"]
    assert lw.direction_mean(df, "mapr", "true").tolist() == [2.0, 4.0]
    assert lw.direction_mean(df, "rprec", "true").isna().all()
    assert lw.ndcg_columns_of(df, "true") == ["ndcg100_t2i_true"]


def _results():
    rows = []
    for arm, base in ((lw.TRIP, 100.0), (lw.ALONE, 50.0), (lw.BOTH, 120.0)):
        for seed in range(3):
            rows.append(
                {"arm": arm, "seed": seed, "rsum": base + seed, "mapr_i2t_true": base / 10, "mapr_t2i_true": base / 5}
            )
    return pd.DataFrame(rows)


def test_fig_tables5_7_bar_heights_are_the_seed_means():
    df = _results()
    fig = lw.fig_tables5_7(df, "true", "t")
    heights = sorted(p.get_height() for p in fig.axes[0].patches if p.get_height() > 0)
    assert heights == pytest.approx(sorted(df.groupby("arm")["rsum"].mean()))
    plt.close(fig)


# --- Figs. 5–7 -------------------------------------------------------------------------------------------------
def test_early_val_rsum_explicit_loop():
    hist = pd.DataFrame(
        [
            {"arm": a, "seed": s, "epoch": e, "val_rsum": 10 * e + s + (5 if a == "x" else 0)}
            for a in "xy"
            for s in (0, 1)
            for e in (1, 2, 3, 4, 5)
        ]
    )
    early, half = lw.early_val_rsum(hist)
    assert half == 2
    for r in early.itertuples():
        want = np.mean([10 * e + r.seed + (5 if r.arm == "x" else 0) for e in (1, 2)])
        assert r.val_rsum == pytest.approx(want)


def _hist():
    rows = []
    for arm, prefix in ((lw.BOTH, "loss_sndcg/"), (lw.ALONE, "loss_")):
        for seed in (0, 1):
            for e in (1, 2, 3, 4):
                r = {"arm": arm, "seed": seed, "epoch": e}
                for d in ("i2t", "t2i"):
                    r[f"{prefix}ndcg_hat_{d}"] = 0.5 + 0.1 * e + 0.01 * seed
                    r[f"{prefix}ndcg_{d}"] = 0.4 + 0.1 * e + 0.02 * (e**2) * (seed + 1)
                rows.append(r)
    return pd.DataFrame(rows)


def test_ndcg_columns_reads_both_prefixes():
    nd = lw.ndcg_columns(_hist())
    assert len(nd) == 2 * 2 * 4 * 2  # arms × seeds × epochs × directions
    one = nd[(nd.arm == lw.ALONE) & (nd.seed == 1) & (nd.epoch == 3) & (nd.direction == "t2i")].iloc[0]
    assert one[lw.HAT] == pytest.approx(0.81) and one[lw.HARD] == pytest.approx(0.4 + 0.3 + 0.02 * 9 * 2)
    assert lw.ndcg_columns(pd.DataFrame({"arm": [], "seed": [], "epoch": []})).empty


def test_tracking_correlations_match_scipy():
    nd = lw.ndcg_columns(_hist())
    got = lw.tracking_correlations(nd, lw.BOTH)
    assert len(got) == 2
    for seed, r in zip((0, 1), got):
        e = np.arange(1, 5)
        want = stats.pearsonr(0.5 + 0.1 * e + 0.01 * seed, 0.4 + 0.1 * e + 0.02 * e**2 * (seed + 1)).statistic
        assert r == pytest.approx(want)
    assert lw.tracking_correlations(nd[nd.epoch <= 2], lw.BOTH) == []  # < 3 epochs


def test_tau_of_and_training_errors():
    assert lw.tau_of("τ=0.001") == 1e-3
    h = _hist().assign(arm="τ=0.01")
    err = lw.training_errors(h)
    e, s = 3, 1
    row = err[(err.seed == s) & (err.epoch == e)].iloc[0]
    for col in ("arm",):
        assert row[col] == "τ=0.01"
    assert row["τ"] == "0.01"
    # both prefixes of the planted history carry the same values per seed, both directions equal
    assert row["error"] == pytest.approx(abs((0.5 + 0.1 * e + 0.01 * s) - (0.4 + 0.1 * e + 0.02 * e**2 * (s + 1))))


def _ndcg_reference(sim, rel, tau):
    """Row means of NDCG-hat (smooth ranks, Eq. 16) and NDCG (hard ranks), IDCG with tied ranks (Eq. 13)."""
    b = sim.shape[0]
    hat, hard = [], []
    for i in range(b):
        g = 2.0 ** rel[i] - 1
        smooth = [
            1 + sum(1 / (1 + np.exp(-(sim[i, k] - sim[i, j]) / tau)) for k in range(b) if k != j) for j in range(b)
        ]
        hr = [1 + sum(sim[i, k] > sim[i, j] for k in range(b)) for j in range(b)]
        ir = [1 + sum(rel[i, k] > rel[i, j] for k in range(b)) for j in range(b)]
        idcg = sum(g[j] / np.log2(1 + ir[j]) for j in range(b))
        hat.append(sum(g[j] / np.log2(1 + smooth[j]) for j in range(b)) / idcg)
        hard.append(sum(g[j] / np.log2(1 + hr[j]) for j in range(b)) / idcg)
    return np.mean(hat), np.mean(hard)


def _error_reference(sim, rel, tau):
    return np.mean([abs(np.subtract(*_ndcg_reference(s, r, tau))) for s, r in ((sim, rel), (sim.T, rel.T))])


def test_batch_errors_against_explicit_ndcg():
    rng = np.random.default_rng(0)
    n, cpi, d = 10, 2, 4
    vi = rng.standard_normal((n, d)).astype(np.float32)
    vc = rng.standard_normal((n * cpi, d)).astype(np.float32)
    relm = rng.random((n, n * cpi)).astype(np.float32)

    def rel_batch(i, c):
        return relm[np.ix_(i, c)]

    rows = lw.batch_errors({"x": (vi, vc)}, rel_batch, (0.1, 0.01), 6, 2, np.random.default_rng(5), cpi)
    assert len(rows) == 2 * 2
    draw = np.random.default_rng(5)
    for b in range(2):
        idx = draw.choice(n, size=6, replace=False)
        cap = idx * cpi + draw.integers(0, cpi, size=6)
        sim = (vi[idx] @ vc[cap].T).astype(np.float64)
        for tau in (0.1, 0.01):
            got = next(r["error"] for r in rows if r["batch"] == b and r["τ"] == tau)
            assert got == pytest.approx(_error_reference(sim, relm[np.ix_(idx, cap)].astype(np.float64), tau), abs=2e-5)


def test_direct_errors_rows_and_draw_order():
    rng = np.random.default_rng(1)
    test = _split(n_images=8, cpi=2)
    vi, vc = rng.standard_normal((8, 3)), rng.standard_normal((16, 3))
    relm = rng.random((8, 16)).astype(np.float32)
    out = lw.direct_errors([(4, vi, vc)], test, lambda i, c: relm[np.ix_(i, c)], taus=(0.1,), batch_size=5, n_batches=2)
    assert len(out) == 2 * 2 and set(out["seed"]) == {4}
    draw = np.random.default_rng(4)
    draw.standard_normal((8, 3)), draw.standard_normal((16, 3))
    idx = draw.choice(8, size=5, replace=False)
    cap = idx * 2 + draw.integers(0, 2, size=5)
    want = _error_reference(vi[idx] @ vc[cap].T, relm[np.ix_(idx, cap)].astype(np.float64), 0.1)
    got = out[(out.batch == 0) & out.source.str.startswith("trained")]["error"].item()
    assert got == pytest.approx(want, abs=2e-5)


def test_fig6_and_fig7_draw_the_given_series():
    nd = lw.ndcg_columns(_hist())
    fig = lw.fig6(nd, "t")
    assert len(fig.axes) == 2  # one panel per listwise arm
    plt.close(fig)
    err_epoch = lw.training_errors(_hist().assign(arm="τ=0.01"))
    direct = pd.DataFrame(
        {"seed": [0, 0], "batch": [0, 0], "source": ["a", "a"], "τ": [0.1, 0.01], "error": [0.2, 0.004]}
    )
    fig = lw.fig7(err_epoch, direct, 128, "t")
    ys = sorted(y for line in fig.axes[1].lines for y in np.atleast_1d(line.get_ydata()) if np.isfinite(y))
    assert 0.2 in ys and 0.004 in ys and 0.01 in ys  # the two points and the dashed 0.01 bound
    plt.close(fig)


# --- Figs. 8–9, Table VIII ---------------------------------------------------------------------------------
def test_fig_tau_baseline_and_flat_below():
    dft = pd.DataFrame(
        [{"arm": f"τ={t:g}", "seed": s, "rsum": 100.0 + s + 10 * (t == 0.1)} for t in lw.TAUS for s in range(3)]
    )
    dft["τ"] = dft.arm.map(lw.tau_of)
    fig = lw.fig_tau(dft, [("rsum", "RSUM")], pd.Series({"rsum": 42.0}), "t")
    assert any(np.allclose(line.get_ydata(), 42.0) for line in fig.axes[0].lines)
    plt.close(fig)
    arms, tol = lw.flat_below(dft)
    assert arms == ["τ=0.0001", "τ=0.001"]
    assert tol == pytest.approx(0.02 * 101.0)


def test_overheads_explicit():
    df = pd.DataFrame(
        {
            "arm": [lw.BOTH, lw.BOTH, lw.TRIP, lw.TRIP],
            "seed": [0, 1, 1, 0],
            "time_train_s_per_epoch": [12.0, 30.0, 20.0, 10.0],
            "time_test_encode_s": [1.0, 2.0, 2.0, 1.0],
        }
    )
    train, enc = lw.overheads(df)
    assert train.to_dict() == pytest.approx({0: 0.2, 1: 0.5})
    assert enc.to_dict() == pytest.approx({0: 0.0, 1: 0.0})


def test_overhead_benchmark_summary_and_missing(tmp_path):
    assert lw.overhead_benchmark(tmp_path / "none.csv") is None
    assert lw.step_overheads(tmp_path / "none.csv") == []
    raw = pd.DataFrame(
        [
            {
                "size": size,
                "round": r,
                "text_hidden": h,
                "batch_size": 128,
                "step_triplet_ms": t,
                "step_listwise_ms": t + o,
                "sndcg_ms": o * 0.9,
            }
            for size, h, t, o in (("study", 64, 10.0, 30.0), ("papers", 1024, 300.0, 30.0))
            for r, t, o in ((0, t, o), (1, t * 1.1, o), (2, t * 0.9, o * 1.2))
        ]
    )
    raw.to_csv(tmp_path / "b.csv", index=False)
    s = lw.overhead_benchmark(tmp_path / "b.csv").set_index("size")
    assert s.loc["papers", "step_triplet_ms"] == pytest.approx(300.0)
    assert s.loc["papers", "step_listwise_ms"] == pytest.approx(np.median([330.0, 360.0, 306.0]))
    assert s.loc["papers", "overhead_ms"] == pytest.approx(np.median([330.0, 360.0, 306.0]) - 300.0)
    assert s.loc["study", "overhead_share_pct"] == pytest.approx(
        100 * (41.0 - 10.0) / 41.0
    )  # medians of 10, 11, 9 and 40, 41, 45
    assert s.loc["study", "rounds"] == 3
    got = lw.step_overheads(tmp_path / "b.csv", "papers")
    assert got == pytest.approx([30 / 300, 30 / 330, 36 / 270])


def test_study_direct_errors_read_every_seed_from_embeddings_or_from_what_an_archive_carried():
    """Fig. 7 (b) of the arm's tuned runs, every seed: from a run's test embeddings, or from the errors its archive
    carried (``error_arrays``, through an ``arrays.npz``) — the same rows as :func:`direct_errors` on the
    embeddings. Errors carried for another batch size, none carried, or carried by other code: the run is named."""
    import io

    from coherent_itr import runs
    from coherent_itr.io import load_npz

    rng = np.random.default_rng(3)
    test = _split(n_images=8, cpi=2)
    relm = rng.random((8, 16)).astype(np.float32)

    def rel(i, c):
        return relm[np.ix_(i, c)]

    emb = {s: (rng.standard_normal((8, 3)), rng.standard_normal((16, 3))) for s in (2, 0)}
    kw = dict(taus=(0.1, 0.01), batch_size=5, n_batches=2)

    def slim(arrays):
        buf = io.BytesIO()
        np.savez(buf, pq_i2t=np.zeros((8, 3), np.uint8), **arrays)
        out = runs.SlimArrays(load_npz(io.BytesIO(buf.getvalue())))
        out.key = "f" * 20
        return out

    arrays = {2: {"test_img": emb[2][0], "test_cap": emb[2][1]}, 0: slim(lw.error_arrays(0, *emb[0], test, rel, **kw))}
    arms = [SimpleNamespace(name=lw.TRIP), SimpleNamespace(name=lw.BOTH)]
    study = SimpleNamespace(
        arms=lambda paper, group: arms if (paper, group) == ("listwise", "table5") else [],
        configs=lambda a: [SimpleNamespace(seed=2), SimpleNamespace(seed=0)] if a.name == lw.BOTH else [],
        cache=SimpleNamespace(get_or_train=lambda c, progress: SimpleNamespace(arrays=arrays[c.seed])),
    )
    got = lw.study_direct_errors(study, "listwise", "table5", lw.BOTH, test, rel, **kw)
    pd.testing.assert_frame_equal(got, lw.direct_errors([(2, *emb[2]), (0, *emb[0])], test, rel, **kw))
    with pytest.raises(
        runs.ImportedRunMissing, match=r"run f{20}: .*\(\[0.1, 0.01\], 5, 2, 0\).*\[0.1, 0.01\], 4, 2, 0"
    ):
        lw.study_direct_errors(study, "listwise", "table5", lw.BOTH, test, rel, **{**kw, "batch_size": 4})
    arrays[0] = slim({})
    with pytest.raises(runs.ImportedRunMissing, match=r"run f{20} was imported .* without the 'fig7b' arrays"):
        lw.study_direct_errors(study, "listwise", "table5", lw.BOTH, test, rel, **kw)
    arrays[0] = slim({**lw.error_arrays(0, *emb[0], test, rel, **kw), "view_fig7b_code": np.asarray("0" * 16)})
    with pytest.raises(runs.ImportedRunMissing, match="computed by other code"):
        lw.study_direct_errors(study, "listwise", "table5", lw.BOTH, test, rel, **kw)


def test_error_table_and_paper_overhead():
    err = pd.DataFrame({"source": ["a", "a", "a", "b"], "τ": [0.1, 0.1, 0.01, 0.1], "error": [0.1, 0.3, 0.5, 0.7]})
    t = lw.error_table(err)
    assert t.loc[("a", 0.1), "mean"] == pytest.approx(0.2) and t.loc[("a", 0.1), "max"] == pytest.approx(0.3)
    assert t.loc[("a", 0.1), "count"] == 2 and t.loc[("b", 0.1), "count"] == 1
    block = {"p": pd.DataFrame({"time_train_s_per_epoch": [200.0, 210.0]}, index=["base", "+ listwise"])}
    assert lw.paper_overhead(block) == pytest.approx(0.05)


def test_legends_outside_makes_one_legend_right_of_the_panels():
    fig, axes = plt.subplots(1, 2)
    for ax, other in zip(axes, ("y", "z")):
        ax.plot([0, 1], [0, 1], label="x")
        ax.plot([0, 1], [1, 0], label=other)
        ax.legend()
    lw.legends_outside(fig)
    assert axes[0].get_legend() is None
    leg = axes[1].get_legend()
    assert [t.get_text() for t in leg.get_texts()] == ["x", "y", "z"]  # each label once
    fig.canvas.draw()
    assert leg.get_window_extent().x0 > axes[1].get_window_extent().x1  # right of the data
    plt.close(fig)


def test_with_tau_parses_every_arm():
    df = pd.DataFrame({"arm": ["τ=0.1", "τ=0.0001"], "rsum": [1.0, 2.0]})
    assert lw.with_tau(df)["τ"].tolist() == [0.1, 1e-4]
    assert "τ" not in df
