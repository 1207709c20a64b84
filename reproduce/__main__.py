"""``python -m reproduce``: the study's command line (:mod:`reproduce.driver.cli`)."""

import os
import sys

from reproduce.driver.cli import main


def exit_now_if_runs_are_left(status: int) -> None:
    """After a Ctrl-C, runs side by side in this process (``--workers 1 --runs-per-worker K``) may still be inside a
    torch operation in their daemon threads; finalising the interpreter under them aborts in torch's C++ ("terminate
    called without an active exception", exit status 134 instead of 130). What they had not stored is lost either
    way (the cache writes atomically), so the process ends at once with ``status``, its output flushed."""
    worker = sys.modules.get("reproduce.driver.worker")  # imported only where runs were trained or planned
    if worker is not None and worker.runs_left():
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(status)


if __name__ == "__main__":
    code = main()
    exit_now_if_runs_are_left(code)
    sys.exit(code)
