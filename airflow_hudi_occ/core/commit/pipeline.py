"""The write pipeline: the order of a write's stages, written once for every engine.

::

    check_input        engine: what refuses a batch before anything is read (key columns)
    settled?           a keyed batch already committed -> its commit; a dead writer's staged
                       instant of it -> re-committed (:func:`prepare_batch`, :func:`recommit`:
                       taken over, its files verified, completed or rolled back); nothing written
    prepare            engine: the table, the user's columns, the batch's own schema
    schema             the commit's schema: the last write's evolved by the batch's
                       (a delete keeps the last write's) -- :func:`commit_schema`
    check_batch        engine: the rest of what refuses a batch before its instant exists
    begin              WriteTransaction.begin: lock, instant, heartbeat, "running" record
    check_before_plan  engine: early conflict checks that need no plan (Spark's RFC-56 probe)
    plan               engine: which file groups, from the snapshot read after begin
    clustering gate    refused, before any data exists, where a pending clustering replaces
                       a file group this write touches (or replaces)
    inflight           with the planned file groups (the write's footprint)
    check_before_write engine: early conflict checks of the whole plan (Spark's driver check)
    write files        engine: every marker before its data file (:func:`write_marked` for
                       engines that write on this process; Spark's tasks mark, then write)
    before_commit      the caller's hook (tests hold writers here so they overlap)
    commit             WriteTransaction.commit: conflict resolution under the lock, attempt
                       record; a twin that won under the lock -> its commit
                       (``already_committed``), ours rolled back
    abort              any failure: the engine's ``failure`` names what the rollback records
                       and what is raised; WriteTransaction.abort rolls back from the markers
                       and writes the attempt record; then the engine's ``after_abort``

An engine (:class:`WriteEngine`) supplies its planner (``plan``) and its file writer
(``write_files``), and may fill the optional stages; it never calls ``begin``, the clustering
gate, ``start_inflight``, ``commit`` or ``abort`` itself. The pipeline calls the transaction;
it does not replace it. Scheduled instants (clustering, compaction) have the other pipeline,
``core/services/scheduled.run_scheduled``, which ends the same way (:func:`abort_and_raise`);
``tests/test_pipelines.py`` checks that no other module calls a transaction's stages.

Errors: whatever a stage raises, after the instant (if any) is rolled back; the engine's
``failure`` may translate it (Spark: a failed job becomes ``SparkWriteError``).
"""

from __future__ import annotations

import logging
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Callable, Iterable, Mapping, NoReturn

from airflow_hudi_occ.core.catalog.sync import check_sync_client, sync_after_commit
from airflow_hudi_occ.core.commit.file_group_work import map_bounded
from airflow_hudi_occ.core.commit.recovery import committed_batch_result, find_recoverable
from airflow_hudi_occ.core.commit.staging import EXTRA_RECOVERED_BY, verify_files
from airflow_hudi_occ.core.commit.transaction import (RECOMMITTED, CommitResult, WriteTransaction,
                                                      find_committed_batch)
from airflow_hudi_occ.core.concurrency.clustering_gate import check_write_against_pending_clustering
from airflow_hudi_occ.core.concurrency.footprint import Footprint
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import (BatchAlreadyCommittedError, HudiOccError, InstantRolledBackError,
                                          StagedCommitError, WriteConflictError)
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.instant_time import InstantTimeGenerator
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.format.schema import evolve
from airflow_hudi_occ.core.table.merge_mode import require_implemented
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.write_guard import look_before_begin

log = logging.getLogger(__name__)

#: ``on_progress(stage, text)``: a line for people (the Spark job prints ``hudi-occ <stage>: ...``)
Progress = Callable[[str, str], None]


def table_schema(table: Table, timeline=None) -> str | None:
    """The schema the table's last completed write recorded (None: no write yet), on
    ``timeline`` (listed now when not given)."""
    tl = timeline if timeline is not None else table.timeline()
    last = tl.last_completed_write()
    return tl.commit_metadata(last).schema if last is not None else None


def commit_schema(table: Table, operation: str, batch_schema: str, timeline=None) -> str:
    """The schema a commit records: the last completed write's, evolved by the batch's
    (``format/schema.evolve``); a delete's batch holds keys only, so it keeps the last one
    (its own only on an empty table). ``timeline``: as :func:`table_schema`'s."""
    old = table_schema(table, timeline)
    if operation == "delete":
        return old or batch_schema
    return evolve(old, batch_schema)


# -- settled?: the batch already committed, or a dead writer's staged instant of it -------------

@dataclass
class RecoveryResult:
    """What :func:`recommit` did. ``outcome``: ``recommitted`` (``commit`` is set) or
    ``rolled_back`` (the staged instant could not be completed and is gone: rewrite the batch)."""

    outcome: str
    instant: str
    commit: object | None = None          # CommitResult
    recovered_from: str | None = None     # the dead writer's id
    error: HudiOccError | None = None

    def to_json(self) -> dict:
        out = {"recovery": self.outcome, "recovered_instant": self.instant,
               "recovered_from": self.recovered_from}
        if self.error is not None:
            out["recovery_error"] = self.error.to_dict()
        return out


def recommit(table, config: WriteConfig, batch_key: str, *, writer_id: str | None = None,
             attempt: int = 1, lock_manager=None, now: float | None = None) -> RecoveryResult | None:
    """Re-commit the staged instant of ``batch_key`` left by a dead writer, if there is one.

    Returns None when there is nothing to recover (or the instant was taken by someone else
    meanwhile); raises :class:`BatchAlreadyCommittedError` when the batch turns out to be
    committed already (the staged instant is then rolled back)."""
    staged = find_recoverable(table, batch_key, config, now=now)
    if staged is None:
        return None
    tx = WriteTransaction(table, config, action=Action(staged.action),
                          operation_type=staged.operation_type, writer_id=writer_id,
                          attempt=attempt, checkpoint=staged.checkpoint, batch_key=batch_key,
                          lock_manager=lock_manager, is_table_service=staged.is_table_service)
    if not tx.take_over(staged, now=now):
        return None
    log.info("took over staged instant %s of batch %r (written by %s)", staged.instant, batch_key,
             staged.writer_id)
    try:
        verify_files(table, staged)
        meta = staged.commit_metadata()
        meta.extra_metadata[EXTRA_RECOVERED_BY] = tx.writer_id
        res = tx.commit_metadata(meta, recovered_from=staged.writer_id)
        return RecoveryResult("recommitted", staged.instant, res, staged.writer_id)
    except BatchAlreadyCommittedError:
        raise  # commit rolled the staged instant back already
    except (WriteConflictError, StagedCommitError, InstantRolledBackError) as e:
        log.warning("staged instant %s of batch %r cannot be re-committed (%s): rolling it back; "
                    "the batch is rewritten", staged.instant, batch_key, e)
        tx.abort(reason=f"re-commit refused: {type(e).__name__}", error=e)
        return RecoveryResult("rolled_back", staged.instant, None, staged.writer_id, e)
    except BaseException as e:
        # A lock timeout, a lost lock, storage trouble: leave the instant staged (its fresh
        # heartbeat stops and expires), so a later attempt or the LAZY rollback decides.
        tx.abort(rollback=False, reason=f"re-commit failed: {type(e).__name__}", error=e)
        raise


def prepare_batch(table: Table, config: WriteConfig, batch_key: str | None, *,
                  writer_id: str | None = None, attempt: int = 1,
                  lock_manager=None, committed_checked: bool = False) -> CommitResult | None:
    """What every engine does first for a keyed batch, before reading its source: the batch
    already committed -> its result (``already_committed``); a dead writer's staged instant of
    it -> re-commit it (``recommitted``); else None: write the batch (a staged instant that
    could not be re-committed has been rolled back).

    ``committed_checked``: the caller looked the key up among the completed instants just
    before (the operator does, before it pays for a spark-submit), so only the staged
    instants are searched here. Skipping the second look loses nothing: a batch committed in
    between is found again under the commit lock (``WriteTransaction.commit``), which is the
    look that decides; so an attempt reads the timeline's commit metadata once outside the
    lock and once under it."""
    if batch_key is None:
        return None
    done = None if committed_checked else find_committed_batch(table, batch_key)
    if done is not None:
        return committed_batch_result(table, done)
    try:
        rec = recommit(table, config, batch_key, writer_id=writer_id, attempt=attempt,
                       lock_manager=lock_manager)
    except BatchAlreadyCommittedError as e:
        return committed_batch_result(table, table.timeline().get(e.committed_instant),
                                      attempted_instant=e.instant)
    if rec is None or rec.commit is None:
        return None
    res = rec.commit
    res.outcome = RECOMMITTED
    res.recovered_from = rec.recovered_from
    return res


@dataclass
class Failure:
    """What an attempt that failed after its instant exists leaves: the error its rollback
    records (the attempt log, the rollback's reason) and the error its caller gets. An engine
    may translate one into the other (Spark: a failed job is raised as ``SparkWriteError``,
    while the attempt log keeps what Spark said)."""

    recorded: BaseException
    raised: BaseException
    #: the rollback's reason
    reason: str

    @classmethod
    def of(cls, error: BaseException) -> "Failure":
        """The error as it came: recorded and raised, its text the reason."""
        return cls(error, error, f"{type(error).__name__}: {error}")


def abort_and_raise(tx: WriteTransaction, error: BaseException, failure: Failure,
                    after_abort: Callable[[Failure], None]) -> NoReturn:
    """How both pipelines end a failed attempt (called in the ``except`` of ``error``): the
    transaction rolls the instant back recording ``failure.recorded``, ``after_abort`` runs
    whatever the rollback did, then ``failure.raised`` is raised (with its ``__cause__``)."""
    try:
        tx.abort(reason=failure.reason, error=failure.recorded)
    finally:
        after_abort(failure)
    if failure.raised is error:
        raise error
    raise failure.raised from failure.raised.__cause__


@dataclass
class WritePlan:
    """What the planner settled, read from the snapshot taken after begin."""

    #: every file group the write produces a file for: the inflight instant's footprint
    planned: list[tuple[str, str]]
    #: existing file groups it updates or replaces: what the clustering gate checks
    touched: list[tuple[str, str]]
    #: the timeline the plan was read from (pending clustering plans are looked up there)
    timeline: object
    #: insert_overwrite: partition -> replaced file ids (None: not a replacecommit)
    replaced: dict[str, list[str]] | None = None
    #: the engine's own plan (work items, Spark's FilePlan)
    detail: object = None


class WriteEngine(ABC):
    """What one engine supplies for one write: its planner and its file writer, and the few
    stages it needs of its own. One object per write attempt; the pipeline drives it."""

    #: the table written (set by ``prepare`` at the latest)
    table: Table
    #: the write's config (lock, heartbeat, early conflict detection, ...)
    config: WriteConfig
    #: the lower-case operation (``upsert``, ``insert``, ...)
    operation: str
    #: every marker of the write is made in this process, by :func:`write_marked` (the core
    #: engines; Spark's executors make their own): the transaction then deletes them by name
    #: after the commit and reads the abort signal while it goes inflight (issue 43)
    marks_here: bool = False

    @property
    @abstractmethod
    def action(self) -> Action:
        """The instant's action (commit, replacecommit, deltacommit)."""

    @property
    @abstractmethod
    def operation_type(self) -> str:
        """Hudi's operation type recorded in the commit (``UPSERT``, ...)."""

    def check_input(self) -> None:
        """Refuse a batch that cannot be a batch of this table, before its key is looked up."""

    def settled(self, batch_key: str | None, *, writer_id: str | None, attempt: int,
                lock_manager) -> CommitResult | None:
        """A keyed batch's commit if already in the table, or the re-commit of a dead writer's
        staged instant of it; None: write it."""
        return prepare_batch(self.table, self.config, batch_key, writer_id=writer_id,
                             attempt=attempt, lock_manager=lock_manager)

    @abstractmethod
    def prepare(self) -> str:
        """The batch's own schema (Avro JSON); the table exists afterwards."""

    def reconcile(self, table_json: str) -> str:
        """``hoodie.datasource.write.reconcile.schema=true``: make the batch the table's schema
        (``format/schema.reconcile_columns``: missing columns null, narrower numbers widened,
        new columns kept) and return its schema (Avro JSON)."""
        raise NotImplementedError

    def check_batch(self, schema_json: str) -> None:
        """The rest of the checks before the instant exists, given the commit's schema."""

    def footprint(self) -> "list[str] | Footprint | None":
        """The partitions the batch touches, declared at begin so other writers (early checks,
        admission) see this write before it has planned (``core/concurrency/footprint``);
        None: not declared; a :class:`Footprint` whose partitions are None: declared (its
        owner and kind named) with its partitions unknown. Either overlaps everything."""
        return None

    def check_before_plan(self, tx: WriteTransaction) -> None:
        """An early conflict check before planning (the instant exists, nothing is written)."""

    @abstractmethod
    def plan(self, tx: WriteTransaction) -> WritePlan:
        """Which file groups get which records, read after ``begin``."""

    def check_before_write(self, tx: WriteTransaction, plan: WritePlan) -> None:
        """An early conflict check of the whole plan, inflight, before any file is written."""

    @abstractmethod
    def write_files(self, tx: WriteTransaction, plan: WritePlan, schema_json: str) -> list[WriteStat]:
        """The data files, each behind its marker; their stats."""

    def replaced(self, plan: WritePlan) -> dict[str, list[str]] | None:
        """The file groups a replacecommit replaces (asked at commit)."""
        return plan.replaced

    def failure(self, tx: WriteTransaction, error: BaseException) -> "Failure":
        """What the rollback after ``error`` records and what is raised (asked before the
        rollback); default: the error as it came."""
        return Failure.of(error)

    def after_abort(self, tx: WriteTransaction, failure: "Failure") -> None:
        """After the rollback, whether or not it succeeded: what the engine undoes of its own
        (Spark: stray base files, the abort signal)."""

    def lost_to_twin(self, tx: WriteTransaction) -> None:
        """After a twin attempt of the batch won under the lock (ours is rolled back)."""

    def close(self) -> None:
        """Release what the attempt held (Spark: cached DataFrames), whatever the outcome."""


@dataclass
class WritePipeline:
    """Runs one :class:`WriteEngine` through the stages, once per call of :meth:`run`."""

    writer_id: str | None = None
    lock_manager: object = None
    time_generator: InstantTimeGenerator | None = None
    on_begin: Callable[[WriteTransaction], None] | None = None
    on_progress: Progress | None = None
    #: the last attempt's transaction and stats (the Spark result reports them)
    tx: WriteTransaction | None = field(default=None, init=False)
    stats: list[WriteStat] = field(default_factory=list, init=False)
    replaced: dict[str, list[str]] | None = field(default=None, init=False)
    schema_json: str | None = field(default=None, init=False)

    def say(self, stage: str, text: str) -> None:
        if self.on_progress is not None:
            self.on_progress(stage, text)

    def run(self, engine: WriteEngine, *, checkpoint: str | None = None,
            batch_key: str | None = None, attempt: int = 1, recover: bool = True,
            before_commit: Callable[[WriteTransaction], None] | None = None,
            extra_metadata: Mapping[str, str] | None = None) -> CommitResult:
        """One batch as one instant (or the batch's earlier commit)."""
        engine.check_input()
        if recover and batch_key is not None:
            done = engine.settled(batch_key, writer_id=self.writer_id, attempt=attempt,
                                  lock_manager=self.lock_manager)
            if done is not None:
                return after_commit(engine.table, engine.config, done)
        batch_schema = engine.prepare()
        check_sync_client(engine.config)  # the config is the engine's once prepared (Spark)
        require_implemented(engine.table)  # a merge this project does not implement (CUSTOM)
        # one listing for the schema and begin's check of the metadata table's instants, made
        # while the table's properties are read (write_guard.look_before_begin)
        look = look_before_begin(engine.table, engine.config)
        seen = look.timeline
        if engine.operation != "delete" and engine.config.reconcile_schema:
            table_json = table_schema(engine.table, seen)
            if table_json:
                batch_schema = engine.reconcile(table_json)
        schema_json = commit_schema(engine.table, engine.operation, batch_schema, seen)
        engine.check_batch(schema_json)
        self.schema_json = schema_json
        tx = self.tx = WriteTransaction(
            engine.table, engine.config, action=engine.action,
            operation_type=engine.operation_type, writer_id=self.writer_id, attempt=attempt,
            checkpoint=checkpoint, batch_key=batch_key, lock_manager=self.lock_manager,
            time_generator=self.time_generator, on_begin=self.on_begin,
            footprint=engine.footprint())
        tx.begin(look=look)
        self.say("begin", f"instant {tx.instant_time} requested (attempt {attempt})")
        try:
            engine.check_before_plan(tx)
            plan = engine.plan(tx)
            # Refused before any data file exists: a pending clustering would drop the update.
            check_write_against_pending_clustering(plan.timeline, plan.touched, tx.instant, engine.config)
            tx.markers_made_here = engine.marks_here
            tx.start_inflight(planned_file_groups=plan.planned)
            engine.check_before_write(tx, plan)
            self.stats = stats = engine.write_files(tx, plan, schema_json)
            if before_commit is not None:
                before_commit(tx)
            self.say("committing", f"instant {tx.instant_time}: conflict check under the lock")
            self.replaced = replaced = engine.replaced(plan) if engine.action is Action.REPLACE_COMMIT else None
            res = tx.commit(stats, schema=schema_json, replaced=replaced, extra_metadata=extra_metadata)
        except BatchAlreadyCommittedError as e:  # a twin of this batch won under the lock
            engine.lost_to_twin(tx)
            res = committed_batch_result(engine.table, engine.table.timeline().get(e.committed_instant),
                                         attempted_instant=e.instant)
        except BaseException as e:
            abort_and_raise(tx, e, engine.failure(tx, e), lambda f: engine.after_abort(tx, f))
        finally:
            engine.close()
        # Outside the attempt: the instant is complete whatever the sync does.
        return after_commit(engine.table, engine.config, res)


def after_commit(table: Table, config: WriteConfig, res: CommitResult) -> CommitResult:
    """What follows every completed instant of both pipelines (and a batch found committed, so
    that a retry after a failed sync catches the catalog up): the catalog sync, when the
    options ask for one (``core/catalog/sync``). Its failure raises ``CatalogSyncError`` naming
    the committed instant, which stays committed."""
    res.catalog_sync = sync_after_commit(table, config, res.instant.requested_time)
    return res


def write_marked(tx: WriteTransaction, items: list, mark: Callable, write: Callable,
                 threads: int) -> list[WriteStat]:
    """Every item's marker first (each passes the early conflict check), in order, then the
    data files, several at a time (parquet encoding and compression release the GIL): a
    rollback finds every file this write may have begun from its markers."""
    names = [mark(tx, item) for item in items]
    return map_bounded(lambda pair: write(tx, *pair), list(zip(items, names)), threads)


def planned_file_groups(items: Iterable) -> list[tuple[str, str]]:
    """``(partition, file id)`` of each work item, in order."""
    return [(w.partition, w.file_id) for w in items]


__all__ = ["WriteEngine", "WritePipeline", "WritePlan", "Failure", "abort_and_raise", "after_commit", "commit_schema", "write_marked",
           "prepare_batch", "recommit", "RecoveryResult",
           "planned_file_groups", "Progress"]
