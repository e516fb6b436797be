"""A bulk_insert written by its input tasks through pyarrow: no shuffle, no sort, one pass.

A copy-on-write ``bulk_insert`` that does not combine keys (Hudi's default) is written as
Hudi's bulk_insert without a sort mode writes it: each input task writes the records it reads
into new file groups of its own, one per partition path it sees, rolled over to a new one by
the max file size. Spark hands each task's rows to a Python worker in Arrow batches
(``mapInArrow``); the worker does everything else itself, in that one job:

- the batch check, as core refuses a batch (issue 31: this was a Spark job of its own before
  the instant existed, 0.23-0.45 s of a 2 M-row bulk_insert; Delta and Java Hudi validate
  inside their write job too): each distinct partition value goes through core's rule
  (``format/partition_path``) before any path is formed from it, and rows without a record
  key are counted (``base_file.rows_without_key``). A task that meets either stops writing
  (its complete files stay staged, its open ones are deleted) and keeps counting, then reports
  the violation; the driver refuses the write at publish with the error core raises
  (:func:`refusal`), after the instant is rolled back. Nothing reaches the table: the files
  are staged flat under the instant's marker folder, named without the partition path;
- the file groups: a file id per (instant, partition path, task, n) (:func:`file_id`, the
  n-th file of that path in that task), so a retried task attempt or a speculative twin,
  which reads the same rows in the same order, writes the same names and rows;
- the five meta columns as core's writer builds them (base_file.with_meta_columns: the
  constant ones as one-value dictionaries), each file's parquet with pyarrow;
- a report per file: partition path, file id, name, rows.

As in Hudi without a sort mode, the files follow the input's tasks: many small input tasks
over many partitions make many small files (repartition the input first, combine, or cluster
later). The route that counted the pairs first fell back to a shuffle then; that count was the
Spark job before the write this module removed.

Why not Spark's own parquet writer (native_write.py): profiled on 2 M rows, Spark's writer
paid about 0.4 s per constant meta column (hashed and compared per row for the dictionary and
the statistics), and its ``partitionBy`` needs the task's rows sorted by file group.

Kept from the Spark-writer route (native_write.py):

- staging: each file is written under ``.hoodie/.temp/<instant>/.spark-staging`` (the
  instant's marker folder, removed with the markers by a rollback) under a hidden temporary
  name, renamed to its staged name only once complete, so a failed task attempt leaves a
  hidden partial file and its retry the one complete file;
- markers before data: the driver creates every reported file's marker after the job and
  before :func:`native_write.publish` moves the files into the table (a staged file is not
  table data: a rollback removes the staging folder whole). Early conflict detection has
  nothing to look at before: a bulk_insert writes new file groups only, which no other
  writer can touch;
- the job group: the driver cancels the job on an abort signal.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections import OrderedDict
from dataclasses import dataclass
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.commit.merge import conform
from airflow_hudi_occ.core.config import ParquetConfig
from airflow_hudi_occ.core.errors import InvalidPartitionPathError
from airflow_hudi_occ.core.format import partition_path
from airflow_hudi_occ.core.format.base_file import (invalid_key_error, parquet_writer,
                                                    rows_without_key, with_meta_columns)
from airflow_hudi_occ.core.format.layout import base_file_name
from airflow_hudi_occ.spark.executor import plain_types
from airflow_hudi_occ.spark.session import arrow_batches

#: files a task keeps open at once: beyond, the least recently written one is finished (its
#: partition's next rows go to the task's next file of that partition). An open writer holds
#: no rows (each write is whole row groups), only a file handle and the footer so far; a task
#: meeting more partitions than this, interleaved, makes more and smaller files (sort the
#: input by the partition columns within its tasks first, as Hudi's PARTITION_SORT does)
MAX_OPEN_FILES = 64
#: rows buffered per file before they are written as one row group (as core's writer)
CHUNK_ROWS = 131_072
#: rows a task buffers over all its files at most: beyond, its largest buffers are written
TASK_BUFFER_ROWS = 4 * CHUNK_ROWS
#: what a task reports: a ``file`` (partition, file_id, name, rows), rows without a key
#: (``no_key``, rows), a hostile partition value (``partition``, field, value)
RESULT_DDL = ("kind string, partition string, file_id string, name string, rows long, "
              "field string, value string")
_RESULT = pa.schema([("kind", pa.string()), ("partition", pa.string()), ("file_id", pa.string()),
                     ("name", pa.string()), ("rows", pa.int64()), ("field", pa.string()),
                     ("value", pa.string())])


def applies(table) -> bool:
    """Whether a bulk_insert may take this route: a local table (the staged files are
    renamed into place). Unlike Spark's writer, pyarrow stores every column type as the
    Python route does, timestamps included."""
    return table.storage.is_local


def file_id(instant: str, partition: str, task: int, n: int) -> str:
    """The n-th file group a task makes in a partition: a UUID-shaped hash of (instant,
    partition path, task) and ``-n``, as Hudi's file ids end. The instant is unique, so a file
    id never names a file group of another write."""
    digest = hashlib.blake2b(f"{instant}\x00{partition}\x00{task}".encode("utf-8", "surrogatepass"),
                             digest_size=16).digest()
    return f"{uuid.UUID(bytes=digest)}-{n}"


def file_name(instant: str, partition: str, task: int, n: int) -> str:
    """Its base file name: the write token ``<task>-0-0``, as Hudi's bulk_insert without a
    sort mode spells it."""
    return base_file_name(file_id(instant, partition, task, n), f"{task}-0-0", instant)


@dataclass(frozen=True)
class TaskPlan:
    """What every write task is told: how the table spells partitions, and how its files are
    sized: rolled over at ``max_file_bytes`` (``hoodie.parquet.max.file.size``) as Java's
    bulk_insert rolls its files by the bytes it wrote (``canWrite``). ``record_size`` (the
    table's average record, else ``hoodie.copyonwrite.record.size.estimate``) sizes a file's
    first chunk only; from then on the file's own bytes per row decide (an estimate of 1 KB a
    record made three times Java's files of the same rows)."""

    key_fields: tuple
    partition_fields: tuple
    hive_style: bool
    url_encode: bool
    max_file_bytes: int
    record_size: int = 1024
    #: Hudi's hoodie.parquet.* keys (None: this project's defaults)
    parquet: ParquetConfig | None = None


def write_job(spark, records, *, user_columns: list[str], target_schema, instant: str,
              plan: TaskPlan, out_dir: str, meta_fields: bool = True):
    """The Spark action (run it under the watched job group): each input task checks and
    writes its records, as read, into ``out_dir``; the action returns every task's report rows
    (:data:`RESULT_DDL`). ``meta_fields=False`` (a table with virtual keys): the user's
    columns alone."""
    fn = _task_writer(plan, target_schema, instant, out_dir, meta_fields)
    df = records.select(*user_columns)

    def run():
        with arrow_batches(spark, CHUNK_ROWS):
            return df.mapInArrow(fn, RESULT_DDL).collect()
    return run


def _task_writer(plan: TaskPlan, target_schema, instant: str, out_dir: str, meta_fields: bool):
    """The ``mapInArrow`` function of one input task (see the module docstring)."""

    def write(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from pyspark import TaskContext

        tc = TaskContext.get()
        task, attempt = (tc.partitionId(), tc.attemptNumber()) if tc is not None else (0, 0)
        files = TaskFiles(plan, target_schema, instant, out_dir, task, attempt, meta_fields)
        for batch in batches:
            files.add(batch)
        yield pa.RecordBatch.from_pylist(files.close_all(), schema=_RESULT)
    return write


class TaskFiles:
    """One task's files: the check of its rows, a buffer and a parquet writer per open file."""

    def __init__(self, plan: TaskPlan, target_schema, instant: str, out_dir: str, task: int,
                 attempt: int, meta_fields: bool = True):
        self.plan, self.schema, self.meta_fields = plan, target_schema, meta_fields
        self.instant, self.out_dir, self.task, self.attempt = instant, out_dir, task, attempt
        self.seq_prefix = f"{instant}_{task}_"
        self.paths: dict[tuple, str | None] = {}  # partition values -> path (None: hostile)
        self.hostile: set[tuple[str, str]] = set()  # (field, value)
        self.no_key = 0
        self.chunk: dict[str, int] = {}  # partition -> n of its current file
        self.filled: dict[str, int] = {}  # partition -> rows given to its current file
        self.buffers: dict[str, list[pa.Table]] = {}
        self.buffered: dict[str, int] = {}
        self.writers: OrderedDict[str, tuple] = OrderedDict()  # partition -> (cm, writer, tmp)
        self.rows: dict[str, int] = {}  # partition -> rows written to its current file
        self.done: list[dict] = []
        self.seq = 0

    @property
    def refused(self) -> bool:
        return bool(self.no_key or self.hostile)

    # -- the check -----------------------------------------------------------------------------

    def _path_of(self, values: tuple) -> str | None:
        if values not in self.paths:
            p = self.plan
            try:
                self.paths[values] = partition_path.partition_path(
                    p.partition_fields, values, hive_style=p.hive_style, url_encode=p.url_encode)
            except InvalidPartitionPathError:
                self.paths[values] = None
                for f, v in zip(p.partition_fields, values):  # the field(s) core refuses
                    try:
                        partition_path.field_text(f, v, hive_style=p.hive_style, url_encode=p.url_encode)
                    except InvalidPartitionPathError:
                        self.hostile.add((f, str(v)))
        return self.paths[values]

    def _split(self, data: pa.Table) -> list[tuple[str | None, pa.Table]]:
        """The rows by partition path, spelled by core's rule once per distinct value."""
        fields = self.plan.partition_fields
        if not fields:
            return [("", data)]
        code, dicts = None, []
        for f in fields:
            enc = pc.dictionary_encode(data.column(f).combine_chunks(), null_encoding="encode")
            dicts.append(enc.dictionary.to_pylist())
            idx = enc.indices.cast(pa.int64())
            code = idx if code is None else pc.add(pc.multiply(code, len(dicts[-1])), idx)
        distinct = pc.unique(code).to_pylist()

        def values_of(c: int) -> tuple:
            out = []
            for d in reversed(dicts):
                c, i = divmod(c, len(d))
                out.append(d[i])
            return tuple(reversed(out))
        paths = {c: self._path_of(values_of(c)) for c in distinct}
        if len(distinct) == 1:
            return [(paths[distinct[0]], data)]
        by_path: dict[str | None, list[int]] = {}
        for c in distinct:
            by_path.setdefault(paths[c], []).append(c)
        return [(p, data.filter(pc.is_in(code, value_set=pa.array(cs, pa.int64()))))
                for p, cs in by_path.items()]

    def add(self, batch: pa.RecordBatch) -> None:
        data = plain_types(batch)
        bad = rows_without_key(data, self.plan.key_fields)
        if bad is not None:
            self.no_key += int(pc.sum(bad).as_py() or 0)
        parts = self._split(data)
        if self.refused:  # stop writing; keep counting for the driver's error
            self._discard()
            return
        for path, part in parts:
            self._add(path, part)
        # the largest buffers until the task is within its bound again: one a batch is not
        # enough when a batch (up to CHUNK_ROWS rows) spreads over many files
        while sum(self.buffered.values()) > TASK_BUFFER_ROWS:
            self._flush(max(self.buffered, key=self.buffered.get))

    # -- the files -----------------------------------------------------------------------------

    def _rows_per_file(self, path: str) -> int:
        """The rows the partition's current file holds at most: by its own bytes per row once
        a chunk of it is written (deterministic: the same rows make the same bytes, so a retried
        attempt names the same files), else by the record-size estimate."""
        written = self.rows.get(path, 0)
        if written and path in self.writers:
            size = os.path.getsize(self.writers[path][2])
            if size:
                return max(1, self.plan.max_file_bytes * written // size)
        return max(1, self.plan.max_file_bytes // max(1, self.plan.record_size))

    def _add(self, path: str, rows: pa.Table) -> None:
        """Rows of one partition into its current file, the next one once it is full. When
        the estimate says full, the chunk is written and the file's actual size judges again."""
        while rows.num_rows:
            room = self._rows_per_file(path) - self.filled.get(path, 0)
            if room <= 0:
                self._close(path)
                continue
            part, rows = rows.slice(0, room), rows.slice(room)
            self.buffers.setdefault(path, []).append(part)
            self.buffered[path] = self.buffered.get(path, 0) + part.num_rows
            self.filled[path] = self.filled.get(path, 0) + part.num_rows
            if part.num_rows == room or self.buffered[path] >= CHUNK_ROWS:
                self._flush(path)

    def _name(self, path: str) -> tuple[str, str]:
        n = self.chunk.get(path, 0)
        return (file_id(self.instant, path, self.task, n), file_name(self.instant, path, self.task, n))

    def _flush(self, path: str) -> None:
        parts = self.buffers.pop(path, [])
        self.buffered.pop(path, None)
        if not parts:
            return
        _, name = self._name(path)
        user = conform(pa.concat_tables(parts), self.schema)
        full = user if not self.meta_fields else with_meta_columns(
            user, instant_time=self.instant, partition=path, file_name=name,
            key_fields=list(self.plan.key_fields), seq_prefix=self.seq_prefix,
            seqno_start=self.seq, dictionary_constants=True)
        self.seq += full.num_rows
        if path not in self.writers:
            while len(self.writers) >= MAX_OPEN_FILES:  # the least recently written one
                self._close(next(iter(self.writers)))
            os.makedirs(self.out_dir, exist_ok=True)
            tmp = os.path.join(self.out_dir, f".{name}.{self.attempt}.inprogress")
            cm = parquet_writer(tmp, full.schema, sample=full, parquet=self.plan.parquet)
            self.writers[path] = (cm, cm.__enter__(), tmp)
        self.writers.move_to_end(path)
        self.writers[path][1].write_table(full)
        self.rows[path] = self.rows.get(path, 0) + full.num_rows

    def _close(self, path: str) -> None:
        """Finish the partition's current file (staged under its name once complete); its
        next rows go to the next file."""
        self._flush(path)
        if path in self.writers:
            cm, _, tmp = self.writers.pop(path)
            cm.__exit__(None, None, None)
            fid, name = self._name(path)
            os.replace(tmp, os.path.join(self.out_dir, name))  # complete, then visible
            self.done.append({"kind": "file", "partition": path, "file_id": fid, "name": name,
                              "rows": self.rows.pop(path)})
        if self.filled.get(path):
            self.chunk[path] = self.chunk.get(path, 0) + 1
            self.filled[path] = 0

    def _discard(self) -> None:
        """A refused task writes no more: its buffers dropped, its open files deleted."""
        self.buffers.clear()
        self.buffered.clear()
        for cm, _, tmp in self.writers.values():
            cm.__exit__(None, None, None)
            os.remove(tmp)
        self.writers.clear()

    def close_all(self) -> list[dict]:
        """Every file finished; the task's report (:data:`RESULT_DDL`)."""
        if self.refused:
            self._discard()
            out = [{"kind": "partition", "field": f, "value": v} for f, v in sorted(self.hostile)]
            return out + ([{"kind": "no_key", "rows": self.no_key}] if self.no_key else [])
        for path in list(self.buffers):
            self._flush(path)
        for path in list(self.writers):
            self._close(path)
        return self.done


def refusal(plan: TaskPlan, rows) -> Exception | None:
    """The error core raises for the batch, from every task's report (None: none refused): the
    first hostile partition value by field and value, else the rows without a key counted over
    the whole batch, as the batch check of the other routes (``tagging.check_batch``) raises
    them: the same class, fields, remedy and message, since core's rule spells them."""
    fields = list(plan.partition_fields)
    hostile = sorted({(fields.index(r["field"]), r["value"]) for r in rows if r["kind"] == "partition"})
    for i, value in hostile:
        try:
            partition_path.field_text(fields[i], value, hive_style=plan.hive_style, url_encode=plan.url_encode)
        except InvalidPartitionPathError as e:
            return e
    if hostile:  # a task refused what the driver accepts: never write on a disagreement
        i, value = hostile[0]
        return InvalidPartitionPathError(
            f"a write task refused the value {value!r} of partition column {fields[i]!r}; "
            "nothing was written", column=fields[i], value=repr(value), path="",
            remedy="report this: the driver and the write task spell the value differently")
    no_key = sum(int(r["rows"] or 0) for r in rows if r["kind"] == "no_key")
    if no_key:
        return invalid_key_error(list(plan.key_fields), no_key)
    return None
