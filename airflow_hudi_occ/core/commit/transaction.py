"""The OCC write transaction, as an explicit staged pipeline.

::

    begin()                under the table lock: new instant time, <t>.<action>.requested,
       |                   heartbeat started; snapshot = last completed write + pending set
    start_inflight()       <t>.inflight (or <t>.<action>.inflight)
       |
    create_marker() ...    per data file: abort signal? early conflict check, then the marker
       |                   (the engine writes the file after the marker exists)
    commit(stats)          with a batch key: stage the complete commit (pre-commit, see
       |                   recovery.py) -> own heartbeat alive? -> a metadata table kept: its
       |                   records computed and its log files written (before the lock) ->
       |                   table lock -> reload timeline (kept for the hold) -> still pending,
       |                   not being rolled back? -> batch key already committed? -> conflict
       |                   resolution -> the metadata table's deltacommit (requested,
       |                   inflight, completed; a log file whose records moved written again)
       |                   -> lock still held? -> completed file (create-if-absent) -> the
       |                   metadata table's services -> release lock -> delete markers and
       |                   the staged commit -> stop heartbeat
    abort()                stop heartbeat, roll the instant back from its markers

    take_over(staged)      recovery: adopt a dead writer's staged instant under the lock (fresh
                           heartbeat), then commit_metadata() completes it as above

Errors: :class:`WriteConflictError` / :class:`EarlyConflictError` / :class:`WriteAbortedError`
/ :class:`LockAcquireTimeoutError` / :class:`LockLostError` are retryable (derive from
``RetryableError``): the caller
aborts this transaction and starts a new one with a fresh instant time. A retry never reuses
an instant time (a re-commit by recovery.py completes the *same* instant; it is not a retry of
the write). :class:`HeartbeatExpiredError` and :class:`LockLostError` mean the commit was not
completed; an engine rolls the attempt back (or leaves it to lazy rollback) before retrying. :class:`BatchAlreadyCommittedError` (not
retryable, not a conflict) means the batch key is already in a completed instant: this attempt
was rolled back and there is nothing to do.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field, replace
from enum import StrEnum
from typing import Callable, Iterable, Mapping

from airflow_hudi_occ.core.concurrency import abort_signal, nbcc

from airflow_hudi_occ.core.commit import attempt_log
from airflow_hudi_occ.core.commit.archival import archive_if_needed
from airflow_hudi_occ.core.commit.rollback import rollback_instant, rollback_pending_writes
from airflow_hudi_occ.core.commit.staging import delete_staged, stage_commit
from airflow_hudi_occ.core.concurrency.conflict import resolve_write_conflicts, strategy_from_config
from airflow_hudi_occ.core.concurrency.operation import ConcurrentOperation
from airflow_hudi_occ.core.concurrency.early_conflict.detector import create_detector, get_detection_strategy
from airflow_hudi_occ.core.concurrency.locks import table_lock_manager
from airflow_hudi_occ.core.concurrency.markers.names import IOType
from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.concurrency.footprint import (REQUEST_LABEL, TABLE_SERVICE, Footprint, check_kind,
                                                        declares_at_begin)
from airflow_hudi_occ.core.config import FailedWritesPolicy, WriteConfig
from airflow_hudi_occ.core.errors import (BatchAlreadyCommittedError, HudiOccError, InstantRolledBackError,
                     InstantStateError)
from airflow_hudi_occ.core.concurrency.heartbeat import Heartbeat, heartbeat_path, is_expired
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.layout import file_group_names
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator, process_generator
from airflow_hudi_occ.core.format.metadata import (EXTRA_ATTEMPT, EXTRA_BATCH_KEY, EXTRA_CHECKPOINT, EXTRA_SCHEMA,
                       EXTRA_WRITER_ID, CommitMetadata, RequestedReplaceMetadata, WriteStat)
from airflow_hudi_occ.core.format.storage import Started
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.metadata_services import run_metadata_table_services
from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.table.metadata_commit import (discard_staged_logs, files_block, stage_metadata_logs,
                                                        write_metadata_deltacommit)
from airflow_hudi_occ.core.table.metadata_stats import stats_blocks
from airflow_hudi_occ.core.table.metadata_table import maintains_files
from airflow_hudi_occ.core.table.write_guard import Look, check_before_lock, confirm_under_lock, prepare_for_write
from airflow_hudi_occ.core.table.timeline import (Timeline, cache_commit_metadata, complete, create_requested,
                                                  listed_ahead, pending_rollback_for, transition_to_inflight)

log = logging.getLogger(__name__)


def default_writer_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{threading.get_ident()}:{uuid.uuid4().hex[:8]}"


@dataclass
class Snapshot:
    """What the write is based on: decides which instants are conflict candidates."""

    last_completed: Instant | None
    pending_at_start: frozenset[str]
    completed_at_start: frozenset[str]
    #: the timeline these were read from, listed under begin's lock: what the write's planner
    #: reads (its view then agrees with the conflict candidates, and costs no listing of its
    #: own, issue 43); None where no such listing was made (a take-over, a scheduled instant)
    timeline: Timeline | None = None


#: CommitResult.outcome values
COMMITTED = "committed"
ALREADY_COMMITTED = "already_committed"   # the batch key was in the table: nothing new written
RECOMMITTED = "recommitted"               # a dead writer's staged instant was completed


@dataclass
class CommitResult:
    instant: Instant
    metadata: CommitMetadata
    lock_attempts: int = 0
    checked_instants: list[str] = field(default_factory=list)
    outcome: str = COMMITTED
    #: already_committed: the instant this attempt began (and rolled back), if it began one
    attempted_instant: str | None = None
    #: recommitted: the writer id that wrote the files
    recovered_from: str | None = None
    #: what the catalog sync after the commit did (core/catalog/sync.SyncReport), if one ran
    catalog_sync: object | None = None

    def to_json(self) -> dict:
        out = self._json()
        if self.catalog_sync is not None:
            out["catalog_sync"] = self.catalog_sync.to_json()
        return out

    def _json(self) -> dict:
        return {"outcome": self.outcome, "instant": self.instant.requested_time,
                "attempted_instant": self.attempted_instant, "recovered_from": self.recovered_from,
                "completion_time": self.instant.completion_time,
                "action": self.instant.action.value,
                "file_groups": file_group_names(self.metadata.mutated_file_groups()),
                "checked_instants": self.checked_instants}


class TransactionState(StrEnum):
    """Where an attempt is: new -> requested -> inflight -> completed, or aborted from any.

    A ``StrEnum``, so it prints and compares as the words the attempt log and messages use."""

    NEW = "new"
    REQUESTED = "requested"
    INFLIGHT = "inflight"
    COMPLETED = "completed"
    ABORTED = "aborted"


#: the states in which an attempt still holds an instant it must complete or roll back
OPEN_STATES = (TransactionState.REQUESTED, TransactionState.INFLIGHT)


class WriteTransaction:
    """One attempt at writing one batch. Not reusable: a retry is a new transaction."""

    def __init__(self, table: Table, config: WriteConfig | None = None, *,
                 action: Action = Action.COMMIT, operation_type: str = "UPSERT",
                 writer_id: str | None = None, attempt: int = 1,
                 checkpoint: str | None = None, batch_key: str | None = None,
                 lock_manager=None, time_generator: InstantTimeGenerator | None = None,
                 is_table_service: bool = False, on_begin=None,
                 footprint: Footprint | Iterable[str] | None = None):
        self.table = table
        #: called with this transaction once its instant is requested (and the lock released):
        #: lets a runner announce the instant (the Spark app's HUDI_OCC_BEGIN line)
        self.on_begin = on_begin
        self.config = config or WriteConfig()
        self.action = action
        self.operation_type = operation_type
        self.writer_id = writer_id or default_writer_id()
        self.attempt = attempt
        self.checkpoint = checkpoint
        self.batch_key = batch_key
        self.is_table_service = is_table_service
        self._lock_manager = lock_manager
        self._time = time_generator or process_generator(self.config.skew_wait_ms)
        self.instant: Instant | None = None
        self.snapshot: Snapshot | None = None
        self.heartbeat: Heartbeat | None = None
        self._markers = None
        self._detector = None
        self.state = TransactionState.NEW
        self.started_at = 0.0
        self.files_discarded = 0  # data files (by marker) thrown away by abort()
        self._strategy = None
        #: pre-commit (stage the commit before the lock) when the batch has a key: a crash
        #: between staging and completing is then recovered by re-commit (recovery.py)
        self.stage_commits = True
        self.staged = None
        self.recovered_from: str | None = None
        #: what this attempt will touch, declared in its requested file at begin (partitions;
        #: concurrency/footprint.py) and refined in its inflight file once tagging knows the
        #: file groups; None: not declared (unknown to the others)
        self.footprint: Footprint | None = self._own_footprint(footprint)
        #: the metadata table's state as judged before begin's lock (write_guard.check_before_lock);
        #: None: judge again in full under the completion's lock
        self._guard_seen = None
        #: the completed instants _read_ahead last read for (None: not yet)
        self._landed_seen: frozenset[str] | None = None
        #: begin's "running" record on its way (_running_recorded)
        self._running_record = None
        #: begin's release on its way (_begin_released)
        self._begin_release = None
        #: every marker of this instant is made through this transaction's markers, in this
        #: process (the core engines, ``WriteEngine.marks_here``; not where Spark executors make
        #: theirs, or for a re-commit of a dead writer's instant): the clean-up deletes them by
        #: name, and the abort signal is read while the instant goes inflight
        self.markers_made_here = False
        #: the abort signal read while going inflight, for the first marker's check
        self._abort_read = None
        #: the metadata table's log files written before the completion's lock
        self._staged_logs: dict = {}

    def _own_footprint(self, given) -> Footprint | None:
        if given is None:
            return None
        labels = self.config.writer_labels
        owner = attempt_log.task_label(labels) or self.writer_id
        request = labels.get(REQUEST_LABEL) or None  # the admission request that let it go
        if isinstance(given, Footprint):
            return replace(given, owner=given.owner or owner, request=given.request or request)
        kind = TABLE_SERVICE if self.is_table_service else check_kind(self.config.write_kind)
        return Footprint.of(given, owner=owner, kind=kind, request=request)

    # -- collaborators -----------------------------------------------------------------------

    @property
    def lock_manager(self):
        if self._lock_manager is None:
            self._lock_manager = table_lock_manager(self.table, self.config)
        return self._lock_manager

    @property
    def instant_time(self) -> str:
        if self.instant is None:
            raise InstantStateError("the transaction has not begun", remedy="call begin() first")
        return self.instant.requested_time

    @property
    def markers(self):
        if self._markers is None:
            self._markers = markers_for(self.table, self.instant_time, self.config.marker_type)
        return self._markers

    @property
    def detector(self):
        if self._detector is None and self.config.early_conflict.enabled:
            self._detector = create_detector(
                self.table, self.instant_time, self.config,
                completed_at_start=set(self.snapshot.completed_at_start))
            self._detector.start()
        return self._detector

    # -- stage 1: begin ------------------------------------------------------------------------

    def _resolve_parts(self) -> None:
        # Resolve every pluggable part before touching the table, so a typo in a strategy or
        # lock provider name changes nothing on storage.
        self._strategy = strategy_from_config(self.config, table=self.table)
        if not self.is_table_service:
            nbcc.check_config(self.table, self.config)
        if self.config.early_conflict.enabled:
            get_detection_strategy(self.config.early_conflict.strategy, self.config)
        _ = self.lock_manager

    def begin(self, requested_data: bytes = b"", plan: RequestedReplaceMetadata | None = None, *,
              look: Look | None = None) -> str:
        """Create the requested instant under the lock, with its heartbeat and "running"
        record. ``look``: the table as the caller judged it just before
        (``write_guard.look_before_begin``, whose timeline the pipeline's schema checks used);
        without it the table is judged here (``write_guard.check_before_lock``)."""
        if self.state is not TransactionState.NEW:
            raise InstantStateError(f"transaction already {self.state}", remedy="start a new one")
        self.table.require_writable()
        self._resolve_parts()
        if self.config.failed_writes_policy is FailedWritesPolicy.EAGER:
            rollback_pending_writes(self.table, self.config, lock_manager=self.lock_manager)
        if plan is not None:
            requested_data = plan.encode()
        elif not requested_data and self.footprint is not None and declares_at_begin(self.action):
            # declared from the first moment the instant exists: every other writer (admission,
            # the early checks) sees what this one will touch before it reads a row
            requested_data = self.footprint.encode(self.operation_type)
        # The table's properties and metadata table judged before the lock (every transaction
        # keeps the metadata table's listing when it may, see commit), refusals before any
        # instant exists; under the lock only what must be there: the timeline (the new time's
        # floor, the snapshot), the requested file and the heartbeat (write_guard.py).
        self._guard_seen = look.state if look is not None else \
            check_before_lock(self.table, self.config, files_writer=True)
        with self.lock_manager.locked(release_with=self._release_while_planning):
            if self._guard_seen is None:  # something to change first (a removal, an upgrade)
                prepare_for_write(self.table, self.config, files_writer=True)
            timeline = self.table.timeline()
            t = self._time.new_time(floor=timeline.latest_time())
            inst = Instant(t, self.action, State.REQUESTED)
            # The heartbeat starts before the lock is released, so no one can see this instant
            # pending without a live heartbeat and roll it back (whoever judges heartbeats does
            # so under the lock). Its first beat and the requested file are written at once:
            # two requests the table waits for, neither needs the other (issue 43).
            heartbeat = Heartbeat(self.table, t, self.config.heartbeat)
            try:
                self.table.storage.concurrently([lambda: create_requested(self.table, inst, requested_data),
                                                 heartbeat.start])
            except FileExistsError:  # <t> is another instant's: so is its heartbeat
                heartbeat.stop(delete=False)
                raise
            except BaseException:
                heartbeat.stop(delete=True)  # no instant of ours: no heartbeat of ours either
                raise
            self.heartbeat = heartbeat
        self.instant = inst
        self.snapshot = Snapshot(
            last_completed=timeline.last_completed_write(),
            pending_at_start=frozenset(i.requested_time for i in timeline.pending()),
            completed_at_start=frozenset(i.requested_time for i in timeline.completed()),
            timeline=timeline,
        )
        self.state = TransactionState.REQUESTED
        self.started_at = time.time()
        # A "running" record names the writer (DAG, task) while it works; its end overwrites it
        # (after this write has landed: _running_recorded). Sent while the writer goes on: it
        # is bookkeeping, a round trip a commit on an object store need not wait for (issue 43).
        rec = self._attempt_record()
        rec.outcome = attempt_log.RUNNING
        self._running_record = self.table.storage.ahead(lambda: attempt_log.write_record(self.table, rec))
        log.info("began %s %s (writer %s, attempt %d)", self.action.value, t, self.writer_id, self.attempt)
        if self.on_begin is not None:
            self.on_begin(self)
        return t

    def take_over(self, staged, *, now: float | None = None) -> bool:
        """Adopt a dead writer's staged instant (recovery.py), deciding under the table lock.

        Under the lock: the instant must still be pending, not named by a pending rollback,
        and its heartbeat still expired; then a fresh heartbeat starts *before* the lock is
        released, so a LAZY rollback (which re-checks expiry under the same lock) leaves it
        alone from here on. This is the one place an instant's heartbeat is restarted; it is
        safe because the decision that the old writer is dead and the new beat are one step
        under the lock. Returns False (nothing changed) if the instant is gone or alive."""
        if self.state is not TransactionState.NEW:
            raise InstantStateError(f"transaction already {self.state}", remedy="start a new one")
        self.table.require_writable()
        self._resolve_parts()
        t = staged.instant
        with self.lock_manager.locked():
            timeline = self.table.timeline()
            inst = timeline.get(t)
            if (inst is None or inst.is_completed or pending_rollback_for(timeline, t) is not None
                    or not is_expired(self.table, t, self.config.heartbeat, now=now)):
                return False
            self.heartbeat = Heartbeat(self.table, t, self.config.heartbeat).start()
        # commit() goes inflight before staging; a requested-only instant is moved on anyway
        self.instant = (transition_to_inflight(self.table, inst) if inst.state is State.REQUESTED
                        else Instant(t, inst.action, State.INFLIGHT))
        last = (Instant(staged.last_completed, Action.COMMIT, State.COMPLETED)
                if staged.last_completed else None)
        self.snapshot = Snapshot(last_completed=last,
                                 pending_at_start=frozenset(staged.pending_at_start),
                                 completed_at_start=frozenset())
        self.recovered_from = staged.writer_id
        self.staged = staged
        self.state = TransactionState.INFLIGHT
        self.started_at = time.time()
        rec = self._attempt_record()
        rec.outcome = attempt_log.RUNNING
        rec.message = f"taking over staged instant {t} of {staged.writer_id}"
        attempt_log.write_record(self.table, rec)
        return True

    # -- stage 2: inflight and data files ---------------------------------------------------------

    def start_inflight(self, data: bytes | None = None,
                       planned_file_groups: Iterable[tuple[str, str]] = ()) -> None:
        """Go inflight, recording the file groups the write plans to touch (as Hudi's workload
        profile does), so a table service committing meanwhile can see this write's footprint."""
        if self.state is not TransactionState.REQUESTED:
            raise InstantStateError(f"cannot go inflight from {self.state}", instant=self.instant_time)
        self._begin_released()
        if data is None and self.footprint is not None:
            self.footprint = self.footprint.refined(planned_file_groups)
            data = self.footprint.encode(self.operation_type)
        elif data is None:
            planned = [WriteStat(file_id=f, path="", partition_path=p)
                       for p, f in sorted(set(planned_file_groups))]
            data = CommitMetadata.from_stats(planned, operation_type=self.operation_type).encode()
        if self.markers_made_here:
            # the first marker's abort check (create_marker) reads the signal while the
            # inflight file is written: one round trip before the first marker, not two
            self._abort_read = self.table.storage.ahead(
                lambda: abort_signal.abort_reason(self.table, self.instant_time))
        self.instant = transition_to_inflight(self.table, self.instant, data)
        self.state = TransactionState.INFLIGHT

    def check_abort(self) -> None:
        """Raise if another process asked this write to stop (cheap: one exists call)."""
        abort_signal.check_abort(self.table, self.instant_time)
        if self._detector is not None and getattr(self._detector, "has_conflict", False):
            self._detector.check_sticky()

    def create_marker(self, partition: str, data_file_name: str, io_type: str = "CREATE"):
        """Before each data file: abort signal, early conflict check, then the marker."""
        io = io_type if isinstance(io_type, IOType) else IOType[str(io_type).upper()]
        if self.state is TransactionState.REQUESTED:
            self.start_inflight()
        started, self._abort_read = self._abort_read, None
        abort_signal.check_abort(self.table, self.instant_time, read=started)
        det = self.detector
        if det is not None:
            return det.create_marker(self.markers, partition, data_file_name, io)
        return self.markers.create(partition, data_file_name, io)

    # -- stage 3: commit ------------------------------------------------------------------------

    def build_metadata(self, stats: Iterable[WriteStat], *, schema: str | None = None,
                       extra_metadata: Mapping[str, str] | None = None,
                       replaced: Mapping[str, list[str]] | None = None) -> CommitMetadata:
        extra = {EXTRA_WRITER_ID: self.writer_id, EXTRA_ATTEMPT: str(self.attempt)}
        if self.checkpoint is not None:
            extra[EXTRA_CHECKPOINT] = self.checkpoint
        if self.batch_key is not None:
            extra[EXTRA_BATCH_KEY] = self.batch_key
        if schema:
            extra[EXTRA_SCHEMA] = schema
        extra.update(extra_metadata or {})
        return CommitMetadata.from_stats(
            stats, operation_type=self.operation_type, extra_metadata=extra,
            replaced=None if replaced is None else {p: list(v) for p, v in replaced.items()})

    def commit(self, stats: Iterable[WriteStat], *, schema: str | None = None,
               extra_metadata: Mapping[str, str] | None = None,
               replaced: Mapping[str, list[str]] | None = None) -> CommitResult:
        if self.state not in OPEN_STATES:
            raise InstantStateError(f"cannot commit a transaction that is {self.state}",
                                    instant=self.instant_time)
        stats = list(stats)
        action = self.action
        if replaced is not None and action is Action.COMMIT:
            raise InstantStateError("replaced file groups need a replacecommit", instant=self.instant_time,
                                    remedy="begin the transaction with action=Action.REPLACE_COMMIT")
        metadata = self.build_metadata(stats, schema=schema, extra_metadata=extra_metadata,
                                       replaced=replaced if replaced is not None else (
                                           {} if action is Action.REPLACE_COMMIT else None))
        if self.state is TransactionState.REQUESTED:
            self.start_inflight()
        if self._detector is not None:
            self._detector.stop()
            self._detector.check_sticky()
        if self.batch_key is not None and self.stage_commits:
            # Pre-commit: every file is written; from here a crash is recovered by re-commit.
            self.staged = stage_commit(self.table, self, metadata)
        return self.commit_metadata(metadata)

    def commit_metadata(self, metadata: CommitMetadata, *,
                        recovered_from: str | None = None) -> CommitResult:
        """Complete the instant with ready metadata (the last step of :meth:`commit`, and what a
        re-commit of a staged instant runs after :meth:`take_over`)."""
        if self.state is not TransactionState.INFLIGHT:
            raise InstantStateError(f"cannot commit a transaction that is {self.state}",
                                    instant=self.instant_time)
        self._running_recorded()
        if recovered_from is not None:
            self.recovered_from = recovered_from
        current = ConcurrentOperation.for_current(self.instant, self.operation_type,
                                                  metadata.mutated_file_groups(),
                                                  is_table_service=self.is_table_service)
        # Stage 3a: a writer that others may consider dead must not complete. Its heartbeat
        # is read while the read-ahead's timelines are listed (one round trip, not three)
        maintained = self._kept_at_begin()
        if maintained:
            with listed_ahead(self.table, self.table.metadata_table()):
                self.heartbeat.check_alive()
                last = self._read_ahead(metadata, current)
        else:
            last = self.heartbeat.check_alive
        # The last request before the lock (the metadata table's log files, or without them the
        # heartbeat's read) goes out with the lock's request when that is a request to the same
        # store (the storage lock): one round trip, not two, for a writer that finds the lock
        # free (issue 43). The hold takes its answer before it reads anything; every way out of
        # here waits for it, so nothing of this write is sent after a failure returns (the
        # rollback that follows finds every log file).
        lm = self.lock_manager
        if getattr(lm, "acquired_on_table_storage", False):
            sent = self.table.storage.ahead(last or (lambda: None))
        else:
            if last is not None:
                last()
            sent = Started(lambda: None, background=False)
        try:
            return self._complete_under_lock(lm, metadata, current, sent)
        except BatchAlreadyCommittedError as e:
            # Outside the lock (rollback takes it): this attempt's files must go.
            self.abort(reason=f"batch {self.batch_key!r} already committed as "
                              f"{e.committed_instant}", error=e)
            raise
        finally:
            sent.error()

    def _read_ahead(self, metadata: CommitMetadata, current, *,
                    waiting: bool = False) -> Callable[[], None] | None:
        """What the completion needs from the storage, read before it holds the lock (issue 43):
        the metadata of the commits that landed since this transaction began (the batch check
        and the conflict check read them; a completed instant's metadata is immutable, cached
        per process) and, with the metadata table kept, for its records the new files' footers,
        the written partitions' other files, the metadata table's listing, its index versions
        and file groups. Under the lock the same computations find them in the process's caches
        and read only what changed meanwhile; their results are the ones written.

        Run once before the lock (``waiting=False``: it returns the staging of the metadata
        table's log files, sent with the lock's request; a refusal, a column type the stats
        cannot record, comes here), then by the lock manager while another writer holds the
        lock (``waiting=True``, ``while_waiting``:
        at 32 writers the completion otherwise read two files of every commit of its wait under
        the lock); a listing that finds no newly completed instant stops there. Without a
        metadata table nothing before the lock lists the timeline: a listing only for the
        conflict check would cost a single writer a request it never needs."""
        seen = self._guard_seen
        maintained = self._kept_at_begin()
        if not (maintained or waiting):
            return None
        timeline = Timeline.load(self.table)
        landed = frozenset(i.requested_time for i in timeline.completed())
        if waiting and landed == self._landed_seen:
            return None
        self._read_landed(timeline, current)
        self._landed_seen = landed
        if maintained:
            stats = stats_blocks(self.table, seen, metadata, self.config.metadata, timeline=timeline,
                                 instant_time=self.instant_time)
            if not waiting:
                blocks = files_block(FilesChange.of_write_stats(metadata.write_stats()))
                blocks.update(stats)
                # its log files too: under the lock only the ones whose records moved meanwhile
                # are written again (metadata_commit.stage_metadata_logs says why no one reads them)
                write = stage_metadata_logs(self.table, self.instant_time, blocks)

                def stage() -> None:
                    self._staged_logs = write()
                return stage
        return None

    def _kept_at_begin(self) -> bool:
        """Does this commit keep the metadata table, as judged before begin's lock (confirmed
        under the completion's)?"""
        seen = self._guard_seen
        return seen is not None and maintains_files(seen, self.config, files_writer=True)

    def _read_landed(self, timeline: Timeline, current) -> None:
        """The metadata of the completed writes the completion will read: every one when the
        batch has a key (find_committed_batch), else the conflict candidates (none when
        concurrent deltacommits do not resolve conflicts: NBCC)."""
        completed = [i for i in timeline.completed() if i.is_write]
        if self.batch_key is None:
            wanted = set()
            if nbcc.resolves_conflicts(self.config, self.operation_type, is_table_service=self.is_table_service):
                wanted = {i.requested_time for i in self._strategy.candidate_instants(
                    timeline, current, self.snapshot.last_completed, self.snapshot.pending_at_start)}
            completed = [i for i in completed if i.requested_time in wanted]
        for inst in completed:
            timeline.commit_metadata(inst)

    def _complete_under_lock(self, lm, metadata: CommitMetadata, current, sent) -> CommitResult:
        # Under the lock each timeline is listed once (the data table's here, the metadata
        # table's when its deltacommit is written) and kept for the rest of the hold, with this
        # process's own changes (Table.timeline_pinned; timeline.PinnedTimeline says why no
        # other process changes what the steps below read while the lock is held). While
        # another writer holds it, what lands meanwhile is read (_read_ahead).
        def while_waiting() -> None:
            sent.error()  # after what went with the lock's request (its failure: raised in the hold)
            self._read_ahead(metadata, current, waiting=True)

        seen = self._guard_seen
        mdt_kept = self.table.metadata_table() if self._kept_at_begin() else None
        # the clean-up after the commit is sent beside the release, once the release has begun
        # (the block adds it once done): the hold ends first, the clean-up waits for no answer
        beside_release: list = []

        def release_with(release) -> None:
            started = self.table.storage.ahead(release)  # begun before the clean-up is sent
            try:
                self.table.storage.concurrently(beside_release)
            finally:
                started.result()
        with lm.locked(while_waiting=while_waiting, release_with=release_with), ExitStack() as pinned:
            # The hold's three reads at once (issue 43: each is a request the whole table waits
            # for): the data timeline, hoodie.properties unchanged since begin (write_guard.py),
            # and the metadata table's timeline, when it was kept at begin (if a Java writer
            # changed the properties meanwhile, that listing goes unused).
            _, unchanged, _ = self.table.storage.concurrently([
                lambda: pinned.enter_context(self.table.timeline_pinned()),
                lambda: seen is not None and self.table.properties_unchanged(),
                lambda: mdt_kept is not None and pinned.enter_context(mdt_kept.timeline_pinned())])
            sent.result()  # the heartbeat alive, the staged log files written
            timeline = self.table.timeline()
            now = timeline.get(self.instant_time)
            if now is None or now.is_completed:
                raise InstantRolledBackError(
                    f"instant {self.instant_time} is no longer pending (rolled back or completed "
                    "by another process)", instant=self.instant_time,
                    remedy="retry the batch with a fresh instant time")
            _refuse_if_being_rolled_back(timeline, self.instant_time)
            if self.batch_key is not None:
                # Idempotence, decided under the lock: of two attempts of one batch (a zombie
                # task and its retry) that both reach here, exactly one completes.
                done = find_committed_batch(self.table, self.batch_key, timeline=timeline)
                if done is not None:
                    raise BatchAlreadyCommittedError(
                        instant=self.instant_time, committed_instant=done.requested_time,
                        committed_completion_time=done.completion_time, batch_key=self.batch_key)
            checked = []
            # NBCC: concurrent deltacommits on one file group all commit (readers merge them
            # by completion time); only bulk_insert and table services still resolve
            if nbcc.resolves_conflicts(self.config, self.operation_type,
                                       is_table_service=self.is_table_service):
                checked = resolve_write_conflicts(
                    timeline, current, self._strategy, last_successful=self.snapshot.last_completed,
                    pending_at_start=set(self.snapshot.pending_at_start))
            # a Java writer may have upgraded the table or enabled its metadata table meanwhile:
            # what begin judged, confirmed by one request (write_guard.py)
            mdt = confirm_under_lock(self.table, self.config, seen, files_writer=True, unchanged=unchanged)
            floor = timeline.latest_time()
            maintained = maintains_files(mdt, self.config, files_writer=True)
            if maintained and (mdt_table := self.table.metadata_table()) is not None:
                pinned.enter_context(mdt_table.timeline_pinned())
            elif self._staged_logs:  # no longer kept (a Java writer changed the properties)
                discard_staged_logs(self.table, self.instant_time, self._staged_logs)
            if maintained:
                # Java's order: the metadata table's deltacommit completes first; its records
                # count for readers only once the data instant completes (metadata_commit.py).
                # Every action committed here (a copy-on-write commit, a merge-on-read
                # deltacommit of the core writer or the Spark engine, a replacecommit of
                # insert_overwrite or clustering, a compaction) names its new files in its
                # write stats, which is all Java's files records of it hold; the files a
                # replacecommit replaced leave the listing at clean, as in Java.
                lm.check_held()
                # with the column and partition stats of every action (metadata_stats.py)
                blocks = files_block(FilesChange.of_write_stats(metadata.write_stats()))
                blocks.update(stats_blocks(self.table, mdt, metadata, self.config.metadata, timeline=timeline,
                                           instant_time=self.instant_time))
                lm.check_held()
                done_mdt = write_metadata_deltacommit(self.table, self.instant_time, blocks,
                                                      self._time.new_time(floor=floor), staged=self._staged_logs)
                floor = max(floor or "", done_mdt.completion_time or "")
            completion_time = self._time.new_time(floor=floor)
            # The lock must still be ours at the moment of completion (a ZooKeeper session can
            # expire while we resolved conflicts); after this point nothing can be undone.
            lm.check_held()
            encoded = metadata.encode()
            done = complete(self.table, self.instant, completion_time, encoded, timeline=timeline)
            attempts = getattr(lm, "attempts_used", 0)
            if maintained:
                self._metadata_table_services(lm, completion_time,
                                              {i.requested_time for i in timeline} | {self.instant_time})
            self.instant = done
            self.state = TransactionState.COMPLETED
            cache_commit_metadata(self.table, done, encoded)
            rec = self._attempt_record()
            rec.completion_time = completion_time
            if self.recovered_from is not None:
                rec.message = "re-committed staged instant (its files were written by the dead writer)"
            beside_release.append(lambda: self._cleanup_after_commit(
                lambda: attempt_log.write_record(self.table, rec)))
        log.info("committed %s at %s%s", done.requested_time, completion_time,
                 " (re-committed)" if self.recovered_from is not None else "")
        self._archive_after_commit(lm, timeline)
        return CommitResult(done, metadata, attempts,
                            [op.instant.requested_time for op in checked or []])

    def _metadata_table_services(self, lm, completion_time: str, data_times: set[str]) -> None:
        """The metadata table's compaction, clean and archival after a commit that wrote its
        deltacommit (:mod:`~airflow_hudi_occ.core.commit.metadata_services`), under the same
        lock, as Java's writer runs them. The commit is done: a failure is logged, never raised
        (each step is crash-safe; the next commit runs them again)."""
        try:
            run_metadata_table_services(self.table, self.config, lm,
                                        lambda: self._time.new_time(floor=completion_time), data_times)
        except Exception as e:  # noqa: BLE001 - the write succeeded
            log.warning("the metadata table's services after commit %s failed (the commit stands; "
                        "the next commit runs them again): %s", self.instant_time, e)

    def _archive_after_commit(self, lm, timeline: Timeline) -> None:
        """``hoodie.archive.automatic``: archive when the timeline seen at commit holds more
        completed writes than ``hoodie.keep.max.commits`` (Hudi archives in postCommit too).
        The commit is done: a failure here is logged, never raised."""
        try:
            archive_if_needed(self.table, timeline, self.config, lock_manager=lm)
        except Exception as e:  # noqa: BLE001 - the write succeeded; archival retries next time
            log.warning("archival after commit %s failed (the commit stands; the next commit or "
                        "`hudi-occ archive` retries): %s", self.instant_time, e)

    def _cleanup_after_commit(self, *also) -> None:
        """What the completed instant leaves goes: its markers (and a staged commit's files),
        its heartbeat and any abort signal (one batch delete on S3); ``also`` runs beside them
        (the attempt record). Concurrently: each is a request or two, none needs another's
        answer, and on an object store each waits on the network (issue 43). Every step runs
        whatever another does."""
        gone = [abort_signal.abort_path(self.table, self.instant_time)]
        if self.heartbeat is not None:
            self.heartbeat.stop(delete=False)
            gone.append(heartbeat_path(self.table, self.instant_time))
        # markers this process made, every one of the instant's, go by name in the same batch
        # (their folder is not listed: one round trip fewer after each commit on an object store)
        made = (self._markers.made_paths() if self.markers_made_here and self._markers is not None
                and not self.table.storage.is_local else None)
        gone += made or []
        self.table.storage.concurrently([lambda: self._delete_markers(listed=made is None),
                                         lambda: self.table.storage.delete_many(gone), *also])

    def _delete_markers(self, *, listed: bool = True) -> None:
        if listed and (self._markers is not None or self.table.storage.exists(
                self.table.storage.path(".hoodie", ".temp", self.instant_time))):
            self.markers.delete_all()
        if self.staged is not None or self.recovered_from is not None:
            delete_staged(self.table, self.instant_time)

    # -- abort -----------------------------------------------------------------------------------

    def _release_while_planning(self, release) -> None:
        """Begin's hold ends: its release is sent and the writer goes on to plan (which lists
        the timeline) without waiting for the answer; :meth:`_begin_released` takes it before the
        instant goes inflight. Why: on an object store the release is a round trip a single
        writer's commit waited for, and nothing the plan reads needs it (issue 43). The lock is
        still this provider's until the answer: another acquire by it waits for the release
        (``LockProvider.release`` holds its state lock throughout)."""
        self._begin_release = self.table.storage.ahead(release)

    def _begin_released(self, *, raising: bool = True) -> None:
        """Wait for begin's release; its failure (the lease still ours on the store, a lock
        service that did not answer) is raised here, before anything of the write exists.
        ``raising=False`` (an abort, a close: the lease lapses, ZooKeeper's node goes with the
        session, a rollback takes the lock again and says more): logged instead."""
        started, self._begin_release = self._begin_release, None
        error = started.error() if started is not None else None
        if error is None:
            return
        if raising:
            raise error
        log.warning("releasing the lock after begin of %s failed: %s", self.instant_time, error)

    def _running_recorded(self) -> None:
        """Wait for begin's "running" record to land, before the attempt's end is recorded
        over it (or read back by a rollback of this attempt)."""
        started, self._running_record = self._running_record, None
        if started is not None:
            started.result()  # write_record logs its own failure: it never raises

    def _attempt_record(self) -> "attempt_log.AttemptRecord":
        return attempt_log.AttemptRecord(
            instant=self.instant_time, action=self.action.value, operation=self.operation_type,
            writer_id=self.writer_id, attempt=self.attempt, batch_key=self.batch_key,
            checkpoint=self.checkpoint, labels=dict(self.config.writer_labels),
            started_at_ms=int(self.started_at * 1000), recovered_from=self.recovered_from)

    def abort(self, *, rollback: bool = True, reason: str = "",
              error: BaseException | None = None) -> None:
        """Give up this attempt: files written so far are rolled back (or left to lazy rollback).

        ``error`` (what made the attempt fail) goes to the attempt log, so the timeline page and
        the CLI can say which instant won and how much work was discarded."""
        if self.state in (TransactionState.COMPLETED, TransactionState.ABORTED, TransactionState.NEW):
            self.state = TransactionState.ABORTED if self.state is TransactionState.NEW else self.state
            return
        self._begin_released(raising=False)
        self._running_recorded()
        rec = attempt_log.record_from_error(self._attempt_record(), error)
        rec.seconds_discarded = round(time.time() - self.started_at, 3) if self.started_at else 0.0
        try:
            rec.files_discarded = self.files_discarded = len(self.markers.data_files())
        except Exception:  # markers unreadable: the rollback below still runs
            pass
        if error is not None and getattr(error, "seconds_discarded", None) is None:
            error.seconds_discarded = rec.seconds_discarded
        if self._detector is not None:
            try:
                self._detector.stop()
            except Exception:  # pragma: no cover - best effort
                pass
        try:
            if rollback:
                done = rollback_instant(self.table, self.instant_time, self.config,
                                        lock_manager=self.lock_manager, reason=reason or "aborted by writer",
                                        time_generator=self._time)
                # kept in the record: `hudi-occ conflicts` names it after the timeline forgot it.
                # Skipped (a clean rolled this instant back first): that rollback marked the
                # record already, and this write of it must not erase the name.
                rec.rolled_back_by = done.rollback_instant or getattr(
                    attempt_log.read_record(self.table, self.instant_time), "rolled_back_by", None)
        finally:
            if self.heartbeat is not None:
                self.heartbeat.stop(delete=rollback)
            self.state = TransactionState.ABORTED
            attempt_log.write_record(self.table, rec)

    def close(self) -> None:
        self._begin_released(raising=False)
        try:
            self._lock_manager and getattr(self._lock_manager, "close", lambda: None)()
        except HudiOccError:  # pragma: no cover
            pass

    def __enter__(self) -> "WriteTransaction":
        if self.state is TransactionState.NEW:
            self.begin()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None and self.state not in (TransactionState.COMPLETED, TransactionState.ABORTED):
            self.abort(reason=f"{exc_type.__name__}: {exc}", error=exc)


def _refuse_if_being_rolled_back(timeline: Timeline, instant_time: str) -> None:
    rb = pending_rollback_for(timeline, instant_time)
    if rb is not None:
        raise InstantRolledBackError(f"instant {instant_time} is being rolled back by rollback "
                                     f"{rb.requested_time}", instant=instant_time,
                                     remedy="this write was presumed dead (its heartbeat expired); "
                                            "retry with a fresh instant time")


def last_checkpoint(table: Table, *, writer_prefix: str | None = None) -> str | None:
    """The source checkpoint of the newest completed commit that recorded one (exactly-once)."""
    tl = table.timeline()
    for inst in reversed(tl.completed_by_completion_time()):
        if not inst.is_write:
            continue
        meta = tl.commit_metadata(inst)
        cp = meta.extra_metadata.get(EXTRA_CHECKPOINT)
        if cp is not None and (writer_prefix is None or
                               meta.extra_metadata.get(EXTRA_WRITER_ID, "").startswith(writer_prefix)):
            return cp
    # A writer that committed rarely may have all its commits archived: its checkpoint is in
    # the history, and losing it would make a source replay from the start.
    return _archived_checkpoint(table, writer_prefix)


def _archived_checkpoint(table: Table, writer_prefix: str | None) -> str | None:
    for _inst, meta in reversed(TimelineHistory(table).completed_writes()):
        cp = meta.extra_metadata.get(EXTRA_CHECKPOINT)
        if cp is not None and (writer_prefix is None or
                               meta.extra_metadata.get(EXTRA_WRITER_ID, "").startswith(writer_prefix)):
            return cp
    return None


def find_committed_batch(table: Table, batch_key: str, *, timeline: Timeline | None = None,
                         archived: bool | None = None) -> Instant | None:
    """The completed instant that recorded ``batch_key``, if any (idempotent orchestration).

    Reads the metadata of every completed write on the active timeline (cached per process),
    so the check under the commit lock costs a read only for instants new since the last one.
    A batch committed long ago may have been archived: the history is searched too
    (``archived``, by default when no timeline snapshot is given, i.e. outside the commit's
    critical section, where a concurrent twin can only be on the active timeline)."""
    tl = timeline or table.timeline()
    for inst in reversed(tl.completed_by_completion_time()):
        if inst.is_write and tl.commit_metadata(inst).extra_metadata.get(EXTRA_BATCH_KEY) == batch_key:
            return inst
    if archived if archived is not None else timeline is None:
        for inst, meta in reversed(TimelineHistory(table).completed_writes()):
            if meta.extra_metadata.get(EXTRA_BATCH_KEY) == batch_key:
                return inst
    return None


def commit_metadata_anywhere(table: Table, instant: Instant):
    """The commit metadata of a completed write, on the active timeline or in the history (the
    timeline reads an instant archived since it was listed from the history: one rule, in
    ``Timeline.commit_metadata``)."""
    return table.timeline().commit_metadata(instant)


__all__ = ["WriteTransaction", "TransactionState", "OPEN_STATES", "CommitResult", "Snapshot", "COMMITTED", "ALREADY_COMMITTED", "RECOMMITTED",
           "last_checkpoint", "find_committed_batch", "commit_metadata_anywhere", "default_writer_id"]
