"""The per-file-group write task that runs on Spark executors.

One call of :func:`write_file_group` writes ONE base file for one file group of one instant:

    abort signal? -> delete a previous task attempt's file (found by its marker) ->
    early conflict check + marker (core) -> merge with the previous base file (Arrow, vectorised)
    -> parquet with the five meta columns -> one WriteStat row back to the driver

It gets everything from a plain, picklable :class:`TaskContext` built by the driver, and
reopens the table and the write config from it, so it needs no driver objects. The driver's
heartbeat keeps the instant alive; executors never beat.

Retries: the write token is ``<spark partition>-<stage>-<attempt>``, so a retried task writes a
differently named file; before writing, every other file of the same fileId and instant named
by a marker is deleted, so at most one base file per (fileId, instant) remains (readers reject
two).

A conflict (:class:`EarlyConflictError`) or an abort signal does NOT fail the task: the task
leaves the abort signal for the instant (which the driver watches to cancel the whole job at
once) and returns a row whose ``stopped`` column names the reason. A failed task would be
retried by Spark (``spark.task.maxFailures``, 4 on a cluster) for work that is doomed anyway;
a task that returns is never retried, and every later task of the job stops at its first
check of the signal.
"""

from __future__ import annotations

import io
import json
import logging
import posixpath
import time
from dataclasses import dataclass, field
from typing import Iterator, Tuple

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.format.base_file import (MERGE_DICTIONARY_COLUMNS, REWRITTEN_META_COLUMNS,
                                                    parquet_writer, read_parquet, with_meta_columns)
from airflow_hudi_occ.core.format.layout import base_file_name, join_partition
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.early_conflict.async_checker import AsyncTimelineServerBasedDetectionStrategy
from airflow_hudi_occ.core.errors import RetryableError
from airflow_hudi_occ.core.table.table import Table

log = logging.getLogger(__name__)

KEY = "_hoodie_record_key"
PART = "_hoodie_partition_path"

STAT_SCHEMA = pa.schema([
    ("partition", pa.string()), ("file_id", pa.string()), ("path", pa.string()),
    ("prev_commit", pa.string()), ("prev_base_file", pa.string()),
    ("num_writes", pa.int64()), ("num_deletes", pa.int64()), ("num_update_writes", pa.int64()),
    ("num_inserts", pa.int64()), ("file_size", pa.int64()), ("write_ms", pa.int64()),
    ("stopped", pa.string()),
])
STAT_DDL = ("partition string, file_id string, path string, prev_commit string, prev_base_file string, "
            "num_writes long, num_deletes long, num_update_writes long, num_inserts long, "
            "file_size long, write_ms long, stopped string")

MODES = ("merge", "delete", "append", "create", "cluster")
COMMIT_TIME = "_hoodie_commit_time"


@dataclass
class TaskContext:
    """What an executor needs, as plain values (shipped in the closure)."""

    base_uri: str
    storage_options: dict
    options: dict  # every hoodie.* key of the write (core rebuilds WriteConfig from it)
    instant: str
    mode: str  # merge | delete | append | create
    user_columns: list[str]
    target_schema: pa.Schema | None  # of user columns; None keeps the previous file's (delete)
    precombine: str | None
    prev: dict = field(default_factory=dict)  # (partition, fileId) -> previous base file rel path
    completed_at_start: list[str] = field(default_factory=list)
    batch_rows: int = 65536
    #: sort each new file by these (clustering's sort columns; a bulk_insert's sort mode: the key)
    sort_columns: list[str] = field(default_factory=list)


# Per Python worker process: the table, config, markers and detector of an instant are built
# once and reused across the file groups the worker writes.
_CACHE: dict = {}


def task_env(ctx: TaskContext):
    """(table, write config, markers, early-conflict detector) of the task's instant, built
    once per Python worker; every executor-side task of a write starts here (``mor_executor``
    too)."""
    key = (ctx.base_uri, ctx.instant)
    got = _CACHE.get(key)
    if got is None:
        if len(_CACHE) > 8:
            for v in _CACHE.values():
                if v[3] is not None:
                    v[3].stop()
            _CACHE.clear()
        from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
        table = Table.open(ctx.base_uri, ctx.storage_options or None)
        config = WriteConfig.from_options(ctx.options)
        markers = markers_for(table, ctx.instant, config.marker_type)
        detector = None
        if config.early_conflict.enabled:
            from airflow_hudi_occ.core.concurrency.early_conflict.detector import create_detector
            detector = create_detector(table, ctx.instant, config,
                                       completed_at_start=set(ctx.completed_at_start))
            # The async checker runs once, on the driver (as Hudi runs it in the timeline
            # server), over every marker of the instant; a thread per Python worker would only
            # repeat its work. Executors' detectors then only create markers.
            if not isinstance(detector, AsyncTimelineServerBasedDetectionStrategy):
                detector.start()
        got = (table, config, markers, detector)
        _CACHE[key] = got
    return got


def task_token() -> str:
    """The write token of this Spark task, ``<partition>-<stage>-<attempt>``, so a retried
    task names its file differently (module docstring: Retries); shared with the merge-on-read
    and compaction tasks."""
    from pyspark import TaskContext as SparkTaskContext
    tc = SparkTaskContext.get()
    if tc is None:  # called outside Spark (unit use)
        return "0-0-0"
    return f"{tc.partitionId()}-{tc.stageId()}-{tc.attemptNumber()}"


def leave_abort_signal(table: Table, instant: str, err: BaseException) -> None:
    """Leave the abort signal carrying the error, so the driver cancels the job at once. Not
    for an error the signal itself raised: the signal is there already (or was: a task the
    driver cancelled can still run for Spark's Python kill timeout, and must not raise again
    the signal the driver cleared after its rollback)."""
    if abort_signal.raised_by_signal(err):
        return
    body = err.to_dict() if hasattr(err, "to_dict") else {"error": type(err).__name__, "message": str(err)}
    abort_signal.raise_abort(table, instant, json.dumps(body), source="spark-executor")


def check_abort(table: Table, instant: str, detector) -> None:
    """Raise if the instant's abort signal is up or the detector has seen a conflict."""
    abort_signal.check_abort(table, instant)
    if detector is not None and getattr(detector, "has_conflict", False):
        detector.check_sticky()


def plain_types(t: pa.Table | pa.RecordBatch) -> pa.Table:
    """Spark may hand large_string/large_binary; base files use the plain types."""
    if isinstance(t, pa.RecordBatch):
        t = pa.Table.from_batches([t])
    fields = []
    changed = False
    for f in t.schema:
        ty = f.type
        if pa.types.is_large_string(ty):
            ty, changed = pa.string(), True
        elif pa.types.is_large_binary(ty):
            ty, changed = pa.binary(), True
        fields.append(pa.field(f.name, ty, f.nullable))
    return t.cast(pa.schema(fields)) if changed else t


def _read_base(table: Table, rel: str) -> pa.Table:
    # the merge rewrites the skipped columns, and writes the commit times back as a dictionary
    return plain_types(read_parquet(table.storage, rel, skip=REWRITTEN_META_COLUMNS,
                                    dictionary=MERGE_DICTIONARY_COLUMNS))


def _merge(ctx: TaskContext, base: pa.Table, incoming: pa.Table) -> merge.MergeResult:
    """The new base file of a file group that has one: ``core.commit.merge`` in this task's mode."""
    mode = {"delete": merge.DELETE, "append": merge.APPEND}.get(ctx.mode, merge.UPSERT)
    return merge.merge_file_group(base, incoming.drop_columns([c for c in (KEY, COMMIT_TIME)
                                                              if c in incoming.column_names]),
                                  incoming.column(KEY).combine_chunks(), mode=mode,
                                  instant=ctx.instant, precombine=ctx.precombine,
                                  schema=ctx.target_schema, order=merge.BATCH_ORDER)


def clear_previous_attempts(table: Table, markers, partition: str, file_id: str, name: str) -> None:
    """A retried task (or stage) must not leave a second base file for this fileId+instant."""
    for m in markers.markers_in_partition(partition):
        if m.file_id == file_id and m.data_file_name != name:
            table.storage.delete(table.storage.path(m.data_file_path))


def write_file_group(ctx: TaskContext, partition: str, file_id: str,
                     batches: Iterator[pa.RecordBatch]) -> pa.Table:
    table, config, markers, detector = task_env(ctx)
    t0 = time.time()
    try:
        check_abort(table, ctx.instant, detector)
        token = task_token()
        name = base_file_name(file_id, token, ctx.instant)
        rel = join_partition(partition, name)
        prev_rel = ctx.prev.get((partition, file_id))
        io_type = "MERGE" if prev_rel else "CREATE"
        clear_previous_attempts(table, markers, partition, file_id, name)
        if detector is not None:
            detector.create_marker(markers, partition, name, io_type)
        else:
            markers.create(partition, name, io_type)
        if partition:
            table.write_partition_metadata(partition, ctx.instant)
        # Collect the group, checking the abort signal between Arrow batches.
        parts, n_seen, last_check = [], 0, time.time()
        for b in batches:
            parts.append(plain_types(b))
            n_seen += b.num_rows
            if time.time() - last_check > 0.2:
                check_abort(table, ctx.instant, detector)
                last_check = time.time()
        incoming = pa.concat_tables(parts) if parts else None
        if incoming is None:
            raise ValueError(f"no rows for file group {partition}/{file_id}")
        if ctx.sort_columns and not prev_rel:  # a clustering's sort, a bulk_insert's sort mode
            incoming = incoming.take(pc.sort_indices(
                incoming, sort_keys=[(c, "ascending") for c in ctx.sort_columns]))
        if prev_rel:
            res = _merge(ctx, _read_base(table, prev_rel), incoming)
            user, keys, times = res.user, res.keys, res.commit_times
            upd, ins, dels = res.updates, res.inserts, res.deletes
        elif ctx.mode == "cluster":
            # Clustering moves records as they are: each keeps its _hoodie_commit_time.
            user = merge.conform(incoming, ctx.target_schema)
            keys = incoming.column(KEY).combine_chunks()
            times = incoming.column(COMMIT_TIME).combine_chunks()
            upd, ins, dels = 0, incoming.num_rows, 0
        else:
            user = merge.conform(incoming, ctx.target_schema)
            keys = incoming.column(KEY).combine_chunks()
            times = None  # every row is this instant's
            upd, ins, dels = 0, incoming.num_rows, 0
        if table.config.populates_meta_fields:
            full = with_meta_columns(user, instant_time=ctx.instant, partition=partition, file_name=name,
                                     keys=keys, commit_times=times,
                                     seq_prefix=f"{ctx.instant}_{token.split('-')[0]}_",
                                     dictionary_constants=True)
        else:  # virtual keys (new files only: the writer refuses the rest): the user's columns
            full = user
        size = _write(table, rel, full, ctx, config.parquet)
        return pa.Table.from_pylist([{
            "partition": partition, "file_id": file_id, "path": rel,
            "prev_commit": _instant_of(prev_rel) if prev_rel else "null",
            "prev_base_file": posixpath.basename(prev_rel) if prev_rel else None,
            "num_writes": full.num_rows, "num_deletes": dels, "num_update_writes": upd,
            "num_inserts": ins, "file_size": size, "write_ms": int((time.time() - t0) * 1000),
            "stopped": None}], schema=STAT_SCHEMA)
    except RetryableError as e:
        leave_abort_signal(table, ctx.instant, e)
        log.warning("file group %s/%s of %s stopped: %s", partition, file_id, ctx.instant, e)
        return pa.Table.from_pylist([{
            "partition": partition, "file_id": file_id, "path": None, "prev_commit": None,
            "prev_base_file": None, "num_writes": 0, "num_deletes": 0, "num_update_writes": 0,
            "num_inserts": 0, "file_size": 0, "write_ms": int((time.time() - t0) * 1000),
            "stopped": type(e).__name__}], schema=STAT_SCHEMA)


def _instant_of(rel: str) -> str:
    return posixpath.basename(rel).rsplit("_", 1)[1].split(".")[0]


def _write(table: Table, rel: str, full: pa.Table, ctx: TaskContext, parquet=None) -> int:
    """Write the parquet in row groups (abort checked between them), then create it whole."""
    buf = io.BytesIO()
    with parquet_writer(buf, full.schema, sample=full, parquet=parquet) as w:
        for off in range(0, max(full.num_rows, 1), ctx.batch_rows):
            abort_signal.check_abort(table, ctx.instant)
            w.write_table(full.slice(off, ctx.batch_rows))
    data = buf.getvalue()
    path = table.storage.path(rel)
    table.storage.makedirs(posixpath.dirname(path))
    abort_signal.check_abort(table, ctx.instant)
    table.storage.create_if_absent(path, data)
    abort_signal.remove_if_aborted(table, ctx.instant, path, rel)
    return len(data)


def write_stat_of(r) -> WriteStat:
    """A task's row (STAT_DDL) as the commit metadata's write stat."""
    return WriteStat(file_id=r.file_id, path=r.path, partition_path=r.partition,
                     prev_commit=r.prev_commit, num_writes=r.num_writes,
                     num_deletes=r.num_deletes, num_update_writes=r.num_update_writes,
                     num_inserts=r.num_inserts, file_size_in_bytes=r.file_size,
                     total_write_bytes=r.file_size, prev_base_file=r.prev_base_file,
                     create_time_ms=r.write_ms if r.prev_commit == "null" else 0,
                     upsert_time_ms=r.write_ms if r.prev_commit != "null" else 0)


def make_group_fn(ctx: TaskContext):
    """The applyInArrow function: (grouping key, iterator of batches) -> one WriteStat row."""
    def fn(key, batches):
        partition, file_id = key[0].as_py(), key[1].as_py()
        out = write_file_group(ctx, partition, file_id, batches)
        yield from out.to_batches()
    # PySpark picks the iterator-of-batches form from the type hints; set them as real objects
    # (this module uses postponed annotations, which would leave strings).
    fn.__annotations__ = {"key": Tuple[pa.Scalar, ...], "batches": Iterator[pa.RecordBatch],
                          "return": Iterator[pa.RecordBatch]}
    return fn
