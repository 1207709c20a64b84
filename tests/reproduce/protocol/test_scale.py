"""reproduce/protocol/scale.py and its cells: the main comparison's primary rows carry their verdict at the papers'
size from a planted papers'-size ledger, "not yet measured" without one, and no other row carries anything."""

from __future__ import annotations

import pandas as pd
import pytest

from reproduce.present import ledger_render
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
