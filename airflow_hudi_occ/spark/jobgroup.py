"""Job-wide abort (beyond Hudi): one doomed task stops the whole Spark write job.

Hudi lets each executor task fail on an early conflict, and Spark retries it and keeps the
other tasks running. Here the write job runs in a job group from a helper thread, while the
driver watches the instant's abort signal (core ``abort_signal``), which an executor leaves
when it meets an :class:`EarlyConflictError` and which a sensor or an operator may leave from
outside. On a signal the driver cancels the job group at once, then waits until no task of
the group is still running (a killed Python worker may still be writing) before the caller
rolls the instant back from its markers.

``extra_check`` is a driver-side watcher (the async early-conflict checker): when it reports
a conflict, the driver leaves the abort signal itself (so tasks still running stop at their
next batch) and cancels the job group.

On Spark Connect there is no SparkContext in the client: the job is tagged instead
(``spark.addTag`` in the thread that runs it; Connect tags are per thread) and cancelled with
``spark.interruptTag``, which cancels the server-side jobs of every operation carrying the
tag; the write stage's progress comes from the server's execution progress (a progress
handler), and as the server's task list cannot be read from the client, the wait for a
cancelled job's tasks is the time by which Spark has killed their Python workers (its
monitor's poll plus ``spark.python.task.killTimeout``), see :class:`TaggedJob`. A stopped
driver (SIGTERM, Ctrl-C) raises the instant's abort signal before it cancels, so a task Spark
cancels without killing its worker stops at its next check.

Errors: :class:`JobAborted` carries the signal's content (the executor's error as a dict)
plus ``job_cancelled`` (the driver cancelled the job while it ran) and the write stage's task
counts at that moment; any other failure of the job is re-raised as it came from Spark.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from typing import Any, Callable

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.job_protocol import KILL_MARGIN_S, MONITOR_POLL_S, PYTHON_KILL_TIMEOUT_S, STOP_CANCEL_S


class JobAborted(Exception):
    def __init__(self, info: dict):
        self.info = info
        super().__init__(str(info.get("reason")))


class JobGroup:
    """A classic session's job group: set in the thread that runs the action, cancelled with
    the SparkContext, its tasks counted by the status tracker."""

    def __init__(self, spark, name: str, description: str):
        self.sc, self.name, self.description = spark.sparkContext, name, description

    def enter(self) -> None:
        self.sc.setJobGroup(self.name, self.description, interruptOnCancel=True)

    def leave(self) -> None:
        pass

    def progress(self) -> tuple[int, int]:
        return write_stage_progress(self.sc, self.name)

    def cancel(self) -> None:
        self.sc.cancelJobGroup(self.name)

    def wait_until_idle(self) -> None:
        wait_until_idle(self.sc, self.name)


class TaggedJob:
    """A Spark Connect session's operation tag (the client has no SparkContext): added in the
    thread that runs the action (Connect's tags are per thread), interrupted by tag, its
    write stage's progress taken from the server's execution progress reports."""

    def __init__(self, spark, name: str, description: str):
        self.spark, self.name = spark, name
        self.thread: threading.Thread | None = None
        self.counts = (0, 0)
        self.interrupted_at: float | None = None

    def __call__(self, stages, inflight_tasks, operation_id, done, **_) -> None:
        """The progress handler: Connect calls it in the thread running the operation; every
        thread's operations report to every handler, so only this job's thread is read."""
        if threading.current_thread() is self.thread and stages:
            last = max(stages, key=lambda s: s.stage_id)
            self.counts = (last.num_completed_tasks, last.num_tasks)

    def enter(self) -> None:
        self.thread = threading.current_thread()
        self.spark.addTag(self.name)
        if hasattr(self.spark, "registerProgressHandler"):  # PySpark 4.0+
            self.spark.registerProgressHandler(self)

    def leave(self) -> None:
        if hasattr(self.spark, "removeProgressHandler"):
            self.spark.removeProgressHandler(self)
        self.spark.removeTag(self.name)

    def progress(self) -> tuple[int, int]:
        return self.counts

    def cancel(self) -> None:
        self.interrupted_at = time.time()
        self.spark.interruptTag(self.name)

    def wait_until_idle(self) -> None:
        """After an interrupt, the time by which Spark has ended every cancelled task's Python
        worker, from the moment of it: each task's monitor thread looks for the interruption
        every :data:`MONITOR_POLL_S`, then gives the worker the kill timeout before it kills
        it (measured on a real server: workers sleeping in a task were gone 2.5 s after the
        interrupt). A worker busy in a file group may outlive the wait (its JVM task ended by the
        interrupt, Spark only closes its socket): the file it then makes is removed by the task
        itself (``abort_signal.remove_if_aborted``), or by the caller's sweep after its
        rollback."""
        if self.interrupted_at is None:
            return
        try:
            text = self.spark.conf.get("spark.python.task.killTimeout", None)
            wait = spark_seconds(text) if text else PYTHON_KILL_TIMEOUT_S
        except Exception:  # noqa: BLE001 - a server that does not say: Spark's default
            wait = PYTHON_KILL_TIMEOUT_S
        time.sleep(max(0.0, self.interrupted_at + MONITOR_POLL_S + wait + KILL_MARGIN_S - time.time()))


_UNITS_S = {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "d": 86400.0}


def spark_seconds(text: str) -> float:
    """A Spark time setting in seconds (``2s``, ``500ms``, ``1min``; a bare number: seconds,
    the unit of ``spark.python.task.killTimeout``). Raises ``ValueError`` on anything else."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*", str(text).lower())
    if m is None or m.group(2) not in ("", *_UNITS_S):
        raise ValueError(f"not a Spark time setting: {text!r}")
    return float(m.group(1)) * _UNITS_S.get(m.group(2) or "s", 1.0)


def job_handle(spark, name: str, description: str) -> "JobGroup | TaggedJob":
    from airflow_hudi_occ.spark.compat import is_connect
    return (TaggedJob if is_connect(spark) else JobGroup)(spark, name, description)


def run_watched(spark, table, instant: str, action: Callable[[], Any], *, poll_s: float = 0.1,
                description: str = "", extra_check: Callable[[], dict | None] | None = None,
                on_progress: Callable[[int, int], None] | None = None,
                progress_every_s: float = 1.0) -> Any:
    """Run ``action`` (a Spark action) under a fresh job group (a tag on Spark Connect);
    cancel it on an abort signal. ``on_progress(done, total)``: the write stage's task
    counts, about every ``progress_every_s`` while the job runs (the caller decides what to
    report)."""
    group = f"hudi-occ-{instant}-{uuid.uuid4().hex[:6]}"
    job = job_handle(spark, group, description or f"hudi write {instant}")
    box: dict = {}

    def target():
        try:
            job.enter()
            try:
                box["result"] = action()
            finally:
                job.leave()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    th = threading.Thread(target=target, name=f"hudi-write-{instant}", daemon=True)
    th.start()
    try:
        info, cancel = _watch(th, job, table, instant, poll_s, extra_check, on_progress, progress_every_s)
    except BaseException:
        # this process is being stopped (Ctrl-C, an orchestrator's kill): the job must not run
        # on without its driver, which a Spark Connect server would let it do; and the caller's
        # rollback must come after its tasks are gone, or a task still writing leaves its file
        # on the table after the rollback removed the others. The cancel is repeated until the
        # action's thread returns: an action submitted just after the first cancel (the thread
        # had not sent it yet) carries the tag too, and would otherwise run to its end. The
        # signal goes up first: a task Spark cancels but does not kill (Spark 4 closes a
        # cancelled task's socket; its Python worker, busy in a file group, runs on) stops at its
        # next check, and a file it creates meanwhile is removed by its writer (executor.py,
        # abort_signal.remove_if_aborted)
        try:
            abort_signal.raise_abort(table, instant, "the driver was stopped", source="spark-driver")
        except Exception:  # noqa: BLE001 - storage unreachable: the cancel still goes out
            pass
        deadline = time.time() + STOP_CANCEL_S
        while th.is_alive() and time.time() < deadline:
            job.cancel()
            th.join(1.0)
        job.wait_until_idle()
        raise
    th.join()
    if info is None:
        info = abort_signal.abort_reason(table, instant)  # the job failed because of it
    job.wait_until_idle()
    if info is not None:  # doomed even if every task happened to finish
        raise JobAborted({"job_cancelled": False, **info, **cancel})
    if "error" in box:
        raise box["error"]
    return box["result"]


def _watch(th, job, table, instant, poll_s, extra_check, on_progress, progress_every_s):
    """Until the job's thread ends or an abort signal is up (then the job is cancelled):
    ``(signal info or None, what the cancel found)``."""
    info = None
    cancel: dict = {}
    next_progress = time.time() + progress_every_s
    while th.is_alive():
        th.join(poll_s)
        if on_progress is not None and th.is_alive() and time.time() >= next_progress:
            next_progress = time.time() + progress_every_s
            on_progress(*job.progress())
        info = abort_signal.abort_reason(table, instant)
        if info is None and extra_check is not None:
            found = extra_check()
            if found is not None:
                abort_signal.raise_abort(table, instant, json.dumps(found), source="spark-driver")
                info = abort_signal.abort_reason(table, instant) or {"reason": json.dumps(found)}
        if info is not None:
            if th.is_alive():
                done, total = job.progress()
                job.cancel()
                cancel = {"job_cancelled": True, "tasks_done_at_cancel": done, "tasks_total": total}
            break
    return info, cancel


def write_stage_progress(sc, group: str) -> tuple[int, int]:
    """(finished, total) tasks of the group's last stage (the one that writes files)."""
    tracker = sc.statusTracker()
    done = total = 0
    for jid in tracker.getJobIdsForGroup(group):
        job = tracker.getJobInfo(jid)
        if job is None or not job.stageIds:
            continue
        st = tracker.getStageInfo(max(job.stageIds))
        if st is not None:
            done += st.numCompletedTasks + st.numFailedTasks
            total += st.numTasks
    return done, total


def wait_until_idle(sc, group: str, timeout_s: float = 60.0) -> None:
    """Until no task of the group runs; then the Python workers' kill timeout on top."""
    tracker = sc.statusTracker()
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        active = 0
        for jid in tracker.getJobIdsForGroup(group):
            job = tracker.getJobInfo(jid)
            if job is None:
                continue
            for sid in job.stageIds:
                st = tracker.getStageInfo(sid)
                if st is not None:
                    active += st.numActiveTasks
        if active == 0:
            return
        time.sleep(0.05)
