"""Triggers: the early-conflict watch of a running write, and the deferrable write's job
(:class:`HudiWriteJobTrigger`, over ``provider/deferred_job.py``), polled in the triggerer.

Why in the triggerer: watching a write that may run for an hour must not hold a worker slot;
the check is a few listings of ``.hoodie`` (timeline, markers, heartbeats) every few seconds.
The check itself is :func:`~airflow_hudi_occ.provider.conflict_watch.check_instant` (pure ``core``, run in a thread so the triggerer's
event loop never blocks on storage):

- the watched instant completed, or disappeared (rolled back): the watch ends;
- its heartbeat expired: the writer is dead, nothing to save; the watch ends;
- else its file groups (planned in its inflight file, and its markers so far) are compared,
  with core's early-conflict detector, with (a) the markers of EARLIER live pending writers
  (of two overlapping writers only the later one fails) and (b) the file groups of writes that
  completed after it began (it would fail its commit-time check). On a conflict the engine's
  abort signal is raised (``core.abort_signal.raise_abort``) with the conflict as JSON: the
  Spark job stops before its next file or batch, rolls back and exits 75, and the write
  operator retries with a fresh instant.
"""

from __future__ import annotations

import asyncio
from typing import Any, AsyncIterator

from airflow.triggers.base import BaseTrigger, TriggerEvent

from airflow_hudi_occ.provider.conflict_watch import ABORT_SOURCE, check_instant  # noqa: F401


class HudiEarlyConflictTrigger(BaseTrigger):
    """Polls :func:`check_instant` until the write ends or is found doomed (then aborts it)."""

    def __init__(self, table_path: str, instant: str, options: dict | None = None,
                 storage_options: dict | None = None, poll_interval: float = 5.0):
        super().__init__()
        self.table_path = table_path
        self.instant = instant
        self.options = dict(options or {})
        self.storage_options = dict(storage_options or {})
        self.poll_interval = poll_interval

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_path": self.table_path, "instant": self.instant, "options": self.options,
                 "storage_options": self.storage_options, "poll_interval": self.poll_interval})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        while True:
            try:
                event = await asyncio.to_thread(check_instant, self.table_path, self.instant,
                                                self.options, self.storage_options)
            except Exception as e:  # noqa: BLE001 - reported to the sensor, which fails clearly
                yield TriggerEvent({"instant": self.instant, "status": "error",
                                    "message": f"{type(e).__name__}: {e}"})
                return
            if event is not None:
                yield TriggerEvent(event)
                return
            await asyncio.sleep(self.poll_interval)


class HudiWriteJobTrigger(BaseTrigger):
    """Follows a detached write job (``provider/deferred_job.py``) until it committed, lost a
    conflict or failed, and yields that outcome once.

    Each poll (:func:`~airflow_hudi_occ.provider.deferred_job.check_job`, in a thread) looks at
    the driver's liveness (pid and start time, on this host in client mode), the instant on the
    timeline, the job's attempt-log record and, for a driver elsewhere, the instant's heartbeat.

    Killing: :meth:`on_kill` (Airflow 3 calls it when a user marks or clears the deferred task)
    ends the job's whole process group; the pending instant stays for the next writer's lazy
    rollback. :meth:`cleanup` kills nothing: it also runs when the triggerer stops or hands the
    trigger to another triggerer, and the job must survive that.
    """

    def __init__(self, table_path: str, job: dict, options: dict | None = None,
                 storage_options: dict | None = None, poll_interval: float = 5.0,
                 begin_timeout_s: float = 900.0):
        super().__init__()
        self.table_path = table_path
        self.job = dict(job)
        self.options = dict(options or {})
        self.storage_options = dict(storage_options or {})
        self.poll_interval = poll_interval
        self.begin_timeout_s = begin_timeout_s

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_path": self.table_path, "job": self.job, "options": self.options,
                 "storage_options": self.storage_options, "poll_interval": self.poll_interval,
                 "begin_timeout_s": self.begin_timeout_s})

    def _detached(self):
        from airflow_hudi_occ.provider.deferred_job import DetachedJob
        return DetachedJob.from_json(self.job)

    async def run(self) -> AsyncIterator[TriggerEvent]:
        from airflow_hudi_occ.provider.deferred_job import FAILED, check_job
        job = self._detached()
        while True:
            try:
                event = await asyncio.to_thread(check_job, self.table_path, self.storage_options, job,
                                                self.options, self.begin_timeout_s)
            except Exception as e:  # noqa: BLE001 - the operator fails clearly with it
                event = {"status": FAILED, "instant": job.instant, "writer_id": job.writer_id,
                         "error": type(e).__name__, "message": f"following the job failed: {e}"}
            self.job["instant"] = job.instant
            if event is not None:
                yield TriggerEvent(event)
                return
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        job = self._detached()
        pids = await asyncio.to_thread(job.kill)
        self.log.info("the task was cancelled: killed the Spark job's process group %s; instant "
                      "%s is left for the next writer's rollback", pids, job.instant)
