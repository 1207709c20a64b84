"""The notebooks' shared start/finish (reproduce.present.page), paper-number files and one side_by_side."""

from __future__ import annotations

import pandas as pd
import pytest

from reproduce.present import page, report

from reproduce.spec import paper_numbers

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


# --- Markdown tables a person reads ---------------------------------------------------------------------
def split_row(line: str) -> list[str]:
    """The cells of one Markdown table row, split at the pipes that are not escaped (GitHub's rule)."""
    import re

    assert line.startswith("|") and line.endswith("|"), line
    return [c.strip() for c in re.split(r"(?<!\\)\|", line[1:-1])]


def tables_of(md: str) -> list[list[list[str]]]:
    """Every Markdown table of ``md`` as rows of cells (header first, the --- line dropped)."""
    out, cur = [], []
    for line in md.split("\n"):
        if line.startswith("|"):
            if not set(line) <= set("|-: "):
                cur.append(split_row(line))
        elif cur:
            out.append(cur)
            cur = []
    return out + ([cur] if cur else [])


def test_md_cell_escapes_pipes_and_line_breaks():
    assert report.md_cell("|gap| ≤ 0.01\nnext") == "\\|gap\\| ≤ 0.01 next"
    assert report.md_cell("a \\| b") == "a \\| b"  # escaped once, not twice
    assert report.md_cell(float("nan")) == "–" and report.md_cell(None) == "–" and report.md_cell(3) == "3"


def test_markdown_table_keeps_every_row_as_wide_as_its_header_with_pipes_in_cells():
    df = pd.DataFrame({"arm": ["A|B", "C"], "|gap| (cosine)": ["0.1 | 0.2", "x\ny"]})
    md = report.markdown_table(df, index=False)
    (table,) = tables_of(md)
    assert table[0] == ["arm", "\\|gap\\| (cosine)"]
    assert table[1] == ["A\\|B", "0.1 \\| 0.2"] and table[2] == ["C", "x y"]
    assert all(len(row) == 2 for row in table)
    old = df.to_markdown(index=False)  # what the writers used to emit: the pipes split the cells
    assert any(len(split_row(line)) != 2 for line in old.split("\n") if not set(line) <= set("|-: "))


def test_markdown_table_splits_wide_frames_and_explains_short_headers():
    cols = [f"R@{k} image→text (Sentence-BERT pseudo labels) [%] ↑" for k in range(1, 21)]
    idx = pd.MultiIndex.from_tuples([("ours", "VSE++"), ("paper", "Ladder")], names=["source", "arm"])
    df = pd.DataFrame([[float(k) for k in range(20)], [float(k + 100) for k in range(20)]], index=idx, columns=cols)
    md = report.markdown_table(df)
    tables = tables_of(md)
    assert len(tables) == 3 and all(len(t[0]) <= report.MAX_MD_COLUMNS for t in tables)
    for t in tables:  # row labels repeated in every part
        assert t[0][:2] == ["source", "arm"] and [r[:2] for r in t[1:]] == [["ours", "VSE++"], ["paper", "Ladder"]]
    headers = [h for t in tables for h in t[0][2:]]
    assert len(headers) == 20 == len(set(headers)) and all(len(h) <= report.SHORT_HEADER + 4 for h in headers)
    values = {h: (r1, r2) for t in tables for h, r1, r2 in zip(t[0][2:], t[1][2:], t[2][2:])}
    for k, full in enumerate(cols):  # the legend spells every short header out; the numbers stay in place
        short = next(h for h in headers if f"* **{h}**: {full}" in md)
        assert values[short] == (str(float(k)), str(float(k + 100)))


def test_save_table_markdown_has_at_most_nine_columns_and_the_csv_all(tmp_path):
    df = pd.DataFrame([range(17)], columns=[f"metric number {k} with a long name" for k in range(17)], index=["A"])
    report.save_table(df, tmp_path, "p", "wide", "caption")
    md = (tmp_path / "p" / "wide.md").read_text()
    assert md.startswith("caption\n\n") and all(len(t[0]) <= 9 for t in tables_of(md))
    assert pd.read_csv(tmp_path / "p" / "wide.csv", index_col=0).shape == (1, 17)


def test_effects_markdown_escapes_pipes_in_cells():
    df = pd.DataFrame(
        [
            dict(id="S1", role="primary", arms="A | B", metric="rsum", effect=1.0, ci_low=0.5, ci_high=1.5, n_seeds=3),
        ]
    )
    (table,) = tables_of(page.effects_markdown(df))
    assert all(len(row) == len(table[0]) for row in table) and table[1][2] == "A \\| B"


def test_tuning_headers_never_show_a_raw_metric_key():
    import re

    from reproduce.spec import labels

    # every column the tuning table has (tuning._rows) plus one unknown name carrying a metric key
    cols = ["arm", "loss", "lr", "warmup_epochs", "val_rsum", "best_epoch", "epochs_run", "collapsed",
            "collapse_reason", "hardneg_cos", "narrow_cone", "rung_val_rsum", "went_on", "other_seeds", "chosen",
            "final_val_rsum"]  # fmt: skip
    for c in cols:
        header = page._tuning_header(c)
        raw = [t for t in re.findall(r"[A-Za-z0-9_@]+", header) if labels.is_metric_key(t)]
        assert raw == [], (c, header)
    assert page._tuning_header("rung_val_rsum") == "val RSUM at the rung (%)"
    assert "rsum" not in page._tuning_header("final_val_rsum")


def test_the_setup_line_names_the_fewer_seeds_of_sweep_points(tmp_path, monkeypatch):
    """A figure over a sweep used to say "seeds [0, 1, 2, 3, 4]" while its points had 3 seeds or seed 0 only
    (``Profile.seeds_for``): the setup line names every seed policy the profile has, and only those — and the
    more seeds a power analysis asked of the paper's arms (``power_seeds.toml``)."""
    from types import SimpleNamespace

    from reproduce.spec import power_seeds
    from reproduce.spec.profiles import get_profile

    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", tmp_path / "none.toml")

    def setup(profile):
        return page.Page(
            "sam", "03_sam", profile.name, "flickr8k", study=SimpleNamespace(profile=profile, seeds=profile.seeds)
        ).setup

    default = get_profile("default")
    assert default.sweep_seeds == (0, 1, 2) and "fraction_reduced" in default.seed0_groups  # the profile this pins
    assert setup(default) == "flickr8k, profile default, seeds 0–4 (other sweep points 0–2; seed-0 sweeps 0)"
    smoke = get_profile("smoke")  # one seed for every arm: nothing fewer to name
    assert smoke.seeds == (0,) and setup(smoke) == "flickr8k, profile smoke, seeds 0"
    assert page.seed_span([0, 1]) == "0, 1" and page.seed_span([0, 2, 5]) == "0, 2, 5"
    planted = tmp_path / "power_seeds.toml"
    planted.write_text('[default.flickr8k]\n"sam/100% data, + SAM" = 16\n"bcls/BCLS" = 29\n', encoding="utf-8")
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", planted)
    assert setup(default).endswith("seed-0 sweeps 0); the arms a power analysis asked more of: up to 16 seeds")
