"""The Spark jobs with the test harness around them: crash points and a commit barrier.

Production code reads no test switch. Tests that need a job to die at a point of the commit
protocol (``HUDI_OCC_CRASH_AT``, see :mod:`airflow_hudi_occ.testing.crash`) or to wait before
its commit until N writers got there (``HUDI_OCC_TEST_COMMIT_BARRIER=<dir>:<n>``, so that
concurrency tests provably overlap; ``<dir>:<n>:begin`` waits until N attempts have *begun*
instead, for writers whose early conflict detection may stop one before its commit: waiting
for it there would hold the other until the barrier's deadline), or to wait right after its
instant is requested until the test lets it go (``HUDI_OCC_TEST_HOLD_AFTER_BEGIN=<file>``:
it writes ``<file>.began`` holding its instant, then waits until ``<file>`` exists; a race
whose later writer must be inside its write job when this one plans and writes) run this
file instead of the engine's job, with the same
arguments: by path under spark-submit (or the operators' ``application=`` /
``$HUDI_OCC_SPARK_APPLICATION``), or as ``python -m airflow_hudi_occ.testing.spark_job``.
A command line with ``--service`` goes to the table-service job, any other to the write job.
"""

from __future__ import annotations

import os
import sys
import time

if __package__ in (None, ""):  # run as a file by spark-submit
    sys.path.insert(0, os.path.abspath(os.path.join(os.path.dirname(__file__), "..", "..")))

from airflow_hudi_occ.spark import job, service_job  # noqa: E402
from airflow_hudi_occ.testing.crash import CRASH_ENV, install  # noqa: E402

BARRIER_ENV = "HUDI_OCC_TEST_COMMIT_BARRIER"
#: how long a writer waits at the barrier at most (seconds, default 300): a test whose writer
#: may first wait for admission behind a long job gives it longer
BARRIER_TIMEOUT_ENV = "HUDI_OCC_TEST_COMMIT_BARRIER_TIMEOUT_S"
PATH = os.path.abspath(__file__)


def commit_barrier():
    """``before_commit`` that holds the writer until ``n`` writers have reached their commit."""
    spec = os.environ.get(BARRIER_ENV)
    if not spec:
        return None
    folder, n, mode = _barrier_spec(spec)

    def wait(tx):
        os.makedirs(folder, exist_ok=True)
        if mode != "begin":
            open(os.path.join(folder, tx.instant_time), "w").close()
        deadline = time.time() + float(os.environ.get(BARRIER_TIMEOUT_ENV) or 300)
        while len(os.listdir(folder)) < n and time.time() < deadline:
            time.sleep(0.05)
    return wait


def _barrier_spec(spec: str) -> tuple[str, int, str]:
    folder, _, rest = spec.partition(":")
    n, _, mode = rest.partition(":")
    return folder, int(n), mode or "commit"


HOLD_ENV = "HUDI_OCC_TEST_HOLD_AFTER_BEGIN"


def hold_after_begin(go: str):
    """``on_begin`` that says the instant (in ``<go>.began``) and waits for the file ``go``."""
    def began(tx):
        job.announce_begin(tx)
        with open(go + ".began.tmp", "w") as f:
            f.write(tx.instant_time)
        os.replace(go + ".began.tmp", go + ".began")
        deadline = time.time() + float(os.environ.get(BARRIER_TIMEOUT_ENV) or 300)
        while not os.path.exists(go) and time.time() < deadline:
            time.sleep(0.02)
    return began


def begin_marker():
    """``on_begin`` for the ``begin`` barrier mode: each attempt leaves a file when it begins
    (or, with ``HUDI_OCC_TEST_HOLD_AFTER_BEGIN``, waits to be let go)."""
    if os.environ.get(HOLD_ENV):
        return hold_after_begin(os.environ[HOLD_ENV])
    spec = os.environ.get(BARRIER_ENV)
    if not spec or _barrier_spec(spec)[2] != "begin":
        return job.announce_begin
    folder = _barrier_spec(spec)[0]

    def began(tx):
        job.announce_begin(tx)
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, tx.instant_time), "w").close()
    return began


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(CRASH_ENV):
        install()
    if "--service" in argv:
        return service_job.main(argv, before_commit=commit_barrier())
    return job.main(argv, before_commit=commit_barrier(), on_begin=begin_marker())


if __name__ == "__main__":
    sys.exit(main())
