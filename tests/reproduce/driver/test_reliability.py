"""Reliability probes on tiny data, one test per defect (each failed before its fix):
stale claims and failures in the ledger / manifest / README, workers left behind by a SIGKILLed
driver, two drivers executing one notebook, and the small gaps (Config values, Flickr8k text files,
missing judgements, the content-keyed precomp cache)."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from coherent_itr.config import Config
from helpers import ROOT, make_release
from reproduce.protocol import plan as plan_mod


# ------------------------------------------------------------------------------------------------
# 1. stale results: claims of a failed notebook are marked, failures recorded, README untouched
# ------------------------------------------------------------------------------------------------
def _fake_papermill(monkeypatch, notebooks, behaviour):
    """papermill replaced by ``behaviour(nb_stem, results_dir)`` (may write claim files or raise)."""
    import papermill

    def fake(src, out, parameters, **kw):
        behaviour(Path(src).stem, Path(out).parent.parent, parameters)
        Path(out).write_text("{}")

    monkeypatch.setattr(papermill, "execute_notebook", fake)
    monkeypatch.setattr(notebooks, "kernel_name", lambda: "python3")


def _write_claim(results_dir: Path, paper: str, data: str, verdict: str) -> Path:
    from reproduce.protocol.claim_files import LEDGER_COLUMNS

    p = results_dir / paper / f"claims_{data}.csv"
    p.parent.mkdir(parents=True, exist_ok=True)
    row = {c: None for c in LEDGER_COLUMNS}
    row.update(id="B1", paper="BCLS", verdict=verdict, dataset=data, n_seeds=1, statement="s", note="n")
    pd.DataFrame([row], columns=LEDGER_COLUMNS).to_csv(p, index=False)
    return p


def test_claims_of_a_failed_notebook_are_marked_stale_with_its_stamp(tmp_path, monkeypatch):
    from reproduce.driver import ledger_files
    from reproduce.driver import notebooks

    res = tmp_path / "results"
    _fake_papermill(monkeypatch, notebooks, lambda nb, rd, par: _write_claim(rd, "bcls", par["data"], "reproduced"))
    assert notebooks.execute("smoke", "synthetic", res, only=["01"], progress=False) == []
    assert notebooks.stale_claims("smoke", {"synthetic": res}) == {}  # fresh: vouched by its stamp
    stamp = json.loads((res / "notebooks" / ".01_bcls.inputs").read_text())
    assert stamp["status"] == "ok" and stamp["claims"] == ["bcls/claims_synthetic.csv"]

    def fail(nb, rd, par):
        raise RuntimeError("cell 7 failed")

    _fake_papermill(monkeypatch, notebooks, fail)
    fails = notebooks.execute("smoke", "synthetic", res, only=["01"], progress=False, force=True)
    assert len(fails) == 1
    stale = notebooks.stale_claims("smoke", {"synthetic": res})
    claim = res / "bcls" / "claims_synthetic.csv"
    assert list(stale) == [claim] and "01_bcls.ipynb [synthetic] failed" in stale[claim]
    assert ".01_bcls.inputs" in stale[claim]  # names the stamp
    df = ledger_files.collect(res, stale=stale)
    b1 = df[(df.id == "B1") & (df.dataset == "synthetic")]  # the registry's primary row and the file's row
    marked = b1[b1.note.fillna("").str.startswith("STALE (")]
    assert len(marked) == 1 and marked.iloc[0].note.endswith("; n")
    assert "STALE" in (res / "claims.md").read_text() or "STALE" in (res / "claims.csv").read_text()
    # a claim file no stamp names (left by some earlier run) is stale too
    _write_claim(res, "ladder", "synthetic", "reproduced")
    assert res / "ladder" / "claims_synthetic.csv" in notebooks.stale_claims("smoke", {"synthetic": res})


def test_driver_does_not_update_readme_when_something_failed_and_records_failures(tmp_path, monkeypatch):
    from reproduce.driver import cli as cli
    from reproduce.driver import ledger_files, outcome
    from reproduce.driver.worker import RunFailure

    monkeypatch.setattr(outcome, "ROOT", tmp_path)
    readme_calls = []
    monkeypatch.setattr(ledger_files, "update_readme", lambda *a, **k: readme_calls.append(a))
    inv = cli.build_invocation(cli.parse_args(["--profile", "default", "--data", "synthetic"]))
    out = outcome.Outcome(
        failed_runs=[RunFailure({"loss": "triplet"}, "ValueError: x", "tb")],
        failed_notebooks=[("synthetic", "01_bcls.ipynb", "Traceback\nRuntimeError: cell 7 failed\n")],
    )
    assert outcome.finish(inv, out, time.perf_counter()) == 1
    assert readme_calls == []
    man = json.loads((tmp_path / "results" / "manifest.json").read_text())
    assert man["failures"]["runs"] == [{"config": {"loss": "triplet"}, "error": "ValueError: x"}]
    assert man["failures"]["notebooks"] == [
        {"data": "synthetic", "notebook": "01_bcls.ipynb", "error": "RuntimeError: cell 7 failed"}
    ]
    # nothing failed, nothing stale: the README is updated
    assert outcome.finish(inv, outcome.Outcome(), time.perf_counter()) == 0
    assert len(readme_calls) == 1


# ------------------------------------------------------------------------------------------------
# 4. no worker survives a SIGKILLed driver
# ------------------------------------------------------------------------------------------------
DRIVER = """
import sys
from coherent_itr.config import Config
from coherent_itr.runs import RunCache
from reproduce.driver.executors import LocalExecutor
cfgs = [Config(data="toy", data_scale="smoke", epochs=100000, embed_dim=8, word_dim=8, text_hidden=8, batch_size=16,
               vocab_min_count=1, grad_diag_every=0, device="cpu", seed=s) for s in range(2)]
LocalExecutor(workers=2, progress=False).run(cfgs, RunCache(sys.argv[1]))
"""


def _alive(p) -> bool:
    import psutil

    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_sigkill_of_the_driver_leaves_no_worker(tmp_path):
    import psutil

    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "src"), str(ROOT)])}
    drv = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(tmp_path / "cache")],
        env=env,
        cwd=ROOT,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        parent = psutil.Process(drv.pid)
        deadline = time.monotonic() + 60
        workers = []
        while time.monotonic() < deadline:
            workers = [c for c in parent.children(recursive=True) if "resource_tracker" not in " ".join(c.cmdline())]
            if len(workers) >= 2 and all(c.cpu_times().user > 1.0 for c in workers):  # imported and training
                break
            time.sleep(0.5)
        assert len(workers) >= 2, "the workers never started"
        everyone = parent.children(recursive=True)
        os.kill(drv.pid, signal.SIGKILL)
        drv.wait(10)
        deadline = time.monotonic() + 8
        while time.monotonic() < deadline and any(_alive(p) for p in everyone):
            time.sleep(0.2)
        left = [(p.pid, " ".join(p.cmdline())[:80]) for p in everyone if _alive(p)]
        assert left == [], f"processes left after SIGKILL of the driver: {left}"
    finally:
        try:
            os.killpg(drv.pid, signal.SIGKILL)  # clean up whatever a failing run left
        except ProcessLookupError:
            pass


# ------------------------------------------------------------------------------------------------
# 5. two drivers never execute one notebook twice
# ------------------------------------------------------------------------------------------------
def test_two_drivers_execute_a_notebook_once(tmp_path, monkeypatch):
    from reproduce.driver import notebooks

    ran = []

    def slow(nb, rd, par):
        ran.append(nb)
        time.sleep(1.0)

    _fake_papermill(monkeypatch, notebooks, slow)
    t0 = time.time()  # both "finished training" now: an execution started after it is fresh
    res = tmp_path / "results"
    fails = []
    threads = [
        threading.Thread(
            target=lambda: fails.extend(
                notebooks.execute("smoke", "synthetic", res, only=["06"], progress=False, fresh_after=t0)
            )
        )
        for _ in range(2)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert fails == [] and ran == ["06_data"]
    # a driver whose training ended after that execution started executes it again
    notebooks.execute("smoke", "synthetic", res, only=["06"], progress=False, fresh_after=time.time())
    assert ran == ["06_data", "06_data"]


# ------------------------------------------------------------------------------------------------
# 6. small gaps
# ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "field, value",
    [
        ("grad_clip", math.nan),
        ("grad_clip", math.inf),
        ("grad_clip", -0.5),
        ("train_fraction", 1e-9),
        ("train_fraction", math.nan),
        ("lr_decay_epoch", 2.5),
        ("lr_decay_epoch", True),
        ("epochs", True),
        ("seed", True),
        ("data_seed", 1.5),
    ],
)
def test_config_rejects(field, value):
    with pytest.raises(ValueError, match=rf"Config\.{field}="):
        Config(**{field: value})


def test_train_fraction_must_leave_one_batch_checked_before_training(monkeypatch):
    from reproduce.protocol import prepare as prep

    # 120 toy training images → 2 kept → 10 captions, fewer than a batch of 64
    cfg = Config(data="toy", data_scale="smoke", train_fraction=0.02, batch_size=64)
    with pytest.raises(ValueError, match=r"keeps 2 of 120 training images \(10 captions an epoch\).*batch_size=64"):
        cfg.check_train_size(120, 5)
    monkeypatch.setattr(prep, "embed_captions", lambda *a, **k: pytest.fail("prepared past a bad fraction"))
    with pytest.raises(ValueError, match="fewer than one batch"):
        prep.prepare([cfg], progress=False)
    Config(data="toy", train_fraction=0.2, batch_size=64).check_train_size(120, 5)  # 24 images, 120 captions


def _release(tmp_path) -> Path:
    return make_release(tmp_path / "flickr8k")


def test_flickr8k_token_file_with_a_byte_order_mark_is_read(tmp_path):
    from coherent_itr.data import flickr8k as f8

    rel = _release(tmp_path)
    tok = rel / f8.TOKEN_FILE
    tok.write_bytes(b"\xef\xbb\xbf" + tok.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", f8.Flickr8kWarning)
        idx = f8.flickr8k_index(rel)
    assert idx["train"][1][0] == "A caption 0 of 10_a.jpg ."
    exp = rel / f8.EXPERT_FILE
    exp.write_bytes(b"\xef\xbb\xbf" + exp.read_bytes())
    with warnings.catch_warnings():
        warnings.simplefilter("error", f8.Flickr8kWarning)  # no "malformed line 1"
        assert len(f8.read_judgements(exp, "expert")) == 4


def test_flickr8k_undecodable_byte_is_reported_with_file_and_line(tmp_path):
    from coherent_itr.data import flickr8k as f8

    rel = _release(tmp_path)
    tok = rel / f8.TOKEN_FILE
    lines = tok.read_bytes().split(b"\n")
    lines[6] = lines[6].replace(b"caption", "capti\u00f3n".encode("latin-1"))
    tok.write_bytes(b"\n".join(lines))
    with pytest.raises(ValueError, match=r"Flickr8k\.token\.txt: line 7: not UTF-8 text \(byte b'\\xf3' at column"):
        f8.flickr8k_index(rel)


def test_missing_judgement_file_is_said_once(tmp_path):
    from coherent_itr.data import flickr8k as f8

    rel = _release(tmp_path)
    (rel / f8.EXPERT_FILE).unlink()
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        s = f8.load_flickr8k(rel, cache_dir=tmp_path / "cache", progress=False)
        f8.load_flickr8k(rel, cache_dir=tmp_path / "cache", progress=False)
    said = [w for w in rec if "ExpertAnnotations.txt" in str(w.message)]
    assert len(said) == 1 and str(rel / f8.EXPERT_FILE) in str(said[0].message)
    assert "expert" not in s.test.extras and "crowd" in s.train.extras


def test_image_replaced_with_same_size_and_mtime_gets_new_features(tmp_path, monkeypatch):
    from PIL import Image

    from coherent_itr.data import flickr8k as f8

    rel = _release(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", f8.Flickr8kWarning)
        a = f8.load_flickr8k(rel, cache_dir=tmp_path / "cache", progress=False)
        with monkeypatch.context() as m:  # nothing changed: the images are not read again
            m.setattr(f8, "file_hash", lambda p: pytest.fail(f"re-hashed {p}"))
            f8.load_flickr8k(rel, cache_dir=tmp_path / "cache", progress=False)
        img = rel / "images" / "30_d.jpg"
        st = img.stat()
        # another picture of exactly the same byte size, with the old modification time
        rng = np.random.default_rng(1)
        for _ in range(200):
            Image.fromarray((rng.random((224, 224, 3)) * 255).astype(np.uint8)).save(tmp_path / "x.jpg", quality=90)
            if (tmp_path / "x.jpg").stat().st_size <= st.st_size:
                break
        data = (tmp_path / "x.jpg").read_bytes()
        img.write_bytes(data + b"\0" * (st.st_size - len(data)))  # JPEG readers ignore trailing bytes
        os.utime(img, ns=(st.st_atime_ns, st.st_mtime_ns))
        assert img.stat().st_size == st.st_size and img.stat().st_mtime_ns == st.st_mtime_ns
        b = f8.load_flickr8k(rel, cache_dir=tmp_path / "cache", progress=False)
    assert not np.allclose(a.test.features[0], b.test.features[0])  # the replaced image
    assert np.array_equal(a.test.features[1], b.test.features[1])  # the others unchanged


def test_executed_notebooks_carry_no_machine_paths(tmp_path):
    import json

    from reproduce.driver import notebooks

    root = tmp_path / "repo"
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": "x",
                "outputs": [{"name": "stderr", "output_type": "stream", "text": [f"{root}/src/a.py:3: Warning: b\n"]}],
            },
            {"cell_type": "markdown", "source": f"{root}/kept in prose"},
        ],
        "metadata": {
            "papermill": {"input_path": f"{root}/notebooks/x.ipynb", "output_path": f"{root}/results/x.ipynb"}
        },
    }
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    assert notebooks.scrub_machine_paths(p, root) == 3
    out = json.loads(p.read_text())
    assert out["metadata"]["papermill"] == {"input_path": "notebooks/x.ipynb", "output_path": "results/x.ipynb"}
    assert out["cells"][0]["outputs"][0]["text"] == ["src/a.py:3: Warning: b\n"]
    assert str(root) not in json.dumps(out["cells"][0]) and out["cells"][1]["source"].startswith(str(root))
    assert notebooks.scrub_machine_paths(p, root) == 0  # idempotent


def test_executed_notebooks_name_the_data_folder_by_its_variable(tmp_path, monkeypatch):
    import json

    from reproduce.driver import notebooks

    release = tmp_path / "somewhere" / "flickr8k"
    monkeypatch.setenv("FLICKR8K_DIR", str(release))
    text = f"{release}/Flickr8k.token.txt: skipped 5 captions\n"
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": "x",
                "outputs": [{"name": "stderr", "output_type": "stream", "text": [text]}],
            }
        ],
        "metadata": {},
    }
    p = tmp_path / "x.ipynb"
    p.write_text(json.dumps(nb))
    assert notebooks.scrub_machine_paths(p, tmp_path / "repo") == 1
    out = json.loads(p.read_text())["cells"][0]["outputs"][0]["text"]
    assert out == ["$FLICKR8K_DIR/Flickr8k.token.txt: skipped 5 captions\n"]


def test_failed_tuning_runs_end_in_one_summary(tmp_path, monkeypatch, capsys):
    """Tuning runs that fail are failed trials, each reported in one line, not a traceback; the study exits 1 with
    one summary naming each failure (run, cause) once, and the full tracebacks go to the failure log in the run
    cache."""
    from coherent_itr.runs import RunCache

    from reproduce.driver import cli as cli
    from reproduce.driver import executors
    from reproduce.driver import ledger_files, outcome
    from reproduce.present import tuning_tables
    from reproduce.protocol import prepare
    from reproduce.driver.worker import RunFailure

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(outcome, "ROOT", tmp_path)
    monkeypatch.setattr(ledger_files, "update_readme", lambda *a, **k: None)
    boom = [
        RunFailure(
            {"data": "synthetic", "loss": "triplet", "lr": 2e-3, "seed": s},
            "FileNotFoundError: /data/gone/images.npy\nmore",
            "Traceback (most recent call last):\n  ...",
        )
        for s in (0, 1, 2, 3)
    ]

    class _Failing:  # the tuning runs it is handed fail
        def run_as_ready(self, ready, cache, bar=None):
            assert any(not evaluate for _, evaluate in ready(set()))
            return list(boom)

    monkeypatch.setattr(executors, "make_executor", lambda *a, **k: _Failing())
    monkeypatch.setattr(prepare, "prepare", lambda *a, **k: 0.0)
    monkeypatch.setattr(tuning_tables, "write_tuning_summary", lambda *a, **k: None)
    inv = cli.build_invocation(cli.parse_args(["--profile", "default", "--data", "synthetic", "--no-progress"]))
    cache = RunCache()
    plan = plan_mod.data_set_plan(inv.profiles["synthetic"], "synthetic", inv.papers, cache)
    out = outcome.Outcome()
    cli.train_data_set(inv, plan, cache, out, {})
    assert not out.failed_data and len(out.failed_runs) == 4
    assert outcome.finish(inv, out, time.perf_counter()) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert err.count("run failed: synthetic triplet lr 0.002 seed 0: FileNotFoundError: /data/gone/images.npy") == 1
    summary = err[err.index("reproduce: FAILED —") :]
    assert "4 run(s): FileNotFoundError: /data/gone/images.npy (synthetic triplet lr 0.002 seed 0; " in summary
    assert "and 1 more)" in summary and "failures.log" in summary
    log = (tmp_path / "cache" / "failures.log").read_text()
    assert log.count("Traceback (most recent call last)") == 4
    man = json.loads((tmp_path / "results" / "manifest.json").read_text())
    assert len(man["failures"]["runs"]) == 4 and not man["failures"]["data_sets"]


def test_pilot_only_sets_its_variable_for_workers_and_kernels_and_leaves_the_readme_alone(tmp_path, monkeypatch):
    from reproduce.driver import cli as cli
    from reproduce.driver import ledger_files, outcome
    from reproduce.spec import power_seeds

    monkeypatch.setenv(power_seeds.PILOT_ONLY_ENV, "0")  # restored after the test: main sets it
    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path / "cache"))
    asked = []
    from coherent_itr import paths

    real = paths.writable_problem
    monkeypatch.setattr(paths, "writable_problem", lambda p: asked.append(Path(p)) or real(p))
    assert cli.main(["--pilot-only", "--data", "synthetic", "--verify-cache"]) == 0
    assert os.environ[power_seeds.PILOT_ONLY_ENV] == "1"
    assert asked[-1] == cli.ROOT / "results" / "pilot" / "study"  # the folder it writes is the one checked

    monkeypatch.setattr(outcome, "ROOT", tmp_path)
    readme_calls = []
    monkeypatch.setattr(ledger_files, "update_readme", lambda *a, **k: readme_calls.append(a))
    inv = cli.build_invocation(cli.parse_args(["--profile", "default", "--data", "synthetic", "--pilot-only"]))
    assert inv.pilot_only and inv.profiles["synthetic"].pilot_only and inv.profiles["flickr8k"].pilot_only
    assert outcome.finish(inv, outcome.Outcome(), time.perf_counter()) == 0
    assert readme_calls == []
    assert (tmp_path / "results" / "pilot" / "study" / "claims.csv").is_file()
    assert not (tmp_path / "results" / "claims.csv").exists()
