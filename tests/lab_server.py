"""JupyterLab started as a subprocess by the tests: wait until it serves, and stop its process group."""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.request


def wait_for_lab(proc: subprocess.Popen, port: int, timeout_s: float) -> int | None:
    """The HTTP status of ``/lab`` on ``port`` once the server answers; ``None`` when ``proc`` exits or
    ``timeout_s`` passes first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/lab", timeout=5) as r:
                return r.status
        except OSError:
            time.sleep(0.5)
    return None


def stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (started with ``start_new_session=True``), SIGKILL after 15 s."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)
