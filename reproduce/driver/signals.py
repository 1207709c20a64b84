"""Ctrl-C and SIGTERM in the driver: the first stops the work (finished runs stay cached) with one line, even when
it lands inside a finalizer; a second exits without waiting."""

from __future__ import annotations

import os
import signal
import sys
import threading

REDELIVER_S = 0.05  # a signal that arrived inside a finalizer is sent again after this many seconds


class Interrupted(KeyboardInterrupt):
    """Ctrl-C (SIGINT) or ``kill`` (SIGTERM) during the work: the worker processes are stopped, and the driver
    exits with 128 + the signal's number after one line saying how many planned runs are cached."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"signal {signum}")
        self.signum = signum


def _in_finalizer(frame) -> bool:
    """Whether an exception raised in ``frame`` would be lost: Python ignores one that escapes a ``__del__`` method
    anywhere up the stack (it prints "Exception ignored in …" and goes on, so a Ctrl-C would be swallowed)."""
    while frame is not None:
        if frame.f_code.co_name == "__del__":
            return True
        frame = frame.f_back
    return False


def interrupt(signum, frame):
    """The driver's handler of SIGINT and SIGTERM: raises :class:`Interrupted` (see the module docstring)."""
    if _in_finalizer(frame):  # deliver it again once the finalizer has returned, where it can stop the driver
        threading.Timer(REDELIVER_S, os.kill, (os.getpid(), signum)).start()
        return
    for s in (signal.SIGINT, signal.SIGTERM):  # a second Ctrl-C while the workers stop: exit without waiting
        signal.signal(s, _interrupt_again)
    raise Interrupted(signum)


def _interrupt_again(signum, frame):
    print("interrupted again: exiting without waiting for the running work; rerun to continue", file=sys.stderr)
    os._exit(128 + signum)  # worker processes and notebook kernels end with their parent
