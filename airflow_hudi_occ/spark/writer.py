"""The Spark write path: one batch (a DataFrame) as one Hudi instant, with OCC.

::

    driver:    options -> table (created on first write) -> schema check (refused BEFORE the
               instant exists) -> WriteTransaction.begin (lock, instant, heartbeat)
               -> tagging (tagging.py: keys, dedupe, simple/bucket index, file sizing)
               -> pending-clustering check -> inflight with the planned file groups
    executors: per file group (executor.py): abort? -> early conflict check + marker ->
               merge with the previous base file -> one parquet base file -> WriteStat
    driver:    commit under the lock with conflict resolution (core) -> result

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
import posixpath
import re
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import pyarrow as pa

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.concurrency.clustering_gate import check_write_against_pending_clustering
from airflow_hudi_occ.core.errors import (BatchAlreadyCommittedError, ConfigError,
                           HudiOccError, RetryableError, TableNotFoundError, WriteAbortedError)
from airflow_hudi_occ.core.table.file_system_view import FileSystemView, bucket_id_of, list_base_files
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.format.schema import avro_schema_json, evolve
from airflow_hudi_occ.core.table.table import META_COLUMNS, Table
from airflow_hudi_occ.core.commit.recovery import committed_batch_result, prepare_batch
from airflow_hudi_occ.core.commit.transaction import COMMITTED, CommitResult, WriteTransaction
from airflow_hudi_occ.spark import tagging
from airflow_hudi_occ.spark.errors import SparkWriteError
from airflow_hudi_occ.spark.executor import STAT_DDL, TaskContext, make_group_fn
from airflow_hudi_occ.spark.jobgroup import JobAborted, run_watched
from airflow_hudi_occ.spark.options import SparkWriteOptions

log = logging.getLogger(__name__)

EXTRA_ENGINE = "hudi_occ.engine"


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

    @classmethod
    def from_commit(cls, res: CommitResult, attempt: int, seconds: float = 0.0) -> "SparkWriteResult":
        meta = res.metadata
        return cls(res.instant.requested_time, res.instant.completion_time, meta.operation_type,
                   attempt, meta.write_stats(), dict(meta.partition_to_replace_file_ids or {}),
                   seconds, res.outcome, res.attempted_instant, res.recovered_from)

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
        return out


def arrow_schema_of(df) -> pa.Schema:
    """The user columns' Arrow schema (plain string/binary, as executors write them)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    sch = to_arrow_schema(df.schema)
    fields = []
    for f in sch:
        t = f.type
        if pa.types.is_large_string(t):
            t = pa.string()
        elif pa.types.is_large_binary(t):
            t = pa.binary()
        fields.append(pa.field(f.name, t, True))
    return pa.schema(fields)


def _default_table_name(base_path: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_]", "_", posixpath.basename(base_path.rstrip("/")) or "hudi_table")
    return name if re.match(r"[A-Za-z_]", name) else f"t_{name}"


def open_or_create_table(base_path: str, opts: SparkWriteOptions, storage_options=None) -> Table:
    try:
        table = Table.open(base_path, storage_options)
    except TableNotFoundError:
        extra = {}
        if opts.index_type == "BUCKET":
            extra = {"hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": opts.bucket_num}
        table = Table.create(base_path, opts.table_name or _default_table_name(base_path),
                             record_key_fields=opts.record_key_fields,
                             partition_fields=opts.partition_fields,
                             precombine_field=opts.precombine_field,
                             hive_style_partitioning=opts.hive_style_partitioning,
                             storage_options=storage_options, extra_properties=extra, exist_ok=True)
    return table


class SparkTableJob:
    """What every Spark action on one table carries: the session, the table, Hudi options as
    strings (as Spark's own options are), and an optional shared lock manager."""

    def __init__(self, spark, base_path: str, options: Mapping[str, Any], *,
                 storage_options: dict | None = None, writer_id: str | None = None,
                 lock_manager=None):
        self.spark = spark
        self.base_path = base_path
        self.options = {str(k): str(v) for k, v in options.items() if v is not None}
        self.storage_options = storage_options
        self.writer_id = writer_id
        self._lock_manager = lock_manager


class SparkHudiWriter(SparkTableJob):
    """Writes DataFrames to one table; one :meth:`write` call is one attempt (one instant).

    ``on_begin(tx)`` is called as soon as an attempt's instant is requested (the job prints
    its ``HUDI_OCC_BEGIN`` line from it)."""

    def __init__(self, spark, base_path: str, options: Mapping[str, Any], *, on_begin=None, **kw):
        super().__init__(spark, base_path, options, **kw)
        self.on_begin = on_begin

    def prepare(self, batch_key: str | None, *, attempt: int = 1) -> SparkWriteResult | None:
        """Before reading a keyed batch: its commit if already in the table, or the re-commit
        of a dead writer's staged instant of it; None: write it. Needs no Spark session (the
        job runs it before starting one)."""
        if batch_key is None:
            return None
        try:
            table = Table.open(self.base_path, self.storage_options)
        except TableNotFoundError:
            return None
        t0 = time.time()
        opts = SparkWriteOptions.from_options(self.options)
        res = prepare_batch(table, opts.write_config, batch_key, writer_id=self.writer_id,
                            attempt=attempt, lock_manager=self._lock_manager)
        return None if res is None else SparkWriteResult.from_commit(res, attempt, time.time() - t0)

    def write(self, df, operation: str | None = None, *, checkpoint: str | None = None,
              batch_key: str | None = None, attempt: int = 1,
              extra_metadata: Mapping[str, str] | None = None,
              before_commit: Callable[[WriteTransaction], None] | None = None,
              recover: bool = True) -> SparkWriteResult:
        """Write one batch as one instant. ``before_commit`` lets tests hold writers at the
        commit step so that they provably overlap. ``recover=False`` skips :meth:`prepare`
        (the caller ran it already)."""
        if recover:
            early = self.prepare(batch_key, attempt=attempt)
            if early is not None:
                return early
        opts_map = dict(self.options)
        if operation:
            opts_map["hoodie.datasource.write.operation"] = operation
        opts = SparkWriteOptions.from_options(opts_map)
        if not opts.record_key_fields:
            try:
                Table.open(self.base_path, self.storage_options)
            except TableNotFoundError:
                raise ConfigError("a new table needs a record key",
                                  key="hoodie.datasource.write.recordkey.field",
                                  remedy="set hoodie.datasource.write.recordkey.field") from None
        table = open_or_create_table(self.base_path, opts, self.storage_options)
        op = opts.operation
        cfg = table.config
        key_fields, part_fields = cfg.record_key_fields, cfg.partition_fields
        pre = cfg.precombine_field
        bucket = opts.index_type == "BUCKET" or (cfg.get("hoodie.index.type", "") or "").upper() == "BUCKET"
        num_buckets = cfg.bucket_num or opts.bucket_num

        # -- schema: refused before the instant exists ---------------------------------------
        df = df.drop(*[c for c in META_COLUMNS if c in df.columns])
        arrow_schema = arrow_schema_of(df)
        schema_json = avro_schema_json(arrow_schema, table.name)
        tl = table.timeline()
        last = tl.last_completed_write()
        prev_schema = tl.commit_metadata(last).schema if last is not None else None
        if op == "delete":
            schema_json = prev_schema or schema_json
            target_schema = None
        else:
            schema_json = evolve(prev_schema, schema_json)
            target_schema = arrow_schema
        user_columns = list(df.columns)
        # Key/partition columns and their types, also before anything is written.
        tagging.record_key_expr(df, key_fields)
        tagging.partition_path_expr(df, part_fields, cfg.hive_style_partitioning)

        action = Action.REPLACE_COMMIT if op == "insert_overwrite" else Action.COMMIT
        tx = WriteTransaction(table, opts.write_config, action=action, operation_type=opts.operation_type,
                              writer_id=self.writer_id, attempt=attempt, checkpoint=checkpoint,
                              batch_key=batch_key, lock_manager=self._lock_manager,
                              on_begin=self.on_begin)
        t_start = time.time()
        tx.begin()
        persisted = []
        planned_parts: set[str] = set()
        planned: list = []
        try:
            prepared = tagging.prepare(df, key_fields, part_fields, cfg.hive_style_partitioning, pre)
            prepared = prepared.persist()
            persisted.append(prepared)
            part_counts = None
            if op in ("insert", "bulk_insert", "insert_overwrite") and not bucket:
                # No index lookup: one pass gives the partitions and the new records per
                # partition, and the file groups are those the plan assigns.
                part_counts = {r[0]: r[1] for r in prepared.groupBy(tagging.PART).count().collect()}
                partitions = sorted(part_counts)
            else:
                partitions = sorted(r[0] for r in prepared.select(tagging.PART).distinct().collect())
            view = FileSystemView(table)  # the snapshot this write reads (after begin)
            slices = [s for p in partitions for s in view.latest_file_slices(p)]
            tagged, planned = self._tag(prepared, op, opts, table, view, slices, bucket, num_buckets,
                                        part_counts)
            if planned is None:
                tagged = tagged.persist()
                persisted.append(tagged)
                groups = [(r[0], r[1]) for r in tagged.groupBy(tagging.PART, tagging.FID).count().collect()]
                planned = sorted(set(groups))
            planned_parts = {p for p, _ in planned}
            existing = {(s.partition, s.file_id): s for s in slices}
            touched_existing = [g for g in planned if g in existing]
            # Refused before any data file exists: clustering would drop these updates.
            replaced_now = [(s.partition, s.file_id) for s in slices] if op == "insert_overwrite" else []
            check_write_against_pending_clustering(view.timeline, touched_existing + replaced_now,
                                                   tx.instant, opts.write_config)
            tx.start_inflight(planned_file_groups=planned)
            mode = {"upsert": "merge", "delete": "delete", "insert": "append",
                    "bulk_insert": "create", "insert_overwrite": "create"}[op]
            prev = {} if mode == "create" else {
                g: existing[g].base_file.relative_path for g in touched_existing}
            if bucket and mode == "append":
                mode = "merge"  # a bucket holds each key once
            ctx = TaskContext(base_uri=table.base_uri, storage_options=self.storage_options or {},
                              options=dict(opts.options), instant=tx.instant_time, mode=mode,
                              user_columns=user_columns, target_schema=target_schema,
                              precombine=pre, prev=prev,
                              completed_at_start=sorted(tx.snapshot.completed_at_start))
            stats = []
            if planned:
                cols = user_columns + [tagging.KEY, tagging.PART, tagging.FID]
                job = tagged.select(*cols).groupBy(tagging.PART, tagging.FID) \
                            .applyInArrow(make_group_fn(ctx), STAT_DDL)
                rows = run_watched(self.spark, table, tx.instant_time, job.collect,
                                   description=f"hudi {op} {table.name} {tx.instant_time}",
                                   extra_check=self._async_checker(tx, planned))
                stopped = [r for r in rows if r.stopped]
                if stopped:  # the signal is gone (cleared by someone): still doomed
                    raise WriteAbortedError(
                        f"write {tx.instant_time} stopped on {len(stopped)} file group(s): "
                        f"{stopped[0].stopped}", instant=tx.instant_time, reason=stopped[0].stopped)
                stats = [WriteStat(file_id=r.file_id, path=r.path, partition_path=r.partition,
                                   prev_commit=r.prev_commit, num_writes=r.num_writes,
                                   num_deletes=r.num_deletes, num_update_writes=r.num_update_writes,
                                   num_inserts=r.num_inserts, file_size_in_bytes=r.file_size,
                                   total_write_bytes=r.file_size, prev_base_file=r.prev_base_file,
                                   create_time_ms=r.write_ms if r.prev_commit == "null" else 0,
                                   upsert_time_ms=r.write_ms if r.prev_commit != "null" else 0)
                         for r in rows]
            replaced = None
            if action is Action.REPLACE_COMMIT:
                replaced = {p: [s.file_id for s in view.latest_file_slices(p)] for p in partitions}
            extra = {EXTRA_ENGINE: "spark", **dict(extra_metadata or {})}
            if before_commit is not None:
                before_commit(tx)
            res = tx.commit(stats, schema=schema_json, replaced=replaced, extra_metadata=extra)
            return SparkWriteResult(res.instant.requested_time, res.instant.completion_time,
                                    opts.operation_type, attempt, stats, replaced or {},
                                    time.time() - t_start)
        except JobAborted as ja:
            err = abort_signal.error_for(tx.instant_time, ja.info)
            err.job_cancelled = bool(ja.info.get("job_cancelled"))
            for k in ("tasks_done_at_cancel", "tasks_total"):
                if k in ja.info:
                    setattr(err, k, ja.info[k])
            self._abort(tx, table, planned_parts, err, t_start, planned=len(planned))
            raise err from None
        except BatchAlreadyCommittedError as e:  # a twin attempt won under the lock; ours is rolled back
            _sweep(table, tx.instant_time, planned_parts)
            done = committed_batch_result(table, table.timeline().get(e.committed_instant),
                                          attempted_instant=e.instant)
            return SparkWriteResult.from_commit(done, attempt, time.time() - t_start)
        except RetryableError as e:
            self._abort(tx, table, planned_parts, e, t_start, planned=len(planned))
            raise
        except HudiOccError as e:
            self._abort(tx, table, planned_parts, e, t_start, planned=len(planned))
            raise
        except BaseException as e:
            self._abort(tx, table, planned_parts, e, t_start)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
            raise SparkWriteError(f"the Spark write of instant {tx.instant_time} failed: "
                                  f"{_short(e)}", instant=tx.instant_time, cause=type(e).__name__) from e
        finally:
            for d in persisted:
                try:
                    d.unpersist()
                except Exception:  # pragma: no cover - best effort
                    pass

    # -- tagging ------------------------------------------------------------------------------

    def _tag(self, prepared, op, opts: SparkWriteOptions, table: Table, view, slices, bucket,
             num_buckets, part_counts=None):
        """(tagged DataFrame, the planned file groups, or None when only the data can tell)."""
        from pyspark.sql import functions as F
        spark = self.spark
        FID, PART = tagging.FID, tagging.PART
        if bucket and op != "insert_overwrite":
            have = {}
            for s in slices:
                b = bucket_id_of(s.file_id)
                if b is not None:
                    have[(s.partition, int(b))] = s.file_id
            if op == "delete":
                out, _ = tagging.assign_buckets(prepared, have, num_buckets, spark, len(table.config.record_key_fields))
                known = set(have.values())
                return (out.where(F.col(FID).isin(list(known))) if known else out.limit(0)), None
            out, _ = tagging.assign_buckets(prepared, have, num_buckets, spark, len(table.config.record_key_fields))
            return out, None
        if bucket:  # insert_overwrite with buckets: fresh bucket file groups
            out, _ = tagging.assign_buckets(prepared, {}, num_buckets, spark, len(table.config.record_key_fields))
            return out, None
        if op in ("upsert", "delete"):
            tagged = tagging.lookup(spark, prepared, slices, table.storage.root)
        else:
            tagged = prepared.withColumn(FID, F.lit(None).cast("string"))
        if op == "delete":
            return tagged.where(F.col(FID).isNotNull()), None
        new = tagged.where(F.col(FID).isNull())
        if part_counts is not None and op not in ("upsert", "delete"):
            counts = dict(part_counts)  # no lookup: every record is new
        else:
            counts = {r[0]: r[1] for r in new.groupBy(PART).count().collect()}
        if not counts:
            return tagged, ([] if part_counts is not None else None)
        small: dict[str, list[tuple[str, int]]] = {}
        if op in ("upsert", "insert") and opts.small_file_limit > 0:
            from airflow_hudi_occ.core.concurrency.clustering_gate import pending_clustering_file_groups
            clustering = pending_clustering_file_groups(view.timeline)
            for s in slices:
                if s.file_group in clustering:
                    continue
                size = table.storage.size(table.storage.path(s.base_file.relative_path))
                if size < opts.small_file_limit:
                    small.setdefault(s.partition, []).append((s.file_id, size))
        assignment = tagging.plan_new_file_groups(
            counts, small, max_file_size=opts.max_file_size,
            record_size=self._record_size(table, view, opts))
        if part_counts is not None and op not in ("upsert", "delete"):
            planned = sorted({(b.partition, b.file_id) for b in assignment.buckets if b.weight > 0})
            return tagging.assign_new(spark, new, assignment), planned
        old = tagged.where(F.col(FID).isNotNull())
        return old.unionByName(tagging.assign_new(spark, new, assignment)), None

    def _record_size(self, table: Table, view, opts: SparkWriteOptions) -> int:
        """Average bytes per record from the last commit that wrote rows (Hudi's estimate)."""
        tl = view.timeline
        for inst in reversed(tl.completed_by_completion_time()):
            if not inst.is_write:
                continue
            stats = tl.commit_metadata(inst).write_stats()
            rows = sum(s.num_writes for s in stats)
            size = sum(s.file_size_in_bytes for s in stats)
            if rows > 0 and size > 0:
                return max(1, size // rows)
        return opts.record_size_estimate

    @staticmethod
    def _async_checker(tx: WriteTransaction, planned: list) -> Callable[[], dict | None] | None:
        """The async early-conflict checker runs on the driver, told every planned file group
        up front (Hudi's pending markers), so a conflict is seen before executors write."""
        from airflow_hudi_occ.core.concurrency.early_conflict import AsyncTimelineServerBasedDetectionStrategy
        if not tx.config.early_conflict.enabled:
            return None
        det = tx.detector  # started here; commit() and abort() stop it
        if not isinstance(det, AsyncTimelineServerBasedDetectionStrategy):
            return None
        for p, f in planned:
            det.add_pending(p, f)

        def check() -> dict | None:
            c = det.conflict
            return None if c is None else c.to_dict()
        return check

    # -- failure --------------------------------------------------------------------------------

    def _abort(self, tx: WriteTransaction, table: Table, parts: set[str], err: BaseException,
               t_start: float, planned: int = 0) -> None:
        written = 0
        try:
            if tx.instant is not None:
                written = sum(1 for p in parts for bf in list_base_files(table, p)
                              if bf.instant_time == tx.instant_time)
        except Exception:  # pragma: no cover - storage unreadable: still roll back
            pass
        try:
            tx.abort(reason=f"{type(err).__name__}: {_short(err)}", error=err)
        finally:
            if tx.instant is not None:
                _sweep(table, tx.instant_time, parts)
                abort_signal.clear_abort(table, tx.instant_time)
        if isinstance(err, HudiOccError):
            err.attempt = tx.attempt
            err.seconds_discarded = round(time.time() - t_start, 3)
            err.files_discarded = tx.files_discarded  # counted by tx.abort from the markers
            # how far the doomed write got: base files on storage vs file groups it planned
            err.files_written = written
            err.file_groups_planned = planned


def _sweep(table: Table, instant: str, partitions: set[str]) -> None:
    """Belt and braces after a rollback: no base file of the failed instant may remain (a file
    of an instant absent from the timeline could be taken for an archived commit)."""
    for p in partitions:
        for bf in list_base_files(table, p):
            if bf.instant_time == instant:
                table.storage.delete(table.storage.path(bf.relative_path))


def _short(e: BaseException) -> str:
    s = str(e)
    return s if len(s) < 2000 else s[:2000] + " ..."
