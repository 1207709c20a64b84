"""A two-node Ray cluster on this machine (head and worker started by ``ray start`` as separate
processes) runs a tiny plan through ``RayExecutor`` into a shared cache; the results equal a
local run bit for bit.

The cluster is stopped by signalling only the processes this test started (their process groups,
then any process whose command line names this test's private Ray temp folder) — never a broad
``ray stop``, which would also stop other Ray instances on a shared machine.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from coherent_itr import runs
from coherent_itr.config import Config
from tiny_run import TINY

pytestmark = pytest.mark.slow

START_TIMEOUT_S = 120
PLAN_TIMEOUT_S = 300
WORKER_START_ATTEMPTS = 3


def _free_ports(n: int) -> list[int]:
    socks = [socket.socket() for _ in range(n)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


def _node_ports() -> list[str]:
    names = (
        "--node-manager-port",
        "--object-manager-port",
        "--dashboard-agent-grpc-port",
        "--dashboard-agent-listen-port",
        "--metrics-export-port",
        "--runtime-env-agent-port",
    )
    return [a for name, port in zip(names, _free_ports(len(names))) for a in (name, str(port))]


def _pids_naming(marker: str) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) != os.getpid():
            try:
                if marker.encode() in (d / "cmdline").read_bytes():
                    out.append(int(d.name))
            except OSError:
                pass
    return out


def _stop(procs: list[subprocess.Popen], marker: str) -> None:
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for p in procs:
            try:
                os.killpg(p.pid, sig)  # each `ray start --block` leads its own session
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline and (_pids_naming(marker) or any(p.poll() is None for p in procs)):
            time.sleep(0.5)
        for pid in _pids_naming(marker):  # a Ray process that left our process group
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass


def test_two_node_ray_cluster_runs_a_plan_into_a_shared_cache(tmp_path):
    pytest.importorskip("ray")
    from reproduce.driver.executors import LocalExecutor

    ray_cli = Path(sys.executable).with_name("ray")
    if not ray_cli.is_file():
        pytest.skip(f"Ray's command-line tool is not installed next to {sys.executable}")
    temp = tempfile.mkdtemp(prefix="rc-", dir="/tmp")  # short: Ray's Unix socket paths must stay < 108 bytes
    (gcs_port,) = _free_ports(1)
    address = f"127.0.0.1:{gcs_port}"
    # a private token: token authentication on, and no other Ray instance's ~/.ray/auth_token involved
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(sys.path),
        "RAY_USAGE_STATS_ENABLED": "0",
        "RAY_AUTH_MODE": "token",
        "RAY_AUTH_TOKEN": secrets.token_hex(32),
        # the raylet waits for its Python agent; on a loaded 2-core machine that import took 43 s (> 30 s)
        "RAY_agent_register_timeout_ms": str(START_TIMEOUT_S * 1000),
    }
    # each node its own temp folder: two raylets in one session folder would share socket paths
    common = [
        "--block",
        "--num-cpus=1",
        "--num-gpus=0",
        "--disable-usage-stats",
        "--object-store-memory",
        str(100 * 2**20),
        "--node-ip-address",
        "127.0.0.1",
    ]
    # the reference: the same plan run locally (first, so it does not compete with the cluster's start-up)
    cfgs = [Config(**TINY, seed=s) for s in range(3)]
    local = runs.RunCache(tmp_path / "local")
    assert LocalExecutor(workers=1, progress=False).run(cfgs, local) == []
    # the shared cache starts with the yardsticks (Sentence-BERT embeddings, CIDEr) but no run
    shutil.copytree(tmp_path / "local", tmp_path / "shared", ignore=shutil.ignore_patterns("runs"))
    shared = runs.RunCache(tmp_path / "shared")
    logs = [open(tmp_path / f"{name}.log", "w") for name in ("head", "worker")]
    procs: list[subprocess.Popen] = []
    try:
        procs.append(
            subprocess.Popen(
                [
                    str(ray_cli),
                    "start",
                    "--head",
                    f"--port={gcs_port}",
                    "--include-dashboard=false",
                    "--temp-dir",
                    f"{temp}/h",
                    *common,
                    *_node_ports(),
                ],
                env=env,
                stdout=logs[0],
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        )
        _wait_for(lambda: _started(tmp_path / "head.log"), procs, tmp_path, "head node", temp)
        for attempt in range(WORKER_START_ATTEMPTS):
            # Ray waits a fixed 30 s (ray/_private/node.py) for a new raylet to register; on this shared 2-core
            # machine a worker sometimes misses it while the head is still busy starting: try again, boundedly
            procs.append(
                subprocess.Popen(
                    [
                        str(ray_cli),
                        "start",
                        f"--address={address}",
                        "--temp-dir",
                        f"{temp}/w{attempt}",
                        *common,
                        *_node_ports(),
                    ],
                    env=env,
                    stdout=logs[1],
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )
            try:
                _wait_for(lambda: _started(tmp_path / "worker.log"), procs, tmp_path, "worker node", temp)
                break
            except AssertionError:
                if attempt == WORKER_START_ATTEMPTS - 1 or procs[-1].poll() is None:
                    raise
                procs.pop()
        # the driver is a separate process too, as `python -m reproduce --executor ray` would be
        driver = subprocess.run(
            [sys.executable, "-c", _DRIVER, address, str(tmp_path / "shared"), json.dumps([c.to_dict() for c in cfgs])],
            env=env,
            capture_output=True,
            text=True,
            timeout=PLAN_TIMEOUT_S,
        )
        assert driver.returncode == 0, driver.stderr[-3000:]
        assert json.loads(driver.stdout.strip().splitlines()[-1]) == {"cpus": 2, "alive_nodes": 2, "failures": []}
        assert all(shared.has(c) for c in cfgs)
        for c in cfgs:
            a, b = shared.load(c), local.load(c)
            assert a.test == b.test
            for k in ("test_img", "test_cap"):
                np.testing.assert_array_equal(a.arrays[k], b.arrays[k])
    finally:
        _stop(procs, temp)
        for f in logs:
            f.close()
        shutil.rmtree(temp, ignore_errors=True)
    assert _pids_naming(temp) == []  # nothing of the cluster is left running


_DRIVER = """
import json, sys
import ray
from coherent_itr.config import Config
from coherent_itr.runs import RunCache
from reproduce.driver.executors import RayExecutor
address, root, cfgs = sys.argv[1], sys.argv[2], [Config.from_dict(d) for d in json.loads(sys.argv[3])]
ray.init(address=address, log_to_driver=False)
cpus = ray.cluster_resources().get("CPU")
alive = sum(n["Alive"] for n in ray.nodes())
failures = RayExecutor(address=address, progress=False).run(cfgs, RunCache(root))
ray.shutdown()
print(json.dumps({"cpus": cpus, "alive_nodes": alive, "failures": [str(f) for f in failures]}))
"""


def _started(log: Path) -> bool:
    return log.exists() and "Ray runtime started" in log.read_text()


def _wait_for(cond, procs, log_dir, what, temp):
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for p in procs:
            if p.poll() is not None:
                logs = "\n".join(
                    (log_dir / f"{n}.log").read_text()[-3000:]
                    for n in ("head", "worker")
                    if (log_dir / f"{n}.log").exists()
                )
                for f in sorted(Path(temp).glob("*/session_*/logs/*")):
                    if f.name in ("raylet.out", "gcs_server.out", "dashboard_agent.log", "raylet.err"):
                        lines = [ln for ln in f.read_text(errors="replace").splitlines() if " I " not in ln[:40]]
                        logs += f"\n--- {f}\n" + "\n".join(ln[:300] for ln in lines[-15:])
                raise AssertionError(f"`ray start` exited with {p.returncode} while waiting for the {what}:\n{logs}")
        try:
            if cond():
                return
        except Exception:  # noqa: BLE001 — the cluster is still starting
            pass
        time.sleep(1)
    raise AssertionError(f"the {what} did not come up within {START_TIMEOUT_S} s")


_AS_READY_DRIVER = """
import json, sys
import ray
from coherent_itr.config import Config
from coherent_itr.runs import RunCache
from reproduce.driver.executors import RayExecutor
temp, root, cfgs = sys.argv[1], sys.argv[2], [Config.from_dict(d) for d in json.loads(sys.argv[3])]
a, b = cfgs
cache = RunCache(root)
ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=temp)
asked = []

def ready(failed):
    asked.append(sorted(failed))
    if not cache.has_training(a):
        return [(a, False)]
    return [(c, True) for c in (a, b) if not cache.has(c)]

failures = RayExecutor(progress=False).run_as_ready(ready, cache)
again = lambda failed: [(b, False)] if not failed else []  # finishes, yet stays ready
stays = RayExecutor(progress=False).run_as_ready(again, RunCache(root + "2"))
ray.shutdown()
print(json.dumps({"failures": [str(f) for f in failures], "asked": len(asked), "stays": [f.error for f in stays]}))
"""


def test_ray_trains_runs_as_they_become_ready(tmp_path):
    """``RayExecutor.run_as_ready`` on a local Ray instance: seed 0 trains first (training only), then it is evaluated
    and seed 1 trains; every run once, the numbers those of a local run; a run that finishes yet stays ready is a
    failure, not a loop."""
    pytest.importorskip("ray")
    from reproduce.driver.executors import LocalExecutor

    temp = tempfile.mkdtemp(prefix="ra-", dir="/tmp")  # short: Ray's Unix socket paths must stay < 108 bytes
    cfgs = [Config(**TINY, seed=s) for s in range(2)]
    local = runs.RunCache(tmp_path / "local")
    assert LocalExecutor(workers=1, progress=False).run(cfgs, local) == []
    shutil.copytree(tmp_path / "local", tmp_path / "ray", ignore=shutil.ignore_patterns("runs"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), "RAY_USAGE_STATS_ENABLED": "0"}
    try:
        driver = subprocess.run(
            [
                sys.executable,
                "-c",
                _AS_READY_DRIVER,
                temp,
                str(tmp_path / "ray"),
                json.dumps([c.to_dict() for c in cfgs]),
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=PLAN_TIMEOUT_S,
        )
        assert driver.returncode == 0, driver.stderr[-3000:]
        got = json.loads(driver.stdout.strip().splitlines()[-1])
    finally:
        _stop([], temp)
        shutil.rmtree(temp, ignore_errors=True)
    assert got["failures"] == [] and got["asked"] <= 5
    assert len(got["stays"]) == 1 and "finished, yet the protocol asks for it again" in got["stays"][0]
    shared = runs.RunCache(tmp_path / "ray")
    for c in cfgs:
        assert shared.load(c).test == local.load(c).test
