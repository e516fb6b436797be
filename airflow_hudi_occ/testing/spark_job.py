"""The Spark jobs with the test harness around them: crash points and a commit barrier.

Production code reads no test switch. Tests that need a job to die at a point of the commit
protocol (``HUDI_OCC_CRASH_AT``, see :mod:`airflow_hudi_occ.testing.crash`) or to wait before
its commit until N writers got there (``HUDI_OCC_TEST_COMMIT_BARRIER=<dir>:<n>``, so that
concurrency tests provably overlap; ``<dir>:<n>:begin`` waits until N attempts have *begun*
instead, for writers whose early conflict detection may stop one before its commit: waiting
for it there would hold the other until the barrier's deadline), or to
wait once its plan is made, before it goes inflight and declares its file groups
(``HUDI_OCC_TEST_HOLD_AFTER_PLAN=<file>``: ``<file>.planned`` holds its instant; a race whose
later writer must pass its checks before its write job and then meet this one's markers
inside it, whatever the machine's load) run this
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

from airflow_hudi_occ.core.job_protocol import emit_progress  # noqa: E402
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


def begin_marker():
    """``on_begin`` for the ``begin`` barrier mode: each attempt leaves a file when it begins."""
    spec = os.environ.get(BARRIER_ENV)
    if not spec or _barrier_spec(spec)[2] != "begin":
        return job.announce_begin
    folder = _barrier_spec(spec)[0]

    def began(tx):
        job.announce_begin(tx)
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, tx.instant_time), "w").close()
    return began


PLAN_HOLD_ENV = "HUDI_OCC_TEST_HOLD_AFTER_PLAN"


def hold_after_plan(go: str):
    """``(on_begin, on_progress)`` that say the instant (in ``<go>.planned``) once its plan is
    made (the write's "tagging" step, before it goes inflight: no file group of it is declared
    yet, no marker written) and wait there for the file ``go``."""
    state: dict = {}

    def began(tx):
        job.announce_begin(tx)
        state["instant"] = tx.instant_time

    def progress(stage: str, text: str) -> None:
        emit_progress(stage, text)
        if stage == "tagging" and "held" not in state:
            state["held"] = True
            with open(go + ".planned.tmp", "w") as f:
                f.write(state["instant"])
            os.replace(go + ".planned.tmp", go + ".planned")
            deadline = time.time() + float(os.environ.get(BARRIER_TIMEOUT_ENV) or 300)
            while not os.path.exists(go) and time.time() < deadline:
                time.sleep(0.02)
    return began, progress


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if os.environ.get(CRASH_ENV):
        install()
    if "--service" in argv:
        return service_job.main(argv, before_commit=commit_barrier())
    if os.environ.get(PLAN_HOLD_ENV):
        began, progress = hold_after_plan(os.environ[PLAN_HOLD_ENV])
        return job.main(argv, before_commit=commit_barrier(), on_begin=began, on_progress=progress)
    return job.main(argv, before_commit=commit_barrier(), on_begin=begin_marker())


if __name__ == "__main__":
    sys.exit(main())
