"""reproduce.present.analyses.unified (notebook 05): each function against an explicit loop, scipy or a planted
frame whose answer is known. No training, no run cache."""

from __future__ import annotations

import math
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import pytest  # noqa: E402
from scipy import stats  # noqa: E402

from reproduce.spec import claims as registry  # noqa: E402
from reproduce.spec import labels, paper_numbers
from reproduce.present import page
from reproduce.present import report  # noqa: E402
from reproduce.present.analyses import unified as U  # noqa: E402
from reproduce.present.analyses import unified_claims as UC  # noqa: E402
from reproduce.protocol.ledger_rows import build_ledger  # noqa: E402

ARMS = ["Triplet-HN", "VLC", "Unified"]
SEEDS = [0, 1, 2]


def val(arm, seed, epoch, col):
    """A planted history value with a known closed form (distinct per arm, seed, epoch, column)."""
    a, c = ARMS.index(arm) + 1, len(col)
    return 0.1 * a + 0.01 * seed + 0.05 * epoch * a + 0.001 * c + (0.02 * epoch**2 if arm == "Triplet-HN" else 0.0)


COLS = ["train_loss", "val_rsum", "val_pos_sim", "val_hardneg_sim", "pos_sim", "hardneg_sim"]
COLS += ["grad_anchor", "grad_hardneg", "grad_negatives"]


@pytest.fixture
def hist():
    """3 arms × 3 seeds × 3 epochs, except Unified seed 2, which stopped after epoch 2; Triplet-HN's epoch 1
    is its warm-up on all negatives."""
    rows = []
    for arm in ARMS:
        for s in SEEDS:
            for e in (1, 2, 3):
                if arm == "Unified" and s == 2 and e == 3:
                    continue
                warm = arm == "Triplet-HN" and e == 1
                rows.append({"arm": arm, "seed": s, "epoch": e, "warmup": warm, **{c: val(arm, s, e, c) for c in COLS}})
    return pd.DataFrame(rows)


def results_frame():
    """Study.results-like rows: table1, margin and gamma groups, one RSUM per (arm, seed)."""
    rows = []
    arms = [("table1", a) for a in ARMS]
    arms += [("margin", a) for a in ("m=0", "m=0.2", "m=0.4")]
    arms += [("gamma", a) for a in ("γ=20", "γ=60", "γ=100", U.INF)]
    for k, (group, arm) in enumerate(arms):
        for s in SEEDS:
            rows.append(
                {"group": group, "arm": arm, "seed": s, "rsum": 100.0 + 7.0 * k + s * (k % 3), "collapsed": False}
            )
    return pd.DataFrame(rows)


def loop_paired(df, a, b, col="rsum"):
    out = []
    for s in SEEDS:
        x = [r[col] for r in df.to_dict("records") if r["arm"] == a and r["seed"] == s]
        y = [r[col] for r in df.to_dict("records") if r["arm"] == b and r["seed"] == s]
        if x and y:
            out.append(x[0] - y[0])
    return out


# ------------------------------------------------------------------------------------------- reading runs


def test_iterations_reads_every_sampled_step_of_every_run():
    def run(arm, seed, steps):
        its = [{"step": k, "epoch": 1 + k // 20, "warmup": False, "grad_hardneg": seed + k / 100} for k in steps]
        return (
            SimpleNamespace(paper="unified", group="table1", name=arm),
            SimpleNamespace(seed=seed),
            SimpleNamespace(record={"iterations": its}),
        )

    runs = [run("VLC", 0, [0, 10, 20]), run("VLC", 1, [0, 10]), run("Unified", 0, [])]
    study = SimpleNamespace(_runs=lambda paper, group: iter(runs))
    df = U.iterations(study)
    assert len(df) == 5 and set(df.arm) == {"VLC"}
    assert df[(df.seed == 1) & (df.step == 10)].grad_hardneg.item() == 1.1
    assert list(df[df.seed == 0].epoch) == [1, 1, 2]
    assert U.iterations(SimpleNamespace(_runs=lambda p, g: iter([]))).empty


def test_coherence_columns_keeps_the_present_ones_in_order():
    df = pd.DataFrame(columns=["arm", "rprec_i2t_true", "cs100_i2t_true", "tau_i2t_true", "cs100_i2t_expert"])
    assert U.coherence_columns(df, "true") == ["cs100_i2t_true", "tau_i2t_true", "rprec_i2t_true"]
    df = pd.DataFrame(columns=["cs1000_i2t_expert", "expert_kendall_nongt"])
    assert U.coherence_columns(df, "expert") == ["cs1000_i2t_expert", "expert_kendall_nongt"]


def test_relative_loss_divides_by_the_runs_first_epoch(hist):
    out = U.with_relative_loss(hist.sample(frac=1.0, random_state=0).sort_values(["arm", "seed", "epoch"]))
    for r in out.to_dict("records"):
        assert math.isclose(r["train_loss_rel"], r["train_loss"] / val(r["arm"], r["seed"], 1, "train_loss"))


def test_vlc_scaled_rows_are_vlc_divided_by_gamma(hist):
    out = U.with_vlc_scaled(hist, 60.0, ["grad_anchor", "grad_hardneg"])
    scaled = out[out.arm == "VLC ÷ γ (γ=60)"]
    assert len(out) == len(hist) + len(scaled) and len(scaled) == len(hist[hist.arm == "VLC"])
    for r in scaled.to_dict("records"):
        assert math.isclose(r["grad_anchor"], val("VLC", r["seed"], r["epoch"], "grad_anchor") / 60.0)
        assert r["grad_negatives"] == val("VLC", r["seed"], r["epoch"], "grad_negatives")  # not scaled


def test_sweeps_parse_their_values():
    df = results_frame()
    mg, gm = U.margin_sweep(df), U.gamma_sweep(df)
    assert sorted(mg.m.unique()) == [0.0, 0.2, 0.4] and (mg.group == "margin").all()
    assert dict(zip(gm.arm, gm.g))["γ=100"] == 100.0 and np.isinf(dict(zip(gm.arm, gm.g))[U.INF])


# ------------------------------------------------------------------------------------------------ tables


def test_ci_text_is_the_student_t_interval():
    x = [1.0, 2.5, 4.0]
    half = stats.t.ppf(0.975, 2) * np.std(x, ddof=1) / math.sqrt(3)
    assert U.ci_text(x) == f"{2.5:+.1f} [{2.5 - half:+.1f}, {2.5 + half:+.1f}]"
    assert U.ci_text([3.0]) == "+3.0 (1 seed, no CI)"


def test_rsum_deltas_ours_and_the_papers_published_differences():
    t1 = results_frame()
    t1 = t1[t1.group == "table1"]
    blocks = {
        "paper A": pd.DataFrame({"rsum": [472.1, 476.4]}, index=["Triplet-HN", "Unified"]),
        "paper B": pd.DataFrame({"rsum": [470.4, 487.6]}, index=["original loss (triplet)", "Unified"]),
        "paper C": pd.DataFrame({"rsum": [547.4, 555.2]}, index=["VLC", "Unified"]),
    }
    d = U.rsum_deltas(t1, blocks, "ours")
    assert list(d.index) == ["ours", "paper A", "paper B", "paper C"]
    assert list(d.columns) == ["Unified − Triplet-HN", "Unified − VLC", "VLC − Triplet-HN"]
    assert d.loc["ours", "Unified − VLC"] == U.ci_text(loop_paired(t1, "Unified", "VLC"))
    assert d.loc["paper A", "Unified − Triplet-HN"] == "+4.3" and d.loc["paper A", "Unified − VLC"] == "–"
    assert d.loc["paper B", "Unified − Triplet-HN"] == "+17.2"  # the model's own triplet loss stands in
    assert d.loc["paper C", "Unified − VLC"] == "+7.8" and d.loc["paper C", "VLC − Triplet-HN"] == "–"


def test_the_committed_paper_table_gives_the_published_rsum_differences():
    blocks = paper_numbers.table("unified", "table1")
    assert len(blocks) == 8 and all(list(b.columns) == report.RECALL_COLUMNS for b in blocks.values())
    t1 = results_frame()
    d = U.rsum_deltas(t1[t1.group == "table1"], blocks, "ours")
    got = d["Unified − Triplet-HN"].iloc[1:7].tolist()
    assert got == ["+4.3", "+2.0", "+17.2", "+4.0", "+7.0", "+3.1"]  # paper Table 1, RSUM rows
    assert d["Unified − VLC"].iloc[7:].tolist() == ["+7.8", "+4.0"]  # paper Table 2 (CLIP)


def test_first_last_is_the_seed_mean_at_epoch_1_and_the_last(hist):
    fl = U.first_last(hist)
    assert list(fl.index.get_level_values("epoch").unique()) == [1, 3]
    assert math.isclose(fl.loc[("VLC", 3), "grad_hardneg"], np.mean([val("VLC", s, 3, "grad_hardneg") for s in SEEDS]))
    assert math.isclose(
        fl.loc[("Unified", 3), "pos_sim"], np.mean([val("Unified", s, 3, "pos_sim") for s in (0, 1)])
    )  # seed 2 stopped at epoch 2


def test_sweep_summary_groups_by_sweep_and_arm():
    df = results_frame()
    s = U.sweep_summary(U.margin_sweep(df), U.gamma_sweep(df), df[df.group == "table1"], 60.0)
    assert list(s.index.get_level_values("sweep").unique()) == ["margin m (γ=60)", "scale γ (m=0.2)", "reference"]
    assert s.loc[("reference", "VLC"), "n_seeds"] == 3 and s.loc[("reference", "VLC"), "n_collapsed"] == 0
    want = np.mean([r["rsum"] for r in df.to_dict("records") if r["arm"] == "γ=100"])
    assert math.isclose(s.loc[("scale γ (m=0.2)", "γ=100"), "rsum"], want)


def test_pretty_formats_each_metric_by_its_kind_and_marks_collapsed_rows():
    df = pd.DataFrame(
        {
            "arm": ["A", "A", "B", "B"],
            "seed": [0, 1, 0, 1],
            "rsum": [400.04, 402.06, 300.0, 310.0],
            "cs100_i2t_true": [0.2, 0.3, 0.1, 0.1],
            "collapsed": [False, False, True, False],
        }
    )
    summ = report.summary(df, ["rsum", "cs100_i2t_true"])
    p = U.pretty(summ, ["rsum", "cs100_i2t_true"])
    assert list(p.columns) == ["rsum", "cs100_i2t_true"]
    assert p.loc["A", "rsum"] == f"{401.05:.1f} ± {np.std([400.04, 402.06], ddof=1):.1f}"
    assert p.loc["A", "cs100_i2t_true"] == f"0.250 ± {np.std([0.2, 0.3], ddof=1):.3f}"
    assert list(p.index) == ["A", "B ‡ 1/2 collapsed"]
    one = report.summary(df[df.seed == 0], ["rsum"])
    assert U.pretty(one, ["rsum"]).loc["A", "rsum"] == "400.0"  # one seed: no std


def test_collapse_caption_only_with_collapsed_rows():
    df = results_frame()
    assert U.collapse_caption(report.summary(df, ["rsum"])) == ""
    df.loc[0, "collapsed"] = True
    assert U.collapse_caption(report.summary(df, ["rsum"])) == " " + report.collapse_note()


def test_show_saves_numbers_and_a_readable_table(tmp_path, monkeypatch):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda x: shown.append(x.data))
    pg = SimpleNamespace(out=tmp_path, paper="unified", data="synthetic")
    df = pd.DataFrame({"rsum": [401.25], "n_seeds": [3]}, index=pd.Index(["VLC"], name="arm"))
    U.show(pg, "t", "Caption.", df)
    assert (tmp_path / "unified" / "t_synthetic.csv").read_text().startswith("arm,rsum,n_seeds")
    md = (tmp_path / "unified" / "t_synthetic.md").read_text()
    assert md.startswith("Caption.") and labels.label("rsum") in md and "401.2" in md
    assert shown and labels.label("rsum") in shown[0] and "| 3 " in shown[0]  # integers as integers


# ------------------------------------------------------------------------------------------- identities


def planted_ident():
    rows = []
    uid = "Unified(m=0.2, γ) → Triplet-HN"
    gaps = {0: [0.5, 0.05, 0.06, 0.0], 1: [0.4, 0.04, 0.004, -0.001]}  # seed 0: increase 0.01; seed 1: below 0
    for seed, gs in gaps.items():
        for gamma, gap in zip(U.ID_GAMMAS, gs):
            rows.append(
                dict(identity=uid, gamma=gamma, seed=seed, gap=gap, bound=0.055, value_dev=gap / 10, grad_dev=0.0)
            )
            rows.append(
                dict(
                    identity="Triplet-SN(γ) → Triplet-HN",
                    gamma=gamma,
                    seed=seed,
                    gap=0.01,
                    bound=1.0,
                    value_dev=1e-6 * seed,
                    grad_dev=0.0,
                )
            )
        for gamma in (10.0, 60.0, 100.0):
            rows.append(
                dict(
                    identity="γ·Unified(m=0) = VLC",
                    gamma=gamma,
                    seed=seed,
                    gap=0.0,
                    value_dev=seed * 1e-15,
                    grad_dev=2e-15,
                )
            )
        rows.append(
            dict(
                identity="Kendall j=i slice (continuous r) = Triplet(all neg., m=0)",
                seed=seed,
                gap=0.0,
                value_dev=3e-16,
                grad_dev=0.0,
            )
        )
        rows.append(
            dict(
                identity="Ladder(β₂=0, HC) = Triplet-HN",
                seed=seed,
                gap=0.0,
                value_dev=0.0,
                grad_dev=0.0,
                control_dev=0.3 + seed,
            )
        )
    return pd.DataFrame(rows)


def test_identity_table_aggregates_per_identity_and_gamma_in_order():
    ident = planted_ident()
    tab = U.identity_table(ident)
    assert list(dict.fromkeys(tab.index)) == list(ident.identity.unique())
    u = tab.loc["Unified(m=0.2, γ) → Triplet-HN"]
    assert list(u["γ"]) == ["100", "1000", "10000", "100000"]
    assert u.iloc[3].gap_min == -0.001 and u.iloc[3].gap_max == 0.0 and u.iloc[1].value_dev_max == 0.005
    assert tab.loc["Ladder(β₂=0, HC) = Triplet-HN", "γ"] == "—"
    assert tab.loc["Ladder(β₂=0, HC) = Triplet-HN", "control_dev_min"] == 0.3
    view = U.identity_view(tab)
    assert view.loc["Ladder(β₂=0, HC) = Triplet-HN", U.IDENTITY_COLUMNS["bound"]] == ""
    assert view.iloc[0][U.IDENTITY_COLUMNS["bound"]] == "0.055"


def test_identity_frame_runs_the_library_checks():
    ident = U.identity_frame(60.0)
    assert len(ident) == 5 * 16 and sorted(ident.seed.unique()) == list(U.ID_SEEDS)
    vlc = ident[ident.identity == "γ·Unified(m=0) = VLC"]
    assert sorted(vlc.gamma.unique()) == [10.0, 60.0, 100.0] and vlc.value_dev.max() < 1e-12


def test_identity_claim_rows_bound_and_monotonicity_violations():
    rows = {r["statement"]: r for r in UC.identity_claim_rows(planted_ident())}
    bound = next(r for s, r in rows.items() if s.startswith("0 ≤ Unified"))
    # by loop: gap < 0 or gap > bound, per check (seed-major, γ order), then per-seed max increase
    want = []
    for seed, gs in {0: [0.5, 0.05, 0.06, 0.0], 1: [0.4, 0.04, 0.004, -0.001]}.items():
        want += [max(-g, g - 0.055, 0.0) for g in gs]
    want += [0.01, 0.0]
    assert np.allclose(bound["effects"], want) and bound["tolerance"] == 1e-10
    prim = rows[registry.claim("U6").primary.statement]
    assert prim["role"] == "primary" and prim["effects"] == [0.0] * 3 + [1e-15] * 3 + [2e-15] * 6
    assert prim["note"] == "values and gradients, γ = 10, 60, 100"
    sn = next(r for s, r in rows.items() if s.startswith("Triplet-SN"))
    assert sn["effects"] == [0.0, 1e-6] and sn["tolerance"] == 1e-3 and sn["note"].endswith("True")
    lad = next(r for s, r in rows.items() if s.startswith("Ladder"))
    assert lad["effects"] == [0.0] * 4 and "≥ 0.3" in lad["note"]
    assert all(r["arms"] == "random float64 matrices, B=32, 2 seeds" for r in rows.values())


# ------------------------------------------------------------------------------------------------ claims


@pytest.fixture
def rows(hist):
    df = results_frame()
    t1 = df[df.group == "table1"]
    return UC.claim_rows(hist, t1, U.margin_sweep(df), U.gamma_sweep(df), planted_ident(), 60.0), df


def by(rows, cid, arms):
    hits = [r for r in rows if r["cid"] == cid and r["arms"] == arms]
    assert len(hits) == 1, (cid, arms, [r["arms"] for r in rows if r["cid"] == cid])
    return hits[0]


def test_claim_rows_leave_the_arm_primaries_to_the_page(rows):
    rows, _ = rows
    contrasts = {(r["cid"], r["arms"]) for r in rows}
    for cid in ("U1", "U4", "U5"):
        p = registry.claim(cid).primary
        assert (cid, f"{p.arm_a} vs {p.arm_b}") not in contrasts
    assert {r["cid"] for r in rows} == {f"U{i}" for i in range(1, 7)}
    assert ("U4", "m=0.2 vs m=0") in contrasts and ("U5", "γ=60 vs γ=∞ (Triplet-HN)") in contrasts


def test_arm_contrasts_are_paired_by_seed(rows):
    rows, df = rows
    assert by(rows, "U1", "Unified vs VLC")["effects"] == loop_paired(df, "Unified", "VLC")
    assert by(rows, "U4", "m=0.2 vs m=0")["effects"] == loop_paired(df, "m=0.2", "m=0")
    assert by(rows, "U5", "γ=60 vs γ=∞ (Triplet-HN)")["effects"] == loop_paired(df, "γ=60", U.INF)
    vlc = {r["seed"]: r["rsum"] for r in df.to_dict("records") if r["arm"] == "VLC"}
    m4 = {r["seed"]: r["rsum"] for r in df.to_dict("records") if r["arm"] == "m=0.4"}
    assert by(rows, "U4", "m=0.4 vs VLC")["effects"] == [m4[s] - vlc[s] for s in SEEDS]
    assert not [r for r in rows if r["arms"] == "m=0 vs VLC"]  # m = 0 is VLC/γ: no "beats VLC" row


def test_u2_rows_by_loop(rows):
    rows, _ = rows
    u2 = [r for r in rows if r["cid"] == "U2"]
    assert len(u2) == 7
    first = u2[0]["effects"]
    assert first == pytest.approx(
        [val("Triplet-HN", s, 1, "hardneg_sim") - val("Unified", s, 1, "hardneg_sim") for s in SEEDS]
    )
    (prim,) = [r for r in u2 if r.get("role") == "primary"]
    assert prim["statement"] == registry.claim("U2").primary.statement and prim["arms"] == "Triplet-HN vs Unified"
    # after Triplet-HN's 1-epoch warm-up, up to epoch 2 (Unified seed 2 stopped there): the early half = epoch 2
    both = {a: [min(val(a, s, 2, "val_pos_sim"), val(a, s, 2, "val_hardneg_sim")) for s in SEEDS] for a in ARMS}
    assert prim["effects"] == pytest.approx([h - u for h, u in zip(both["Triplet-HN"], both["Unified"])])
    assert "epoch 2" in prim["note"]
    peak = [r for r in u2 if r["metric"] == "max over epochs of val_hardneg_sim"]
    assert len(peak) == 1 and peak[0].get("role", "") == ""
    want = [
        max(val("Triplet-HN", s, e, "val_hardneg_sim") for e in (1, 2, 3))
        - max(val("Unified", s, e, "val_hardneg_sim") for e in ((1, 2) if s == 2 else (1, 2, 3)))
        for s in SEEDS
    ]
    assert peak[0]["effects"] == pytest.approx(want)
    grow = by(rows, "U2", "Triplet-HN")["effects"]
    assert grow == pytest.approx(
        [val("Triplet-HN", s, 3, "grad_hardneg") - val("Triplet-HN", s, 1, "grad_hardneg") for s in SEEDS]
    )
    d = by(rows, "U2", "Triplet-HN vs VLC")["effects"]
    lg = [
        math.log(val("Triplet-HN", s, 3, "grad_hardneg") / val("Triplet-HN", s, 1, "grad_hardneg"))
        - math.log(val("VLC", s, 3, "grad_hardneg") / val("VLC", s, 1, "grad_hardneg"))
        for s in SEEDS
    ]
    assert d == pytest.approx(lg)
    delta = next(r for r in u2 if r["metric"].startswith("Δgrad_hardneg"))["effects"]
    assert delta[:2] == pytest.approx(
        [grow[s] - (val("Unified", s, 3, "grad_hardneg") - val("Unified", s, 1, "grad_hardneg")) for s in (0, 1)]
    )
    assert math.isnan(delta[2])  # Unified seed 2 has no last epoch (kept as in the notebook's first version)


def test_u3_row_is_the_notebook_primary(rows):
    rows, _ = rows
    (u3,) = [r for r in rows if r["cid"] == "U3" and r.get("role") == "primary"]
    assert u3["statement"] == registry.claim("U3").primary.statement
    # the same epochs for both arms: after Triplet-HN's warm-up (epoch 1) up to the shortest run (epoch 2)
    assert u3["effects"] == pytest.approx(
        [val("Unified", s, 2, "val_rsum") - val("Triplet-HN", s, 2, "val_rsum") for s in SEEDS]
    )
    (half,) = [r for r in rows if r["cid"] == "U3" and r.get("role", "") == ""]
    assert half["metric"] == "mean val_rsum, epochs 1–1 (%)"  # 3 epochs: first half = epoch 1
    assert half["effects"] == pytest.approx(
        [val("Unified", s, 1, "val_rsum") - val("Triplet-HN", s, 1, "val_rsum") for s in SEEDS]
    )


def test_rows_are_accepted_by_the_page_and_the_ledger(rows):
    rows, _ = rows
    pg = page.Page("unified", "05_unified", "default", "synthetic", study=None)
    for r in rows:
        pg.claim(**r)
    file_rows = [{**c.row(), "_file": "claims_synthetic.csv"} for c in pg.claims]
    led = build_ledger(file_rows, datasets=("synthetic",))
    prim = led[(led.role == "primary") & led.id.isin(["U2", "U3", "U6"])]
    assert len(prim) == 3 and (prim.n_seeds > 0).all()
    assert set(prim.statement) == {registry.claim(c).primary.statement for c in ("U2", "U3", "U6")}


# ----------------------------------------------------------------------------------------------- figures


def iterations_frame():
    rows = []
    for arm in ARMS:
        for s in SEEDS:
            for step in range(0, 40, 10):
                rows.append(
                    {
                        "arm": arm,
                        "seed": s,
                        "step": step,
                        "epoch": 1 + step // 20,
                        "warmup": arm == "Triplet-HN" and step < 20,
                    }
                    | {c: val(arm, s, 1 + step / 20, c) for c in COLS}
                )
    return pd.DataFrame(rows)


def legends(fig):
    return [lg for ax in fig.axes if (lg := ax.get_legend()) is not None]


def test_legend_outside_merges_the_axes_legends():
    fig, (a, b) = plt.subplots(1, 2)
    a.plot([0, 1], label="x")
    b.plot([0, 1], label="y")
    b.plot([1, 0], label="x")
    a.legend(), b.legend()
    U.legend_outside(fig)
    (lg,) = legends(fig)
    assert [t.get_text() for t in lg.get_texts()] == ["x", "y"] and lg.axes is b
    assert lg.get_bbox_to_anchor().transformed(b.transAxes.inverted()).x0 > 1.0
    plt.close(fig)


def test_epoch_marks_and_warmup_band():
    fig, ax = plt.subplots()
    its = iterations_frame()
    U.epoch_marks(ax, its[its.arm == "Triplet-HN"])
    assert [ln.get_xdata()[0] for ln in ax.get_lines()] == [20]
    (band,) = ax.patches
    assert band.get_label() == "warm-up on all negatives (Triplet-HN)"
    assert (band.get_x(), band.get_x() + band.get_width()) == (0, 20)  # the warm-up epoch to the next one
    plt.close(fig)


def test_fig3_per_epoch_log_loss(hist):
    f3 = U.fig3(U.with_relative_loss(hist), "setup")
    assert len(f3.axes) == 3 and f3.axes[0].get_yscale() == "log" and len(legends(f3)) == 1
    plt.close(f3)


def test_fig4_similarity_validation_per_epoch_training_per_step(hist):
    f4 = U.fig4_similarity(hist, iterations_frame(), "setup")
    assert len(f4.axes) == 6 and f4.axes[0].get_xlabel() == "epoch" and f4.axes[3].get_xlabel() == "training step"
    assert len(legends(f4)) == 1
    plt.close(f4)


def test_fig4_gradients_per_sampled_step():
    its = iterations_frame()
    g = U.fig4_gradients(its, 60.0, "setup")
    (lg,) = legends(g)
    assert "VLC ÷ γ (γ=60)" in [t.get_text() for t in lg.get_texts()] and g.axes[0].get_xlabel() == "training step"
    # per step: one point per sampled step, not one per epoch
    assert len(g.axes[0].get_lines()[0].get_xdata()) == its.step.nunique()
    plt.close(g)


def test_fig5_sweeps_with_infinity_at_the_end():
    df = results_frame()
    f5 = U.fig5(U.margin_sweep(df), U.gamma_sweep(df), df[df.group == "table1"], 60.0, "setup")
    assert [t.get_text() for t in f5.axes[1].get_xticklabels()][-1] == "∞"
    plt.close(f5)
