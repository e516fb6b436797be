"""Executing an instant scheduled earlier (clustering, compaction): adopt it, once for both.

A table service is planned under the lock as a requested instant with its plan; whoever
executes it later does not create an instant but *adopts* that one: under the table lock the
plan is read again, an inflight one is taken over only if its executor is dead, and the
heartbeat starts before the lock is released (as :meth:`WriteTransaction.begin` does for a
new instant). The snapshot is the table as the plan saw it: the conflict candidates are the
instants that completed after the plan was written and those still pending.

The services differ only in which instants they may adopt, how they read the plan, and how a
dead executor's leftovers go (clustering deletes its files; compaction rolls the instant back
to requested first); :class:`ScheduledInstantTransaction` asks its subclass for those.

Errors: :class:`InstantStateError` when there is nothing to adopt, or a live executor holds it;
the lock's errors.
"""

from __future__ import annotations

import time

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.transaction import Snapshot, TransactionState, WriteTransaction
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat
from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.format.instant import Instant, State
from airflow_hudi_occ.core.table.timeline import Timeline
from airflow_hudi_occ.core.table.write_guard import prepare_for_write


def scheduled_snapshot(timeline: Timeline, instant_time: str) -> Snapshot:
    """The snapshot of an instant scheduled at ``instant_time``: the writes completed before
    it (the newest of them is the last completed write), and every other instant pending now
    or completed after it (the conflict candidates)."""
    done_before = [i for i in timeline.completed()
                   if i.is_write and (i.completion_time or i.requested_time) < instant_time]
    return Snapshot(
        last_completed=max(done_before, key=lambda i: i.requested_time) if done_before else None,
        pending_at_start=frozenset(
            i.requested_time for i in timeline if i.requested_time != instant_time and (
                i.is_pending or (i.completion_time or i.requested_time) > instant_time)),
        completed_at_start=frozenset(i.requested_time for i in done_before))


class ScheduledInstantTransaction(WriteTransaction):
    """A :class:`WriteTransaction` that adopts a scheduled instant instead of creating one;
    :meth:`adopt` takes the place of :meth:`begin`, the rest (inflight, markers, commit,
    abort) is the transaction's own."""

    #: what the service calls its plans (in messages)
    service = "table service"

    def __init__(self, table, config=None, **kw):
        super().__init__(table, config, is_table_service=True, **kw)
        self.plan = None

    # -- what a service supplies -----------------------------------------------------------

    def check_table(self) -> None:
        """Refuse a table this service does not run on (before anything is read)."""

    def before_lock(self, instant_time: str | None) -> str | None:
        """Work done before the lock is taken; returns the instant to adopt (None: the
        earliest pending)."""
        return instant_time

    def pick(self, timeline: Timeline, instant_time: str | None) -> Instant:
        """The pending instant to adopt, read under the lock."""
        raise NotImplementedError

    def resume_inflight(self, instant: Instant) -> None:
        """An inflight instant: its executor is dead (its leftovers are removed here), or this
        raises :class:`InstantStateError`. Runs under the lock."""
        raise InstantStateError(f"{self.service} {instant.requested_time} is being executed by a "
                                "live executor", instant=instant.requested_time,
                                remedy="wait for it, or run another plan")

    def read_plan(self, timeline: Timeline, instant: Instant):
        """The instant's plan, as scheduled."""
        raise NotImplementedError

    # -- adopting ----------------------------------------------------------------------------

    def adopt(self, instant_time: str | None = None):
        """Take over the scheduled instant ``instant_time`` (default: the earliest pending);
        returns its plan."""
        if self.state is not TransactionState.NEW:
            raise InstantStateError(f"transaction already {self.state}", remedy="start a new one")
        self.check_table()
        self.table.require_writable()
        self._resolve_parts()
        instant_time = self.before_lock(instant_time)
        with self.lock_manager.locked():
            prepare_for_write(self.table, self.config, files_writer=True)  # its commit keeps the listing
            timeline = self.table.timeline()
            inst = self.pick(timeline, instant_time)
            t = inst.requested_time
            if inst.state is State.INFLIGHT:
                self.resume_inflight(inst)
            self.plan = self.read_plan(timeline, inst)
            self.instant = Instant(t, self.action, State.REQUESTED)
            self.started_at = time.time()
            # A "running" record names the executor (DAG, task) while it works, as a write's
            # begin does: the timeline page and the writers waiting on it say who it is.
            # Written before the beat, so whoever sees it live (admission) can name it.
            rec = self._attempt_record()
            rec.outcome = attempt_log.RUNNING
            attempt_log.write_record(self.table, rec)
            # started before the lock is released: no one sees it adopted without a live beat
            self.heartbeat = Heartbeat(self.table, t, self.config.heartbeat).start()
        self.snapshot = scheduled_snapshot(timeline, t)
        self.state = TransactionState.REQUESTED
        return self.plan


__all__ = ["ScheduledInstantTransaction", "scheduled_snapshot"]
