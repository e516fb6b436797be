"""The Spark write path: one batch (a DataFrame) as one Hudi instant, with OCC.

::

    The stages and their order are core's write pipeline (core/commit/pipeline.py);
    SparkWriteEngine supplies Spark's part of each (its own methods, named as the stages):

    driver:    settled? (prepare: the batch key already committed / a staged instant)
               -> prepare: options -> table (created on first write) -> schema; the
                  commit's schema evolved by the pipeline -> check_batch: key and
                  partition columns, hostile values (refused BEFORE the instant exists;
                  a copy-on-write bulk_insert without a combine: its column types here,
                  its values in its write tasks, see below)
               -> begin (the pipeline: lock, instant, heartbeat; on_begin told)
               -> check_before_plan: RFC-56 against live writers' markers (a driver-side
                  probe of the batch's first records, then one Spark join if needed)
               -> plan: tagging (tagging.py: keys, simple/bucket index, file
                  sizing; file_group_plan.py: which of them per operation, in one pass)
               -> the pipeline: pending-clustering gate, inflight with the planned groups
               -> check_before_write: every planned file group against live markers
    executors: write_files: records shuffled by file group, deduplicated after the shuffle;
               new file groups only, on a local table: Spark's parquet writer, markers made
               by the driver first, files published under Hudi names (native_write.py), or
               for a bulk_insert that does not combine, pyarrow in each input task, no
               shuffle, the tasks checking their rows as core does; a refusal is raised
               at publish, nothing published, the instant rolled back (pair_write.py);
               else per file group (executor.py): abort? -> early conflict check + marker
               -> merge with the previous base file -> one parquet base file -> WriteStat
    driver:    the pipeline's commit under the lock with conflict resolution (core) -> result
               (or on failure: failure (errors.spark_failure), the pipeline's rollback,
               after_abort: stray files swept, the error told what was discarded; a twin
               that won: our files swept, its commit returned)

The driver owns the transaction: the heartbeat, the lock and the timeline never leave it.
The write job runs under a job group that the driver cancels as soon as any executor meets
a conflict or an abort signal (jobgroup.py), then the instant is rolled back from its markers.

Semantics mirror core's :class:`~airflow_hudi_occ.core.commit.writer.ArrowTableWriter` (the
single-process reference): ``upsert`` merges by key (the larger precombine wins, ties go to
the incoming record), ``insert`` / ``bulk_insert`` write new keys without a lookup, ``delete``
removes keys, ``insert_overwrite`` replaces every file group of the touched partitions.
Beyond that reference, new keys top up small file groups and are split into file groups of
about ``hoodie.parquet.max.file.size``, as Hudi's Spark writer does.

Idempotence and recovery (``batch_key``): :meth:`SparkHudiWriter.prepare` (run by
:meth:`~SparkHudiWriter.write` first, and by the job before it reads the source) returns the
batch's commit if it is already in the table (``already_committed``) or re-commits a dead
writer's staged instant of it (``recommitted``, core/recovery.py); a twin attempt that loses
the check under the commit lock also returns ``already_committed`` (its instant rolled back).

Errors: every :class:`RetryableError` (write conflict, early conflict, abort, lock timeout)
leaves the table as it was and carries ``attempt``, ``seconds_discarded`` and
``files_discarded``; retry with a fresh call. :class:`SchemaError` and :class:`ConfigError`
are raised before anything is written. Any other job failure is a :class:`SparkWriteError`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Mapping

import pyarrow as pa

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.concurrency.footprint import Footprint, check_kind
from airflow_hudi_occ.core.config import BulkInsertSortMode
from airflow_hudi_occ.core.commit.writer import SORTS_BY_KEY
from airflow_hudi_occ.spark.submit.table_creation import open_or_create_table
from airflow_hudi_occ.core.concurrency.early_conflict.async_checker import AsyncTimelineServerBasedDetectionStrategy
from airflow_hudi_occ.core.concurrency.early_conflict.declared import declared_groups
from airflow_hudi_occ.core.errors import (ConfigError, EarlyConflictError,
                           HudiOccError, TableNotFoundError, WriteAbortedError)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, list_base_files
from airflow_hudi_occ.core.format.base_file import compares_ordering_values
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.format.schema import avro_schema_json, check_column_names, reconcile_columns
from airflow_hudi_occ.core.table.table import (MERGE_ON_READ, NO_RECORD_KEY_MESSAGE, NO_RECORD_KEY_REMEDY,
                                               Table)
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.core.commit.pipeline import Failure, WriteEngine, WritePipeline, WritePlan, prepare_batch
from airflow_hudi_occ.core.commit.transaction import COMMITTED, CommitResult, WriteTransaction
from airflow_hudi_occ.spark import native_write, pair_write, tagging
from airflow_hudi_occ.spark.errors import spark_failure
from airflow_hudi_occ.spark.executor import STAT_DDL, TaskContext, make_group_fn, write_stat_of
from airflow_hudi_occ.spark.compat import apply_in_arrow
from airflow_hudi_occ.spark.file_group_plan import FilePlan, plan_file_groups, plan_in_tasks, tag_buckets
from airflow_hudi_occ.spark.jobgroup import run_watched
from airflow_hudi_occ.spark.submit.options import SparkWriteOptions, check_merge_on_read

log = logging.getLogger(__name__)

EXTRA_ENGINE = "hudi_occ.engine"
#: what the engine writes into a table with virtual keys: new file groups only, no key lookup
#: (the core writer does the rest)
VIRTUAL_KEY_OPERATIONS = ("bulk_insert", "insert_overwrite")


@dataclass
class SparkWriteResult:
    instant: str
    completion_time: str | None
    operation: str
    attempt: int
    stats: list[WriteStat] = field(default_factory=list)
    replaced: dict[str, list[str]] = field(default_factory=dict)
    seconds: float = 0.0
    #: committed | already_committed (nothing new written) | recommitted (a staged instant)
    outcome: str = COMMITTED
    attempted_instant: str | None = None
    recovered_from: str | None = None
    #: the catalog sync after the commit (core/catalog/sync.SyncReport), if one ran
    catalog_sync: object | None = None

    @classmethod
    def from_commit(cls, res: CommitResult, attempt: int, seconds: float = 0.0) -> "SparkWriteResult":
        meta = res.metadata
        return cls(res.instant.requested_time, res.instant.completion_time, meta.operation_type,
                   attempt, meta.write_stats(), dict(meta.partition_to_replace_file_ids or {}),
                   seconds, res.outcome, res.attempted_instant, res.recovered_from, res.catalog_sync)

    def summary(self) -> dict:
        s = self.stats
        return {"files": len(s), "rows_written": sum(x.num_writes for x in s),
                "inserts": sum(x.num_inserts for x in s), "updates": sum(x.num_update_writes for x in s),
                "deletes": sum(x.num_deletes for x in s), "bytes": sum(x.file_size_in_bytes for x in s),
                "file_groups": len({x.file_group for x in s}),
                "replaced_file_groups": sum(len(v) for v in self.replaced.values())}

    def to_json(self) -> dict:
        out = {"outcome": self.outcome, "instant": self.instant, "completion_time": self.completion_time,
               "operation": self.operation, "attempt": self.attempt, "seconds": round(self.seconds, 3),
               "stats": self.summary()}
        if self.attempted_instant is not None:
            out["attempted_instant"] = self.attempted_instant
        if self.recovered_from is not None:
            out["recovered_from"] = self.recovered_from
        if self.catalog_sync is not None:
            out["catalog_sync"] = self.catalog_sync.to_json()
        return out


def arrow_schema_of(df) -> pa.Schema:
    """The user columns' Arrow schema (plain string/binary, as executors write them)."""
    from airflow_hudi_occ.spark.compat import to_arrow_schema
    # a timestamp is an instant: stored as UTC microseconds (Java Hudi's TIMESTAMP_MICROS,
    # adjusted to UTC); Spark hands executors the session's zone, the same instants
    sch = to_arrow_schema(df.schema, timezone="UTC")
    fields = []
    for f in sch:
        t = f.type
        if pa.types.is_large_string(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t, True))
    return pa.schema(fields)


class SparkTableJob:
    """What every Spark action on one table carries: the session, the table, Hudi options as
    strings (as Spark's own options are), and an optional shared lock manager."""

    def __init__(self, spark, base_path: str, options: "Mapping[str, Any] | SparkWriteOptions", *,
                 storage_options: dict | None = None, writer_id: str | None = None,
                 lock_manager=None):
        self.spark = spark
        self.base_path = base_path
        #: options checked already (the job checks them once, before anything else)
        self._checked = options if isinstance(options, SparkWriteOptions) else None
        if self._checked is not None:
            options = self._checked.options
        self.options = {str(k): str(v) for k, v in options.items() if v is not None}
        self.storage_options = storage_options
        self.writer_id = writer_id
        #: one lock manager for every transaction of this job (None: each makes its own)
        self.lock_manager = lock_manager


class SparkHudiWriter(SparkTableJob):
    """Writes DataFrames to one table; one :meth:`write` call is one attempt (one instant).

    ``on_begin(tx)`` is called as soon as an attempt's instant is requested (the job prints
    its ``HUDI_OCC_BEGIN`` line from it); ``on_progress(stage, text)`` at each step of the
    write, for people (the job prints ``hudi-occ <stage>: <text>`` lines, core/job_protocol)."""

    def __init__(self, spark, base_path: str, options: Mapping[str, Any], *, on_begin=None,
                 on_progress: Callable[[str, str], None] | None = None, **kw):
        super().__init__(spark, base_path, options, **kw)
        self.on_begin = on_begin
        self.on_progress = on_progress

    @property
    def write_options(self) -> SparkWriteOptions:
        """The options, parsed and checked once per writer (on first use, so that a wrong key
        fails the call that needs it): every attempt and stage reads this, none parses again."""
        if self._checked is None:
            self._checked = SparkWriteOptions.from_options(self.options)
        return self._checked

    def settled_commit(self, batch_key: str | None, *, attempt: int = 1,
                       committed_checked: bool = False) -> CommitResult | None:
        """A keyed batch's commit if already in the table, or the re-commit of a dead writer's
        staged instant of it; None: write it (also when the table does not exist yet).
        ``committed_checked``: as :func:`~airflow_hudi_occ.core.commit.pipeline.prepare_batch`."""
        if batch_key is None:
            return None
        try:
            table = Table.open(self.base_path, self.storage_options)
        except TableNotFoundError:
            return None
        return prepare_batch(table, self.write_options.write_config, batch_key, writer_id=self.writer_id,
                             attempt=attempt, lock_manager=self.lock_manager,
                             committed_checked=committed_checked)

    def prepare(self, batch_key: str | None, *, attempt: int = 1,
                committed_checked: bool = False) -> SparkWriteResult | None:
        """Before reading a keyed batch: its commit if already in the table, or the re-commit
        of a dead writer's staged instant of it; None: write it. Needs no Spark session (the
        job runs it before starting one)."""
        t0 = time.time()
        res = self.settled_commit(batch_key, attempt=attempt, committed_checked=committed_checked)
        return None if res is None else SparkWriteResult.from_commit(res, attempt, time.time() - t0)

    def write(self, df, operation: str | None = None, *, checkpoint: str | None = None,
              batch_key: str | None = None, attempt: int = 1,
              extra_metadata: Mapping[str, str] | None = None,
              before_commit: Callable[[WriteTransaction], None] | None = None,
              recover: bool = True) -> SparkWriteResult:
        """Write one batch as one instant. ``before_commit`` lets tests hold writers at the
        commit step so that they provably overlap. ``recover=False`` skips :meth:`prepare`
        (the caller ran it already). The stages and their order are ``core/commit/pipeline``'s;
        :class:`SparkWriteEngine` supplies this engine's part of each."""
        t0 = time.time()
        engine = SparkWriteEngine(self, df, operation)
        pipeline = WritePipeline(writer_id=self.writer_id, lock_manager=self.lock_manager,
                                 on_begin=self.on_begin, on_progress=self.on_progress)
        res = pipeline.run(engine, checkpoint=checkpoint, batch_key=batch_key, attempt=attempt,
                           recover=recover, before_commit=before_commit,
                           extra_metadata={EXTRA_ENGINE: "spark", **dict(extra_metadata or {})})
        run = engine.run
        if res.outcome != COMMITTED:  # settled before the write, or a twin won under the lock
            return SparkWriteResult.from_commit(res, attempt, time.time() - (run.t_start if run else t0))
        return SparkWriteResult(res.instant.requested_time, res.instant.completion_time,
                                engine.batch.opts.operation_type, run.tx.attempt, pipeline.stats,
                                pipeline.replaced or {}, time.time() - run.t_start,
                                catalog_sync=res.catalog_sync)


@dataclass
class _Batch:
    """One batch checked against the table; nothing of it is on the timeline yet."""

    df: Any  #: the user's columns (meta columns dropped)
    table: Table
    opts: SparkWriteOptions
    schema_json: str
    target_schema: pa.Schema | None  #: None for a delete (no rows are written)
    bucket: bool
    num_buckets: int
    mor: bool = False  #: merge-on-read: a deltacommit (spark/mor_executor.py)
    #: partition values spelled other than as themselves (``tagging.check_batch``)
    partition_labels: dict = field(default_factory=dict)
    #: the batch's partition paths (``tagging.check_batch``): its footprint, declared at begin
    #: (None for a bulk_insert checked by its write tasks: declared with partitions unknown)
    partitions: list | None = None

    @property
    def op(self) -> str:
        return self.opts.operation

    @property
    def action(self) -> Action:
        if self.mor:
            return Action.DELTA_COMMIT
        return Action.REPLACE_COMMIT if self.op == "insert_overwrite" else Action.COMMIT

    @property
    def user_columns(self) -> list[str]:
        return list(self.df.columns)

    @property
    def combines(self) -> bool:
        """Whether the batch's copies of a key are combined: always, but for a copy-on-write
        bulk_insert with the simple index and without ``hoodie.combine.before.insert`` (Hudi's
        default)."""
        return self.op != "bulk_insert" or self.mor or self.bucket or self.opts.combine_before_insert

    @property
    def in_tasks(self) -> bool:
        """A copy-on-write bulk_insert that keeps duplicate keys, into a local table: checked
        and written by its input tasks in one Spark job (``file_group_plan.plan_in_tasks``,
        pair_write.py), with no batch check before its instant."""
        return (self.op == "bulk_insert" and not self.bucket and not self.combines
                and pair_write.applies(self.table))


@dataclass
class _Attempt:
    """One attempt in flight: what an abort must undo (the instant, the files of the planned
    partitions, the cached DataFrames) and report (time spent, file groups planned)."""

    tx: WriteTransaction
    t_start: float
    persisted: list = field(default_factory=list)
    planned: list = field(default_factory=list)
    #: the batch refused by its write tasks (pair_write.refusal): raised as the batch check
    #: raises it, so its fields are not those of a discarded attempt
    refusal: BaseException | None = None
    #: base files of the instant on storage when it failed (counted before its rollback)
    written: int = 0

    @property
    def planned_parts(self) -> set[str]:
        return {p for p, _ in self.planned}


class SparkWriteEngine(WriteEngine):
    """The Spark engine of one write attempt (``core/commit/pipeline`` drives its stages): the
    driver plans with Spark SQL (tagging), the executors write (markers, then files, per task
    or by the driver first for Spark's own parquet writer), and a failed job is cancelled as a
    whole and rolled back. The stages are this class's own; of its writer it reads only the
    public settings (session, table path, options, progress callback)."""

    def __init__(self, writer: SparkHudiWriter, df, operation: str | None):
        self.writer = writer
        self.spark = writer.spark
        self.df = df
        self.requested_operation = operation
        self.table = None
        self.config = None
        self.operation = None
        self.batch: _Batch | None = None
        self.run: _Attempt | None = None

    @property
    def action(self) -> Action:
        return self.batch.action

    @property
    def operation_type(self) -> str:
        return self.batch.opts.operation_type

    def say(self, stage: str, text: str) -> None:
        if self.writer.on_progress is not None:
            self.writer.on_progress(stage, text)

    # -- the stages of one write, in order -----------------------------------------------------

    def settled(self, batch_key, *, writer_id, attempt, lock_manager) -> CommitResult | None:
        return self.writer.settled_commit(batch_key, attempt=attempt)

    def prepare(self) -> str:
        """Options, the table (created on a first write), the user's columns and their schema:
        the first half of what refuses the batch before the instant exists
        (:meth:`check_batch` is the rest, once the commit's schema is known)."""
        w = self.writer
        opts = w.write_options.with_operation(self.requested_operation).check_writable()
        check_column_names(arrow_schema_of(self.df))  # before a first write creates the table
        if not opts.record_key_fields:
            try:
                Table.open(w.base_path, w.storage_options)
            except TableNotFoundError:
                raise ConfigError(NO_RECORD_KEY_MESSAGE, key="hoodie.datasource.write.recordkey.field",
                                  remedy=NO_RECORD_KEY_REMEDY) from None
        table = open_or_create_table(w.base_path, opts, w.storage_options)
        cfg = table.config
        if not cfg.populates_meta_fields and opts.operation not in VIRTUAL_KEY_OPERATIONS:
            raise ConfigError(
                f"table {table.name} has virtual keys (hoodie.populate.meta.fields=false): the Spark "
                f"engine writes such a table by {' and '.join(VIRTUAL_KEY_OPERATIONS)} only; its "
                f"{opts.operation} finds records by their stored _hoodie_record_key",
                key="hoodie.populate.meta.fields", value="false",
                remedy=f"use {' or '.join(VIRTUAL_KEY_OPERATIONS)}, or write the {opts.operation} with "
                       "the core ArrowTableWriter, which keeps virtual keys")
        bucket = opts.index_type == "BUCKET" or (cfg.get("hoodie.index.type", "") or "").upper() == "BUCKET"
        mor = cfg.table_type == MERGE_ON_READ  # also a MOR table made elsewhere
        if mor:  # spark/mor_executor.py: deltacommits; new keys go to new file groups, as core's
            check_merge_on_read(cfg.table_type, opts.operation, "BUCKET" if bucket else "SIMPLE",
                                key="hoodie.table.type")
            opts = replace(opts, small_file_limit=0)
        df = self.df.drop(*[c for c in META_COLUMNS if c in self.df.columns])
        arrow_schema = arrow_schema_of(df)
        b = self.batch = _Batch(df=df, table=table, opts=opts,
                                schema_json=avro_schema_json(arrow_schema, table.name),
                                target_schema=None if opts.operation == "delete" else arrow_schema,
                                bucket=bucket, num_buckets=cfg.bucket_num or opts.bucket_num, mor=mor)
        self.table, self.config, self.operation = b.table, b.opts.write_config, b.op
        return b.schema_json

    def reconcile(self, table_json: str) -> str:
        """The batch as the table's schema (``format/schema.reconcile_columns``) in Spark SQL:
        a missing column a typed null, a narrower number cast, new columns kept."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import from_arrow_type
        b = self.batch
        cols = []
        for name, to, present in reconcile_columns(arrow_schema_of(b.df), table_json):
            if not present:
                cols.append(F.lit(None).cast(from_arrow_type(to)).alias(name))
            else:
                cols.append(F.col(name).cast(from_arrow_type(to)).alias(name) if to is not None else F.col(name))
        b.df = b.df.select(*cols)
        arrow = arrow_schema_of(b.df)
        b.schema_json, b.target_schema = avro_schema_json(arrow, b.table.name), arrow
        return b.schema_json

    def check_batch(self, schema_json: str) -> None:
        """Key and partition columns and their types; hostile partition values, rows without
        a key and, where the write compares ordering values, rows with a null one (one Spark
        job): still before the instant exists."""
        batch = self.batch
        batch.schema_json = schema_json
        df, cfg, opts = batch.df, batch.table.config, batch.opts
        tagging.record_key_expr(df, cfg.record_key_fields)
        tagging.partition_path_expr(df, cfg.partition_fields, cfg.hive_style_partitioning)
        if batch.in_tasks:  # its write tasks check their rows (pair_write.py)
            self.say("planning", f"{opts.operation} into copy-on-write table {batch.table.name}: "
                                 "its rows are checked and counted by the write job's tasks")
        else:
            counts: dict = {}
            batch.partition_labels = tagging.check_batch(
                df, cfg.record_key_fields, cfg.partition_fields, cfg.hive_style_partitioning,
                cfg.url_encode_partitions, counts,
                ordering=cfg.ordering_field if compares_ordering_values(batch.op, batch.combines) else None)
            self.say("planning", f"{opts.operation} of {counts.get('rows', 0)} input rows in "
                                 f"{counts.get('partitions', 0)} partition(s) into "
                                 f"{'merge-on-read' if batch.mor else 'copy-on-write'} table {batch.table.name}")
            batch.partitions = counts.get("paths")  # the footprint declared at begin
        self.run = _Attempt(tx=None, t_start=time.time())

    def footprint(self) -> "list[str] | Footprint | None":
        if self.batch.in_tasks:
            # partitions known only to its write job; new file groups only, which no other
            # writer's conflict check can meet: named from begin, waited on everywhere
            return Footprint.of(None, kind=check_kind(self.config.write_kind))
        return self.batch.partitions

    def check_before_plan(self, tx: WriteTransaction) -> None:
        """RFC-56 at the earliest point: before the tagging jobs, look at the file groups that
        earlier, live writers hold markers on; if any record of this batch lives in one of
        them (its key is in that file group's base file), the write is doomed: stop now, having
        run one small Spark job and written nothing. Only where the answer is certain: the
        simple index, for upserts and deletes (inserts and top-ups are judged after tagging)."""
        self.run.tx = tx
        batch = self.batch
        if (not tx.config.early_conflict.enabled or batch.bucket
                or batch.op not in ("upsert", "delete")):
            return
        det = tx.detector
        rivals = det.rivals(tx.footprint)  # earlier live writers on our partitions (declared)
        for w, shared in rivals:
            self.say("early-check", f"right after begin: live writer {w.describe(shared)} "
                                    f"({len(w.footprint.file_groups) if w.footprint else 0} file "
                                    "group(s) declared); a shared partition is not a conflict")
        held: dict[tuple[str, str], str] = {}
        for other in det.view.candidates():
            for group in det.view.all_file_groups(other):
                held.setdefault((group[0], group[1]), other)
        declared = declared_groups(rivals)  # what they will write: markers to come
        for group, other in declared.items():
            held.setdefault(group, other)
        if not held:
            self.say("early-check", "before tagging: passed (no live writer holds markers)")
            return
        table = batch.table
        fsv = FileSystemView(table, partitions=sorted({p for p, _ in held}))
        slices = [sl for p, f in sorted(held) if (sl := fsv.get(p, f)) is not None]
        passed = (f"before tagging: passed ({len(held)} file group(s) held by "
                  f"{len(set(held.values()))} live writer(s), none with keys of this batch)")
        if not slices:
            self.say("early-check", passed)
            return  # new file groups only: no record of this batch lives there yet
        cfg = table.config
        fid = tagging.first_held_hit(self.spark, batch.df, cfg.record_key_fields, cfg.partition_fields,
                                     cfg.hive_style_partitioning, slices, table.storage,
                                     batch.partition_labels)
        if fid is None:
            self.say("early-check", passed)
            return
        group = next(g for g in held if g[1] == fid)
        self.say("early-check", f"before tagging: stopped: keys of this batch are in file group "
                                f"{group[0]}/{group[1]}, which live writer {held[group]} holds")
        try:
            if group in declared:
                det.check_declared([group], rivals)
            raise det.conflict_with(held[group], [group])
        except EarlyConflictError as e:
            e.stopped_before_job = True
            e.stopped_before_tagging = True
            raise

    def plan(self, tx: WriteTransaction) -> WritePlan:
        """Tag the records (keys, partitions, file groups) against the snapshot read after
        begin, and settle which file groups the write touches."""
        plan = self._plan_file_groups()
        self._report_plan(plan)
        return WritePlan(planned=self.run.planned, touched=self._touched(plan),
                         timeline=plan.view.timeline, detail=plan)

    def check_before_write(self, tx: WriteTransaction, plan: WritePlan) -> None:
        """Every planned file group checked once on the driver before the write job starts:
        a write doomed by an earlier live writer's markers (or, with the commit-conflict check,
        by a commit since it began) stops here, before any executor writes a byte. Each task
        still checks again before its own marker, for writers that begin meanwhile."""
        planned = self.run.planned
        if tx.config.early_conflict.enabled and planned:
            try:
                tx.detector.check_all(planned)
            except EarlyConflictError as e:
                e.stopped_before_job = True  # no task ran: nothing to cancel, nothing written
                self.say("early-check", f"before writing: stopped: instant "
                                        f"{getattr(e, 'other_instant', None)} holds "
                                        f"{len(getattr(e, 'file_groups', None) or [])} of the "
                                        f"planned file group(s)")
                raise
            self.say("early-check", f"before writing: passed ({len(planned)} file group(s) "
                                    "clear of other writers' markers)")

    def write_files(self, tx: WriteTransaction, plan: WritePlan, schema_json: str) -> list[WriteStat]:
        """The Spark job, in a job group the driver cancels on a conflict or an abort signal:
        new file groups only (and a local table): Spark's own parquet writer
        (native_write.py), or pyarrow in the input tasks (pair_write.py); else one Python task
        per planned file group (executor.py; mor_executor.py for a deltacommit)."""
        stats = self._write_files(plan.detail)
        self.say("writing", f"done: {len(stats)} file(s), {sum(s.num_writes for s in stats)} rows written")
        return stats

    def replaced(self, plan: WritePlan) -> dict[str, list[str]] | None:
        """insert_overwrite: every file group of the touched partitions, as the snapshot saw them."""
        if self.batch.action is not Action.REPLACE_COMMIT:
            return None
        fp: FilePlan = plan.detail
        return {p: [s.file_id for s in fp.view.latest_file_slices(p)] for p in fp.partitions}

    # -- failure --------------------------------------------------------------------------------

    def failure(self, tx: WriteTransaction, error: BaseException) -> Failure:
        """As every Spark action's (``errors.spark_failure``); first, how far the doomed write
        got: its base files on storage, counted before the rollback deletes them."""
        run = self.run
        try:
            run.written = sum(1 for p in run.planned_parts for bf in list_base_files(self.table, p)
                              if bf.instant_time == tx.instant_time)
        except Exception:  # pragma: no cover - storage unreadable: still roll back
            pass
        return spark_failure(error, tx.instant_time, f"write of instant {tx.instant_time}")

    def after_abort(self, tx: WriteTransaction, failure: Failure) -> None:
        """The failed instant's stray base files swept, its abort signal cleared; an error of
        ours says what was discarded (the attempt, its seconds and files, how far it got)."""
        run, err = self.run, failure.recorded
        sweep_failed_base_files(self.table, tx.instant_time, run.planned_parts)
        abort_signal.clear_abort(self.table, tx.instant_time)
        if isinstance(err, HudiOccError) and err is not run.refusal:
            err.attempt = tx.attempt
            err.seconds_discarded = round(time.time() - run.t_start, 3)
            err.files_discarded = tx.files_discarded  # counted by tx.abort from the markers
            # how far the doomed write got: base files on storage vs file groups it planned
            err.files_written = run.written
            err.file_groups_planned = len(run.planned)

    def lost_to_twin(self, tx: WriteTransaction) -> None:
        sweep_failed_base_files(self.table, tx.instant_time, self.run.planned_parts)

    def close(self) -> None:
        if self.run is not None:
            _unpersist(self.run.persisted)

    # -- what the stages share ------------------------------------------------------------------

    def _report_plan(self, plan: FilePlan) -> None:
        if plan.in_tasks is not None:
            self.say("tagging", f"new file groups only, chosen by the write tasks (one per partition "
                                f"and task, rolled over at {plan.in_tasks.max_file_bytes} bytes)")
            return
        existing = plan.existing
        touched = sum(1 for g in plan.planned if g in existing)
        self.say("tagging", f"{len(plan.planned)} file group(s) to write in "
                            f"{len({p for p, _ in plan.planned})} partition(s): {touched} "
                            f"existing, {len(plan.planned) - touched} new")

    def _plan_file_groups(self) -> FilePlan:
        batch, run = self.batch, self.run
        if batch.in_tasks:  # no key or partition column: its tasks spell them
            run.planned = []  # known from the write job's reports
            return plan_in_tasks(batch.df, batch.opts, batch.table)
        cfg = batch.table.config
        keyed = tagging.keyed(batch.df, cfg.record_key_fields, cfg.partition_fields,
                              cfg.hive_style_partitioning, batch.partition_labels)
        if not batch.bucket:
            native = batch.op in ("bulk_insert", "insert_overwrite") and \
                native_write.applies(batch.table, "create", batch.df.schema)
            plan = plan_file_groups(self.spark, keyed, batch.op, batch.opts, batch.table,
                                    run.persisted, by_task=native and batch.combines)
            plan.deduped = plan.deduped or not batch.combines
            run.planned = plan.planned
            return plan
        prepared = tagging.dedupe(keyed, cfg.ordering_field).persist()
        run.persisted.append(prepared)
        partitions = sorted(r[0] for r in prepared.select(tagging.PART).distinct().collect())
        view = FileSystemView(batch.table)  # the snapshot this write reads (after begin)
        slices = [s for p in partitions for s in view.latest_file_slices(p)]
        tagged = tag_buckets(self.spark, prepared, batch.op, batch.table, slices,
                             batch.num_buckets).persist()
        run.persisted.append(tagged)
        groups = [(r[0], r[1]) for r in tagged.groupBy(tagging.PART, tagging.FID).count().collect()]
        run.planned = sorted(set(groups))
        return FilePlan(tagged=tagged, partitions=partitions, view=view, slices=slices,
                        planned=run.planned)

    def _touched(self, plan: FilePlan) -> list[tuple[str, str]]:
        """The stored file groups the write updates, and those an insert_overwrite replaces:
        what the clustering gate checks."""
        existing = plan.existing
        touched = [g for g in self.run.planned if g in existing]
        replaced_now = ([(s.partition, s.file_id) for s in plan.slices]
                        if self.batch.op == "insert_overwrite" else [])
        return touched + replaced_now

    def _write_files(self, plan: FilePlan) -> list[WriteStat]:
        batch, run = self.batch, self.run
        if plan.in_tasks is not None:
            return self._write_in_tasks(plan)
        if not run.planned:
            self.say("writing", "nothing to write (no file group planned)")
            return []
        self.say("writing", f"{len(run.planned)} file group(s)")
        if batch.mor:
            from airflow_hudi_occ.spark import mor_executor
            return mor_executor.write_files(self, plan)
        tx, table = run.tx, batch.table
        ctx = self.task_context(plan)
        records = self.records_by_file_group(plan)
        description = f"hudi {batch.op} {table.name} {tx.instant_time}"
        if native_write.applies(table, ctx.mode, batch.df.schema):
            names = native_write.file_names(run.planned, tx.instant_time)
            native_write.create_markers(table, tx.config, tx.instant_time, names)
            out = native_write.staging_dir(table, tx.instant_time)
            t0 = time.time()
            job = native_write.write_job(self.spark, records, batch.user_columns, tx.instant_time,
                                         names, out, meta_fields=table.config.populates_meta_fields,
                                         parquet=tx.config.parquet,
                                         sort_by_key=batch.op == "bulk_insert" and self.sorts_by_key)
            run_watched(self.spark, table, tx.instant_time, job, description=description,
                        extra_check=self.async_checker(), on_progress=self.write_progress(len(run.planned)))
            return native_write.publish(table, tx.instant_time, native_write.staged_files(names, out),
                                        out, t0)
        job = apply_in_arrow(records, (tagging.PART, tagging.FID), make_group_fn(ctx), STAT_DDL)
        rows = run_watched(self.spark, table, tx.instant_time, job.collect, description=description,
                           extra_check=self.async_checker(), on_progress=self.write_progress(len(run.planned)))
        stopped = [r for r in rows if r.stopped]
        if stopped:  # the signal is gone (cleared by someone): still doomed
            raise WriteAbortedError(
                f"write {tx.instant_time} stopped on {len(stopped)} file group(s): "
                f"{stopped[0].stopped}", instant=tx.instant_time, reason=stopped[0].stopped)
        return [write_stat_of(r) for r in rows]

    def _write_in_tasks(self, plan: FilePlan) -> list[WriteStat]:
        """The one Spark job of a bulk_insert checked and written by its input tasks
        (pair_write.py), then on the driver: a task's refusal (a hostile partition value, rows
        without a key) raised as core's error (the pipeline rolls the instant back; nothing was
        published), else every reported file's marker, then the files published under their
        names after an abort check. No early conflict check runs: its file groups are new, so
        no other writer's markers can name them."""
        batch, run = self.batch, self.run
        tx, table = run.tx, batch.table
        out = native_write.staging_dir(table, tx.instant_time)
        self.say("writing", "the input tasks check their rows and write them into new file groups")
        t0 = time.time()
        job = pair_write.write_job(self.spark, self.laid_out(batch.df), user_columns=batch.user_columns,
                                   target_schema=batch.target_schema, instant=tx.instant_time,
                                   plan=plan.in_tasks, out_dir=out,
                                   meta_fields=table.config.populates_meta_fields)
        rows = run_watched(self.spark, table, tx.instant_time, job,
                           description=f"hudi {batch.op} {table.name} {tx.instant_time}",
                           on_progress=self.write_progress(None))
        refused = pair_write.refusal(plan.in_tasks, rows)
        if refused is not None:
            run.refusal = refused
            self.say("writing", f"refused by the write tasks ({type(refused).__name__}): nothing "
                                "published, the instant is rolled back")
            raise refused
        files = [(r["partition"], r["file_id"], r["name"], os.path.join(out, r["name"]))
                 for r in rows if r["kind"] == "file"]
        run.planned = sorted((p, f) for p, f, _, _ in files)
        self.say("writing", f"{sum(r['rows'] for r in rows if r['kind'] == 'file')} input rows in "
                            f"{len(run.planned_parts)} partition(s) written to {len(files)} new file group(s)")
        native_write.create_markers(table, tx.config, tx.instant_time,
                                    {(p, f): name for p, f, name, _ in files})
        return native_write.publish(table, tx.instant_time, files, out, t0)

    def records_by_file_group(self, plan: FilePlan):
        """The tagged records, one per key, shuffled by file group: the dedupe runs after
        the shuffle (all copies of a key share its file group), so it costs a sort within
        each Spark partition, not a shuffle of its own. A plan by input task (no duplicate
        keys, file groups of their own per task) needs neither."""
        batch = self.batch
        cols = batch.user_columns + [tagging.KEY, tagging.PART, tagging.FID]
        data = plan.tagged
        if plan.shuffle:
            data = data.repartition(tagging.PART, tagging.FID)
        if not plan.deduped:
            data = tagging.dedupe(data, batch.table.config.ordering_field, within=(tagging.FID,))
        return data.select(*cols)

    def task_context(self, plan: FilePlan) -> TaskContext:
        """What every executor task needs: how to write (create, append, merge, delete) and
        the base file each touched file group had."""
        batch, run = self.batch, self.run
        mode = {"upsert": "merge", "delete": "delete", "insert": "append",
                "bulk_insert": "create", "insert_overwrite": "create"}[batch.op]
        existing = plan.existing
        prev = {} if mode == "create" else {
            g: existing[g].base_file.relative_path for g in run.planned if g in existing}
        if batch.bucket and mode == "append":
            mode = "merge"  # a bucket holds each key once
        return TaskContext(base_uri=batch.table.base_uri, storage_options=self.writer.storage_options or {},
                           options=dict(batch.opts.options), instant=run.tx.instant_time, mode=mode,
                           user_columns=batch.user_columns, target_schema=batch.target_schema,
                           precombine=batch.table.config.ordering_field, prev=prev,
                           completed_at_start=sorted(run.tx.snapshot.completed_at_start),
                           sort_columns=[tagging.KEY] if batch.op == "bulk_insert" and self.sorts_by_key else [])

    @property
    def sorts_by_key(self) -> bool:
        """A bulk_insert whose ``hoodie.bulkinsert.sort.mode`` orders each file's rows by key."""
        return self.batch.opts.write_config.bulk_insert_sort_mode in SORTS_BY_KEY

    def laid_out(self, df):
        """A bulk_insert's input as ``hoodie.bulkinsert.sort.mode`` lays it out for its input
        tasks (pair_write.py writes each task's rows in order), as Java's partitioners do:
        GLOBAL_SORT sorts the batch by partition path and record key, PARTITION_SORT each task's
        rows; PARTITION_PATH_REPARTITION brings a path's rows to one task (one file per path),
        _AND_SORT then orders each task's rows by path. NONE: as read."""
        mode = self.batch.opts.write_config.bulk_insert_sort_mode
        if mode is BulkInsertSortMode.NONE:
            return df
        cfg = self.batch.table.config
        path = tagging.partition_path_expr(df, cfg.partition_fields, cfg.hive_style_partitioning)
        key = tagging.record_key_expr(df, cfg.record_key_fields)
        if mode is BulkInsertSortMode.GLOBAL_SORT:
            return df.sort(path, key)
        if mode is BulkInsertSortMode.PARTITION_SORT:
            return df.sortWithinPartitions(path, key)
        df = df.repartition(max(1, df.rdd.getNumPartitions()), path)
        return df.sortWithinPartitions(path) if mode is BulkInsertSortMode.PARTITION_PATH_REPARTITION_AND_SORT else df

    def write_progress(self, file_groups: int | None, every_s: float = 10.0) -> Callable[[int, int], None] | None:
        """``on_progress`` for :func:`run_watched`: one line as the write tasks pass 25, 50 and
        75% (each task writes one or more of the ``file_groups``; None: the tasks choose
        them), and at least every ``every_s`` while they run; the end is said by the caller."""
        if self.writer.on_progress is None:
            return None
        state = {"quarter": 0, "at": time.time()}

        def report(done: int, total: int) -> None:
            if total <= 0 or done >= total:
                return
            quarter = 4 * done // total
            if quarter > state["quarter"] or time.time() - state["at"] >= every_s:
                state["quarter"], state["at"] = max(quarter, state["quarter"]), time.time()
                groups = "" if file_groups is None else f", {file_groups} file group(s)"
                self.say("writing", f"{done} of {total} write task(s) done "
                                    f"({100 * done // total}%{groups})")
        return report

    def async_checker(self) -> Callable[[], dict | None] | None:
        """The async early-conflict checker runs on the driver, told every planned file group
        up front (Hudi's pending markers), so a conflict is seen before executors write."""
        tx = self.run.tx
        if not tx.config.early_conflict.enabled:
            return None
        det = tx.detector  # started here; commit() and abort() stop it
        if not isinstance(det, AsyncTimelineServerBasedDetectionStrategy):
            return None
        for p, f in self.run.planned:
            det.add_pending(p, f)

        def check() -> dict | None:
            c = det.conflict
            return None if c is None else c.to_dict()
        return check


def _unpersist(frames: list) -> None:
    for d in frames:
        try:
            d.unpersist()
        except Exception:  # pragma: no cover - best effort
            pass


def sweep_failed_base_files(table: Table, instant: str, partitions: set[str]) -> None:
    """Belt and braces after a rollback: no base file of the failed instant may remain (a file
    of an instant absent from the timeline could be taken for an archived commit). Public: the
    Spark clustering's abort sweeps the same way."""
    for p in partitions:
        for bf in list_base_files(table, p):
            if bf.instant_time == instant:
                table.storage.delete(table.storage.path(bf.relative_path))

