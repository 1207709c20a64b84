"""The failed-seed rule on planted runs: a run fails when it collapsed or when its validation or test RSUM is below
half the median of its arm's other seeds (docs/protocol.md); an arm's failed seeds are counted on the primary row,
whether an arm contrast or a notebook-measured row (S3's grid), the row is decided on all its seeds, and beside it
on the seeds without a failure; the arm a claim predicts to fail is never counted; every primary row has a failures
cell; a claim file without its seeds keeps the earlier rule (``not testable``)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from reproduce.driver import ledger_files
from reproduce.present import ledger_render
from reproduce.present.analyses import sam_claims
from reproduce.protocol import claim_files, claim_rows
from reproduce.protocol.claim_files import ClaimResult
from reproduce.protocol.ledger import decide, estimate, family_alpha, smallest_effect
from reproduce.spec import claims as registry


def _results(arms: dict, failed: dict | None = None, seeds=range(8)) -> pd.DataFrame:
    """Study.results-like rows: ``arms = {arm: mean RSUM}``, seed noise fixed; ``failed = {arm: seeds}`` collapse."""
    rng = np.random.default_rng(0)
    rows = []
    for arm, mean in arms.items():
        for s in seeds:
            bad = s in (failed or {}).get(arm, ())
            rsum = 3.0 if bad else mean + rng.normal(0.0, 2.0)
            rows.append({"arm": arm, "seed": s, "rsum": rsum, "collapsed": bad, "collapse_reason": "planted"})
    return pd.DataFrame(rows)


def _ledger(tmp_path, rows: list[dict], collapsed=None) -> pd.DataFrame:
    claim_files.write_claims(rows, tmp_path, "bcls", "synthetic")
    df = ledger_files.collect(tmp_path, collapsed=collapsed)
    return df[(df["role"] == "primary") & (df["dataset"] == "synthetic")].set_index("id")


def test_failed_seeds_are_counted_per_arm_and_the_predicted_failure_is_not():
    df = _results(
        {"Triplet-HN": 390.0, "Kendall SW-HS alone": 360.0}, {"Triplet-HN": (2, 5), "Kendall SW-HS alone": (1,)}
    )
    row = claim_rows.primary_row("B3", "synthetic", df)  # Triplet-HN − Kendall SW-HS alone, which B3 predicts fails
    assert registry.claim("B3").primary.predicted_to_fail == "Kendall SW-HS alone"
    assert row["seeds"] == "0;1;2;3;4;5;6;7" and row["failed_seeds"] == "2;5"
    assert row["failures"] == "Triplet-HN failed 2 of 8 seeds (2, 5)"
    healthy = claim_rows.primary_row("B1", "synthetic", _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}))
    assert healthy["failed_seeds"] == "" and healthy["failures"] == "0 of 8 seeds"  # zero stated as zero
    no_health = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}).drop(columns=["collapsed"])
    assert claim_rows.failed_seeds(no_health, ["Triplet-SN"], [0, 1]) == (None, "")
    assert "failed_seeds" not in claim_rows.primary_row("B1", "synthetic", no_health)  # health unknown: not claimed


def test_a_row_with_failed_seeds_is_decided_on_all_seeds_and_again_without_them(tmp_path):
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}, {"Triplet-HN": (3,), "Triplet-SN": (6,)})
    row = claim_rows.primary_row("B1", "synthetic", df)
    got = _ledger(tmp_path, [row]).loc["B1"]
    effects = [float(x) for x in row["seed_effects"].split(";")]
    alpha = family_alpha(int(got["family_size"]))
    delta = smallest_effect(got["paper_effect"])
    all_seeds = decide("direction", estimate(effects), alpha, delta, got["paper_effect"])
    assert got["verdict"] == all_seeds[0] and got["ci_low"] == pytest.approx(all_seeds[2])  # failures included
    kept = [e for s, e in enumerate(effects) if s not in (3, 6)]
    v, _, lo, hi = decide("direction", estimate(kept), alpha, delta, got["paper_effect"])
    assert got["without_failures"] == f"{v} [{lo:.3g}, {hi:.3g}] on 6 seeds"
    assert got["failures"] == "Triplet-SN failed 1 of 8 seeds (6); Triplet-HN failed 1 of 8 seeds (3)"
    assert f"; {got['failures']}; without them: {got['without_failures']}" in got["reason"]
    assert np.isfinite(got["p_adj"]) and got["family"] == "BCLS"  # in its family, as any decided row


def test_an_arm_that_failed_every_seed_is_measured_and_has_no_second_verdict(tmp_path):
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0}, {"Triplet-SN": tuple(range(8))})
    got = _ledger(tmp_path, [claim_rows.primary_row("B1", "synthetic", df)]).loc["B1"]
    assert got["verdict"] == "reversed" and got["without_failures"] == "no seed without a failure"


def test_the_collapsed_mapping_decides_only_rows_without_their_seeds(tmp_path):
    """A claim file written before the failure rate (no ``seeds``) keeps the earlier rule: an arm the cache says
    collapsed makes its primary row ``not testable``; a row that names its seeds carries its own failures."""
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0})
    row = claim_rows.primary_row("B1", "synthetic", df)
    mapping = {("synthetic", "Triplet-HN"): "seed 3: planted"}
    assert _ledger(tmp_path / "new", [row], mapping).loc["B1", "verdict"] != "not testable"
    old = {k: v for k, v in row.items() if k not in ("failed_seeds", "failures")}
    got = _ledger(tmp_path / "old", [old], mapping).loc["B1"]
    assert got["verdict"] == "not testable" and "Triplet-HN: seed 3" in got["reason"] and math.isnan(got["p_adj"])


def test_a_seed_list_that_is_not_numbers_is_named():
    with pytest.raises(ValueError, match=r"claim B1 \(synthetic\): failed_seeds 'x;2'"):
        claim_files._seed_list({"id": "B1", "dataset": "synthetic", "failed_seeds": "x;2"}, "failed_seeds")
    assert claim_files._seed_list({"seeds": float("nan")}, "seeds") == ()
    assert claim_files._seed_list({}, "seeds") is None


# --- the failure rule: collapsed, or far below the arm's own other seeds -------------------------------------
def _runs(values: dict, val: dict | None = None, collapsed=()) -> pd.DataFrame:
    """``values = {arm: [test RSUM per seed 0, 1, …]}``; ``val`` the validation RSUM (default: the test RSUM + 10);
    ``collapsed``: (arm, seed) pairs the health record marks collapsed."""
    rows = []
    for arm, xs in values.items():
        for s, x in enumerate(xs):
            v = (val or {}).get(arm, [x + 10.0 for x in xs])[s]
            rows.append(
                {
                    "arm": arm,
                    "seed": s,
                    "rsum": x,
                    "selected_val_rsum": v,
                    "collapsed": (arm, s) in collapsed,
                    "collapse_reason": "planted",
                }
            )
    return pd.DataFrame(rows)


def _failed(runs: pd.DataFrame) -> dict:
    f = claim_rows.run_failures(runs)
    return {(r.arm, r.seed): r.why for r in f.itertuples() if r.failed}


def test_a_near_chance_run_of_a_trained_arm_fails_though_it_passes_the_chance_rule():
    """The Flickr8k S3 case: test RSUM 9.2 (validation 3.8× chance, so not collapsed) where the arm's other seeds
    score ≈ 200 — half their median is the line, whatever chance is."""
    runs = _runs({"HN": [205.0, 198.0, 210.0, 201.0, 9.2]}, {"HN": [215.0, 208.0, 220.0, 211.0, 12.2]})
    assert set(_failed(runs)) == {("HN", 4)}
    why = _failed(runs)[("HN", 4)]
    assert "test RSUM 9.2 < 0.5 × 203.0, the median of its 4 other seeds" in why and "validation RSUM 12.2" in why


def test_a_weak_but_trained_seed_is_not_failed_and_the_line_is_half_the_median():
    runs = _runs({"A": [200.0, 204.0, 196.0, 120.0, 101.0, 90.0]})  # 120, 101: weak; 90 < 0.5 × 196 (the median)
    assert set(_failed(runs)) == {("A", 5)}
    assert claim_rows.FAIL_FRACTION == 0.5 and claim_rows.FAIL_MIN_OTHERS == 2


def test_validation_alone_or_the_health_record_alone_fails_a_run():
    runs = _runs({"A": [200.0, 201.0, 199.0, 200.0]}, {"A": [210.0, 212.0, 90.0, 211.0]}, collapsed={("A", 0)})
    got = _failed(runs)
    assert set(got) == {("A", 0), ("A", 2)}
    assert got[("A", 0)].startswith("collapsed (planted)") and got[("A", 2)].startswith("validation RSUM 90.0")


def test_the_relative_rule_needs_two_other_seeds_and_reads_each_arm_against_itself():
    assert _failed(_runs({"A": [200.0, 9.0]})) == {}  # one other seed: no median to judge by, only the chance rule
    weak = _runs({"weak": [40.0, 42.0, 38.0, 41.0], "strong": [200.0, 205.0, 198.0, 201.0]})
    assert _failed(weak) == {}  # a weak arm is weak, not failed: it is compared with its own seeds
    every = _runs({"A": [3.0, 3.1, 2.9]}, collapsed={("A", 0), ("A", 1), ("A", 2)})
    assert set(_failed(every)) == {("A", 0), ("A", 1), ("A", 2)}  # an arm that never trained: the chance rule


def test_failed_seeds_of_an_arm_contrast_follow_the_relative_rule(tmp_path):
    runs = _runs({"Triplet-SN": [400.0, 401.0, 399.0, 402.0, 398.0], "Triplet-HN": [390.0, 391.0, 389.0, 392.0, 9.2]})
    row = claim_rows.primary_row("B1", "synthetic", runs)
    assert row["failed_seeds"] == "4" and row["failures"] == "Triplet-HN failed 1 of 5 seeds (4)"
    got = _ledger(tmp_path, [row]).loc["B1"]
    assert got["failures"] == row["failures"] and got["without_failures"].endswith("on 4 seeds")


def _grid(seed4_collapsed_sn: bool = True) -> pd.DataFrame:
    """SAM as written, τ ∈ {3, 10} × keep-triplet × SN / HN, seeds 0–4: SN ≈ 110, HN ≈ 210 test RSUM; at seed 4 the
    SN τ=3 SAM-only run collapsed and both HN SAM-only cells ended at 9.2 (validation 3.8× chance: not collapsed)."""
    rng = np.random.default_rng(1)
    rows = []
    for tau in (3, 10):
        for keep in (True, False):
            for sampling, mean in (("SN", 110.0), ("HN", 210.0)):
                arm = f"τ={tau} {sampling} keep={keep}"
                for s in range(5):
                    x = mean + rng.normal(0.0, 2.0)
                    bad = False
                    if s == 4 and not keep and sampling == "HN":
                        x = 9.2
                    if s == 4 and not keep and sampling == "SN" and tau == 3 and seed4_collapsed_sn:
                        x, bad = 5.0, True
                    rows.append(
                        {
                            "arm": arm,
                            "seed": s,
                            "loss": "sam",
                            "variant": "as written",
                            "tau": float(tau),
                            "sampling": sampling,
                            "keep": keep,
                            "rsum": x,
                            "selected_val_rsum": 12.2 if x == 9.2 else x + 10.0,
                            "collapsed": bad,
                            "collapse_reason": "planted",
                        }
                    )
    return pd.DataFrame(rows)


def _s3_primary(grid: pd.DataFrame) -> ClaimResult:
    rows = sam_claims.primary_roles(sam_claims.grid_claims(grid), "flickr8k")
    r = next(r for r in rows if r.get("role") == "primary")
    return ClaimResult(
        r["cid"], "SAM", r["source"], r["statement"], r["metric"], "flickr8k", r["arms"], r["effects"],
        notebook="03_sam", note=r["note"], role="primary", failures=r.get("failures") or {},
    )  # fmt: skip


def test_s3_a_notebook_measured_row_carries_its_failed_seed_its_rates_and_both_verdicts(tmp_path):
    cr = _s3_primary(_grid())
    assert cr.failures["seeds"] == "0;1;2;3;4" and cr.failures["failed_seeds"] == "4"
    assert cr.failures["failures"] == (
        "τ=3 SN keep=False failed 1 of 5 seeds (4); τ=3 HN keep=False failed 1 of 5 seeds (4); "
        "τ=10 HN keep=False failed 1 of 5 seeds (4)"
    )
    claim_files.write_claims([cr], tmp_path, "sam", "flickr8k")
    got = ledger_files.collect(tmp_path).set_index(["id", "dataset", "role"]).loc[("S3", "flickr8k", "primary")]
    assert got["failures"] == cr.failures["failures"] and got["n_seeds"] == 5
    effects = [float(x) for x in got["seed_effects"].split(";")]
    alpha, delta = family_alpha(int(got["family_size"])), smallest_effect(got["paper_effect"])
    v_all = decide("direction", estimate(effects), alpha, delta, got["paper_effect"])
    v_kept = decide("direction", estimate(effects[:4]), alpha, delta, got["paper_effect"])
    assert got["verdict"] == v_all[0]
    assert got["without_failures"] == f"{v_kept[0]} [{v_kept[2]:.3g}, {v_kept[3]:.3g}] on 4 seeds"
    assert v_kept[0] == "reversed"  # the planted grid: SN ≈ 100 below HN on every healthy seed
    tags = ledger_render.verdict_tags(got.to_dict())
    assert f"failed seeds: {cr.failures['failures']}; without them {got['without_failures']}" in tags


def test_a_grid_without_a_failed_run_states_zero():
    grid = _grid()
    grid.loc[grid["seed"] == 4, "rsum"] = grid.loc[grid["seed"] == 3, "rsum"].to_numpy()
    grid.loc[grid["seed"] == 4, "selected_val_rsum"] = grid.loc[grid["seed"] == 3, "selected_val_rsum"].to_numpy()
    grid["collapsed"] = False
    assert _s3_primary(grid).failures == {"seeds": "0;1;2;3;4", "failed_seeds": "", "failures": "0 of 5 seeds"}


def test_a_notebook_row_names_its_arms_and_one_without_trained_arms_says_so():
    runs = _runs({"Triplet + S-NDCG": [300.0, 301.0, 299.0], "Triplet (mean)": [295.0, 296.0, 9.0], "Triplet": [1.0]})
    assert claim_rows.named_arms("Triplet + S-NDCG vs Triplet (mean)", runs["arm"]) == [
        "Triplet + S-NDCG",
        "Triplet (mean)",
    ]
    assert claim_rows.named_arms("Triplet + S-NDCG test embeddings, τ = 0.001", runs["arm"]) == ["Triplet + S-NDCG"]
    assert claim_rows.named_arms("100% data, Triplet-HN", ["Triplet-HN", "100% data, Triplet-HN"]) == [
        "100% data, Triplet-HN"
    ]
    curve = claim_rows.notebook_failure_cells(runs, "Triplet + S-NDCG vs Triplet (mean)", 3)
    assert curve == {"seeds": "0;1;2", "failed_seeds": "2", "failures": "Triplet (mean) failed 1 of 3 seeds (2)"}
    batches = claim_rows.notebook_failure_cells(runs, "Triplet + S-NDCG test embeddings, τ = 0.001", 90)
    assert batches == {"failed_seeds": "", "failures": "0 of 3 seeds"}  # 90 batches, not seeds: no seed list
    free = claim_rows.notebook_failure_cells(runs, "sbert vs cider", 5)
    assert free == {"failed_seeds": "", "failures": f"{claim_rows.NO_TRAINED_ARM} (sbert vs cider)"}


def test_every_primary_row_has_a_failures_cell(tmp_path):
    df = _results({"Triplet-SN": 400.0, "Triplet-HN": 390.0})
    old = {k: v for k, v in claim_rows.primary_row("B1", "synthetic", df).items() if k not in ("failed_seeds",)}
    old.pop("failures")
    claim_files.write_claims([old], tmp_path, "bcls", "synthetic")
    got = ledger_files.collect(tmp_path)
    prim = got[got["role"] == "primary"]
    assert prim["failures"].map(lambda x: isinstance(x, str) and x.strip() != "").all()
    assert prim.set_index(["id", "dataset"]).loc[("B1", "synthetic"), "failures"].startswith("not collected")
    assert (
        prim.set_index(["id", "dataset"]).loc[("B2", "synthetic"), "failures"] == "no runs measured (no notebook row)"
    )


def test_a_page_fills_the_failures_of_a_notebook_primary_it_was_not_given():
    from reproduce.present import page

    class _Study:
        def results(self, paper):
            return _runs({"Triplet + S-NDCG": [300.0, 301.0, 299.0], "Triplet (mean)": [295.0, 296.0, 9.0]})

    pg = page.Page("listwise", "04_listwise", "smoke", "synthetic", study=_Study())
    pg.claim("N7", "Fig. 5", "", "m", "Triplet + S-NDCG vs Triplet (mean)", [1.0, 2.0, 3.0], role="primary")
    pg.claim("N1", "Table V", "a secondary row", "rsum", "Triplet + S-NDCG vs Triplet (mean)", [1.0, 2.0, 3.0])
    given = {"seeds": "0;1;2", "failed_seeds": "", "failures": "0 of 3 seeds"}
    pg.claim("N3", "Fig. 7", "", "m", "x", [0.1, 0.2], role="primary", failures=given)
    n7, n1, n3 = pg.notebook_rows()
    assert n7.failures == {"seeds": "0;1;2", "failed_seeds": "2", "failures": "Triplet (mean) failed 1 of 3 seeds (2)"}
    assert n1.failures == {} and n3.failures == given  # a secondary row is not filled; what the notebook gave is kept
    row = n7.row()
    assert row["failed_seeds"] == "2" and row["seeds"] == "0;1;2" and "failures" not in n1.row()
