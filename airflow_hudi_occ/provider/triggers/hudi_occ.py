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

from airflow_hudi_occ.provider.conflict_watch import check_instant


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


class HudiAdmissionTrigger(BaseTrigger):
    """Waits, in the triggerer, until a deferrable write's admission request is admitted
    (``provider/admission.py``: no live writer shares its partitions, no request ahead of it)
    or ``timeout_s`` passed, then yields once: ``{"status": "admitted" | "timeout",
    "request_id", "waited_s", "waited_for"}``. Each look refreshes the request (a waiter
    whose triggerer died is forgotten after the request's ttl). On kill the request is
    withdrawn."""

    def __init__(self, table_path: str, request_id: str, options: dict | None = None,
                 storage_options: dict | None = None, poll_interval: float = 2.0,
                 timeout_s: float = 900.0, starvation_s: float = 600.0, started_at: float = 0.0):
        super().__init__()
        self.table_path = table_path
        self.request_id = request_id
        self.options = dict(options or {})
        self.storage_options = dict(storage_options or {})
        self.poll_interval = poll_interval
        self.timeout_s = timeout_s
        self.starvation_s = starvation_s
        self.started_at = started_at

    def serialize(self) -> tuple[str, dict[str, Any]]:
        return (f"{type(self).__module__}.{type(self).__qualname__}",
                {"table_path": self.table_path, "request_id": self.request_id, "options": self.options,
                 "storage_options": self.storage_options, "poll_interval": self.poll_interval,
                 "timeout_s": self.timeout_s, "starvation_s": self.starvation_s,
                 "started_at": self.started_at})

    async def run(self) -> AsyncIterator[TriggerEvent]:
        import time

        from airflow_hudi_occ.provider.admission import look
        started = self.started_at or time.time()
        waited_for: list[str] = []
        while True:
            try:
                seen = await asyncio.to_thread(look, self.table_path, self.storage_options,
                                               self.request_id, self.options, self.starvation_s)
            except Exception as e:  # noqa: BLE001 - a wait must not fail the write: go, OCC decides
                seen = {"admitted": True, "blockers": [], "error": f"{type(e).__name__}: {e}"}
            for b in seen["blockers"]:
                if b not in waited_for:
                    waited_for.append(b)
            timed_out = not seen["admitted"] and time.time() - started >= self.timeout_s
            if seen["admitted"] or timed_out:
                yield TriggerEvent({"status": "timeout" if timed_out else "admitted",
                                    "request_id": self.request_id, "waited_for": waited_for,
                                    "waited_s": round(time.time() - started, 3),
                                    "blockers": seen["blockers"], "error": seen.get("error")})
                return
            await asyncio.sleep(self.poll_interval)

    async def on_kill(self) -> None:
        from airflow_hudi_occ.provider.admission import withdraw
        await asyncio.to_thread(withdraw, self.table_path, self.storage_options, self.request_id)
