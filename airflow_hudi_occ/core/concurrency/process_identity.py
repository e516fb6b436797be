"""Which process this is (host, pid, start time), and whether a recorded one is provably gone.

Why the start time: pids are reused. A lock file that names pid 4242 on this host proves
nothing once 4242 is some other program; the pid together with the time its process started
does. Why "provably": a process on another host cannot be seen from here, so the answer there
is "unknown", and a caller that would take something over must then wait for an expiry instead.
"Here" is the host name *and* the pid namespace (Linux: the inode of ``/proc/self/ns/pid``):
containers sharing the host's name (host networking) each have their own pids, and a pid that
is free in ours may be a live writer in theirs.

psutil (installed with the provider) reads the start time; without it the check falls back
to ``os.kill(pid, 0)``, which tells "no such process" from "alive" (a reused pid counts as
alive: the safe side).

Errors: none; every question that cannot be answered is answered "unknown" (None).
"""

from __future__ import annotations

import errno
import os
import socket
from dataclasses import dataclass

try:  # optional for the core library: the provider's extra installs it
    import psutil
except ImportError:  # pragma: no cover - exercised only without the provider extra
    psutil = None

#: psutil derives start times from clock ticks since boot: equal starts agree far closer
START_TIME_TOLERANCE_S = 0.05


def _pid_namespace() -> str | None:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:  # not Linux, or /proc not mounted: the host name alone must do
        return None


def _start_time(pid: int) -> float | None:
    if psutil is None:
        return None
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return None


@dataclass(frozen=True)
class ProcessIdentity:
    host: str
    pid: int
    #: epoch seconds the process started (None: not recorded)
    started_at: float | None = None
    #: the pid namespace its pid belongs to (None: not recorded)
    pid_namespace: str | None = None

    @classmethod
    def current(cls) -> "ProcessIdentity":
        return cls(socket.gethostname(), os.getpid(), _start_time(os.getpid()), _pid_namespace())

    @property
    def is_here(self) -> bool:
        if self.host != socket.gethostname():
            return False
        return self.pid_namespace is None or self.pid_namespace == _pid_namespace()

    def alive(self) -> bool | None:
        """True or False for a process on this host; None for one elsewhere (cannot tell).

        A zombie (killed, not yet reaped by its parent) is dead: it can never release anything.
        """
        if not self.is_here:
            return None
        if psutil is not None:
            try:
                p = psutil.Process(self.pid)
                if p.status() == psutil.STATUS_ZOMBIE:
                    return False
                if self.started_at is not None and \
                        abs(p.create_time() - self.started_at) > START_TIME_TOLERANCE_S:
                    return False  # the pid now belongs to another process
                return True
            except psutil.NoSuchProcess:
                return False
            except psutil.Error:  # e.g. AccessDenied: it exists
                return True
        try:
            os.kill(self.pid, 0)
        except OSError as e:
            return e.errno != errno.ESRCH
        return True


__all__ = ["ProcessIdentity", "START_TIME_TOLERANCE_S"]
