"""Executing an instant scheduled earlier (clustering, compaction): adopt it, and run it
through the stages of a scheduled instant, written once for every service and engine.

A table service is planned under the lock as a requested instant with its plan; whoever
executes it later does not create an instant but *adopts* that one: under the table lock the
plan is read again, an inflight one is taken over only if its executor is dead, and the
heartbeat starts before the lock is released (as :meth:`WriteTransaction.begin` does for a
new instant). The snapshot is the table as the plan saw it: the conflict candidates are the
instants that completed after the plan was written and those still pending.

The services differ only in which instants they may adopt, how they read the plan, and how a
dead executor's leftovers go (clustering deletes its files; compaction rolls the instant back
to requested first); :class:`ScheduledInstantTransaction` asks its subclass for those.

The pipeline (:func:`run_scheduled`), beside the write pipeline (``core/commit/pipeline``)::

    adopt           the transaction: lock, the plan read again, heartbeat, "running" record
    inflight        an empty inflight file (as Java writes a clustering's and a compaction's)
    execute         the executor (:class:`ScheduledWork`): the plan's files, each behind its
                    marker (Arrow in this process, or Spark tasks); nothing committed
    before_commit   the caller's hook (tests hold an executor here so writers overlap it)
    commit          WriteTransaction.commit as a table service: conflict resolution under the
                    lock, the executor's schema, replaced file groups and extra metadata
    abort           any failure: the executor's ``failure`` names what the rollback records
                    and what is raised; the transaction rolls back (a clustering's plan goes
                    with it; a compaction returns to requested); then its ``after_abort``

An executor never calls the transaction's stages itself (``tests/test_pipelines.py``).

Errors: :class:`InstantStateError` when there is nothing to adopt, or a live executor holds it;
the lock's errors; whatever a stage raises, after the rollback (the executor may translate it).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.catalog.sync import check_sync_client
from airflow_hudi_occ.core.commit.pipeline import Failure, abort_and_raise, after_commit
from airflow_hudi_occ.core.commit.transaction import CommitResult, Snapshot, TransactionState, WriteTransaction
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat
from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.format.instant import Instant, State
from airflow_hudi_occ.core.format.metadata import WriteStat
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


@dataclass
class Executed:
    """What an executor wrote for a scheduled instant."""

    stats: list[WriteStat] = field(default_factory=list)
    #: partition -> the file ids a replacecommit replaces (clustering); None: none (compaction)
    replaced: dict[str, list[str]] | None = None


class ScheduledWork(ABC):
    """One executor's part in running one scheduled instant (:func:`run_scheduled` drives it):
    the transaction of its service, the work itself, and what the commit records."""

    #: the service's transaction (``ClusteringTransaction``, ``CompactionTransaction``)
    transaction_class: type[ScheduledInstantTransaction]
    #: extra commit metadata of this executor (Spark's clustering names its engine)
    extra_metadata: Mapping[str, str] | None = None

    def __init__(self, table, config, *, lock_manager=None, writer_id: str | None = None):
        self.table = table
        #: the service's config (``ClusteringConfig``, ``CompactionConfig``); its ``write``
        #: part configures the transaction
        self.config = config
        self.lock_manager = lock_manager
        self.writer_id = writer_id

    def transaction(self) -> ScheduledInstantTransaction:
        """A new transaction of the service, not yet adopted."""
        return self.transaction_class(self.table, self.config.write, lock_manager=self.lock_manager,
                                      writer_id=self.writer_id)

    @abstractmethod
    def execute(self, tx: ScheduledInstantTransaction, plan: Any) -> Executed:
        """Write what ``plan`` asks for (the instant is inflight), every file behind its marker."""

    def schema(self, tx: ScheduledInstantTransaction) -> str | None:
        """The schema the commit records (asked after ``before_commit``, right before the
        commit)."""
        return None

    def failure(self, tx: ScheduledInstantTransaction, error: BaseException) -> Failure:
        """What the rollback after ``error`` records and what is raised; default: the error as
        it came."""
        return Failure.of(error)

    def after_abort(self, tx: ScheduledInstantTransaction, failure: Failure) -> None:
        """After the rollback, whether or not it succeeded: what the executor undoes of its own."""


@dataclass
class ScheduledOutcome:
    """A scheduled instant run to its commit."""

    commit: CommitResult
    executed: Executed
    #: from adopting to the completed commit
    seconds: float


def run_scheduled(work: ScheduledWork, instant: str | None = None, *,
                  before_commit: Callable[[WriteTransaction], None] | None = None) -> ScheduledOutcome:
    """Adopt the scheduled ``instant`` (default: the earliest pending one of the service),
    execute it and commit it; on any failure roll it back and raise."""
    t0 = time.time()
    check_sync_client(work.config.write)
    tx = work.transaction()
    plan = tx.adopt(instant)
    try:
        tx.start_inflight(data=b"")  # Java's clustering and compaction inflight files are empty
        done = work.execute(tx, plan)
        if before_commit is not None:
            before_commit(tx)
        res = tx.commit(done.stats, schema=work.schema(tx), replaced=done.replaced,
                        extra_metadata=work.extra_metadata)
    except BaseException as e:
        abort_and_raise(tx, e, work.failure(tx, e), lambda f: work.after_abort(tx, f))
    # Outside the attempt: the instant is complete whatever the catalog sync does.
    return ScheduledOutcome(after_commit(work.table, work.config.write, res), done, time.time() - t0)


__all__ = ["ScheduledInstantTransaction", "ScheduledWork", "Executed", "ScheduledOutcome",
           "run_scheduled", "scheduled_snapshot"]
