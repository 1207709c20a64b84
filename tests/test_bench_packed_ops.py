"""``benchmarks/bench_packed_ops.py`` at a tiny size: the report has a row per loss, engine and width, the batched
losses spend fewer operations per run than the loop at two members, and the report goes where ``--out`` says."""

from __future__ import annotations

import re

from helpers import load_benchmark


def test_the_report_at_a_tiny_size(tmp_path, monkeypatch):
    bench = load_benchmark("bench_packed_ops")
    monkeypatch.setattr(bench, "B", 8)
    monkeypatch.setattr(bench, "F", 16)
    monkeypatch.setattr(bench, "V", 30)
    monkeypatch.setattr(bench, "WIDTHS", (2,))
    monkeypatch.setattr(bench, "LOSSES", ("triplet", "adaptive_ladder"))
    out = tmp_path / "ops.md"
    assert bench.main(["--out", str(out), "--no-time"]) == 0
    rows = [line.split(" | ") for line in out.read_text().splitlines() if re.match(r"\| (triplet|adaptive)", line)]
    got = {(r[0].strip("| "), r[1]): r for r in rows}
    assert set(got) == {
        (loss, engine)
        for loss in ("triplet", "adaptive_ladder")
        for engine in ("solo", "packed, loss loop", "packed, batched loss")
    }
    for loss in ("triplet", "adaptive_ladder"):
        loop, batched = got[(loss, "packed, loss loop")], got[(loss, "packed, batched loss")]
        assert int(loop[6]) == 2 * int(loop[5])  # the loop: a member's loss operations twice
        assert int(batched[7]) < int(loop[7]) and int(batched[3]) < int(loop[3])  # per run; per update
        assert batched[-1].strip(" |") == "—"  # not timed
