"""A loopback server in a child process, for tests and benches: started, waited for until it
answers, stopped within a bound, and what it wrote to stderr kept for the error that names why
it did not start.

Why a file and not a pipe for stderr: a server that logs more than a pipe's buffer while nobody
reads it blocks on its next write, and every request it serves hangs with it (the S3 tests'
"hudi-rs hangs for 180 s", docs/reliability.md). Used by :class:`~.s3.S3Server` and
:class:`~.latency_proxy.LatencyProxy`.
"""

from __future__ import annotations

import subprocess
import tempfile
import time
from typing import Callable


class ServerProcess:
    """``args`` run as a child process (in ``env``, default this process's environment); :meth:`start` returns once ``ready()`` stops raising
    ``OSError`` (the server answers), and raises ``RuntimeError`` naming ``what`` and the tail of
    its stderr when it exits first or does not answer within ``timeout_s``."""

    def __init__(self, args: list[str], *, what: str, ready: Callable[[], object], timeout_s: float,
                 poll_s: float = 0.1, env: dict[str, str] | None = None):
        self.args, self.what, self.ready, self.env = args, what, ready, env
        self.timeout_s, self.poll_s = timeout_s, poll_s
        self.proc: subprocess.Popen | None = None
        self._stderr = None

    def start(self) -> None:
        self._stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(self.args, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                     env=self.env)
        deadline = time.monotonic() + self.timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.what} exited: {self.errors()[-2000:]}")
            try:
                self.ready()
                return
            except OSError:
                time.sleep(self.poll_s)
        tail = self.errors()[-2000:]
        self.stop()
        raise RuntimeError(f"{self.what} did not answer within {self.timeout_s:.0f}s: {tail}")

    def stop(self) -> None:
        """Terminate, then kill after 10 s; close the stderr file."""
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
            self.proc = None
        if self._stderr is not None:
            self._stderr.close()
            self._stderr = None

    def errors(self) -> str:
        """What the server wrote to stderr so far."""
        if self._stderr is None:
            return ""
        self._stderr.seek(0)
        return self._stderr.read().decode(errors="replace")


__all__ = ["ServerProcess"]
