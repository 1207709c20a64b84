"""The X1 main comparison (Agarwal et al. 2021): IQM, stratified-bootstrap intervals and the probability
of improvement against brute-force counts and closed forms."""

from __future__ import annotations

import itertools

import matplotlib

matplotlib.use("Agg")

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402

from reproduce.spec import labels  # noqa: E402
from reproduce.protocol import main_comparison as mc  # noqa: E402


def _poi_brute_force(x, y):
    total = 0.0
    for a, b in itertools.product(x, y):
        total += 1.0 if a > b else 0.5 if a == b else 0.0
    return total / (len(x) * len(y))


def test_probability_of_improvement_equals_a_brute_force_count():
    rng = np.random.default_rng(0)
    for _ in range(20):
        x = rng.integers(0, 6, rng.integers(1, 9)).astype(float)  # small integers: many ties
        y = rng.integers(0, 6, rng.integers(1, 9)).astype(float)
        assert mc.probability_of_improvement(x, y) == pytest.approx(_poi_brute_force(x, y))
    # batched over resamples
    xb, yb = rng.normal(size=(7, 5)), rng.normal(size=(7, 4))
    got = mc.probability_of_improvement(xb, yb)
    assert got == pytest.approx([_poi_brute_force(a, b) for a, b in zip(xb, yb)])
    assert mc.probability_of_improvement([1.0, 2.0], [1.0, 2.0]) == 0.5
    with pytest.raises(ValueError, match="both arms"):
        mc.probability_of_improvement([], [1.0])


def test_iqm_is_the_mean_of_the_middle_half():
    x = np.array([100.0, 3.0, 1.0, 4.0, 2.0, -50.0, 5.0, 6.0])  # n = 8: drop 2 at each end
    assert mc.iqm(x) == pytest.approx(np.mean([2.0, 3.0, 4.0, 5.0]))
    assert mc.iqm([1.0, 2.0, 3.0, 4.0, 100.0]) == pytest.approx(3.0)  # n = 5: drop 1 at each end


def test_stratified_resamples_stay_in_their_arm_and_match_the_bootstrap_variance():
    a, b = np.array([1.0, 2.0, 3.0, 4.0, 5.0]), np.array([10.0, 11.0, 12.0])
    boot = mc.stratified_resamples({"a": a, "b": b}, n_boot=20000, seed=1)
    assert boot["a"].shape == (20000, 5) and boot["b"].shape == (20000, 3)
    assert set(np.unique(boot["a"])) <= set(a) and set(np.unique(boot["b"])) <= set(b)
    # closed form: the bootstrap variance of a mean of n draws is σ̂²/n with σ̂² the plug-in variance
    assert boot["a"].mean(axis=1).var() == pytest.approx(a.var() / 5, rel=0.05)


def _runs(spec, metric="rsum"):
    return pd.DataFrame([{"arm": arm, "seed": s, metric: v} for arm, vals in spec.items() for s, v in enumerate(vals)])


def test_main_comparison_on_planted_runs():
    df = _runs(
        {
            "Triplet-SN": [410.0, 412.0, 409.0, 415.0, 411.0],  # every seed above every VSE++ seed
            mc.BASE: [400.0, 401.0, 399.0, 402.0, 398.0],
            "Tie": [400.0, 401.0, 399.0, 402.0, 398.0],  # the same scores as VSE++
        }
    )
    res = mc.main_comparison(df, n_boot=500)
    assert list(res.index) == [mc.BASE, "Triplet-SN", "Tie"] and list(res.columns) == mc.COLUMNS
    sn = res.loc["Triplet-SN"]
    assert sn["mean"] == pytest.approx(411.4) and sn["iqm"] == pytest.approx(np.mean([410.0, 411.0, 412.0]))
    assert sn["mean_low"] <= sn["mean"] <= sn["mean_high"] and 409.0 <= sn["mean_low"] and sn["mean_high"] <= 415.0
    assert (sn["poi"], sn["poi_low"], sn["poi_high"]) == (1.0, 1.0, 1.0)  # disjoint ranges in every resample
    assert res.loc["Tie", "poi"] == 0.5 and res.loc["Tie", "poi_low"] < 0.5 < res.loc["Tie", "poi_high"]
    assert np.isnan(res.loc[mc.BASE, "poi"])
    table = mc.comparison_table(res)
    assert (
        list(table["seeds"]) == [5, 5, 5]
        and len(table.columns) <= 9
        and table.loc["Triplet-SN", "P(> VSE++) [95% CI]"] == "1.00 [1.00, 1.00]"
    )
    assert table.loc[mc.BASE, "P(> VSE++) [95% CI]"] == "—"
    with pytest.raises(ValueError, match="baseline"):
        mc.main_comparison(df[df.arm != mc.BASE])
    with pytest.raises(KeyError, match="tau"):
        mc.main_comparison(df, metric="tau")


def test_forest_plot_labels_do_not_overlap():
    import matplotlib.pyplot as plt

    arms = {
        mc.BASE: [400.0, 401.0, 399.0],
        "BCLS (Triplet-SN + Kendall SW-HS)": [405.0, 407.0, 404.0],
        "Ladder loss (β₂ = 0.5)": [395.0, 402.0, 399.0],
        "τ=0.1 SN keep=True": [380.0, 390.0, 385.0],
        "Triplet (all negatives)": [300.0, 310.0, 305.0],
    }
    res = mc.main_comparison(_runs(arms), n_boot=200)
    fig = mc.forest_plot(res, labels.label("rsum"), title="X1 main comparison (synthetic, profile smoke, seeds [0])")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in ax.get_yticklabels() + [ax.xaxis.label] if t.get_text()]
    texts += [fig._suptitle] + [t for t in fig.axes[1].texts] + fig.axes[0].get_legend().get_texts()
    assert "SAM τ=0.1" in " ".join(t.get_text() for t in texts)  # arms by their display names
    boxes = [t.get_window_extent(renderer) for t in texts]
    # the legend sits outside the data: no marker or whisker of any arm under it
    legend_box = fig.axes[0].get_legend().get_window_extent(renderer)
    for line in fig.axes[0].lines:
        pts = line.get_transform().transform(line.get_xydata())
        assert not any(legend_box.contains(*p) for p in pts)
    for (i, p), (j, q) in itertools.combinations(enumerate(boxes), 2):
        assert not p.overlaps(q), (texts[i].get_text(), texts[j].get_text())
    width, height = fig.get_size_inches() * fig.dpi
    for b in boxes:  # nothing drawn outside the figure
        assert b.x0 >= 0 and b.y0 >= 0 and b.x1 <= width + 1 and b.y1 <= height + 1
    plt.close(fig)


def test_one_seed_gets_no_interval():
    df = _runs({mc.BASE: [400.0, 401.0, 402.0], "One": [405.0]})
    res = mc.main_comparison(df, n_boot=100)
    one = res.loc["One"]
    assert one["mean"] == 405.0 and one["poi"] == 1.0
    assert np.isnan(one[["mean_low", "mean_high", "iqm_low", "iqm_high", "poi_low", "poi_high"]].astype(float)).all()
    assert mc.comparison_table(res).loc["One", "mean [95% CI]"] == "405.0 [— one seed]"
    mc.forest_plot(res, "RSUM").canvas.draw()  # draws without an interval


def _png(fig) -> bytes:
    import io

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=60)
    return buf.getvalue()


def _papers_size_case():
    ours = mc.main_comparison(
        _runs({mc.BASE: [400.0, 401.0, 399.0], "Triplet-SN": [405.0, 407.0, 404.0], "Unified": [398.0, 402.0, 400.0]}),
        n_boot=200,
    )
    nan = float("nan")
    theirs = pd.DataFrame(  # VSE++ ahead; Unified not trained; Triplet-SN's interval far beyond ours (to the edge)
        {
            mc.BASE: dict(iqm=431.0, iqm_low=430.0, iqm_high=433.0, poi=nan, poi_low=nan, poi_high=nan),
            "Triplet-SN": dict(iqm=420.0, iqm_low=418.0, iqm_high=520.0, poi=0.0, poi_low=0.0, poi_high=0.1),
            "Other": dict(iqm=2.0, iqm_low=1.0, iqm_high=3.0, poi=0.0, poi_low=0.0, poi_high=0.0),
        }
    ).T.assign(n_seeds=3, mean=nan, mean_low=nan, mean_high=nan)[mc.COLUMNS]
    return ours, theirs


def test_forest_plot_draws_the_papers_size_as_a_lane_of_open_markers_under_each_arm():
    import matplotlib.pyplot as plt

    from reproduce.protocol import scale

    ours, theirs = _papers_size_case()
    fig = mc.forest_plot(ours, "RSUM", title="X1", paper=theirs.loc[[mc.BASE, "Triplet-SN", "Other"]])
    fig.canvas.draw()
    ax1, ax2 = fig.axes
    y = {arm: float(i) for arm, i in zip(ours.index, np.arange(len(ours))[::-1])}
    legend = [t.get_text() for t in ax1.get_legend().get_texts()]
    assert legend == ["IQM", "mean", f"{scale.SCALE_LABEL}:\nIQM, 3 seeds"]
    diamonds = [ln for ln in ax1.lines if ln.get_marker() == "D"]
    assert len(diamonds) == 1 and diamonds[0].get_markerfacecolor() in ("white", (1.0, 1.0, 1.0, 1.0))
    assert list(diamonds[0].get_xdata()) == list(theirs.loc[[mc.BASE, "Triplet-SN"], "iqm"])  # not "Other"
    assert list(diamonds[0].get_ydata()) == [y[mc.BASE] - 0.25, y["Triplet-SN"] - 0.25]
    # its interval: the error bar of each diamond spans the table's IQM interval
    bars = [c for c in ax1.collections if np.allclose(c.get_segments()[0][:, 1], y[mc.BASE] - 0.25)]
    assert len(bars) == 1
    assert [tuple(s[:, 0]) for s in bars[0].get_segments()] == [
        tuple(theirs.loc[a, ["iqm_low", "iqm_high"]]) for a in (mc.BASE, "Triplet-SN")
    ]
    # the probability of improvement at the papers' size: an open square in the same lane, against its own VSE++
    squares = [ln for ln in ax2.lines if ln.get_marker() == "s" and ln.get_markerfacecolor() != ln.get_color()]
    assert [list(ln.get_ydata()) for ln in squares] == [[y["Triplet-SN"] - 0.25]]
    assert list(squares[0].get_xdata()) == [0.0]
    # our IQM above, our mean in the middle: the lanes do not share a height
    ours_iqm, ours_mean = [ln for ln in ax1.lines if ln.get_marker() == "o"]  # drawn in this order
    assert list(ours_iqm.get_xdata()) == list(ours["iqm"]) and list(ours_iqm.get_ydata()) == [
        v + 0.25 for v in y.values()
    ]
    assert list(ours_mean.get_ydata()) == list(y.values())
    texts = {t.get_text() for t in ax1.texts}
    assert f"{scale.SCALE_LABEL}: {scale.NOT_MEASURED}" in texts  # Unified: not trained at the papers' size
    assert "520 ▸" in texts  # beyond the axis: drawn at the edge, labelled with its value
    lo, hi = ax1.get_xlim()
    assert lo < 399.0 and 431.0 < hi < 520.0  # ours and theirs share the axis; a far whisker is cut at the edge
    renderer = fig.canvas.get_renderer()
    words = [t for ax in fig.axes for t in ax.get_yticklabels() + [ax.xaxis.label] if t.get_text()]
    words += [fig._suptitle, *ax1.texts, *ax2.texts, *ax1.get_legend().get_texts()]
    for p, q in itertools.combinations(words, 2):
        assert not p.get_window_extent(renderer).overlaps(q.get_window_extent(renderer)), (p.get_text(), q.get_text())
    plt.close(fig)


def test_forest_plot_without_papers_size_results_is_todays_figure_or_today_with_a_note():
    import matplotlib.pyplot as plt

    from reproduce.protocol import scale

    ours, _ = _papers_size_case()
    plain, with_none = mc.forest_plot(ours, "RSUM", title="X1"), mc.forest_plot(ours, "RSUM", title="X1", paper=None)
    assert _png(plain) == _png(with_none)
    noted = mc.forest_plot(ours, "RSUM", title="X1", paper=scale.NOT_MEASURED)
    assert [t.get_text() for t in noted.axes[1].texts if "papers" in t.get_text()] == [
        f"{scale.SCALE_LABEL}: {scale.NOT_MEASURED}"
    ]
    assert len(noted.axes[0].lines) == len(plain.axes[0].lines) and len(noted.axes[1].lines) == len(plain.axes[1].lines)
    assert list(noted.get_size_inches()) == list(plain.get_size_inches())
    noted.canvas.draw()
    r = noted.canvas.get_renderer()
    note = next(t for t in noted.axes[1].texts if "papers" in t.get_text()).get_window_extent(r)
    legend = noted.axes[0].get_legend().get_window_extent(r)
    assert not note.overlaps(legend) and not note.overlaps(noted._suptitle.get_window_extent(r))
    assert note.x1 <= noted.get_size_inches()[0] * noted.dpi + 1
    for f in (plain, with_none, noted):
        plt.close(f)
