"""Reading merge-on-read tables: file slices with their log files, snapshot and read-optimised.

A MOR file slice is a base file plus the log files written into it. Which log files belong to
which slice follows Hudi 1.0's completion-time slicing, as hudi-rs implements it: a log file
is named with its deltacommit's requested time; it counts only once that instant is completed
(or archived), and it belongs to the slice with the latest base instant at or before the
deltacommit's *completion* time. Within a slice, log files are read in completion-time order,
then version, then write token, so equal ordering values go to the write that completed later
(a serial replay by completion time; with NBCC, where a deltacommit that began first can
complete last, hudi-rs 0.5.0 and Java order by requested time instead: docs/merge-on-read.md).
A file group with log files and no visible base file (NBCC's new bucket) is one log-only slice.

The snapshot merge is the one hudi-rs (and Java's EVENT_TIME_ORDERING) performs:

1. blocks of rolled-back instants (rollback command blocks name them) and of instants that
   are not completed are ignored;
2. the base rows, then the log blocks in order, are replayed per record key (Java's merged
   log scanner): a later record replaces the current one unless its ordering value is
   smaller (with no ordering field: always); a delete whose ordering value is the natural zero
   (what a DELETE operation writes) removes whatever came before it, so a key written again
   after its delete is back; a delete with an ordering value removes only a record it is not
   older than.

hudi-rs 0.5.0 gives the same rows on every table the tests write (the delete-then-rewrite
case included).

Read-optimised reads only the base files of the latest slices, so it lags the snapshot by
every deltacommit not yet compacted.

Errors: :class:`~airflow_hudi_occ.core.format.log_file.LogFormatError` for a log file that
is not Hudi's format (a truncated last block, a crashed writer's tail, is skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from airflow_hudi_occ.core.format.base_file import read_parquet
from airflow_hudi_occ.core.format.layout import FileGroupId, join_partition
from airflow_hudi_occ.core.format.schema import avro_to_arrow
from airflow_hudi_occ.core.format.log_file import (BlockType, DeleteRecord, LogBlock, LogFileName,
                                                   decode_blocks, read_avro_records,
                                                   read_delete_records, read_parquet_block)
from airflow_hudi_occ.core.table.file_system_view import FileSlice, FileSystemView, list_partitions
from airflow_hudi_occ.core.table.table import Table

@dataclass(frozen=True)
class MergeFileSlice:
    """A base file and the log files that belong to it, in read order. ``base`` is None for a
    log-only file group (NBCC writes a new bucket's first records to log files only); its
    ``group`` then names it."""

    base: FileSlice | None
    log_files: tuple[LogFileName, ...] = field(default_factory=tuple)
    group: FileGroupId | None = None

    @property
    def file_group(self) -> FileGroupId:
        return self.base.file_group if self.base is not None else self.group

    @property
    def partition(self) -> str:
        return self.file_group.partition

    def log_paths(self) -> list[str]:
        return [join_partition(self.partition, lf.name) for lf in self.log_files]


def list_log_files(table: Table, partition: str) -> list[LogFileName]:
    storage = table.storage
    folder = storage.path(partition) if partition else storage.root
    return [lf for lf in (LogFileName.parse(n) for n in storage.list_names(folder)) if lf is not None]


class _Completion:
    """Completion times of the timeline's writes; an instant older than the active timeline is
    archived, hence committed (its completion time unknown: its requested time stands in)."""

    def __init__(self, view: FileSystemView):
        self.view = view
        self.times = {i.requested_time: i.completion_time or i.requested_time
                      for i in view.timeline.completed() if i.is_write}

    def completion_time(self, instant_time: str) -> str | None:
        if instant_time in self.times:
            return self.times[instant_time]
        return instant_time if self.view.completion.is_visible(instant_time) else None


#: completion times as the merge sees them (compaction plans filter log files by them)
CompletionTimes = _Completion


def merge_file_slices(table: Table, view: FileSystemView | None = None) -> list[MergeFileSlice]:
    """The latest slice of every file group with its committed log files."""
    view = view or FileSystemView(table)
    completion = _Completion(view)
    logs: dict[FileGroupId, list[tuple[str, LogFileName]]] = {}
    # every partition, not only those with base files: a partition may hold log-only groups
    parts = set(view._partitions) if view._partitions is not None else set(list_partitions(table))
    for part in sorted(parts):
        for lf in list_log_files(table, part):
            done = completion.completion_time(lf.instant_time)
            if done is not None:
                logs.setdefault(FileGroupId(part, lf.file_id), []).append((done, lf))
    out = []
    for s in view.latest_file_slices():
        mine = [(c, lf) for c, lf in logs.pop(s.file_group, []) if c >= s.instant_time]
        out.append(MergeFileSlice(s, _in_read_order(mine)))
    # log-only file groups (no visible base file yet; a pending compaction's is invisible):
    # one slice of every committed log, as Java's HoodieFileGroup keeps the logs of a group
    # without a base file in its one slice
    replaced = view.completion.replaced_file_groups()
    for fg, mine in sorted(logs.items()):
        if fg not in replaced:
            out.append(MergeFileSlice(None, _in_read_order(mine), fg))
    return out


def _in_read_order(logs: list[tuple[str, LogFileName]]) -> tuple[LogFileName, ...]:
    """Completion time, then version, then write token: the order a serial replay applies
    the deltacommits in, so that equal ordering values go to the later *completed* write."""
    return tuple(lf for _, lf in sorted(logs, key=lambda cl: (cl[0], cl[1].version, cl[1].write_token)))


def _valid_blocks(table: Table, fs: MergeFileSlice, completion: _Completion) -> list[LogBlock]:
    blocks: list[LogBlock] = []
    for rel in fs.log_paths():
        blocks.extend(decode_blocks(table.storage.read(table.storage.path(rel)),
                                    allow_truncated_tail=True))
    rolled_back = {b.target_instant_time for b in blocks if b.is_rollback}
    return [b for b in blocks if b.block_type is not BlockType.COMMAND
            and b.instant_time not in rolled_back
            and b.instant_time is not None and completion.completion_time(b.instant_time) is not None]


def _newer(new, old) -> bool:
    """Whether an ordering value ``new`` of a later write beats ``old`` (ties to the later)."""
    if new is None or old is None:
        return True
    return new >= old


def _fold(events: list, ordering: bool) -> list[int]:
    """Replay the slice's writes in order, per key, as Java's merged log scanner does: a later
    record replaces the current one unless its ordering value is smaller; a delete with the
    natural zero ordering removes whatever came before; a delete with an ordering value only
    removes a record it is not older than. Returns the surviving row numbers."""
    state: dict[str, tuple] = {}
    for ev in events:
        if ev[0] == "row":
            _, key, row, value = ev
            cur = state.get(key)
            if cur is None or not ordering or _newer(value, cur[2]):
                state[key] = ("row", row, value)
        else:
            _, key, value = ev
            cur = state.get(key)
            zero = value is None or value == 0 or not ordering
            if zero or cur is None or _newer(value, cur[2]):
                state[key] = ("del", None, None if zero else value)
    return sorted(st[1] for st in state.values() if st[0] == "row")


def read_file_slice(table: Table, fs: MergeFileSlice, completion: _Completion | None = None) -> pa.Table:
    """The merged rows of one slice (meta columns first, the base file's column order)."""
    completion = completion or _Completion(FileSystemView(table))
    blocks = _valid_blocks(table, fs, completion) if fs.log_files else []
    if fs.base is not None:
        base = read_parquet(table.storage, fs.base.base_file.relative_path)
        if not fs.log_files:
            return base
        schema = base.schema
    else:
        # log-only: the latest data block's schema (the most evolved one)
        schemas = [b.schema for b in blocks if b.block_type is BlockType.AVRO_DATA and b.schema]
        schema = avro_to_arrow(schemas[-1]) if schemas else None
        if schema is None:
            return pa.table({})
        base = schema.empty_table()
    # data parts in write order; the deletes that follow each part
    parts = [base]
    delete_after: list[list[DeleteRecord]] = [[]]
    for b in blocks:
        if b.block_type is BlockType.AVRO_DATA:
            bschema = schema if fs.base is not None else avro_to_arrow(b.schema)
            parts.append(pa.Table.from_pylist(read_avro_records(b), schema=bschema))
            delete_after.append([])
        elif b.block_type is BlockType.PARQUET_DATA:
            parts.append(read_parquet_block(b))
            delete_after.append([])
        elif b.block_type is BlockType.DELETE:
            delete_after[-1].extend(read_delete_records(b))
    rows = pa.concat_tables(parts, promote_options="permissive")
    ordering = table.config.precombine_field
    if ordering not in rows.column_names:
        ordering = None
    keys = rows.column("_hoodie_record_key").to_pylist()
    values = rows.column(ordering).to_pylist() if ordering else [None] * len(keys)
    events: list = []
    n = 0
    for p, dels in zip(parts, delete_after):
        events.extend(("row", keys[i], i, values[i]) for i in range(n, n + p.num_rows))
        n += p.num_rows
        events.extend(("del", d.record_key, d.ordering_value) for d in dels)
    survivors = _fold(events, ordering is not None)
    merged = rows.take(pa.array(survivors, pa.int64()))
    return merged.select([c for c in schema.names if c in merged.column_names])


def read_snapshot(table: Table) -> pa.Table:
    """Every file group's latest slice, base merged with its logs."""
    view = FileSystemView(table)
    completion = _Completion(view)
    parts = [read_file_slice(table, fs, completion) for fs in merge_file_slices(table, view)]
    parts = [p for p in parts if p.num_rows or p.num_columns]
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts, promote_options="permissive")


def read_optimized(table: Table) -> pa.Table:
    """Base files only (Hudi's read-optimised query): fast, and behind by the logs."""
    parts = [read_parquet(table.storage, s.base_file.relative_path)
             for s in FileSystemView(table).latest_file_slices()]
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts, promote_options="permissive")


__all__ = ["CompletionTimes", "MergeFileSlice", "list_log_files", "merge_file_slices", "read_file_slice",
           "read_snapshot", "read_optimized"]
