"""Holding a Java writer at its commit: the tests take Java's file-system lock
(``.hoodie/lock``) as soon as Java's instant is inflight, so Java writes its markers and data
files and then waits for the lock, alive, for as long as the test needs a live Java writer."""

from __future__ import annotations

import os
import time
from contextlib import contextmanager


def pending_inflight(path: str) -> list[str]:
    """Instants with ``<t>.inflight`` and no completed ``<t>_<c>.commit`` (timeline layout 2
    keeps the requested and inflight files of completed instants)."""
    names = os.listdir(os.path.join(path, ".hoodie", "timeline"))
    done = {n.split("_")[0] for n in names if "_" in n and n[:1].isdigit()}
    return [n.split(".")[0] for n in names if n.endswith(".inflight") and n.split(".")[0] not in done]


@contextmanager
def java_held_at_its_commit(run, path: str, timeout_s: float = 120):
    """Take Java's lock file once ``run``'s instant is inflight; yields the deadline (monotonic
    seconds) for the test's own waits; gives the lock back on exit."""
    lock_file = os.path.join(path, ".hoodie", "lock")
    deadline = time.monotonic() + timeout_s
    held = False
    try:
        while not held:
            assert run.proc.poll() is None, run.log_tail()
            assert time.monotonic() < deadline, run.log_tail()
            if pending_inflight(path):
                try:
                    os.close(os.open(lock_file, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                    held = True
                except FileExistsError:
                    pass
            time.sleep(0.01)
        yield deadline
    finally:
        if held:
            os.remove(lock_file)
