"""The child-process server helper behind S3Server and LatencyProxy: a server that dies at
start is named with what it wrote; one that never answers is stopped after the bound."""

from __future__ import annotations

import sys

import pytest

from airflow_hudi_occ.testing.server_process import ServerProcess


def never_ready():
    raise ConnectionRefusedError("not yet")


def test_a_server_that_exits_at_start_is_named_with_its_stderr():
    server = ServerProcess([sys.executable, "-c", "import sys; sys.stderr.write('port taken'); sys.exit(3)"],
                           what="toy server", ready=never_ready, timeout_s=30, poll_s=0.01)
    with pytest.raises(RuntimeError, match="toy server exited: port taken"):
        server.start()
    server.stop()


def test_a_server_that_never_answers_is_stopped_after_the_bound():
    server = ServerProcess([sys.executable, "-c", "import time; time.sleep(60)"], what="toy server",
                           ready=never_ready, timeout_s=0.5, poll_s=0.05)
    with pytest.raises(RuntimeError, match="toy server did not answer within"):
        server.start()
    assert server.proc is None  # terminated and reaped, not left running


def test_a_ready_server_keeps_running_until_stopped():
    server = ServerProcess([sys.executable, "-c", "import time; time.sleep(60)"], what="toy server",
                           ready=lambda: None, timeout_s=5)
    server.start()
    proc = server.proc
    assert proc.poll() is None
    server.stop()
    assert proc.poll() is not None and server.proc is None
