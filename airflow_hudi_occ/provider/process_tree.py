"""Ending a Spark submission whole: spark-submit, its JVM and the Python driver.

spark-submit runs as the leader of its own session, so its process group holds the tree; but a
child may leave the group, and once spark-submit dies its children are re-parented and can no
longer be found from it. So the descendants are listed *before* the first signal, and each of
them is signalled besides the group.
"""

from __future__ import annotations

import os
import signal

import psutil


def kill_session_tree(root: psutil.Process, grace_s: float = 5.0) -> list[int]:
    """SIGTERM ``root``'s process group and every descendant, SIGKILL what outlives
    ``grace_s``; returns the pids that were running."""
    try:
        procs = [root] + root.children(recursive=True)
    except psutil.Error:
        procs = [root]
    pids = [p.pid for p in procs]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(root.pid, sig)  # the session leader's pid is the group id
        except (ProcessLookupError, PermissionError):
            pass
        for p in procs:
            try:
                p.send_signal(sig)
            except psutil.Error:
                pass
        _, procs = psutil.wait_procs(procs, timeout=grace_s if sig == signal.SIGTERM else 5)
        if not procs:
            break
    return pids


__all__ = ["kill_session_tree"]
