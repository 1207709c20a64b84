"""Traps a new user walks into, each closed: an empty paper selection trains nothing, one default cache for
``make``, ``python -m reproduce`` and Lab, notebooks edited in Lab leave git clean, ``make lab ARGS=...``,
Ctrl-C / SIGTERM end with one line, a bad cache variable is named."""

from __future__ import annotations

import os
import subprocess
import sys

from pathlib import Path

import pytest
from lab_server import stop_group, wait_for_lab
from helpers import ROOT
from reproduce.protocol import plan as plan_mod


# ------------------------------------------------------------------------------------------------
# --papers data: the data card trains nothing
# ------------------------------------------------------------------------------------------------
class _RefusingExecutor:
    """An executor that records every call; the tests below expect none."""

    def __init__(self) -> None:
        self.calls: list[int] = []

    def run(self, configs, cache, bar=None, evaluate=True):
        self.calls.append(len(configs))
        return []


def test_an_empty_paper_list_tunes_nothing():
    """``ready_runs(papers=[])`` selects no paper: no tuning run, no final run, nothing to wait for (``None`` still
    means all)."""
    from coherent_itr.runs import RunCache

    from reproduce.protocol import pipeline, tuning
    from reproduce.protocol.study import profile_for

    profile = profile_for("default", "synthetic")
    assert tuning.tuning_configs(profile, None), "the default profile tunes: the check below would be vacuous"
    r = pipeline.ready_runs(profile, [], RunCache())
    assert r.tuning == [] and r.final == [] and r.chosen_all


def test_papers_data_trains_nothing_under_the_tuned_profile(monkeypatch, capsys):
    """``--papers data`` (the data card, no runs) under the tuned default profile: the plan is empty, the
    announcement says so, and training prepares nothing, runs no executor and writes no tuning summary."""
    from coherent_itr.runs import RunCache

    from reproduce.driver import cli as cli
    from reproduce.driver import executors, outcome
    from reproduce.present import tuning_tables
    from reproduce.protocol import prepare

    inv = cli.build_invocation(cli.parse_args(["--papers", "data", "--data", "synthetic", "--no-progress"]))
    executor = _RefusingExecutor()
    called = []
    monkeypatch.setattr(executors, "make_executor", lambda *a, **k: executor)
    monkeypatch.setattr(prepare, "prepare", lambda todo, progress: called.append(("prepare", len(todo))) or 0.0)
    monkeypatch.setattr(tuning_tables, "write_tuning_summary", lambda *a, **k: called.append(("summary", a[3:])))
    cache = RunCache()
    plan = plan_mod.data_set_plan(inv.profiles["synthetic"], "synthetic", inv.papers, cache)
    assert plan.tuned and plan.configs == [] and plan.todo == []
    cli.announce(inv, [plan])
    out = outcome.Outcome()
    assert cli.train_data_set(inv, plan, cache, out, {}) is None  # nothing trained: no fresh notebook execution
    assert executor.calls == [] and called == [] and out.runs_to_do == 0 and out.failed_runs == []
    said = capsys.readouterr().out
    assert "nothing to train (the selected papers train nothing)" in said
    assert "tuning done" not in said


# ------------------------------------------------------------------------------------------------
# One default cache; a bad cache variable is named
# ------------------------------------------------------------------------------------------------
def _env(drop=(), **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in drop}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), str(ROOT), env.get("PYTHONPATH", "")])
    env.update(extra)
    return env


_PRINT_CACHE = "from coherent_itr import paths; print(paths.cache_dir(create=False))"


def test_one_default_cache_for_make_the_driver_and_lab(tmp_path):
    """With ``$COHERENT_ITR_CACHE`` unset, a process started by ``make`` (as ``make reproduce`` and ``make lab``
    start theirs) and a plain ``python`` (``python -m reproduce``, a Lab kernel) resolve the same folder: the
    checkout's ``.cache/``, which ``python -m reproduce --help`` names."""
    env = _env(drop=("COHERENT_ITR_CACHE",))
    plain = subprocess.run([sys.executable, "-c", _PRINT_CACHE], env=env, capture_output=True, text=True, check=True)
    recipe = f"which-cache: ; @'{sys.executable}' -c '{_PRINT_CACHE}'"
    made = subprocess.run(
        ["make", "-s", "--no-print-directory", "-C", str(ROOT), "--eval", recipe, "which-cache"],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert plain.stdout.strip() == made.stdout.strip() == str(ROOT / ".cache")
    helped = subprocess.run(
        [sys.executable, "-m", "reproduce", "--help"],
        cwd=ROOT,
        env={**env, "COLUMNS": "100"},
        capture_output=True,
        text=True,
    )
    assert f"(now {ROOT / '.cache'};" in helped.stdout
    fake_jupyter = tmp_path / "jupyter"  # lab.sh execs $JUPYTER: here a stand-in asking the library
    fake_jupyter.write_text(f"#!/bin/sh\nexec '{sys.executable}' -c '{_PRINT_CACHE}'\n")
    fake_jupyter.chmod(0o755)
    lab = subprocess.run(
        ["bash", str(ROOT / "scripts" / "lab.sh")],
        env={**env, "JUPYTER": str(fake_jupyter)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert lab.stdout.strip() == plain.stdout.strip()


def test_an_unwritable_cache_variable_is_named_with_its_path():
    r = subprocess.run(
        [sys.executable, "-m", "reproduce", "--profile", "smoke"],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",), COHERENT_ITR_CACHE="/proc/x"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "$COHERENT_ITR_CACHE=/proc/x" in line and "/proc/x is not a writable folder" in line


def test_the_library_names_the_cache_variable_when_its_folder_cannot_be_made(monkeypatch):
    from coherent_itr import paths

    monkeypatch.setenv("COHERENT_ITR_CACHE", "/proc/x")
    with pytest.raises(OSError, match=r"/proc/x \(from \$COHERENT_ITR_CACHE=/proc/x\) cannot be created"):
        paths.cache_dir()
    with pytest.raises(OSError, match=r"from cache_dir=/proc/y\)"):
        paths.cache_dir("/proc/y")
    monkeypatch.delenv("COHERENT_ITR_CACHE")
    assert paths.cache_dir(create=False) == ROOT / ".cache" and "unset" in paths.cache_origin()


# ------------------------------------------------------------------------------------------------
# make lab ARGS="--port=... --no-browser"
# ------------------------------------------------------------------------------------------------
def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_make_lab_passes_args_to_jupyter():
    """``make lab ARGS="--port=P --no-browser ..."`` serves JupyterLab on port P (the venv is this test's
    interpreter's, its install stamp not remade). Stopped by its process group."""
    import json
    import urllib.request

    port = _free_port()
    venv = Path(sys.executable).parent.parent
    lab_args = f"--port={port} --no-browser --ServerApp.ip=127.0.0.1 --IdentityProvider.token= --ServerApp.password="
    proc = subprocess.Popen(
        ["make", "-s", "-C", str(ROOT), "-o", f"{venv}/.installed", "lab", f"VENV={venv}", f"ARGS={lab_args}"],
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    try:
        status = wait_for_lab(proc, port, 120)
        err = proc.stderr.read1(4000).decode() if proc.poll() is not None else ""
        assert status == 200, f"make lab did not serve /lab on port {port} (exit {proc.poll()}): {err}"
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/contents/", timeout=10) as r:
            names = {c["name"] for c in json.loads(r.read())["content"]}
        assert {"notebooks", "results"} <= names
    finally:
        stop_group(proc)


# ------------------------------------------------------------------------------------------------
# Notebooks under notebooks/ run in Lab leave git clean
# ------------------------------------------------------------------------------------------------
NOTEBOOK = "notebooks/07_explore.ipynb"


def _as_lab_saves_it(nb: dict) -> dict:
    """``nb`` after running every cell in Lab: outputs, execution counts, run timings, scroll state, widget
    state and the kernel's language details, as Lab's autosave writes them."""
    import copy

    nb = copy.deepcopy(nb)
    n = 0
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        n += 1
        cell["execution_count"] = n
        cell["outputs"] = [
            {"name": "stdout", "output_type": "stream", "text": [f"cell {n} ran\n"]},
            {"data": {"text/plain": [str(n)]}, "execution_count": n, "metadata": {}, "output_type": "execute_result"},
        ]
        cell["metadata"].update(
            {
                "execution": {"iopub.status.idle": "2026-01-01T00:00:00Z"},
                "ExecuteTime": {"end_time": "x"},
                "scrolled": True,
            }
        )
    nb["metadata"]["language_info"] = {
        "codemirror_mode": {"name": "ipython", "version": 3},
        "file_extension": ".py",
        "mimetype": "text/x-python",
        "name": "python",
        "nbconvert_exporter": "python",
        "pygments_lexer": "ipython3",
        "version": "3.11.7",
    }
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {"state": {}, "version_major": 2}}
    return nb


def _git(repo: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    cmd = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.org", *args]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=_env(), **kw)


def _repo_with_the_notebook(tmp_path: Path) -> Path:
    """A git repository holding this checkout's .gitattributes, .gitignore, scripts/ and one notebook source."""
    import shutil

    repo = tmp_path / "repo"
    (repo / "notebooks").mkdir(parents=True)
    shutil.copytree(ROOT / "scripts", repo / "scripts")
    for name in (".gitattributes", ".gitignore"):
        shutil.copy(ROOT / name, repo / name)
    shutil.copy(ROOT / NOTEBOOK, repo / NOTEBOOK)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-qm", "sources")
    return repo


def test_the_git_filter_stores_notebook_sources_without_outputs(tmp_path):
    """With the filter of ``make venv`` (scripts/git_filters.sh) configured, a notebook source saved with outputs
    has no diff and adding it stages nothing; an edit to a cell's source is staged without the outputs."""
    import json

    pytest.importorskip("nbstripout")
    repo = _repo_with_the_notebook(tmp_path)
    subprocess.run(["bash", str(repo / "scripts" / "git_filters.sh")], env=_env(PYTHON=sys.executable), check=True)
    committed = json.loads((repo / NOTEBOOK).read_text())
    ran = _as_lab_saves_it(committed)
    (repo / NOTEBOOK).write_text(json.dumps(ran, indent=1) + "\n")
    assert _git(repo, "diff", "--stat").stdout == ""
    _git(repo, "add", "-A")
    assert _git(repo, "status", "--porcelain").stdout == ""
    edited = next(c for c in ran["cells"] if c["cell_type"] == "code")
    edited["source"] = ["# an edit\n", *edited["source"]]
    (repo / NOTEBOOK).write_text(json.dumps(ran, indent=1) + "\n")
    _git(repo, "add", "-A")
    staged = json.loads(_git(repo, "show", f":{NOTEBOOK}").stdout)
    code = [c for c in staged["cells"] if c["cell_type"] == "code"]
    assert code[0]["source"][0] == "# an edit\n"
    assert all(c["outputs"] == [] and c["execution_count"] is None for c in code)
    assert staged["metadata"] == committed["metadata"]


@pytest.mark.slow
def test_lab_saves_notebook_sources_without_outputs(tmp_path):
    """scripts/lab.sh (``make lab``) saves a notebook under ``notebooks/`` through nbstripout: after Lab's
    autosave of a run notebook the file is byte-identical to the committed one and ``git status`` is clean;
    a source edit shows; a notebook elsewhere (``results/``) keeps its outputs."""
    import json
    import time
    import urllib.request

    pytest.importorskip("nbstripout")
    repo = _repo_with_the_notebook(tmp_path)
    committed = (repo / NOTEBOOK).read_bytes()
    port, token = _free_port(), "test-token"
    proc = subprocess.Popen(
        ["bash", str(repo / "scripts" / "lab.sh"), f"--port={port}", "--no-browser", "--ServerApp.ip=127.0.0.1"]
        + [f"--IdentityProvider.token={token}"],
        env=_env(JUPYTER=str(Path(sys.executable).parent / "jupyter")),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )

    def api(path: str, body: dict | None = None) -> dict:
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/contents/{path}",
            data=None if body is None else json.dumps(body).encode(),
            method="GET" if body is None else "PUT",
            headers={"Authorization": f"token {token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=20) as r:
            return json.loads(r.read())

    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                model = api(NOTEBOOK)
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    err = proc.stderr.read1(4000).decode() if proc.poll() is not None else ""
                    pytest.fail(f"JupyterLab did not start (exit {proc.poll()}): {err}")
                time.sleep(0.5)
        ran = _as_lab_saves_it(model["content"])
        api(NOTEBOOK, {"type": "notebook", "format": "json", "content": ran})
        assert (repo / NOTEBOOK).read_bytes() == committed
        assert _git(repo, "status", "--porcelain").stdout == ""
        (repo / "results" / "notebooks").mkdir(parents=True)
        api("results/notebooks/07_explore.ipynb", {"type": "notebook", "format": "json", "content": ran})
        kept = json.loads((repo / "results/notebooks/07_explore.ipynb").read_text())
        assert any(c.get("outputs") for c in kept["cells"])
        edited = next(c for c in ran["cells"] if c["cell_type"] == "code")
        edited["source"] = "# an edit\n" + "".join(edited["source"])
        api(NOTEBOOK, {"type": "notebook", "format": "json", "content": ran})
        assert _git(repo, "status", "--porcelain", "notebooks").stdout == f" M {NOTEBOOK}\n"
        saved = json.loads((repo / NOTEBOOK).read_text())
        assert all(not c.get("outputs") for c in saved["cells"]) and "# an edit" in json.dumps(saved)
    finally:
        stop_group(proc)


# ------------------------------------------------------------------------------------------------
# Ctrl-C / SIGTERM: one line, exit 130 / 143, nothing left behind
# ------------------------------------------------------------------------------------------------
N_TINY_RUNS, PRE_CACHED = 40, 2
_TINY_DRIVER = f"""
import sys
sys.path.insert(0, {str(ROOT / "tests")!r})

if __name__ == "__main__":  # the spawned workers import this file too: they only train
    from coherent_itr.config import Config
    from reproduce.driver import cli as driver
    from reproduce.driver import ledger_files
    from reproduce.present import tuning_tables
    from reproduce.protocol import pipeline, prepare, tuning
    from tiny_run import TINY

    # a tiny plan through the driver's own path (the smoke profile tunes): {N_TINY_RUNS} one-epoch toy runs
    cfgs = [Config(**TINY, seed=s) for s in range({N_TINY_RUNS})]
    tuning.tuning_configs = lambda profile, papers=None: cfgs
    tuning.tuned_plan = lambda profile, papers, cache, **k: cfgs
    pipeline.ready_runs = lambda profile, papers, cache, failed_keys=(), **k: pipeline.Ready(
        [], [c for c in cfgs if c.key() not in failed_keys and not cache.has(c)], 0
    )
    tuning_tables.write_tuning_summary = lambda *a, **k: None
    prepare.prepare = lambda *a, **k: 0.0
    ledger_files.collect = lambda *a, **k: None
    ledger_files.write_manifest = lambda *a, **k: None
    sys.exit(driver.main(["--profile", "smoke", "--data", "synthetic", "--skip-notebooks", "--workers", "2"]))
"""


@pytest.mark.parametrize("sig", ["SIGINT", "SIGTERM"])
def test_interrupt_ends_with_one_line_and_leaves_nothing_behind(tmp_path, sig):
    """The driver interrupted while two workers train a tiny plan: Ctrl-C (SIGINT to the whole process group, as
    a terminal sends it) or ``kill`` (SIGTERM to the driver only) ends it with exit status 128 + signal and one
    line naming the runs cached, without a traceback or a leaked-resource warning; no worker outlives it."""
    import signal
    import time

    from coherent_itr.config import Config
    from coherent_itr.runs import RunCache
    from tiny_run import TINY

    import psutil

    cache_root = Path(os.environ["COHERENT_ITR_CACHE"])
    for s in range(PRE_CACHED):  # cached before: counted, so the count is seen to be more than a constant
        RunCache(cache_root).get_or_train(Config(**TINY, seed=s), progress=False)
    script = tmp_path / "tiny_driver.py"
    script.write_text(_TINY_DRIVER)
    proc = subprocess.Popen(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 50
        while sum("spawn_main" in " ".join(c.cmdline()) for c in psutil.Process(proc.pid).children()) < 2:
            assert time.monotonic() < deadline and proc.poll() is None, "the driver started no workers in time"
            time.sleep(0.2)
        # a worker has trained a run: the signal lands inside real work, after a run's progress bar (tqdm)
        # created its lock — a cross-process semaphore there used to leak when the worker was stopped
        while sum(RunCache(cache_root).has_training(Config(**TINY, seed=s)) for s in range(N_TINY_RUNS)) <= PRE_CACHED:
            assert time.monotonic() < deadline and proc.poll() is None, "the workers trained no run in time"
            time.sleep(0.2)
        children = psutil.Process(proc.pid).children(recursive=True)  # the workers and multiprocessing's tracker
        signum = getattr(signal, sig)
        if signum == signal.SIGINT:
            os.killpg(proc.pid, signum)
        else:
            proc.send_signal(signum)
        out, err = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
    cached = sum(RunCache(cache_root).has_training(Config(**TINY, seed=s)) for s in range(N_TINY_RUNS))
    assert PRE_CACHED <= cached < N_TINY_RUNS, "the signal came too late to test anything"
    assert proc.returncode == 128 + signum, (proc.returncode, err)
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    bars = [ln for ln in lines if ln.startswith("training runs (now synthetic):")]  # the progress bar as it stood
    assert [ln for ln in lines if ln not in bars] == [f"interrupted: {cached} runs cached, rerun to continue"], err
    assert "Traceback" not in out and "leaked" not in out
    _, alive = psutil.wait_procs(children, timeout=5)  # the workers die with their driver
    assert [c for c in alive if c.status() != psutil.STATUS_ZOMBIE] == []


# ------------------------------------------------------------------------------------------------
# A Python without the study's environment
# ------------------------------------------------------------------------------------------------
def test_a_python_without_the_environment_is_told_to_use_the_venv():
    """``python3 -m reproduce`` from the checkout with a Python lacking the environment (here: site-packages off
    with ``-S``, the library's src/ not on the path) says what to run instead, in one line, exit status 2."""
    env = _env(drop=("FLICKR8K_DIR",))
    env["PYTHONPATH"] = str(ROOT)
    r = subprocess.run(
        [sys.executable, "-S", "-m", "reproduce", "--profile", "smoke"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2 and r.stdout == ""
    (line,) = r.stderr.strip().splitlines()
    assert "coherent_itr is not installed" in line and "make venv" in line and ".venv/bin/python -m reproduce" in line


_FINALIZER_DRIVER = """
import os, signal, sys, time
from reproduce.driver import cli as driver
class Group:  # like the object whose __del__ swallowed a Ctrl-C: the signal arrives while a finalizer runs
    def __del__(self):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.02)


def run(args, sets):
    Group()  # dropped at once: its __del__ runs here
    t = time.monotonic()
    while time.monotonic() - t < 10:  # the study's work, which the interrupt must stop
        time.sleep(0.01)
    print("not interrupted", flush=True)
    return 0


driver.run = run
driver.runs_cached = lambda configs: 0
for _ in range(20):  # 20 times in a row in one process: the handlers are put back after each
    t = time.monotonic()
    rc = driver.main(["--profile", "smoke", "--data", "synthetic", "--skip-notebooks"])
    print(f"{rc} {time.monotonic() - t:.2f}", flush=True)
"""


def test_a_ctrl_c_that_lands_in_a_finalizer_still_stops_the_driver(tmp_path):
    """Python ignores an exception that escapes a ``__del__``: a Ctrl-C whose handler raised there was swallowed and
    the study ran on. The driver sends such a signal again once the finalizer has returned: 20 times in a row it
    stops within seconds with its one line and exit status 130."""
    script = tmp_path / "finalizer_driver.py"
    script.write_text(_FINALIZER_DRIVER)
    proc = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    runs = [line.split() for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and len(runs) == 20, (proc.stdout, proc.stderr)
    assert all(rc == "130" and float(s) < 5 for rc, s in runs), runs
    assert "not interrupted" not in proc.stdout and "Exception ignored" not in proc.stderr
    assert proc.stderr.splitlines() == ["interrupted: 0 runs cached, rerun to continue"] * 20


_PHASE_DRIVER = """
import dataclasses, os, signal, sys, time
from coherent_itr.config import Config
from reproduce.driver import cli as driver, executors, notebooks
from reproduce.protocol import pipeline, plan as plan_mod, prepare
from reproduce.protocol.study import profile_for

PHASE = sys.argv[1]


def stall(*args, **kwargs):  # the phase's work: one SIGINT lands in it and must stop the driver within seconds
    os.kill(os.getpid(), signal.SIGINT)
    t = time.monotonic()
    while time.monotonic() - t < 10:
        time.sleep(0.01)
    print("not interrupted", flush=True)
    raise SystemExit(3)


class Stalling:  # an executor whose runs never end
    run = run_as_ready = staticmethod(stall)


def make_plan(profiles, papers, cache, workers, notebooks_s=0.0, runs_from=None):
    if PHASE == "planning":
        stall()
    todo = [] if PHASE == "notebooks" else [Config(data="toy", seed=0)]
    profile = profile_for("default", "synthetic")  # tunes
    if PHASE != "tuning":  # the runs known at once, no tuning phase
        profile = dataclasses.replace(profile, tuning=None)
    return plan_mod.Plan("smoke", [plan_mod.DataSetPlan("synthetic", profile, todo, todo)], workers, notebooks_s)


plan_mod.make_plan = make_plan
pipeline.ready_runs = stall  # what the tuning protocol can train now
prepare.prepare = stall if PHASE == "preparation" else (lambda todo, progress, later=(): 0.0)
prepare.prepare_analyses = lambda profile, data, progress=True: {}  # the notebooks' data: the test's world has none
executors.make_executor = lambda *a, **k: Stalling()
notebooks.execute_all = stall
driver.runs_cached = lambda configs: 0
for _ in range(20):  # 20 times in a row in one process: the handlers are put back after each
    t = time.monotonic()
    rc = driver.main(["--profile", "smoke", "--data", "synthetic", "--no-progress"])
    print(f"{rc} {time.monotonic() - t:.2f}", flush=True)
"""


@pytest.mark.parametrize("phase", ["planning", "tuning", "preparation", "training", "notebooks"])
def test_one_ctrl_c_stops_the_driver_in_every_phase_twenty_times_in_a_row(tmp_path, phase):
    """A SIGINT planted in each phase of the driver — planning, tuning, data preparation (caption embedding,
    featurisation), training, the notebooks — stops it within seconds with its one line and exit status 130, 20 times
    in a row (the intermittent swallowed Ctrl-C of a fresh clone's ``make smoke`` was one in several)."""
    script = tmp_path / "phase_driver.py"
    script.write_text(_PHASE_DRIVER)
    proc = subprocess.run(
        [sys.executable, str(script), phase],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",), COHERENT_ITR_CACHE=str(tmp_path / "cache")),
        capture_output=True,
        text=True,
        timeout=300,
    )
    runs = [line.split() for line in proc.stdout.splitlines() if line[:1].isdigit()]
    assert proc.returncode == 0 and len(runs) == 20, (proc.stdout[-2000:], proc.stderr[-2000:])
    assert all(rc == "130" and float(s) < 5 for rc, s in runs), runs
    assert "not interrupted" not in proc.stdout and "Traceback" not in proc.stderr
    said = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert said == ["interrupted: 0 runs cached, rerun to continue"] * 20, proc.stderr[-2000:]


_PACK_SCRIPT = """
import signal, sys, threading, time
from reproduce.driver import worker

signal.signal(signal.SIGINT, signal.default_int_handler)  # as the driver does: a SIGINT ignored by a parent shell

said = threading.Lock()  # one whole line per thread: print writes the text and its newline apart

def run(config_dict, *args):  # a run that lasts: the Ctrl-C lands inside it
    with said:
        print("started", flush=True)
    time.sleep(600)

worker.run_one = run
worker.run_pack([{"seed": 1}, {"seed": 2}], sys.argv[1], 1)
"""


def test_a_ctrl_c_stops_runs_side_by_side_in_the_drivers_own_process_at_once(tmp_path):
    """``--workers 1 --runs-per-worker K`` trains a pack in the driver's own process: a Ctrl-C there ends it at
    once (the runs' threads are daemons), instead of waiting for every run of the pack to finish."""
    import signal
    import time

    script = tmp_path / "pack.py"
    script.write_text(_PACK_SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "cache")],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert [proc.stdout.readline().strip() for _ in range(2)] == ["started", "started"]
        t0 = time.monotonic()
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert time.monotonic() - t0 < 30
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
    assert proc.returncode != 0 and "KeyboardInterrupt" in err


def test_after_a_ctrl_c_the_driver_exits_with_its_status_while_a_packs_runs_are_still_inside_torch(tmp_path):
    """Finalising the interpreter under a pack's daemon threads aborted in torch's C++ (exit status 134,
    "terminate called without an active exception"): ``python -m reproduce`` ends at once with the driver's status
    when such a thread is still alive, and returns normally when none is."""
    script = tmp_path / "left.py"
    script.write_text(
        "import sys, threading, time\n"
        "import torch\n"
        "from reproduce.__main__ import exit_now_if_runs_are_left\n"
        "from reproduce.driver.worker import RUN_THREAD\n"
        "exit_now_if_runs_are_left(3)  # no run left: returns\n"
        "x = torch.randn(256, 256)\n"
        "def work():\n"
        "    while True:\n"
        "        x @ x\n"
        "threading.Thread(target=work, name=RUN_THREAD + '0', daemon=True).start()\n"
        "time.sleep(0.5)\n"
        "print('left', flush=True)\n"
        "exit_now_if_runs_are_left(130)\n"
        "sys.exit(5)\n"
    )
    r = subprocess.run(
        [sys.executable, str(script)],
        cwd=ROOT,
        env=_env(drop=("FLICKR8K_DIR",)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 130 and r.stdout == "left\n", (r.returncode, r.stdout, r.stderr[-500:])
    assert "terminate called" not in r.stderr
