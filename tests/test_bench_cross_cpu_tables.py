"""``benchmarks/bench_cross_cpu_tables.py`` on planted results folders: the largest change per table, where, and
the ledger's verdicts side by side."""

import pandas as pd
from helpers import load_benchmark

bench = load_benchmark("bench_cross_cpu_tables")


def _folder(path, effect, verdict, rsum):
    (path / "bcls").mkdir(parents=True)
    pd.DataFrame({"arm": ["Triplet-HN", "BCLS"], "rsum": [222.3, rsum], "train_s": [1.0, 2.0]}).to_csv(
        path / "bcls" / "table8_flickr8k.csv", index=False
    )
    claims = {"id": ["B1"], "dataset": ["flickr8k"], "role": ["primary"], "metric": ["rsum"], "arms": ["A − B"]}
    pd.DataFrame({**claims, "effect": [effect], "verdict": [verdict]}).to_csv(path / "claims.csv", index=False)


def test_a_moved_cell_and_a_changed_verdict_are_reported(tmp_path):
    _folder(tmp_path / "a", 3.25, "inconclusive", 225.0)
    _folder(tmp_path / "b", 3.5, "reproduced", 225.25)
    out = tmp_path / "cmp"
    assert bench.main([str(tmp_path / "a"), str(tmp_path / "b"), "--out", str(out)]) == 0
    df = pd.read_csv(out.with_suffix(".csv")).set_index("table")
    row = df.loc["bcls/table8_flickr8k.csv"]
    assert row["max_abs_change"] == 0.25 and row["where"] == "rsum @ BCLS" and row["moved"] == 1
    assert row["cells"] == 2  # rsum; the timing column is bookkeeping, left out
    text = out.with_suffix(".md").read_text()
    assert "verdicts that differ: 1 (B1 flickr8k: inconclusive → reproduced)" in text
    assert df.loc["claims.csv", "max_abs_change"] == 0.25


def test_the_same_folder_moves_nothing(tmp_path):
    _folder(tmp_path / "a", 3.25, "inconclusive", 225.0)
    out = tmp_path / "cmp"
    bench.main([str(tmp_path / "a"), str(tmp_path / "a"), "--out", str(out)])
    df = pd.read_csv(out.with_suffix(".csv"))
    assert (df["max_abs_change"] == 0).all() and (df["moved"] == 0).all()
    assert "verdicts that differ: 0." in out.with_suffix(".md").read_text()
