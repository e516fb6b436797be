"""A single-process writer for merge-on-read tables: deltacommits that append log files.

What it writes, as Hudi 1.x does for a MOR table with the simple index (table version 8):

- every write is a ``deltacommit`` instant (requested -> inflight -> completed), through
  :class:`WriteTransaction`, so the table lock, early conflict checks and commit-time conflict
  resolution apply exactly as for copy-on-write commits;
- records whose key is new go to new file groups as parquet base files (Hudi's MOR with the
  simple index sends inserts to base files), with a CREATE marker;
- upserts of keys that live in a file group append one Avro data block, deletes one delete
  block, to a *new* log file of that group's latest slice,
  ``.<fileId>_<deltacommit>.log.1_<token>``, behind a CREATE marker (Hudi's for log files
  from version 8). A new file per
  deltacommit (rather than appending to an existing one, as table version 6 did) is what
  Hudi 1.0's completion-time slicing expects, and makes a failed write's rollback a plain
  delete of its files, which the marker-driven rollback already does.

Tagging (which rows go to which file group) is :class:`ArrowTableWriter`'s own, so the two
writers agree on where a key lives; only the per-file-group step differs. Under non-blocking
concurrency control (``core/concurrency/nbcc.py``) tagging is by bucket alone and every write
is a log file, including a bucket's first (a log-only file group under the bucket's fixed
fileId); concurrent deltacommits on one bucket all commit.

Not here (see docs/merge-on-read.md): compaction (``services/compaction``), the bucket index
under OCC, insert_overwrite, appending to existing log files, table version 9.

Errors are the transaction's (retryable conflicts, lock errors) plus :class:`ConfigError` for
an operation or table this writer does not handle.
"""

from __future__ import annotations

import json
import time

import pyarrow as pa
import pyarrow.compute as pc

from airflow_hudi_occ.core.commit import merge
from airflow_hudi_occ.core.commit.pipeline import WritePlan, planned_file_groups, write_marked
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.core.commit.file_group_work import FileGroupWork
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter, CopyOnWriteEngine
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.format.base_file import (far_value_text, key_part_array, record_key_array,
                                                    rows_out_of_python_range, with_meta_columns, write_token)
from airflow_hudi_occ.core.format.schema import SchemaError
from airflow_hudi_occ.core.concurrency import nbcc
from airflow_hudi_occ.core.format.bucket_index import bucket_id, hash_fields, nbcc_file_id
from airflow_hudi_occ.core.format.layout import bucket_id_of
from airflow_hudi_occ.core.format.instant import Action
from airflow_hudi_occ.core.format.layout import join_partition
from airflow_hudi_occ.core.format.log_file import (DeleteRecord, LogFileName, avro_data_block,
                                                   delete_block, encode_blocks, table_avro_schema)
from airflow_hudi_occ.core.format.metadata import WriteStat
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.mor_reader import CompletionTimes, list_log_files
from airflow_hudi_occ.core.table.table import MERGE_ON_READ, Table

#: the operations a deltacommit of this writer performs
MOR_OPERATIONS = ("upsert", "insert", "delete", "bulk_insert")


def ordering_avro_type(schema_json: str, field_name: str | None) -> str | None:
    """The Avro type of the ordering field in the table schema (delete records carry their
    ordering value typed as that field)."""
    if not field_name:
        return None
    for f in json.loads(schema_json).get("fields", []):
        if f["name"] == field_name:
            t = f["type"]
            t = next((x for x in t if x != "null"), None) if isinstance(t, list) else t
            return t if isinstance(t, str) else (t or {}).get("type")
    return None


class MergeOnReadWriter(ArrowTableWriter):
    """One batch as one deltacommit. Same constructor as :class:`ArrowTableWriter`."""

    def __init__(self, table: Table, *args, **kwargs):
        if table.config.table_type != MERGE_ON_READ:
            raise ConfigError(f"table {table.name} is {table.config.table_type}",
                              key="hoodie.table.type", value=table.config.table_type,
                              remedy="write copy-on-write tables with ArrowTableWriter")
        table.require_meta_fields("the merge-on-read writer")
        super().__init__(table, *args, **kwargs)
        #: (partition, file id) -> the pending compaction's instant, read by the last plan
        self.pending_compaction: dict = {}

    table_type = MERGE_ON_READ

    def engine(self, data: pa.Table, operation: str, before_file=None) -> "MergeOnReadEngine":
        return MergeOnReadEngine(self, data, operation, before_file)

    # -- NBCC tagging ------------------------------------------------------------------------

    def plan_nbcc(self, view: FileSystemView, data: pa.Table, op: str, groups) -> list[FileGroupWork]:
        """Non-blocking concurrency control: every key goes to its bucket's one file group, and
        every write to a log file of this deltacommit, whether the bucket exists or not (Java's
        bucket partitioner under NB-CC). No stored key is read: the bucket alone decides, so
        concurrent writers never look at, or wait for, each other's files. A bucket that has no
        file group yet gets the fixed NBCC fileId, the same in every writer. Only bulk_insert
        creates base files (for new buckets, under the same fixed fileId), and it resolves
        conflicts at commit as Hudi's bulk_insert does.

        Deletes are written as delete blocks for every key of the batch, also to buckets not
        (yet) in the table: a concurrent insert of the key that completes first must end up
        deleted, as a serial replay by completion time has it (Hudi drops deletes it cannot
        tag to a file group; beyond Hudi, deliberate)."""
        cfg = self.table.config
        n = nbcc.num_buckets(self.table, self.config)
        fields = hash_fields(self.config.index, cfg.record_key_fields)
        pre = cfg.ordering_field  # None under COMMIT_TIME_ORDERING: the later row wins
        completion = CompletionTimes(view)
        work: list[FileGroupWork] = []
        for part, idx in groups:
            keyed = data.select(list(dict.fromkeys([*cfg.record_key_fields, *fields]))).take(idx)
            keys = record_key_array(keyed, cfg.record_key_fields)
            chosen = merge.dedupe_indices(keys, data.column(pre).take(idx)
                                          if pre and pre in data.column_names else None)
            if chosen is not None:
                idx, keyed = idx.take(chosen), keyed.take(chosen)
            cols = [key_part_array(keyed.column(f)).to_pylist() for f in fields]
            by_bucket: dict[int, list[int]] = {}
            for i, vals in enumerate(zip(*cols)):  # Java's String.hashCode: not vectorised
                by_bucket.setdefault(bucket_id(vals, n), []).append(i)
            existing = self._bucket_file_groups(view, part, completion)
            for b, pos in sorted(by_bucket.items()):
                rows = idx.take(pa.array(pos, pa.int64()))
                file_id, base = existing.get(b, (nbcc_file_id(b), None))
                if op == "bulk_insert" and b not in existing:
                    work.append(FileGroupWork(part, file_id, None, rows))  # a base file (CREATE)
                    continue
                mode = merge.DELETE if op == "delete" else merge.UPSERT
                work.append(FileGroupWork(part, file_id, _NbccSlice(base, b in existing), rows, mode))
        return work

    def _bucket_file_groups(self, view: FileSystemView, part: str, completion) -> dict:
        """bucket -> (fileId, latest base slice or None) of the partition's file groups that
        exist: with a visible base file, or with a log file of a completed deltacommit."""
        out: dict[int, tuple[str, object]] = {}
        for sl in view.latest_file_slices(part):
            b = bucket_id_of(sl.file_id)
            if b is not None:
                out[int(b)] = (sl.file_id, sl)
        for lf in list_log_files(self.table, part, view.listing):
            b = bucket_id_of(lf.file_id)
            if b is not None and int(b) not in out and completion.completion_time(lf.instant_time):
                out[int(b)] = (lf.file_id, None)
        return out

    # -- log files --------------------------------------------------------------------------

    def mark_log(self, tx: WriteTransaction, w: FileGroupWork, before_file) -> str:
        """The marker of the log file this deltacommit writes into ``w``'s slice: CREATE, as
        Hudi writes for log files from table version 8 on (each deltacommit writes a new log
        file, nothing is appended). Java's rollback refuses an APPEND marker on such a table
        ("V8+ should not have APPEND markers"), so a failed write of ours could not be rolled
        back by Java."""
        name = LogFileName(w.file_id, tx.instant_time, 1, write_token(0, 0, tx.attempt)).name
        if before_file:
            before_file(tx, w.partition, w.file_id)
        tx.create_marker(w.partition, name, "CREATE")
        if w.partition:  # a log-only file group may be the partition's first file
            self.table.write_partition_metadata(w.partition, tx.instant_time)
        return name

    def write_log(self, tx: WriteTransaction, data: pa.Table, w: FileGroupWork, name: str, *,
                   schema_json: str) -> WriteStat:
        t0 = time.time()
        rel = join_partition(w.partition, name)
        cfg = self.table.config
        rows = data.take(w.indices)
        keys = record_key_array(rows, cfg.record_key_fields)
        full_schema = json.dumps(table_avro_schema(json.loads(schema_json)), separators=(",", ":"))
        if w.mode == merge.DELETE:
            pre = cfg.precombine_field
            otype = ordering_avro_type(schema_json, pre) or "int"
            # Hudi's delete without an ordering value: 0, "the delete wins over every record
            # written before it" (readers then order by commit time)
            zero = 0 if otype in ("int", "long") else (0.0 if otype in ("float", "double") else None)
            if zero is None:
                otype, zero = "int", 0
            dels = [DeleteRecord(k, w.partition, zero, otype) for k in keys.to_pylist()]
            blocks = [delete_block(tx.instant_time, full_schema, dels)]
            writes, updates, deletes = 0, 0, len(dels)
        else:
            # _hoodie_file_name of a log record is the fileId, as Java's append handle sets it
            full = with_meta_columns(rows, instant_time=tx.instant_time, partition=w.partition,
                                     file_name=w.file_id, keys=keys)
            blocks = [avro_data_block(tx.instant_time, full_schema, full.to_pylist())]
            writes, updates, deletes = full.num_rows, full.num_rows, 0
        payload = encode_blocks(blocks)
        # create-if-absent: a retried task never appends a second copy of its blocks
        self.table.storage.create_if_absent(self.table.storage.path(rel), payload)
        ms = int((time.time() - t0) * 1000)
        base = w.prev.base_file
        # a log-only file group (NBCC): its slice begins with this deltacommit, as Java's
        # append handle takes the instant for the base instant of a group with no slice yet
        prev = w.prev.instant_time or tx.instant_time
        if isinstance(w.prev, _NbccSlice) and not w.prev.exists and w.mode != merge.DELETE:
            writes, updates = writes, 0
            inserts = writes
        else:
            inserts = 0
        compaction = self.pending_compaction.get((w.partition, w.file_id))
        if compaction is not None:
            prev, base = compaction, None
        return WriteStat(file_id=w.file_id, path=rel, partition_path=w.partition,
                         prev_commit=prev, num_writes=writes,
                         num_deletes=deletes, num_update_writes=updates, num_inserts=inserts,
                         file_size_in_bytes=len(payload), total_write_bytes=len(payload),
                         upsert_time_ms=ms, base_file=base.name if base is not None else "",
                         log_files=[name], log_version=1, log_offset=0)


class MergeOnReadEngine(CopyOnWriteEngine):
    """The Arrow merge-on-read engine of one write: a deltacommit whose new keys go to new
    file groups' base files and whose updates and deletes go to a new log file of each touched
    file group (under NBCC, every write to its bucket's log file)."""

    def __init__(self, writer: "MergeOnReadWriter", data: pa.Table, operation: str, before_file=None):
        op = operation.lower()
        if op not in MOR_OPERATIONS:
            raise ConfigError(f"operation {operation!r} is not written to merge-on-read tables yet",
                              key="hoodie.datasource.write.operation", value=operation,
                              remedy=f"use one of {MOR_OPERATIONS}")
        self.use_nbcc = nbcc.is_nbcc(writer.config)
        if self.use_nbcc:
            nbcc.check_config(writer.table, writer.config)
        elif writer.config.index.buckets is not None:
            raise ConfigError("the bucket index is written to merge-on-read tables only under "
                              "non-blocking concurrency control",
                              key="hoodie.index.type", value="BUCKET",
                              remedy=f"set {nbcc.MODE_KEY}={nbcc.NBCC}, or use the simple index "
                                     "(the default)")
        super().__init__(writer, data, op, before_file)

    @property
    def action(self) -> Action:
        return Action.DELTA_COMMIT

    def check_batch(self, schema_json: str) -> None:
        super().check_batch(schema_json)
        if self.operation != "delete":
            check_log_values(self.data)

    def plan(self, tx: WriteTransaction) -> WritePlan:
        groups = self.groups
        w = self.writer
        view = FileSystemView(self.table, partitions=[p for p, _ in groups])
        if self.use_nbcc:
            work = w.plan_nbcc(view, self.data, self.operation, groups)
        else:
            work, _ = w.tag(view, self.data, self.operation, groups, 1)
        # a file group under a pending compaction: this write's log file belongs to the slice
        # the compaction starts (Java records that slice's base instant as prevCommit)
        w.pending_compaction = view.timeline.pending_compaction_file_groups()
        touched = [(x.partition, x.file_id) for x in work if x.prev is not None]
        return WritePlan(planned=planned_file_groups(work), touched=touched, timeline=view.timeline,
                         detail=work)

    def write_files(self, tx: WriteTransaction, plan: WritePlan, schema_json: str) -> list[WriteStat]:
        w, mixed = self.writer, self.by_path.mixed

        def mark(tx, item):
            return (w.mark(tx, item, self.before_file) if _is_base(item)
                    else w.mark_log(tx, item, self.before_file))

        def write(tx, item, name):
            return (w.write_base_file(tx, self.data, item, name, mixed=mixed) if _is_base(item)
                    else w.write_log(tx, self.data, item, name, schema_json=schema_json))
        return write_marked(tx, plan.detail, mark, write, w.threads)


def check_log_values(data: pa.Table) -> None:
    """Refuse, before the instant exists, a date or timestamp column holding a value outside
    the years 1-9999: a log block carries each record through Python's ``date`` and
    ``datetime`` (fastavro), which end there, so the write failed half-way with a raw
    ``OverflowError`` (a base file of the copy-on-write writer takes them)."""
    for name in data.column_names:
        far = rows_out_of_python_range(data.column(name))
        if far is not None and pc.any(far).as_py():
            first = int(pc.index(far, True).as_py())
            raise SchemaError(
                f"column {name!r} holds dates or times outside the years 1-9999 (the first is row "
                f"{first} of the batch: {far_value_text(data.column(name), first)}), which the "
                "merge-on-read writer's log records cannot carry; nothing was written",
                columns=[name], remedy="correct or filter the values (a sentinel such as "
                                       "9999-12-31 is within range), or write a copy-on-write table")


def _is_base(w: FileGroupWork) -> bool:
    """Whether the work item writes a base file (a new file group) rather than a log file."""
    return w.prev is None


class _NbccSlice:
    """The slice an NBCC log file goes into: the bucket's latest base slice, or none yet
    (a log-only file group). Quacks like the FileSlice ``write_log`` reads."""

    def __init__(self, base, exists: bool):
        self.base = base
        self.exists = exists

    @property
    def base_file(self):
        return self.base.base_file if self.base is not None else None

    @property
    def instant_time(self):
        return self.base.instant_time if self.base is not None else None


__all__ = ["MergeOnReadWriter", "MergeOnReadEngine", "MOR_OPERATIONS", "ordering_avro_type", "check_log_values"]
