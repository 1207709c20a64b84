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
