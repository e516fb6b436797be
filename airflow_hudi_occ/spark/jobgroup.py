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

Errors: :class:`JobAborted` carries the signal's content (the executor's error as a dict)
plus ``job_cancelled`` (the driver cancelled the job while it ran) and the write stage's task
counts at that moment; any other failure of the job is re-raised as it came from Spark.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any, Callable

from airflow_hudi_occ.core.concurrency import abort_signal


class JobAborted(Exception):
    def __init__(self, info: dict):
        self.info = info
        super().__init__(str(info.get("reason")))


def run_watched(spark, table, instant: str, action: Callable[[], Any], *, poll_s: float = 0.1,
                description: str = "", extra_check: Callable[[], dict | None] | None = None,
                on_progress: Callable[[int, int], None] | None = None,
                progress_every_s: float = 1.0) -> Any:
    """Run ``action`` (a Spark action) under a fresh job group; cancel it on an abort signal.
    ``on_progress(done, total)``: the write stage's task counts, about every
    ``progress_every_s`` while the job runs (the caller decides what to report)."""
    sc = spark.sparkContext
    group = f"hudi-occ-{instant}-{uuid.uuid4().hex[:6]}"
    box: dict = {}

    def target():
        try:
            sc.setJobGroup(group, description or f"hudi write {instant}", interruptOnCancel=True)
            box["result"] = action()
        except BaseException as e:  # noqa: BLE001 - handed to the caller's thread
            box["error"] = e

    th = threading.Thread(target=target, name=f"hudi-write-{instant}", daemon=True)
    th.start()
    info = None
    cancel: dict = {}
    next_progress = time.time() + progress_every_s
    while th.is_alive():
        th.join(poll_s)
        if on_progress is not None and th.is_alive() and time.time() >= next_progress:
            next_progress = time.time() + progress_every_s
            on_progress(*write_stage_progress(sc, group))
        info = abort_signal.abort_reason(table, instant)
        if info is None and extra_check is not None:
            found = extra_check()
            if found is not None:
                abort_signal.raise_abort(table, instant, json.dumps(found), source="spark-driver")
                info = abort_signal.abort_reason(table, instant) or {"reason": json.dumps(found)}
        if info is not None:
            if th.is_alive():
                done, total = write_stage_progress(sc, group)
                sc.cancelJobGroup(group)
                cancel = {"job_cancelled": True, "tasks_done_at_cancel": done, "tasks_total": total}
            break
    th.join()
    if info is None:
        info = abort_signal.abort_reason(table, instant)  # the job failed because of it
    wait_until_idle(sc, group)
    if info is not None:  # doomed even if every task happened to finish
        raise JobAborted({"job_cancelled": False, **info, **cancel})
    if "error" in box:
        raise box["error"]
    return box["result"]


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
