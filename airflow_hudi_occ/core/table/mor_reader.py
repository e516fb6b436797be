"""Reading merge-on-read tables: file slices with their log files, snapshot and read-optimised.

A MOR file slice is a base file plus the log files written into it. Which log files belong to
which slice follows Hudi 1.0's completion-time slicing, as hudi-rs implements it: a log file
is named with its deltacommit's requested time; it counts only once that instant is completed
(or archived), and it belongs to the slice with the latest base instant at or before the
deltacommit's *completion* time. Within a slice, log files are read in completion-time order,
then version, then write token.

The snapshot merge is the one hudi-rs (and Java's EVENT_TIME_ORDERING) performs:

1. blocks of rolled-back instants (rollback command blocks name them) and of instants that
   are not completed are ignored;
2. per record key, the base row and every log row compete: the largest ordering field wins,
   ties go to the later write (with no ordering field: the latest write wins);
3. delete records then remove the winner when the delete is "newer": a delete whose ordering
   value is the natural zero (what a DELETE operation writes) wins over any record of an
   earlier instant; otherwise over a smaller ordering value, or an equal one of an earlier
   instant.

Read-optimised reads only the base files of the latest slices, so it lags the snapshot by
every deltacommit not yet compacted.

Errors: :class:`~airflow_hudi_occ.core.format.log_file.LogFormatError` for a log file that
is not Hudi's format (a truncated last block, a crashed writer's tail, is skipped).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa

from airflow_hudi_occ.core.format.base_file import read_parquet
from airflow_hudi_occ.core.format.layout import FileGroupId, join_partition
from airflow_hudi_occ.core.format.log_file import (BlockType, DeleteRecord, LogBlock, LogFileName,
                                                   decode_blocks, read_avro_records,
                                                   read_delete_records, read_parquet_block)
from airflow_hudi_occ.core.table.file_system_view import FileSlice, FileSystemView, list_partitions
from airflow_hudi_occ.core.table.table import Table

_ORDER = "__hudi_occ_order"


@dataclass(frozen=True)
class MergeFileSlice:
    """A base file and the log files that belong to it, in read order."""

    base: FileSlice
    log_files: tuple[LogFileName, ...] = field(default_factory=tuple)

    @property
    def file_group(self) -> FileGroupId:
        return self.base.file_group

    def log_paths(self) -> list[str]:
        return [join_partition(self.base.partition, lf.name) for lf in self.log_files]


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


def merge_file_slices(table: Table, view: FileSystemView | None = None) -> list[MergeFileSlice]:
    """The latest slice of every file group with its committed log files."""
    view = view or FileSystemView(table)
    completion = _Completion(view)
    logs: dict[FileGroupId, list[tuple[str, LogFileName]]] = {}
    parts = {s.partition for s in view.latest_file_slices()} or set(list_partitions(table))
    for part in sorted(parts):
        for lf in list_log_files(table, part):
            done = completion.completion_time(lf.instant_time)
            if done is not None:
                logs.setdefault(FileGroupId(part, lf.file_id), []).append((done, lf))
    out = []
    for s in view.latest_file_slices():
        mine = [(c, lf) for c, lf in logs.get(s.file_group, []) if c >= s.instant_time]
        mine.sort(key=lambda cl: (cl[0], cl[1].version, cl[1].write_token))
        out.append(MergeFileSlice(s, tuple(lf for _, lf in mine)))
    return out


def _valid_blocks(table: Table, fs: MergeFileSlice, completion: _Completion) -> list[LogBlock]:
    blocks: list[LogBlock] = []
    for rel in fs.log_paths():
        blocks.extend(decode_blocks(table.storage.read(table.storage.path(rel)),
                                    allow_truncated_tail=True))
    rolled_back = {b.target_instant_time for b in blocks if b.is_rollback}
    return [b for b in blocks if b.block_type is not BlockType.COMMAND
            and b.instant_time not in rolled_back
            and b.instant_time is not None and completion.completion_time(b.instant_time) is not None]


def _winners(rows: pa.Table, ordering: str | None) -> pa.Table:
    """Per record key, the row with the largest ordering value, ties to the later write."""
    keys = [("_hoodie_record_key", "ascending")]
    if ordering and ordering in rows.column_names:
        keys.append((ordering, "descending"))
    keys.append((_ORDER, "descending"))
    rows = rows.sort_by(keys)
    k = rows.column("_hoodie_record_key").to_numpy(zero_copy_only=False)
    first = np.ones(len(k), dtype=bool)
    if len(k) > 1:
        first[1:] = k[1:] != k[:-1]
    return rows.filter(pa.array(first))


def _apply_deletes(rows: pa.Table, deletes: list[tuple[DeleteRecord, str]],
                   ordering: str | None) -> pa.Table:
    if not deletes or rows.num_rows == 0:
        return rows
    newest: dict[str, tuple[object, str]] = {}
    for d, instant in deletes:
        ev, ct = newest.get(d.record_key, (None, ""))
        if d.ordering_value is not None and (ev is None or d.ordering_value > ev):
            ev = d.ordering_value
        newest[d.record_key] = (ev, max(ct, instant))
    keys = rows.column("_hoodie_record_key").to_pylist()
    times = rows.column("_hoodie_commit_time").to_pylist()
    values = rows.column(ordering).to_pylist() if ordering and ordering in rows.column_names else None
    keep = []
    for i, key in enumerate(keys):
        hit = newest.get(key)
        if hit is None:
            keep.append(True)
            continue
        ev, ct = hit
        if values is None or ev is None or ev == 0:
            gone = ct > times[i]
        else:
            v = values[i]
            gone = v is None or ev > v or (ev == v and ct > times[i])
        keep.append(not gone)
    return rows.filter(pa.array(keep))


def read_file_slice(table: Table, fs: MergeFileSlice, completion: _Completion | None = None) -> pa.Table:
    """The merged rows of one slice (meta columns first, the base file's column order)."""
    completion = completion or _Completion(FileSystemView(table))
    base = read_parquet(table.storage, fs.base.base_file.relative_path)
    if not fs.log_files:
        return base
    schema = base.schema
    parts = [base]
    deletes: list[tuple[DeleteRecord, str]] = []
    for b in _valid_blocks(table, fs, completion):
        if b.block_type is BlockType.AVRO_DATA:
            parts.append(pa.Table.from_pylist(read_avro_records(b), schema=schema))
        elif b.block_type is BlockType.PARQUET_DATA:
            parts.append(read_parquet_block(b))
        elif b.block_type is BlockType.DELETE:
            deletes.extend((d, b.instant_time) for d in read_delete_records(b))
    numbered = []
    n = 0
    for p in parts:
        numbered.append(p.append_column(_ORDER, pa.array(np.arange(n, n + p.num_rows, dtype=np.int64))))
        n += p.num_rows
    rows = pa.concat_tables(numbered, promote_options="permissive")
    ordering = table.config.precombine_field
    merged = _apply_deletes(_winners(rows, ordering), deletes, ordering)
    merged = merged.sort_by(_ORDER).drop_columns([_ORDER])
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


__all__ = ["MergeFileSlice", "list_log_files", "merge_file_slices", "read_file_slice",
           "read_snapshot", "read_optimized"]
