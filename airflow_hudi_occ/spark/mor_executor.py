"""The Spark write job of a merge-on-read deltacommit: what core's ``MergeOnReadWriter`` does
per file group, as one Spark task per file group.

::

    driver:    SparkWriteEngine as for copy-on-write (begin, tagging against the base files,
               inflight with the planned file groups), action ``deltacommit``; new keys go to
               new file groups only (no small-file top-ups, as core's MOR writer)
    executors: per file group
               - a new one: executor.write_file_group, the copy-on-write create path (CREATE
                 marker, one parquet base file)
               - a stored one: abort? -> early conflict check + CREATE marker -> one new log
                 file ``.<fileId>_<instant>.log.1_<token>`` holding one Avro data block (upsert)
                 or one delete block (delete) -> a WriteStat shaped as Java's deltacommits
                 (``baseFile``, ``logFiles``, ``logVersion``, ``logOffset``)
    driver:    commit under the lock with conflict resolution (core), or rollback from the
               markers, which deletes the log files as well (core/commit/rollback.py)

Why a new log file per deltacommit rather than appending: see core/commit/mor_writer.py
(table version 8 slices by completion time; a failed write's undo is deleting its files).

Retries: the write token is the Spark task's ``<partition>-<stage>-<attempt>``, and a retried
task deletes the files of earlier attempts named by its markers first (executor.py), so one log
file per file group and instant remains. The payload is created whole (create-if-absent),
never appended, so a torn write leaves no half-block for a reader.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Iterator, Tuple

import pyarrow as pa

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.commit.mor_writer import ordering_avro_type
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.errors import RetryableError, WriteAbortedError
from airflow_hudi_occ.core.format.base_file import with_meta_columns
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.format.log_file import (DeleteRecord, LogFileName, avro_data_block,
                                                   delete_block, encode_blocks, table_avro_schema)
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.spark import executor, tagging
from airflow_hudi_occ.spark.executor import TaskContext
from airflow_hudi_occ.spark.jobgroup import run_watched
from airflow_hudi_occ.spark.compat import apply_in_arrow

#: executor.STAT_SCHEMA plus the deltacommit's fields
MOR_STAT_SCHEMA = executor.STAT_SCHEMA.append(pa.field("base_file", pa.string())) \
                                      .append(pa.field("log_file", pa.string()))
MOR_STAT_DDL = executor.STAT_DDL + ", base_file string, log_file string"


@dataclass
class MorTaskContext:
    """What a MOR task needs beyond the copy-on-write one, as plain values."""

    base: TaskContext
    #: (partition, fileId) of every stored file group -> (prevCommit, base file name)
    logs: dict = field(default_factory=dict)
    schema_json: str = ""  #: the table's Avro schema with the five meta fields first
    ordering_type: str = "int"  #: the ordering field's Avro type (delete records carry it)


def write_files(engine, plan) -> list[WriteStat]:
    """The deltacommit's Spark job (``SparkWriteEngine.write_files`` for a MOR table), for the
    engine's batch and attempt."""
    batch, run = engine.batch, engine.run
    tx, table = run.tx, batch.table
    base = engine.task_context(plan)
    existing = plan.existing
    # a file group under a pending compaction: this log file belongs to the slice the
    # compaction starts (Java records that slice's base instant as prevCommit, no base file)
    pending = plan.view.timeline.pending_compaction_file_groups()
    logs = {}
    for g in run.planned:
        s = existing.get(g)
        if s is not None:
            logs[g] = (pending[g], "") if g in pending else (s.instant_time, s.base_file.name)
    otype = ordering_avro_type(batch.schema_json, table.config.precombine_field) or "int"
    ctx = MorTaskContext(base=base, logs=logs, ordering_type=otype,
                         schema_json=json.dumps(table_avro_schema(json.loads(batch.schema_json)),
                                                separators=(",", ":")))
    # one record per key, as the copy-on-write job gets them (the plan may leave the batch's
    # duplicate keys to the write job)
    job = apply_in_arrow(engine.records_by_file_group(plan), (tagging.PART, tagging.FID),
                         make_group_fn(ctx), MOR_STAT_DDL)
    rows = run_watched(engine.spark, table, tx.instant_time, job.collect,
                       description=f"hudi {batch.op} (deltacommit) {table.name} {tx.instant_time}",
                       extra_check=engine.async_checker(),
                       on_progress=engine.write_progress(len(run.planned)))
    stopped = [r for r in rows if r.stopped]
    if stopped:
        raise WriteAbortedError(
            f"write {tx.instant_time} stopped on {len(stopped)} file group(s): "
            f"{stopped[0].stopped}", instant=tx.instant_time, reason=stopped[0].stopped)
    return [_write_stat(r) for r in rows]


def write_log_group(ctx: MorTaskContext, partition: str, file_id: str,
                    batches: Iterator[pa.RecordBatch]) -> pa.Table:
    """One stored file group: one new log file with this deltacommit's block."""
    c = ctx.base
    table, _config, markers, detector = executor.task_env(c)
    t0 = time.time()
    prev_commit, base_name = ctx.logs[(partition, file_id)]
    try:
        executor.check_abort(table, c.instant, detector)
        name = LogFileName(file_id, c.instant, 1, executor.task_token()).name
        rel = join_partition(partition, name)
        executor.clear_previous_attempts(table, markers, partition, file_id, name)
        # CREATE, as Hudi marks log files from table version 8 on (core/commit/mor_writer.py)
        if detector is not None:
            detector.create_marker(markers, partition, name, "CREATE")
        else:
            markers.create(partition, name, "CREATE")
        parts = [executor.plain_types(b) for b in batches]
        incoming = pa.concat_tables(parts) if parts else None
        if incoming is None or incoming.num_rows == 0:
            raise ValueError(f"no rows for file group {partition}/{file_id}")
        keys = incoming.column(tagging.KEY).combine_chunks()
        if c.mode == "delete":
            # Hudi's delete without an ordering value: 0 typed as the ordering field, "the delete
            # wins over every record written before it" (as core's MergeOnReadWriter writes it)
            otype = ctx.ordering_type
            zero = 0 if otype in ("int", "long") else (0.0 if otype in ("float", "double") else None)
            if zero is None:
                otype, zero = "int", 0
            dels = [DeleteRecord(k, partition, zero, otype) for k in keys.to_pylist()]
            block = delete_block(c.instant, ctx.schema_json, dels)
            writes, updates, deletes = 0, 0, len(dels)
        else:
            user = merge.conform(incoming.select(c.user_columns), c.target_schema)
            # _hoodie_file_name of a log record is the fileId, as Java's append handle sets it
            full = with_meta_columns(user, instant_time=c.instant, partition=partition,
                                     file_name=file_id, keys=keys)
            block = avro_data_block(c.instant, ctx.schema_json, full.to_pylist())
            writes, updates, deletes = full.num_rows, full.num_rows, 0
        payload = encode_blocks([block])
        executor.check_abort(table, c.instant, detector)
        path = table.storage.path(rel)
        table.storage.create_if_absent(path, payload)
        abort_signal.remove_if_aborted(table, c.instant, path, rel)
        return pa.Table.from_pylist([{
            "partition": partition, "file_id": file_id, "path": rel, "prev_commit": prev_commit,
            "prev_base_file": None, "num_writes": writes, "num_deletes": deletes,
            "num_update_writes": updates, "num_inserts": 0, "file_size": len(payload),
            "write_ms": int((time.time() - t0) * 1000), "stopped": None,
            "base_file": base_name, "log_file": name}], schema=MOR_STAT_SCHEMA)
    except RetryableError as e:
        executor.leave_abort_signal(table, c.instant, e)
        return pa.Table.from_pylist([{
            "partition": partition, "file_id": file_id, "path": None, "prev_commit": None,
            "prev_base_file": None, "num_writes": 0, "num_deletes": 0, "num_update_writes": 0,
            "num_inserts": 0, "file_size": 0, "write_ms": int((time.time() - t0) * 1000),
            "stopped": type(e).__name__, "base_file": None, "log_file": None}],
            schema=MOR_STAT_SCHEMA)


def write_group(ctx: MorTaskContext, partition: str, file_id: str,
                batches: Iterator[pa.RecordBatch]) -> pa.Table:
    if (partition, file_id) in ctx.logs:
        return write_log_group(ctx, partition, file_id, batches)
    out = executor.write_file_group(ctx.base, partition, file_id, batches)  # inserts: a base file
    n = out.num_rows
    return out.append_column("base_file", pa.nulls(n, pa.string())) \
              .append_column("log_file", pa.nulls(n, pa.string()))


def make_group_fn(ctx: MorTaskContext):
    def fn(key, batches):
        out = write_group(ctx, key[0].as_py(), key[1].as_py(), batches)
        yield from out.to_batches()
    fn.__annotations__ = {"key": Tuple[pa.Scalar, ...], "batches": Iterator[pa.RecordBatch],
                          "return": Iterator[pa.RecordBatch]}
    return fn


def _write_stat(r) -> WriteStat:
    if r.log_file is None:  # a new file group's base file: as a copy-on-write insert
        return executor.write_stat_of(r)
    return WriteStat(file_id=r.file_id, path=r.path, partition_path=r.partition,
                     prev_commit=r.prev_commit, num_writes=r.num_writes, num_deletes=r.num_deletes,
                     num_update_writes=r.num_update_writes, num_inserts=0,
                     file_size_in_bytes=r.file_size, total_write_bytes=r.file_size,
                     upsert_time_ms=r.write_ms, base_file=r.base_file or "",
                     log_files=[r.log_file], log_version=1, log_offset=0)


__all__ = ["write_files", "write_group", "MorTaskContext", "MOR_STAT_DDL"]
