"""``benchmarks/bench_cuda.py`` (the CUDA check, run on a GPU machine): without CUDA it refuses with one line
and exit status 2 instead of measuring CPU as if it were a GPU; its report lists every loss that failed the
CUDA-vs-CPU comparison, with ``|`` escaped in the table."""

from __future__ import annotations

import json

import pytest
import torch

from helpers import load_benchmark


@pytest.fixture(scope="module")
def bench():
    return load_benchmark("bench_cuda")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for machines without CUDA")
def test_without_cuda_it_refuses_and_measures_nothing(bench, tmp_path, capsys):
    assert bench.main(["--out", str(tmp_path)]) == 2
    assert "no CUDA device" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_report_lists_the_losses_that_failed(bench, tmp_path):
    env = {"date": "d", "torch": "t", "cpus": 1, "load_average": (0.0, 0.0, 0.0), "device": "cuda", "commit": "c"}
    ok = {"loss": "triplet", "params": "{}", "value_diff": 0.0, "grad_max_diff": 0.0, "passed": True}
    bad = {"loss": "listwise", "params": '{"a|b": 1}', "value_diff": 1e-7, "grad_max_diff": 9e-5, "passed": False}
    bench.write(tmp_path, {"environment": env, "losses": [ok, bad], "errors": {}})
    md = (tmp_path / "cuda.md").read_text()
    assert "1 of 2 within" in md
    assert '| listwise | {"a\\|b": 1} |' in md and "| triplet |" not in md
    assert json.loads((tmp_path / "cuda.json").read_text())["losses"][1]["passed"] is False


def test_the_loss_check_turns_tf32_off_inside_and_leaves_the_switches_as_it_found_them(bench, monkeypatch):
    """The parts after it train runs: with TF32 left off they trained with other cuDNN numerics than the
    process's own (in one GPU visit, the captured VSE++ smoke run validated at 109.2 after the check, 99.6 without)."""
    seen = []
    monkeypatch.setattr(bench, "_check_losses", lambda *a: seen.append(torch.backends.cudnn.allow_tf32) or [])
    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        for matmul, cudnn in ((False, True), (True, False)):
            torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = matmul, cudnn
            assert bench.check_losses("cpu") == []
            assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == (matmul, cudnn)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before
    assert seen == [False, False]


def test_the_dp_chunk_part_compares_the_two_chunkings_and_reports_them(bench, tmp_path):
    """On the CPU standing in, the two chunkings give the same levels (the premise the part checks on a GPU) and the
    report has its table."""
    rows = bench.dp_chunk("cpu", n_rep=1)
    assert len(rows) == 3 and all(r["levels_equal"] and r["counts_equal"] and r["rows_differing"] == 0 for r in rows)
    env = {"date": "d", "torch": "t", "cpus": 1, "load_average": (0.0, 0.0, 0.0), "device": "cpu", "commit": "c"}
    bench.write(tmp_path, {"environment": env, "dp_chunk": rows, "errors": {}})
    assert "## 7. The adaptive ladder's DP" in (tmp_path / "cuda.md").read_text()


def test_the_loss_kernels_part_counts_each_losss_operations_and_reports_them(bench, tmp_path):
    """On the CPU standing in: a row per loss with its operations and their time; the adaptive ladder launches
    far more than the triplet loss (the step_ops proxy), and the report has its table."""
    rows = bench.loss_kernels("cpu", n_rep=1)
    got = {r["loss"]: r for r in rows}
    assert list(got) == list(bench.KERNEL_LOSSES)
    assert all(r["kernels"] > 0 and r["kernel_ms"] > 0 and r["step_ms"] > 0 and r["longest"] for r in rows)
    assert got["adaptive_ladder"]["kernels"] > 5 * got["triplet"]["kernels"]
    env = {"date": "d", "torch": "t", "cpus": 1, "load_average": (0.0, 0.0, 0.0), "device": "cpu", "commit": "c"}
    bench.write(tmp_path, {"environment": env, "loss_kernels": rows, "errors": {}})
    text = (tmp_path / "cuda.md").read_text()
    assert "## 8. One loss step's kernels" in text and "On the CPU standing in" in text
