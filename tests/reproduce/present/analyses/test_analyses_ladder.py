"""reproduce.present.analyses.ladder against planted frames, explicit loops and scipy (no runs, no training)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from reproduce.protocol import calibration

from reproduce.present import report  # noqa: E402
from reproduce.spec import claims as registry  # noqa: E402
from reproduce.present.analyses import ladder as L  # noqa: E402
from reproduce.present.analyses import ladder_claims as LC  # noqa: E402
from reproduce.present.analyses import ladder_theta as LT  # noqa: E402
from reproduce.present.analyses import plotting  # noqa: E402

SEEDS = (0, 1, 2)
METRICS = [
    "cs100_i2t_sbert",
    "cs100_t2i_sbert",
    "cs200_i2t_sbert",
    "cs1000_i2t_sbert",
    "cs1000_t2i_sbert",
    "cs100_i2t_true",
    "cs100_t2i_true",
    "cs200_i2t_true",
    "cs1000_i2t_true",
    "cs1000_t2i_true",
    "rsum",
    "i2t_map",
]
GROUPS = {
    "table1": ["VSE++", "Ladder (manual)", "Ladder (adaptive)"],
    "beta2": [f"{s} β₂={b:g}" for b in (0.0, 0.25, 0.5) for s in ("manual", "auto(2,2)")],
    "levels": ["L=1", "L=2", "L=3"],
    "lminmax": ["(1,1)", "(2,2)", "(2,4)", "(2,5)"],
}


def value(arm: str, seed: int, metric: str) -> float:
    """A planted metric value whose paired differences are known: depends on arm, seed and metric."""
    return (sum(map(ord, arm)) % 97) * 0.01 + seed**2 * 0.1 + METRICS.index(metric) * 1.7 + 0.003 * len(arm) * seed


def frames(drop_yard: bool = False) -> dict:
    out = {}
    for g, arms in GROUPS.items():
        rows = [{"arm": a, "seed": s, **{m: value(a, s, m) for m in METRICS}} for a in arms for s in SEEDS]
        df = pd.DataFrame(rows)
        if drop_yard:
            df = df.drop(columns=[m for m in METRICS if m.endswith("_true")]).assign(expert_kendall_nongt=0.5)
        out[g] = df
    return out


# --- columns -----------------------------------------------------------------------------------------------
def test_present_keeps_given_order_skips_missing_none_and_duplicates():
    assert L.present(["a", "b", "c"], ["c", None, "x", "a", "c"]) == ["c", "a"]


def test_yard_key_prefers_k_specific_then_expert_then_none():
    assert L.yard_key(["cs100_i2t_true", "expert_kendall_nongt"], 100, "i2t", "true") == "cs100_i2t_true"
    assert L.yard_key(["expert_kendall_nongt"], 100, "i2t", "expert") == "expert_kendall_nongt"
    assert L.yard_key(["rsum"], 100, "i2t", "true") is None


def test_table_columns_follow_the_paper_layout():
    cols = ["rsum", "t2i_r1", "i2t_r1", "cs100_i2t_true", "cs100_i2t_sbert", "i2t_meanr", "zzz"]
    assert L.table_columns(cols, "true", ks=(100,)) == [
        "cs100_i2t_sbert",
        "cs100_i2t_true",
        "i2t_meanr",
        "i2t_r1",
        "t2i_r1",
        "rsum",
    ]


def test_with_rsum_sums_the_six_recalls_and_is_nan_when_one_is_missing():
    rk = [f"{d}_r{r}" for d in ("i2t", "t2i") for r in (1, 5, 10)]
    block = pd.DataFrame([list(range(1, 7)), [1, 2, 3, 4, 5, np.nan]], columns=rk, index=["a", "b"])
    out = L.with_rsum(block)
    assert out.loc["a", "rsum"] == 21 and np.isnan(out.loc["b", "rsum"])


def test_paper_blocks_read_the_committed_tables_with_rsum():
    t1 = L.paper_blocks("table1")
    coco = t1["paper: MS-COCO 1K, VSE++ VGG19"]
    assert list(coco.index) == ["VSE++", "Ladder (manual)", "Ladder (adaptive)"]
    assert coco.loc["VSE++", "rsum"] == pytest.approx(56.0 + 84.0 + 92.0 + 42.5 + 78.0 + 88.0)
    for name, ks in (("table1", (100, 1000)), ("table4", (100, 1000)), ("table6", (100, 200, 1000))):
        for block in L.paper_blocks(name).values():
            assert list(block.columns) == L.paper_columns(ks), name
            assert block.notna().all().all(), name
    x = L.paper_blocks("table11")
    assert len(x) == 4 and all(list(b.columns) == ["i2t_map"] for b in x.values())


def test_pretty_digits_by_kind_and_collapse_mark_kept():
    df = pd.DataFrame(
        {
            "arm": ["a", "a", "b", "b"],
            "cs100_i2t_sbert": [0.1, 0.2, 0.3, 0.5],
            "rsum": [100.0, 110.0, 200.0, 210.0],
            "collapsed": [False, False, True, False],
        }
    )
    summ = report.summary(df, ["cs100_i2t_sbert", "rsum"])
    out = L.pretty(summ, ["cs100_i2t_sbert", "rsum"])
    assert out.loc["a", "cs100_i2t_sbert"] == f"0.150 ± {np.std([0.1, 0.2], ddof=1):.3f}"
    assert out.loc["a", "rsum"] == f"105.0 ± {np.std([100, 110], ddof=1):.1f}"
    assert list(out.index) == ["a", "b ‡ 1/2 collapsed"]


def test_sweep_values_parse_the_arm_names():
    b = L.sweep_values(pd.DataFrame({"arm": ["manual β₂=0.5", "auto(2,2) β₂=0"]}), "beta2")
    assert list(b.selection) == ["manual", "auto(2,2)"] and list(b.beta2) == [0.5, 0.0]
    assert list(L.sweep_values(pd.DataFrame({"arm": ["L=3", "L=1"]}), "levels").L) == [3, 1]
    m = L.sweep_values(pd.DataFrame({"arm": ["(2,4)", "(1,1)"]}), "lminmax")
    assert list(m.bounds.cat.categories) == ["(2,4)", "(1,1)"]
    with pytest.raises(ValueError, match="unknown group"):
        L.sweep_values(m, "table1")


def test_fixed_bounds_are_the_equal_pairs():
    assert L.fixed_bounds(["(1,1)", "(2,2)", "(2,4)", "(10,10)", "x"]) == ["(1,1)", "(2,2)", "(10,10)"]


def test_identity_check_max_abs_difference_and_setting():
    df = pd.DataFrame(
        {
            "arm": ["VSE++"] * 3 + ["m0"] * 3 + ["a0"] * 2,
            "seed": [0, 1, 2, 0, 1, 2, 0, 1],
            "rsum": [100.0, 200.0, 300.0, 100.5, 199.0, 300.0, 90.0, 200.0],
            "lr": [2e-3] * 6 + [6e-4] * 2,
            "warmup_epochs": [0] * 8,
        }
    )
    out = L.identity_check(df, ["m0", "a0"], "VSE++")
    assert out.loc["m0", "largest absolute difference"] == pytest.approx(1.0) and out.loc["m0", "same lr and warm-up"]
    assert out.loc["a0", "largest absolute difference"] == pytest.approx(10.0) and out.loc["a0", "seeds"] == 2
    assert not out.loc["a0", "same lr and warm-up"]


# --- Fig. 6 ------------------------------------------------------------------------------------------------
def planted_rel(n: int) -> np.ndarray:
    """Row i has exactly i % 4 off-diagonal entries ≥ 0.4 (value 0.9), the rest 0.1; diagonal 1."""
    rel = np.full((n, n), 0.1)
    for i in range(n):
        others = [j for j in range(n) if j != i]
        rel[i, others[: i % 4]] = 0.9
    np.fill_diagonal(rel, 1.0)
    return rel


def test_batch_stats_against_an_explicit_loop_and_scipy_binomial():
    n = 10
    rel = planted_rel(n)
    levels = np.array([2, 2, 2, 3, 3, 4, 2, 2, 3, 2])
    s = LT.batch_stats(rel, 0.4, levels)
    counts = [sum(rel[i, j] >= 0.4 for j in range(n) if j != i) for i in range(n)]
    p = sum(counts) / (n * (n - 1))
    binom = stats.binom(n - 1, p).std()
    assert s["share ≥ θ (%)"] == pytest.approx(100 * p)
    assert s["binomial std"] == pytest.approx(binom)
    assert s["overdispersion"] == pytest.approx(np.std(counts, ddof=1) / binom)
    assert s["std n≥θ per row"] == pytest.approx(np.std(counts, ddof=1))
    assert s["mean n≥θ per row"] == pytest.approx(np.mean(counts))
    off = [rel[i, j] for i in range(n) for j in range(n) if i != j]
    assert s["mean rel"] == pytest.approx(np.mean(off)) and s["std rel"] == pytest.approx(np.std(off))
    assert s["rows with no candidate ≥ θ (%)"] == pytest.approx(100 * counts.count(0) / n)
    assert s["modal levels"] == 2 and s["rows ≠ modal levels (%)"] == pytest.approx(40.0)
    assert np.isnan(LT.batch_stats(np.eye(4) * 0 + 0.1, 0.4, np.full(4, 2))["overdispersion"])


class FakeTrain:
    n_images, captions_per_image = 40, 5
    n_captions = 200


class FakeProvider:
    def __init__(self):
        self.calls = []

    def batch(self, img, cap):
        assert (np.asarray(cap) // FakeTrain.captions_per_image == np.asarray(img)).all()
        self.calls.append((np.asarray(img), np.asarray(cap)))
        return planted_rel(len(img)).astype(np.float32)


class FakeAdaptive:
    def __call__(self, sim, rel):
        n = sim.shape[0]
        self.diagnostics = {"levels_per_row_i2t": [2 + (i % 5 == 0) for i in range(n)]}


@pytest.mark.parametrize("sampling", ["images", "captions"])
def test_fig6_batches_counts_density_and_levels(sampling):
    prov = FakeProvider()
    f6 = LT.fig6_batches(FakeTrain(), prov, sampling, FakeAdaptive(), n_batches=3, batch_size=10)
    assert len(prov.calls) == 3 and all(len(set(c)) == 10 for _, c in prov.calls)
    assert list(f6["counts"].query("batch == 1").n_above) == [i % 4 for i in range(10)]
    for _, g in f6["dens"].groupby("batch"):
        assert (g.density * 0.05).sum() == pytest.approx(1.0)
    lv = f6["levels"].query("batch == 0").set_index("levels").share
    assert lv[2] == pytest.approx(80.0) and lv[3] == pytest.approx(20.0) and lv[4] == 0
    ref = LT.batch_stats(planted_rel(10), 0.4, np.array([2 + (i % 5 == 0) for i in range(10)]))
    assert f6["stats"].iloc[2]["overdispersion"] == pytest.approx(ref["overdispersion"])


# --- θ calibration ---------------------------------------------------------------------------------------
class CosineProvider:
    """Relevance = cosine of fixed random caption vectors (the paired-caption form of the ladder's signal)."""

    def __init__(self, n_captions=200, seed=1):
        v = np.random.default_rng(seed).normal(size=(n_captions, 8))
        self.v = v / np.linalg.norm(v, axis=1, keepdims=True)

    def batch(self, img, cap):
        x = self.v[np.asarray(cap)]
        return x @ x.T


def test_theta_calibration_matches_the_quantiles_and_shares_by_hand():
    prov = CosineProvider()
    out = LT.theta_calibration(prov, FakeTrain(), profile_theta=(0.5, 0.45), n_batches=4, batch_size=20, seed=3)
    mats = [prov.batch(i, c) for i, c in calibration.training_batches(40, 5, batch_size=20, n_batches=4, seed=3)]
    vals = np.concatenate([m[~np.eye(20, dtype=bool)] for m in mats])
    want = [np.sort(vals)[int(np.ceil((1 - s) * (len(vals) - 1)))] for s in calibration.SCOPE_SHARES]
    assert out["thetas"] == pytest.approx(want)
    tab = out["table"]
    assert list(tab.index) == [
        "paper θ₁",
        "paper θ₂",
        "calibrated θ₁ (measured here)",
        "calibrated θ₂ (measured here)",
        "calibrated θ₁ (profile: the runs)",
        "calibrated θ₂ (profile: the runs)",
    ]
    assert tab.loc["paper θ₁", "pairs ≥ θ (%)"] == pytest.approx(100 * (vals >= 0.40).mean())
    empty = np.mean([not any(m[i, j] >= 0.5 for j in range(20) if j != i) for m in mats for i in range(20)])
    assert tab.loc["calibrated θ₁ (profile: the runs)", "rows with an empty level 1 (%)"] == pytest.approx(100 * empty)
    assert len(LT.theta_calibration(prov, FakeTrain(), n_batches=2, batch_size=20)["table"]) == 4


def test_literal_of_maps_calibrated_arms_only():
    assert LT.literal_of("Ladder (manual, θ=0.508 calibrated)") == "Ladder (manual)"
    assert LT.literal_of("manual β₂=0.5 (θ calibrated)") == "manual β₂=0.5"
    assert LT.literal_of("L=3 (θ calibrated)") == "L=3"
    assert LT.literal_of("Ladder (manual)") is None and LT.literal_of("VSE++") is None


def test_theta_arms_and_deltas_pair_literal_and_calibrated_runs():
    arms = ["VSE++", "Ladder (manual)", "Ladder (manual, θ=0.508 calibrated)", "L=3", "L=3 (θ calibrated)"]
    df = pd.DataFrame(
        [{"arm": a, "seed": s, "rsum": 10.0 * i + s * (i % 2)} for i, a in enumerate(arms) for s in SEEDS]
    )
    cal = LT.theta_arms(df)
    assert list(cal.setting.unique()) == ["Ladder (manual)", "L=3"] and "VSE++" not in set(cal.arm)
    assert set(cal[cal.arm == "L=3"]["θ"]) == {"literal"}
    d = LT.theta_deltas(cal, ["rsum"])
    # Ladder (manual) is arm 1 (+s), calibrated arm 2 (+0): differences 10, 9, 8
    assert d.loc["Ladder (manual)", "rsum"] == pytest.approx(9.0)
    assert d.loc["Ladder (manual)", "rsum_std"] == pytest.approx(1.0) and d.loc["L=3", "n_seeds"] == 3
    assert LT.theta_arms(df[df.arm.isin(["VSE++", "L=3"])]).empty


# --- claims ------------------------------------------------------------------------------------------------
def f6_stats(n=4):
    stats = pd.DataFrame({"overdispersion": np.linspace(1.0, 1.6, n), "rows ≠ modal levels (%)": np.linspace(5, 35, n)})
    return {"stats": stats, "batch_size": 128, "theta": 0.4}


def test_claim_rows_effects_by_hand_and_no_registry_primary():
    fr = frames()
    rows = LC.claim_rows(fr, "true", "true relevance r*", "synthetic", f6_stats())
    counts = pd.Series([r["cid"] for r in rows]).value_counts().to_dict()
    # L1: 4 circular − 1 primary + 4 independent + RSUM; L2: 2 × 3 − 1; L3: 2 × 2 − 1; L4: 2 × 3 − 1; L5: 2; L6: 2 − 1
    assert counts == {"L1": 8, "L2": 5, "L3": 3, "L4": 5, "L5": 2, "L6": 1}
    for r in rows:
        if r["cid"] == "L5":
            continue
        a, b = r["arms"].split(" − ")
        assert not registry.claim(r["cid"]).primary.matches("synthetic", arm_a=a, arm_b=b, metric=r["metric"])
        want = [value(a, s, r["metric"]) - value(b, s, r["metric"]) for s in SEEDS]
        assert r["effects"] == pytest.approx(want), r["statement"]
    rs = [r for r in rows if r["cid"] == "L2" and r["metric"] == "rsum"]
    assert [r["arms"] for r in rs] == ["manual β₂=0 − manual β₂=0.5", "auto(2,2) β₂=0 − auto(2,2) β₂=0.5"]
    eq = next(r for r in rows if r.get("kind") == "equivalence")
    assert eq["tolerance"] == pytest.approx(0.05 * np.mean([value("VSE++", s, "rsum") for s in SEEDS]))
    l5 = [r for r in rows if r["cid"] == "L5"]
    assert l5[0]["role"] == "primary" and l5[0]["statement"] == registry.claim("L5").primary.statement
    assert l5[0]["metric"] == registry.claim("L5").primary.legacy_for("synthetic")["metric"]
    assert l5[0]["arms"] == "4 train batches of 128"
    assert l5[0]["effects"] == pytest.approx(np.linspace(0.0, 0.6, 4))
    assert l5[1]["effects"] == pytest.approx(np.linspace(-0.05, 0.25, 4)) and "role" not in l5[1]


def test_claim_rows_on_flickr8k_use_one_expert_row():
    rows = LC.claim_rows(frames(drop_yard=True), "expert", "Flickr8k expert judgements", "flickr8k", f6_stats())
    l1 = [r for r in rows if r["cid"] == "L1" and r["metric"] == "expert_kendall_nongt"]
    assert len(l1) == 1 and l1[0]["effects"] == pytest.approx([0.0, 0.0, 0.0])
    l3 = [r for r in rows if r["cid"] == "L3" and r["metric"] == "expert_kendall_nongt"]
    assert len(l3) == 2 and all("not K-specific" in r["note"] for r in l3)


def test_by_yardstick_groups_rows_by_kind_of_evidence():
    claims = pd.DataFrame(
        {
            "id": ["L5", "L1", "L1", "L1"],
            "arms": ["batches", "a − b", "a − b", "a − b"],
            "metric": ["std over rows of n≥θ / binomial std − 1", "cs100_i2t_sbert", "rsum", "cs100_i2t_true"],
            "effect": [0.5, 0.1, 3.0, -0.2],
            "ci_low": [0.4, 0.0, 1.0, -0.3],
            "ci_high": [0.6, 0.2, 5.0, -0.1],
        }
    )
    out = LC.by_yardstick(claims)
    assert list(out["claim"]) == ["L1", "L1", "L1", "L5"]
    assert list(out["evidence"]) == [
        "independent yardstick",
        "circular (Sentence-BERT)",
        "binary ground truth",
        "batch statistic",
    ]
    assert list(out["effect [95% interval]"])[0] == "-0.2 [-0.3, -0.1]"
    assert out["metric"].iloc[0].startswith("CS@100 image→text (true relevance)")
    assert out["metric"].iloc[3] == "std over rows of n≥θ / binomial std − 1"


# --- figures -----------------------------------------------------------------------------------------------
@pytest.fixture
def close_figures():
    import matplotlib.pyplot as plt

    yield
    plt.close("all")


def test_cs_bars_one_panel_per_k_and_direction_legend_outside(close_figures):
    def legend_texts(fig):
        legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
        assert len(legends) == 1 and not fig.legends
        return {t.get_text() for t in legends[0].get_texts()}

    fig = L.cs_bars(frames()["table1"], "true", "r*", "t")
    assert len(fig.axes) == 4 and legend_texts(fig) == {"Sentence-BERT (circular)", "r* (independent)"}
    # no K-specific yardstick: one more panel, the expert τ on non-GT pairs, so the figure still compares
    flickr = L.cs_bars(frames(drop_yard=True)["table1"], "expert", "experts", "t")
    assert [ax.get_title() for ax in flickr.axes][-1] == "expert τ-b, non-GT pairs"
    assert legend_texts(flickr) == {"Sentence-BERT (circular)", "expert τ, non-GT pairs (independent)"}
    heights = sorted(round(p.get_height(), 6) for p in flickr.axes[-1].patches if p.get_height())
    assert heights == [0.5, 0.5, 0.5]  # the planted expert τ of each arm
    bare = L.cs_bars(frames(drop_yard=True)["table1"].drop(columns="expert_kendall_nongt"), "expert", "experts", "t")
    assert len(bare.axes) == 4 and bare._suptitle.get_text().replace("\n", " ").endswith("no experts in these results")


def test_sweep_figure_has_one_legend_right_of_the_panels_when_they_share_their_series(close_figures):
    tb = L.sweep_values(frames()["beta2"], "beta2")
    fig = L.sweep_figure(
        tb, "beta2", [(["cs100_i2t_sbert"], "y", "p"), (["rsum"], "y", "q")], "selection", "β₂", "t", "r*"
    )
    assert len(fig.axes) == 2
    fig.canvas.draw()
    first, last = fig.axes
    assert first.get_legend() is None  # the same two series in both panels: said once
    assert last.get_legend().get_window_extent().x0 > last.get_window_extent().x1  # right of the data
    assert {t.get_text() for t in last.get_legend().get_texts()} == {"manual", "auto(2,2)"}
    for ax in fig.axes:  # each series' points stay by their category's tick (dodge ±DODGE/2 at most)
        series = [ln for ln in ax.lines if ln.get_marker() not in (None, "", "None")]  # not the bars' caps
        assert series
        for line in series:
            xs = np.asarray(line.get_xdata(), dtype=float)
            assert np.all(np.abs(xs - np.round(xs)) <= plotting.DODGE / 2 + 1e-9)


def test_sweep_view_lminmax_marks_fixed_vs_adaptive(close_figures):
    fig = L.sweep_view("lminmax", frames()["lminmax"], "true", "r*", "t")
    assert len(fig.axes) == 3  # CS@100, CS@1000, RSUM
    assert [ln.get_xdata()[0] for ln in fig.axes[0].lines if ln.get_linestyle() == ":"] == [1.5]  # (1,1), (2,2) | …


def test_sweep_view_levels_has_a_panel_per_k_and_rsum(close_figures):
    fig = L.sweep_view("levels", frames()["levels"], "true", "r*", "t")
    assert [ax.get_title() for ax in fig.axes] == ["CS@100 i2t", "CS@200 i2t", "CS@1000 i2t", "binary retrieval"]
    # the CS@K panels show two yardsticks, RSUM one series: their legends differ, so each panel keeps its own
    assert all(ax.get_legend() is not None for ax in fig.axes)


def test_fig6_figure_has_three_panels(close_figures):
    f6 = LT.fig6_batches(FakeTrain(), FakeProvider(), "captions", FakeAdaptive(), n_batches=2, batch_size=10)
    assert f6["batch_size"] == 10 and f6["theta"] == calibration.PAPER_THETAS[0]
    assert len(LT.fig6_figure(f6, "t").axes) == 3


def test_theta_figure_marks_every_theta(close_figures):
    out = LT.theta_calibration(CosineProvider(), FakeTrain(), n_batches=2, batch_size=20)
    fig = LT.theta_figure(out["values"], out["table"], "t")
    assert len(fig.axes[0].lines) == len(out["table"])  # one vertical line per θ


class FakePage:
    paper, data = "ladder", "synthetic"

    def __init__(self, out):
        self.out = out


def test_publish_saves_numbers_and_a_readable_markdown(tmp_path):
    numbers = pd.DataFrame({"rsum": [400.0]}, index=pd.MultiIndex.from_tuples([("ours", "VSE++")]))
    md = L.publish(
        FakePage(tmp_path), "t", numbers, pd.DataFrame({"rsum": ["400.0 ± 1.0"]}, index=numbers.index), "cap"
    )
    saved = (tmp_path / "ladder" / "t_synthetic.md").read_text()
    assert saved.startswith("cap\n\n") and "RSUM (sum of R@1,5,10" in saved and "ours · VSE++" in saved
    assert "400.0 ± 1.0" in md.data and pd.read_csv(tmp_path / "ladder" / "t_synthetic.csv")["rsum"].iloc[0] == 400.0
