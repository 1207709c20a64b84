"""reproduce/protocol/scale.py and its cells: the main comparison's primary rows carry their verdict at the papers'
size from a planted papers'-size ledger, "not yet measured" without one, and no other row carries anything; the X1
arms at the papers' size are read back from the table the paper profile's overview notebook writes."""

from __future__ import annotations

import pandas as pd
import pytest

from reproduce.present import ledger_render, report
from reproduce.protocol import main_comparison as mc
from reproduce.protocol import scale
from reproduce.spec.profiles import get_profile


def _ledger(rows):
    base = dict(role="primary", verdict="inconclusive", effect=1.0, ci_low=-2.0, ci_high=4.0)
    return pd.DataFrame([{**base, **r} for r in rows])


DEFAULT = _ledger(
    [
        dict(id="B1", dataset="flickr8k"),
        dict(id="B1", dataset="synthetic"),
        dict(id="X1", dataset="flickr8k"),
        dict(id="L1", dataset="flickr8k"),  # not a main-comparison row
        dict(id="B1", dataset="flickr8k", role="secondary"),
    ]
)


def test_without_a_papers_size_ledger_the_main_rows_say_not_yet_measured():
    cells = ledger_render.papers_size_column(DEFAULT, None)
    assert cells == [
        "papers' size: not yet measured",
        f"papers' size: {scale.NOT_PLANNED}",
        "papers' size: not yet measured",
        "",
        "",
    ]


def test_a_planted_papers_size_ledger_gives_its_verdicts_to_the_same_claim_and_data_set(tmp_path):
    paper = _ledger(
        [
            dict(id="B1", dataset="flickr8k", verdict="reversed", effect=-15.3, ci_low=-20.1, ci_high=-10.4),
            dict(id="B1", dataset="flickr8k", role="secondary", verdict="reproduced"),
            dict(id="L1", dataset="flickr8k", verdict="reproduced"),
        ]
    )
    path = tmp_path / "claims.csv"
    paper.to_csv(path, index=False)
    cells = ledger_render.papers_size_column(DEFAULT, scale.read_paper_ledger(path))
    assert cells[0] == "papers' size: **reversed** -15.3 [-20.1, -10.4]"
    assert cells[2] == "papers' size: not yet measured"  # X1 is not in the planted ledger
    assert cells[3] == cells[4] == ""  # L1 is no main-comparison row; a secondary row carries nothing


def test_the_readme_table_gains_the_column_only_with_something_to_show():
    df = DEFAULT.assign(statement="s", paper_effect=1.0, ratio=1.0, reason="")
    df["papers_size"] = ledger_render.papers_size_column(df, None)
    t = ledger_render.primary_table(df)
    assert t.set_index("id").loc["B1", "papers_size"] == "papers' size: not yet measured"
    text = ledger_render.summary_markdown(df)
    assert "flickr8k at the papers' size (GRU-1024)" in text.splitlines()[0]
    b1 = next(line for line in text.splitlines() if line.startswith("| B1 "))
    assert b1.rstrip(" |").endswith("not yet measured")
    assert "papers' size" not in ledger_render.summary_markdown(df.drop(columns="papers_size")).splitlines()[0]


def test_the_papers_size_ledger_is_the_paper_profiles_and_a_bad_one_is_named(tmp_path):
    assert scale.paper_ledger_path().parent.name == "paper_scale" == get_profile("paper").results_dir.split("/")[-1]
    assert scale.read_paper_ledger(tmp_path / "none.csv") is None
    bad = tmp_path / "claims.csv"
    bad.write_text("id,verdict\nB1,reproduced\n")
    with pytest.raises(ValueError, match=r"claims.csv: not a claims ledger, columns \['role', 'dataset'"):
        scale.read_paper_ledger(bad)


def _x1_main_at_the_papers_size(tmp_path):
    """The paper profile's overview notebook's X1 table, written as the notebook writes it (main_comparison on
    planted runs, saved by report.save_table under <results>/overview/)."""
    runs = pd.DataFrame(
        [
            {"arm": arm, "seed": s, "rsum": v}
            for arm, vals in {
                "Triplet-SN": [250.0, 252.0, 251.0],
                mc.BASE: [265.0, 266.0, 264.0],  # VSE++ ahead at the papers' size
                "Unified": [262.0, 268.0, 263.0],
                "Only at the papers' size": [1.0, 2.0, 3.0],
            }.items()
            for s, v in enumerate(vals)
        ]
    )
    res = mc.main_comparison(runs, n_boot=300)
    path = report.save_table(res, tmp_path, "overview", f"x1_main_{scale.SCALE_DATA}")
    return res, path


def test_the_x1_arms_at_the_papers_size_are_read_from_the_paper_profiles_overview_table(tmp_path):
    res, path = _x1_main_at_the_papers_size(tmp_path)
    assert scale.paper_main_path().relative_to(scale.paper_ledger_path().parent) == path.relative_to(tmp_path)
    ours = [mc.BASE, "Triplet-SN", "Unified", "Not trained at the papers' size"]
    got = scale.papers_size_arms("flickr8k", "default", ours, path=path)
    assert list(got.index) == [mc.BASE, "Triplet-SN", "Unified"]  # ours' order, only the arms both have
    pd.testing.assert_frame_equal(got, res.loc[got.index], check_exact=False, rtol=1e-12)
    sn = got.loc["Triplet-SN"]
    assert sn["iqm"] == 251.0 and sn["iqm_low"] <= 251.0 <= sn["iqm_high"] and sn["poi"] == 0.0
    assert list(scale.papers_size_arms("flickr8k", "smoke", path=path).index) == list(res.index)  # every arm


def test_the_x1_arms_at_the_papers_size_not_measured_not_planned_and_a_bad_table(tmp_path):
    _, path = _x1_main_at_the_papers_size(tmp_path)
    assert scale.papers_size_arms("flickr8k", "default", path=tmp_path / "none.csv") == scale.NOT_MEASURED
    assert scale.papers_size_arms("flickr8k", "default", ["VSE++ alone"], path=path) == scale.NOT_MEASURED
    assert scale.papers_size_arms("synthetic", "default", path=path) is None  # the paper profile trains Flickr8k
    assert scale.papers_size_arms("flickr8k", "paper", path=path) is None  # its own figure: nothing beside it
    bad = tmp_path / "bad.csv"
    bad.write_text("arm,mean\nVSE++,1\n")
    with pytest.raises(ValueError, match=r"bad.csv: not an X1 main comparison, columns \['n_seeds', 'iqm'"):
        scale.papers_size_arms("flickr8k", "default", path=bad)
    assert scale.SCALE_LABEL == f"papers' size (GRU-{get_profile('paper').model['text_hidden']})"
