"""reproduce/protocol/power_plan.py: the rule that turns a pilot ledger's power analysis into seeds per arm, on
planted ledgers; the command writes a file the plan reads back, and refuses a file that is not a ledger."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from reproduce.protocol import power_plan
from reproduce.spec import power_seeds


def _row(id_, dataset, n, effect=1.0, role="primary", note=""):
    return {
        "id": id_,
        "role": role,
        "dataset": dataset,
        "paper_effect": effect,
        "seeds_for_power": n,
        "power_note": note,
    }


def test_each_arm_gets_the_most_seeds_a_reachable_primary_row_asks_of_it():
    ledger = pd.DataFrame(
        [
            _row("B1", "flickr8k", 14),  # Triplet-SN − Triplet-HN
            _row("B2", "flickr8k", 10),  # BCLS − Triplet-SN: Triplet-SN keeps B1's 14
            _row("B3", "flickr8k", 3),  # fewer than the pilot's 5: nothing
            _row("B1", "synthetic", math.nan, note="more than the cap of 30 seeds"),
            _row("B2", "synthetic", 9, role="secondary"),  # never decides, never asks
            _row("U1", "synthetic", 12, effect=math.nan),  # no paper effect: no power to plan
            _row("B7", "flickr8k", 8),  # measured by its notebook, names no arms
        ]
    )
    plan, rows = power_plan.seed_plan(ledger, "default")
    assert plan == {"flickr8k": {"bcls/Triplet-SN": 14, "bcls/Triplet-HN": 14, "bcls/BCLS": 10}}
    by = rows.set_index(["id", "dataset"])
    assert by.loc[("B1", "synthetic"), "why"] == "more than the cap of 30 seeds"
    assert by.loc[("B1", "synthetic"), "seeds_for_power"] == 0 and ("U1", "synthetic") not in by.index
    assert "names no arms" in by.loc[("B7", "flickr8k"), "why"]
    assert power_plan.added_runs(plan, "default") == {"flickr8k": 9 + 9 + 5}


def test_the_command_writes_a_file_the_plan_reads_and_refuses_what_is_not_a_ledger(tmp_path, monkeypatch, capsys):
    ledger = tmp_path / "claims.csv"
    pd.DataFrame([_row("B1", "flickr8k", 7)]).to_csv(ledger, index=False)
    target = tmp_path / "power_seeds.toml"
    target.write_text('[paper.flickr8k]\n"bcls/BCLS" = 6\n', encoding="utf-8")  # another profile's plan stays
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", target)
    assert power_plan.main(["--ledger", str(ledger), "--profile", "default", "--write"]) == 0
    assert "flickr8k: 2 arm(s) gain seeds, 4 run(s) added" in capsys.readouterr().out
    got = power_seeds.load()
    assert got[("default", "flickr8k")] == {"bcls/Triplet-HN": 7, "bcls/Triplet-SN": 7}
    assert got[("paper", "flickr8k")] == {"bcls/BCLS": 6}
    assert "sha256" in target.read_text() and "claims.csv" in target.read_text()
    pd.DataFrame({"id": ["B1"]}).to_csv(ledger, index=False)
    with pytest.raises(SystemExit) as exc:
        power_plan.main(["--ledger", str(ledger)])
    assert exc.value.code == 2 and "no column(s)" in capsys.readouterr().err


def test_keep_trains_each_arm_at_the_larger_of_the_earlier_and_the_new_plan(tmp_path, monkeypatch, capsys):
    """The plan derived again from a later pilot (``--keep``): an arm the earlier plan gave more keeps them, an arm
    the new plan asks more of gets them, and the file names both ledgers; without ``--keep`` the new plan replaces."""
    ledger = tmp_path / "claims.csv"
    pd.DataFrame([_row("B1", "flickr8k", 7), _row("B2", "flickr8k", 12)]).to_csv(ledger, index=False)
    target = tmp_path / "power_seeds.toml"
    target.write_text(
        '# from the ledger old.csv (sha256 0123…)\n[default.flickr8k]\n"bcls/Triplet-HN" = 14\n"bcls/BCLS" = 9\n\n'
        '# from the ledger paper.csv (sha256 abcd…)\n[paper.flickr8k]\n"bcls/BCLS" = 6\n',
        encoding="utf-8",
    )
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", target)
    assert power_plan.main(["--ledger", str(ledger), "--write", "--keep"]) == 0
    got = power_seeds.load()
    assert got[("default", "flickr8k")] == {"bcls/Triplet-HN": 14, "bcls/Triplet-SN": 12, "bcls/BCLS": 12}
    text = target.read_text()
    assert "keeping where larger the seeds of the plan from the ledger old.csv (sha256 0123…)" in text
    assert "# from the ledger paper.csv (sha256 abcd…)\n[paper.flickr8k]" in text  # another profile's source stays
    assert power_plan.main(["--ledger", str(ledger), "--write"]) == 0
    assert power_seeds.load()[("default", "flickr8k")] == {"bcls/Triplet-HN": 7, "bcls/Triplet-SN": 12, "bcls/BCLS": 12}
    capsys.readouterr()


def test_data_derives_one_data_sets_table_and_keeps_the_others_as_they_are(tmp_path, monkeypatch, capsys):
    """A pilot complete on Flickr8k only: ``--data flickr8k`` replaces (or with ``--keep`` raises) that table, and
    the synthetic table and its source stay, although the ledger's synthetic rows would ask otherwise."""
    ledger = tmp_path / "claims.csv"
    pd.DataFrame([_row("B1", "flickr8k", 7), _row("B1", "synthetic", 20)]).to_csv(ledger, index=False)
    target = tmp_path / "power_seeds.toml"
    earlier = (
        '# from the ledger old.csv (sha256 0123…)\n[default.flickr8k]\n"bcls/Triplet-HN" = 14\n\n'
        '# from the ledger old.csv (sha256 0123…)\n[default.synthetic]\n"bcls/BCLS" = 6\n'
    )
    target.write_text(earlier, encoding="utf-8")
    monkeypatch.setattr(power_seeds, "POWER_SEEDS_TOML", target)
    assert power_plan.main(["--ledger", str(ledger), "--data", "flickr8k", "--write", "--keep"]) == 0
    got = power_seeds.load()
    assert got[("default", "flickr8k")] == {"bcls/Triplet-HN": 14, "bcls/Triplet-SN": 7}
    assert got[("default", "synthetic")] == {"bcls/BCLS": 6}
    assert power_plan.sources_of(target.read_text())[("default", "synthetic")] == "the ledger old.csv (sha256 0123…)"
    target.write_text(earlier, encoding="utf-8")
    assert power_plan.main(["--ledger", str(ledger), "--data", "flickr8k", "--write"]) == 0
    assert power_seeds.load()[("default", "flickr8k")] == {"bcls/Triplet-HN": 7, "bcls/Triplet-SN": 7}
    with pytest.raises(SystemExit) as exc:
        power_plan.main(["--ledger", str(ledger), "--data", "coco"])
    assert exc.value.code == 2 and "expected synthetic and/or flickr8k" in capsys.readouterr().err


def test_sources_of_reads_the_line_above_each_table():
    text = power_plan.toml_text({"default": {"flickr8k": {"a/b": 6}, "synthetic": {"a/c": 7}}}, {"default": "X (1)"})
    assert power_plan.sources_of(text) == {("default", "flickr8k"): "X (1)", ("default", "synthetic"): "X (1)"}
