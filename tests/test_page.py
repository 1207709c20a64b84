"""The notebooks' shared start/finish (reproduce.page), paper-number files and one side_by_side."""

from __future__ import annotations

import pandas as pd
import pytest

from reproduce import page, paper_numbers, report

CSV = """table,source,row,column,value
table8,"paper: F30K, ResNet",Triplet-HN,i2t_r1,48.9
table8,"paper: F30K, ResNet",Triplet-HN,rsum,390.4
table8,"paper: F30K, ResNet",BCLS,i2t_r1,54.4
table8,"paper: F30K, ResNet",BCLS,rsum,
table8,"paper: COCO, ResNet",Triplet-HN,i2t_r1,36.3
"""


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setattr(paper_numbers, "FOLDER", tmp_path)
    (tmp_path / "toy.csv").write_text(CSV)
    return tmp_path


def test_paper_table_is_read_in_file_order_with_missing_values(folder):
    t = paper_numbers.table("toy", "table8")
    assert list(t) == ["paper: F30K, ResNet", "paper: COCO, ResNet"]
    f30 = t["paper: F30K, ResNet"]
    assert list(f30.index) == ["Triplet-HN", "BCLS"] and list(f30.columns) == ["i2t_r1", "rsum"]
    assert f30.loc["BCLS", "i2t_r1"] == 54.4 and pd.isna(f30.loc["BCLS", "rsum"])
    assert paper_numbers.tables("toy") == ["table8"]


def test_paper_numbers_bad_input_names_file_and_line(folder):
    with pytest.raises(KeyError, match="no table 'table9'.*table8"):
        paper_numbers.table("toy", "table9")
    with pytest.raises(FileNotFoundError, match="nope.csv"):
        paper_numbers.table("nope", "table8")
    (folder / "bad.csv").write_text(CSV.replace("48.9", "4x"))
    with pytest.raises(ValueError, match=r"bad.csv, line 2: value '4x' is not a number"):
        paper_numbers.table("bad", "table8")
    (folder / "dup.csv").write_text(CSV + 'table8,"paper: COCO, ResNet",Triplet-HN,i2t_r1,1\n')
    with pytest.raises(ValueError, match="appears twice"):
        paper_numbers.table("dup", "table8")


def test_every_committed_paper_file_reads():
    for f in sorted(paper_numbers.FOLDER.glob("*.csv")):
        for name in paper_numbers.tables(f.stem):
            assert paper_numbers.table(f.stem, name)


def test_side_by_side_puts_ours_first_on_our_columns(folder):
    ours = pd.DataFrame({"i2t_r1": ["50.0 ± 1.0"], "t2i_r1": ["40.0 ± 2.0"]}, index=pd.Index(["BCLS"], name="arm"))
    t = report.side_by_side(ours, paper_numbers.table("toy", "table8"), "ours")
    assert list(t.index.get_level_values(0).unique()) == ["ours", "paper: F30K, ResNet", "paper: COCO, ResNet"]
    assert list(t.columns) == ["i2t_r1", "t2i_r1"]
    assert t.loc[("paper: F30K, ResNet", "BCLS"), "i2t_r1"] == "54.4"
    assert t.loc[("paper: F30K, ResNet", "BCLS"), "t2i_r1"] == "–"
    assert list(report.flat(t).index)[1] == "paper: F30K, ResNet · Triplet-HN"


def test_effects_markdown_lists_primary_rows_first_and_no_verdicts():
    df = pd.DataFrame(
        [
            dict(
                id="B1",
                role="",
                arms="a vs b",
                metric="m",
                effect=1.0,
                ci_low=0.5,
                ci_high=1.5,
                n_seeds=3,
                verdict="reproduced",
            ),
            dict(
                id="B1",
                role="primary",
                arms="c − d",
                metric="rsum",
                effect=2.0,
                ci_low=-1.0,
                ci_high=5.0,
                n_seeds=3,
                verdict="inconclusive",
            ),
        ]
    )
    md = page.effects_markdown(df)
    body = md.split("\n")[2:4]
    assert body[0].startswith("| B1 | primary | c − d") and body[1].startswith("| B1 | secondary | a vs b")
    assert "reproduced" not in md.replace("results/claims.md", "") and "inconclusive" not in md


def test_page_claim_rejects_an_unknown_claim_id():
    pg = page.Page("bcls", "01_bcls", "smoke", "synthetic", study=None)
    with pytest.raises(KeyError):
        pg.claim("B99", "Table 1", "x", "rsum", "a vs b", [1.0])
    pg.claim("B1", "Table VIII", "x", "rsum", "a vs b", [1.0, 2.0])
    assert pg.claims[0].paper == "BCLS" and pg.claims[0].notebook == "01_bcls"


def test_summary_counts_collapsed_runs_and_pretty_marks_the_row():
    df = pd.DataFrame(
        {
            "arm": ["A", "A", "A", "B", "B", "B"],
            "seed": [0, 1, 2, 0, 1, 2],
            "rsum": [10.0, 12.0, 14.0, 1.0, 2.0, 3.0],
            "collapsed": [False, False, False, True, False, None],
        }
    )
    s = report.summary(df, ["rsum"])
    assert s.loc["A", "rsum"] == 12.0 and s.loc["A", "rsum_std"] == 2.0
    assert s["n_collapsed"].to_dict() == {"A": 0, "B": 1}
    p = report.pretty(s, ["rsum"])
    assert list(p.index) == ["A", "B ‡ 1/3 collapsed"] and p.iloc[0, 0] == "12.0 ± 2.0"
    assert "‡" in report.collapse_note()
    two = report.pretty(report.summary(df.assign(k=1), ["rsum"], by=["k", "arm"]), ["rsum"])
    assert list(two.index) == [(1, "A"), (1, "B ‡ 1/3 collapsed")]
    assert "n_collapsed" not in report.summary(df.drop(columns="collapsed"), ["rsum"])


def test_int_epochs_sets_integer_ticks_on_epoch_axes_only():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (a, b) = plt.subplots(1, 2)
    a.set_xlabel("epoch")
    b.set_xlabel("α")
    before = b.xaxis.get_major_locator()
    report.int_epochs(fig)
    assert isinstance(a.xaxis.get_major_locator(), MaxNLocator) and a.xaxis.get_major_locator()._integer
    assert b.xaxis.get_major_locator() is before  # other axes untouched
    plt.close(fig)
