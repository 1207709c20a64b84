"""The command line ``python -m reproduce``: bad inputs give one line on stderr and exit status 2
before any work; every option has help; ``--help`` imports nothing heavy; ``--data auto`` says
which data sets it found and why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from lab_server import stop_group, wait_for_lab
from helpers import ROOT


def _run(args, env_extra=None, drop=(), timeout=60):
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env["COLUMNS"] = "100"  # help wraps the same everywhere
    env.update(env_extra or {})
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout)


def _fake_release(root: Path, judgements=True) -> Path:
    """A valid three-image release (one image a split, 5 captions each)."""
    import numpy as np
    from PIL import Image

    from coherent_itr.data import flickr8k as f8

    (root / "images").mkdir(parents=True)
    for s, name in (("train", "1_a.jpg"), ("dev", "2_b.jpg"), ("test", "3_c.jpg")):
        Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "images" / name)
        (root / f8.SPLIT_FILES[s]).write_text(name + "\n")
    caps = [f"{n}#{k}\tA caption ." for n in ("1_a.jpg", "2_b.jpg", "3_c.jpg") for k in range(5)]
    (root / f8.TOKEN_FILE).write_text("\n".join(caps) + "\n")
    if judgements:
        (root / f8.EXPERT_FILE).write_text("3_c.jpg\t3_c.jpg#0\t4\t4\t4\n")
        (root / f8.CROWD_FILE).write_text("3_c.jpg\t3_c.jpg#1\t1.0\t3\t0\n")
    return root


@pytest.mark.parametrize(
    "args, says",
    [
        (["--profile", "nope"], "invalid choice: 'nope'"),
        (["--data", "nope"], "invalid data set 'nope'"),
        (["--data", "synthetic,flickr9k"], "invalid data set 'flickr9k'"),
        (["--papers", "bcls,nope"], "invalid paper 'nope'"),
        (["--executor", "slurm"], "invalid choice: 'slurm'"),
        (["--workers", "0"], "expected an integer ≥ 1 or 'auto', got '0'"),
        (["--workers", "many"], "expected an integer ≥ 1 or 'auto', got 'many'"),
        (["--engine", "fast"], "invalid choice: 'fast'"),
        (["--engine", "pack", "--executor", "ray"], "pack trains packs in local workers"),
        (["--engine", "pack", "--runs-per-worker", "2"], "pack trains packs in local workers"),
        (["--pack-width", "0"], "--pack-width"),
    ],
)
def test_bad_argument_is_one_line_and_exit_2(args, says):
    r = _run(["-m", "reproduce", *args])
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and says in lines[0] and lines[0].startswith("python -m reproduce: error:")
    assert r.stdout == ""  # nothing planned, nothing run


def test_bad_flickr8k_dir_is_an_error_naming_it_not_a_silent_skip(tmp_path):
    r = _run(["-m", "reproduce", "--profile", "smoke"], {"FLICKR8K_DIR": str(tmp_path / "typo")})
    assert r.returncode == 2 and r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and str(tmp_path / "typo") in lines[0] and "FLICKR8K_DIR" in lines[0]
    # a folder that is not a release: every missing part named
    (tmp_path / "empty").mkdir()
    r = _run(["-m", "reproduce", "--data", "flickr8k"], {"FLICKR8K_DIR": str(tmp_path / "empty")})
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "images" in line and "Flickr8k.token.txt" in line and "Flickr_8k.trainImages.txt" in line


def test_flickr8k_requested_without_its_variable():
    r = _run(["-m", "reproduce", "--data", "flickr8k"], drop=("FLICKR8K_DIR",))
    assert r.returncode == 2
    (line,) = r.stderr.strip().splitlines()
    assert "FLICKR8K_DIR" in line


def test_unwritable_cache_is_reported_before_any_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")  # a folder cannot be made under a file (even as root)
    r = _run(
        ["-m", "reproduce", "--profile", "smoke"],
        {"COHERENT_ITR_CACHE": str(blocker / "cache")},
        drop=("FLICKR8K_DIR",),
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert str(blocker / "cache") in line and "not a writable folder" in line


def test_help_imports_nothing_heavy_and_documents_every_option():
    r = _run(["-X", "importtime", "-m", "reproduce", "--help"])
    assert r.returncode == 0
    imported = {ln.split("|")[-1].strip() for ln in r.stderr.splitlines() if ln.startswith("import time:")}
    assert not {"torch", "pandas", "papermill", "coherent_itr.runs", "coherent_itr.config"} & imported
    for words in (
        "results/flickr8k/",
        "manifest.json",
        "README.md",
        "COHERENT_ITR_CACHE",
        "FLICKR8K_DIR",
        "(default: default)",
        "(default: auto)",
    ):
        assert words in r.stdout
    from reproduce.driver.arguments import build_parser

    for action in build_parser()._actions:
        assert action.help and len(action.help) > 15, action.dest


def test_cli_choices_match_the_study():
    from reproduce.driver import arguments
    from reproduce.spec import experiments, profiles

    assert set(arguments.PAPERS) == set(experiments.PAPERS) | {"data"}
    assert set(arguments.build_parser()._option_string_actions["--profile"].choices) == set(profiles.PROFILES)
    from coherent_itr import runs

    assert arguments.RUNS_FROM_ENV == runs.RUNS_FROM_ENV  # kept apart so that --help never imports torch
    assert arguments.ENGINE_ENV == runs.ENGINE_ENV
    from coherent_itr import packed

    assert arguments.DEFAULT_PACK_WIDTH == packed.DEFAULT_WIDTH


@pytest.mark.parametrize(
    "argv, machine, setting",
    [
        ([], None, "auto:8"),
        ([], "cpu-AuthenticAMD-AVX2-torch2.13.0-0dc32781", "solo"),  # reading the committed CPU runs: their engine
        (["--engine", "solo"], None, "solo"),
        (["--engine", "pack", "--pack-width", "16"], None, "pack:16"),
        (["--engine", "pack"], "cuda-sm90-torch2.11.0-0", "pack:8"),  # a GPU machine's packed runs, read back
    ],
)
def test_the_engine_each_invocation_sets_for_workers_and_notebooks(argv, machine, setting):
    from reproduce.driver.arguments import engine_setting, parse_args

    args = parse_args(argv)
    assert engine_setting(args.engine, args.pack_width, machine) == setting


def test_data_auto_says_what_it_found_and_why(tmp_path, monkeypatch):
    from reproduce.driver import cli as cli
    from reproduce.driver import preflight

    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    sets, why = preflight.resolve_data_sets(cli.parse_args([]).data_sets)
    assert sets == ["synthetic"] and any("not set" in w for w in why)
    rel = _fake_release(tmp_path / "f8k", judgements=False)
    monkeypatch.setenv("FLICKR8K_DIR", str(rel))
    sets, why = preflight.resolve_data_sets(cli.parse_args([]).data_sets)
    assert sets == ["synthetic", "flickr8k"]
    assert any(str(rel) in w and "ExpertAnnotations.txt" in w for w in why)
    sets, _ = preflight.resolve_data_sets(cli.parse_args(["--data", "synthetic"]).data_sets)
    assert sets == ["synthetic"]


def test_runs_side_by_side_are_refused_on_cuda_where_they_fail(monkeypatch):
    """``--runs-per-worker K`` on a CUDA machine is refused before any work, naming the measurement and what to use
    instead; on the CPU (one thread a run) it is accepted."""
    import torch

    from reproduce.driver import cli as cli
    from reproduce.driver import preflight
    from reproduce.spec.profiles import get_profile

    monkeypatch.setenv("COHERENT_ITR_THREADS", "1")
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    args = cli.parse_args(["--runs-per-worker", "4", "--data", "synthetic"])
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    with pytest.raises(cli.UsageError, match=r"--runs-per-worker 4: on CUDA.*cuDNN.*--workers N"):
        cli.build_invocation(args)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert cli.build_invocation(args).data_sets == ("synthetic",)
    assert preflight.validate(get_profile("default"), ["synthetic"], None, 4)[0] == ["synthetic"]


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_command_serves_the_repository_root_as_this_user():
    """scripts/lab.sh (what `make lab` runs) starts JupyterLab — as root too — rooted at the repository:
    /lab answers 200 and results/ and notebooks/ are listed by the contents API. Stopped by its process group."""
    import urllib.request

    port = _free_port()
    env = {**os.environ, "JUPYTER": str(Path(sys.executable).parent / "jupyter")}
    proc = subprocess.Popen(
        [
            "bash",
            str(ROOT / "scripts" / "lab.sh"),
            f"--port={port}",
            "--no-browser",
            "--ServerApp.ip=127.0.0.1",
            "--IdentityProvider.token=",
            "--ServerApp.password=",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        status = wait_for_lab(proc, port, 90)
        err = proc.stderr.read1(4000) if proc.poll() is not None else ""
        assert status == 200, f"JupyterLab did not serve /lab (exit {proc.poll()}): {err}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/", timeout=10) as r:
            names = {c["name"] for c in json.loads(r.read())["content"]}
        assert {"notebooks", "results", "README.md"} <= names
    finally:
        stop_group(proc)


def test_progress_bars_in_executed_notebooks_are_widgets_not_warnings(tmp_path):
    """ipywidgets is in the pinned environment: tqdm.auto in a papermill-executed notebook renders a
    widget instead of printing ``TqdmWarning: IProgress not found`` into the committed notebook."""
    import nbformat
    import papermill as pm

    nb = nbformat.v4.new_notebook(
        cells=[
            nbformat.v4.new_code_cell("from tqdm.auto import tqdm\nfor _ in tqdm(range(3), desc='encoding'):\n    pass")
        ]
    )
    nbformat.write(nb, tmp_path / "in.ipynb")
    pm.execute_notebook(
        str(tmp_path / "in.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3", progress_bar=False
    )
    outputs = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    text = json.dumps(outputs)
    assert "TqdmWarning" not in text and "IProgress" not in text
    assert any("application/vnd.jupyter.widget-view+json" in o.get("data", {}) for o in outputs)


def test_a_bad_line_in_the_release_stops_the_driver_before_any_work(tmp_path):
    """A caption file with a malformed line is found while checking the inputs (file and line named),
    not after the runs have been planned and the data set prepared."""
    from coherent_itr.data import flickr8k as f8

    rel = _fake_release(tmp_path / "f8k")
    caps = (rel / f8.TOKEN_FILE).read_text().splitlines()
    caps[7] = "2_b.jpg#2 no tab here"
    (rel / f8.TOKEN_FILE).write_text("\n".join(caps) + "\n")
    r = _run(["-m", "reproduce", "--profile", "smoke", "--data", "flickr8k"], {"FLICKR8K_DIR": str(rel)})
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "Flickr8k.token.txt: line 8: malformed caption line" in line


def test_notebook_kernels_connect_over_ipc_in_a_private_folder_without_the_tcp_warning(tmp_path, capfd):
    """The driver's kernels talk over Unix sockets in a temporary folder (removed afterwards), so ipykernel's
    "running over TCP without encryption" warning no longer fills the driver's log."""
    import nbformat
    import papermill as pm

    from reproduce.driver.notebooks import ipc_kernel_config

    code = "from ipykernel.kernelapp import IPKernelApp\napp = IPKernelApp.instance()\nprint(app.transport, app.ip)"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code)]), tmp_path / "in.ipynb")
    with ipc_kernel_config() as config:
        folder = Path(config.KernelManager.ip).parent
        assert folder.is_dir()
        pm.execute_notebook(
            str(tmp_path / "in.ipynb"),
            str(tmp_path / "out.ipynb"),
            kernel_name="python3",
            progress_bar=False,
            config=config,
        )
    transport, ip = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs[0]["text"].split()
    assert transport == "ipc" and Path(ip).parent == folder
    assert not folder.exists()
    assert "without encryption" not in capfd.readouterr().err


def test_a_warning_about_the_release_is_printed_once_by_the_driver_and_never_by_a_worker(capsys):
    """The driver's log had each Flickr8k warning up to four times: from two places of the preparation and once
    per worker, each with its source line — twice even under the driver's "once" rule, after a library put a
    "default" filter in front. Now: one line, no source line. Another warning stays as it was."""
    import uuid
    import warnings

    from coherent_itr.data.flickr8k import Flickr8kWarning
    from reproduce.driver.preflight import data_warnings_once

    text = f"Flickr8k.token.txt: skipped the captions of a missing image ({uuid.uuid4().hex})"

    def from_one_place():
        warnings.warn(text, Flickr8kWarning, stacklevel=1)

    def from_another_place():
        warnings.warn(text, Flickr8kWarning, stacklevel=1)

    with warnings.catch_warnings():
        warnings.simplefilter("default")  # Python's default: once per place, so twice here without the driver's rule
        data_warnings_once()
        from_one_place()
        warnings.simplefilter("default")  # a library's filter in front of the driver's "once"
        from_another_place()
        from_one_place()
        warnings.warn("another warning", UserWarning, stacklevel=1)
    err = capsys.readouterr().err
    assert err.count(text) == 1 and f"warning: {text}\n" in err and "warnings.warn(" not in err
    code = (
        "import os, warnings\n"
        "from coherent_itr.data.flickr8k import Flickr8kWarning\n"
        "from reproduce.driver.worker import init_worker\n"
        "init_worker(os.getppid())\n"
        "warnings.warn('release note', Flickr8kWarning)\n"
        "warnings.warn('another warning', UserWarning)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert "release note" not in r.stderr and "another warning" in r.stderr


def test_with_every_tuning_run_cached_the_driver_trains_only_the_final_runs(monkeypatch):
    """A plan (``reproduce.protocol.plan``) that found every tuning run cached: the pipeline names only the final runs
    not in the cache, and the driver hands the executor those and no tuning run, counting them once."""
    from coherent_itr.config import Config

    from reproduce.driver import cli, executors, outcome
    from reproduce.present import tuning_tables
    from reproduce.protocol import pipeline, prepare
    from reproduce.protocol import plan as plan_mod
    from reproduce.protocol.study import profile_for

    tuned = [Config(data="toy", seed=s) for s in range(3)]
    cached = {tuned[0].key()}  # the chosen seed-0 run: evaluated already

    class Cache:
        def has(self, c):
            return c.key() in cached

        def has_training(self, c):
            return c.key() in cached

        def counts(self, todo):
            done = sum(c.key() in cached for c in todo)
            return {"cached": done, "to_train": len(todo) - done}

    class Executor:
        ran: list = []

        def run_as_ready(self, ready, cache, bar=None):
            while todo := [(c, evaluate) for c, evaluate in ready(set()) if c.key() not in cached]:
                for c, evaluate in todo:
                    self.ran.append((c.key(), evaluate))
                    cached.add(c.key())
            return []

    def ready_runs(profile, papers, cache, failed_keys=(), **k):  # every tuning run cached: only final runs
        return pipeline.Ready([], [c for c in tuned if not cache.has(c)], 0)

    executor = Executor()
    monkeypatch.setattr(executors, "make_executor", lambda *a, **k: executor)
    monkeypatch.setattr(prepare, "prepare", lambda todo, progress, later=(): 0.0)
    monkeypatch.setattr(tuning_tables, "write_tuning_summary", lambda *a, **k: None)
    monkeypatch.setattr(pipeline, "ready_runs", ready_runs)
    est = plan_mod.DataSetEstimate("synthetic", [], tuned[1:], 2, 0.0, True, final_plan=tuned)
    plan = plan_mod.DataSetPlan("synthetic", profile_for("default", "synthetic"), [], [], None, est)
    inv = cli.build_invocation(cli.parse_args(["--data", "synthetic", "--no-progress"]))
    out = outcome.Outcome()
    asked = {}  # the interrupt's channel: every run the protocol found beyond the plan's
    assert cli.train_data_set(inv, plan, Cache(), out, asked) is not None  # something trained: notebooks fresh
    assert executor.ran == [(c.key(), True) for c in tuned[1:]] and out.runs_to_do == 2 and not out.failed_runs
    assert set(asked) == {c.key() for c in tuned[1:]} and plan.todo == []  # counted there, the plan unchanged


def test_workers_auto_is_one_per_core_on_a_cpu_and_up_to_16_sharing_a_gpu():
    """``--workers auto`` on planted devices: a CPU gives one worker per core at the run's threads; a CUDA device
    one process per CPU core, at most ``GPU_WORKERS`` (16: measured on one H200, docs/cluster.md)."""
    from reproduce.driver import cli, executors

    assert cli.parse_args(["--workers", "auto"]).workers == "auto"
    assert cli.parse_args(["--workers", "AUTO"]).workers == "auto"
    assert cli.parse_args(["--workers", "3"]).workers == 3
    assert executors.auto_workers(cuda=False, cores=2, threads=1)[0] == 2
    assert executors.auto_workers(cuda=False, cores=16, threads=4)[0] == 4
    assert executors.auto_workers(cuda=False, cores=1, threads=4)[0] == 1  # never 0
    assert executors.auto_workers(cuda=True, cores=16)[0] == 16
    assert executors.auto_workers(cuda=True, cores=64)[0] == executors.GPU_WORKERS == 16
    assert executors.auto_workers(cuda=True, cores=8)[0] == 8
    n, why = executors.auto_workers(cuda=True, cores=64)
    assert "CUDA" in why and str(executors.GPU_WORKERS) in why


def test_main_resolves_the_profile_once_and_hands_down_one_frozen_invocation(tmp_path, monkeypatch, capsys):
    """A dry run walked from ``main``: the profile is resolved once (``get_profile``, wherever a module bound it),
    the plan reads the invocation's profiles, and the invocation cannot be changed downstream."""
    import dataclasses

    from reproduce.driver import cli
    from reproduce.spec import profiles

    monkeypatch.setenv("COHERENT_ITR_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FLICKR8K_DIR", raising=False)
    monkeypatch.delenv("COHERENT_ITR_RUNS_FROM", raising=False)
    real, calls, built = profiles.get_profile, [], []

    def counted(*a, **k):
        calls.append(a)
        return real(*a, **k)

    for mod in list(sys.modules.values()):
        if getattr(mod, "__name__", "").startswith("reproduce") and getattr(mod, "get_profile", None) is real:
            monkeypatch.setattr(mod, "get_profile", counted)
    build = cli.build_invocation
    monkeypatch.setattr(cli, "build_invocation", lambda args: built.append(build(args)) or built[-1])
    assert cli.main(["--profile", "smoke", "--data", "synthetic", "--dry-run", "--no-progress"]) == 0
    assert calls == [("smoke",)]
    (inv,) = built
    assert inv.run_profiles() == {"synthetic": real("smoke")} and inv.profiles["flickr8k"].data == "flickr8k"
    with pytest.raises(dataclasses.FrozenInstanceError):
        inv.workers = 3
    assert "reproduce [smoke/synthetic]" in capsys.readouterr().out
