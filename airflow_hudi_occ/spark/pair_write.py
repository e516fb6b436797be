"""A bulk_insert written by its input tasks through pyarrow: no shuffle, no sort, one pass.

A copy-on-write ``bulk_insert`` that does not combine keys (Hudi's default) is planned by
(partition, input task) (file_group_plan.plan_by_pair): each task writes the records it reads
into file groups of its own. Spark hands each task's rows to a Python worker in Arrow batches
(``mapInArrow``); the worker splits them by file group, builds the five meta columns as core's
writer does (base_file.with_meta_columns: the constant ones as one-value dictionaries) and
writes each file group's parquet with pyarrow.

Why not Spark's own parquet writer (native_write.py), which this route replaced: profiled on
2 M rows, Spark's writer paid about 0.4 s per constant meta column (commit time, partition,
file name: hashed and compared per row for the dictionary and the statistics), and its
``partitionBy`` needs the task's rows sorted by file group. Here a constant column costs one
dictionary entry, the key is spelled by core (the reference spelling), and the rows are not
sorted unless a task holds more file groups than :data:`MAX_OPEN_FILES`.

Kept from the Spark-writer route (native_write.py does these for both):

- the names: ``<fileId>_<task>-0-0_<instant>.parquet``, fixed per file group before the job,
  so every marker exists before the job starts;
- staging: each file group's file is written under ``.hoodie/.temp/<instant>/.spark-staging``
  (the instant's marker folder, removed with the markers by a rollback) and appears there
  under its staged name only once complete (an atomic rename), so a failed task attempt
  leaves a hidden partial file and its retry (or a speculative twin, which writes the same
  rows) the one complete file; :func:`native_write.publish` moves them after an abort check;
- the job group: the driver cancels the job on an early conflict or an abort signal.
"""

from __future__ import annotations

import os
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql import functions as F

from airflow_hudi_occ.core.commit.merge import conform
from airflow_hudi_occ.core.format.base_file import parquet_writer, with_meta_columns
from airflow_hudi_occ.core.table.file_system_view import base_file_name
from airflow_hudi_occ.spark import tagging
from airflow_hudi_occ.spark.executor import plain_types
from airflow_hudi_occ.spark.native_write import GROUP
from airflow_hudi_occ.spark.session import arrow_batches, task_ids_as_run

#: a task with more file groups than this gets its rows sorted by file group in Spark, so
#: that it holds one file open at a time (else one writer and one buffer per file group)
MAX_OPEN_FILES = 16
#: rows buffered per file group before they are written as one row group (as core's writer)
CHUNK_ROWS = 131_072
#: rows a task buffers over all its file groups at most: beyond, its largest buffers are written
TASK_BUFFER_ROWS = 4 * CHUNK_ROWS
STAGED_NAME = "data.parquet"
RESULT_DDL = "folder long, rows long"
_RESULT = pa.schema([("folder", pa.int64()), ("rows", pa.int64())])


def applies(table) -> bool:
    """Whether a bulk_insert by (partition, task) may take this route: a local table (the
    staged files are renamed into place). Unlike Spark's writer, pyarrow stores every column
    type as the Python route does, timestamps included."""
    return table.storage.is_local


def file_names(plan, instant: str) -> dict:
    """(partition, fileId) -> base file name of a :class:`~file_group_plan.PairPlan`: the write
    token is ``<task>-0-0``, as Hudi's bulk_insert without a sort mode spells it."""
    return {g: base_file_name(g[1], f"{task}-0-0", instant) for g, task in plan.groups().items()}


def write_job(spark, records, *, user_columns: list[str], key_fields: list[str], target_schema,
              instant: str, plan, names: dict, out_dir: str, meta_fields: bool = True):
    """The Spark action of a :func:`file_group_plan.plan_by_pair` bulk_insert: each input task
    writes its records, as read, into ``out_dir/<GROUP>=<folder>/data.parquet``, the folder being
    :meth:`PairPlan.folder` of its file group: a long computed in Spark from the task id, the
    partition's hash and a chunk of the key's hash (only pairs above the max file size have
    more than one chunk). ``names``: :func:`file_names` of the plan (its markers' names). A
    record of a pair the count did not see lands in a folder outside the plan, which the task
    refuses. ``meta_fields=False`` (a table with virtual keys): the user's columns alone."""
    task = F.spark_partition_id()
    big = {f"{t}|{p}": plan.files((p, t)) for (p, t) in plan.pairs if plan.files((p, t)) > 1}
    if big:
        files = F.try_element_at(F.create_map(*[F.lit(x) for kv in sorted(big.items()) for x in kv]),
                                 F.concat(task.cast("string"), F.lit("|"), F.col(tagging.PART)))
        chunk = F.pmod(F.xxhash64(F.col(tagging.KEY)), F.coalesce(files, F.lit(1)))
    else:
        chunk = F.lit(0)
    folder = (F.shiftleft(task.cast("long"), 43) + F.shiftleft(chunk.cast("long"), 32)
              + F.xxhash64(F.col(tagging.PART)).bitwiseAND(0xFFFFFFFF))
    df = records.select(*user_columns, folder.alias(GROUP))
    ordered = plan.most_files_in_a_task() > MAX_OPEN_FILES
    if ordered:
        df = df.sortWithinPartitions(GROUP)
    targets = {folder_: (g[0], names[g]) for g, folder_ in plan.folders().items()}
    fn = _task_writer(targets, list(key_fields), target_schema, instant, out_dir, ordered, meta_fields)
    def run():
        with arrow_batches(spark, CHUNK_ROWS), task_ids_as_run(spark):  # the tasks it counted
            return df.mapInArrow(fn, RESULT_DDL).collect()
    return run


def _task_writer(targets: dict, key_fields: list[str], target_schema, instant: str, out_dir: str,
                 ordered: bool, meta_fields: bool = True):
    """The ``mapInArrow`` function of one input task (see the module docstring)."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        task, attempt = (tc.partitionId(), tc.attemptNumber()) if tc is not None else (0, 0)
        files = _TaskFiles(targets, key_fields, target_schema, instant, out_dir,
                           f"{instant}_{task}_", f".{task}-{attempt}.inprogress", meta_fields)
        for batch in batches:
            files.add(batch, ordered)
        yield pa.RecordBatch.from_pylist(files.close_all(), schema=_RESULT)
    return write


class _TaskFiles:
    """One task's open file groups: a buffer and a parquet writer each."""

    def __init__(self, targets, key_fields, target_schema, instant, out_dir, seq_prefix, tmp_suffix,
                 meta_fields: bool = True):
        self.targets, self.key_fields, self.schema = targets, key_fields, target_schema
        self.meta_fields = meta_fields
        self.instant, self.out_dir, self.seq_prefix, self.tmp_suffix = instant, out_dir, seq_prefix, tmp_suffix
        self.buffers: dict[int, list[pa.Table]] = {}
        self.buffered: dict[int, int] = {}
        self.writers: dict[int, tuple] = {}  # folder -> (context manager, writer, temp path)
        self.rows: dict[int, int] = {}
        self.seq = 0
        self.current: int | None = None  # sorted input: the file group being written

    def add(self, batch: pa.RecordBatch, ordered: bool) -> None:
        data = plain_types(batch)
        folders = data.column(GROUP)
        data = data.drop_columns([GROUP])
        distinct = pc.unique(folders).to_pylist()
        for f in distinct:
            part = data if len(distinct) == 1 else data.filter(pc.equal(folders, f))
            if ordered and f != self.current:
                if self.current is not None:  # sorted input: a file group never comes back
                    self._close(self.current)
                self.current = f
            self.buffers.setdefault(f, []).append(part)
            self.buffered[f] = self.buffered.get(f, 0) + part.num_rows
            if self.buffered[f] >= CHUNK_ROWS:
                self._flush(f)
        # the largest buffers until the task is within its bound again: one a batch is not
        # enough when a batch (up to CHUNK_ROWS rows) spreads over many file groups
        while sum(self.buffered.values()) > TASK_BUFFER_ROWS:
            self._flush(max(self.buffered, key=self.buffered.get))

    def _flush(self, folder: int) -> None:
        parts = self.buffers.pop(folder, [])
        self.buffered.pop(folder, None)
        if not parts:
            return
        if folder not in self.targets:
            raise RuntimeError(f"rows for a file group the plan of {self.instant} did not count "
                               f"(folder {folder}): the input changed between the count and the "
                               "write; make it deterministic (e.g. cache it) and retry")
        partition, name = self.targets[folder]
        user = conform(pa.concat_tables(parts), self.schema)
        full = user if not self.meta_fields else with_meta_columns(
            user, instant_time=self.instant, partition=partition, file_name=name,
            key_fields=self.key_fields, seq_prefix=self.seq_prefix, seqno_start=self.seq,
            dictionary_constants=True)
        self.seq += full.num_rows
        if folder not in self.writers:
            folder_dir = os.path.join(self.out_dir, f"{GROUP}={folder}")
            os.makedirs(folder_dir, exist_ok=True)
            tmp = os.path.join(folder_dir, self.tmp_suffix)
            cm = parquet_writer(tmp, full.schema, sample=full)
            self.writers[folder] = (cm, cm.__enter__(), tmp)
        self.writers[folder][1].write_table(full)
        self.rows[folder] = self.rows.get(folder, 0) + full.num_rows

    def _close(self, folder: int) -> None:
        self._flush(folder)
        if folder not in self.writers:  # no row reached it
            return
        cm, _, tmp = self.writers.pop(folder)
        cm.__exit__(None, None, None)
        os.replace(tmp, os.path.join(os.path.dirname(tmp), STAGED_NAME))  # complete, then visible

    def close_all(self) -> list[dict]:
        for f in list(self.buffers):
            self._flush(f)
        for f in list(self.writers):
            self._close(f)
        return [{"folder": f, "rows": n} for f, n in sorted(self.rows.items())]
