"""Reading merge-on-read tables: file slices with their log files; snapshot, time travel,
incremental and read-optimised reads.

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

Time travel and incremental reads bound which committed instants are seen (:class:`ReadBound`):
as of a requested time (Hudi's time-travel rule), or as of a completion time (the end of an
incremental window, whose writes are chosen by completion time). A log file's completion time
comes from the active timeline, else from the LSM history once its deltacommit is archived.

Errors: :class:`~airflow_hudi_occ.core.format.log_file.LogFormatError` for a log file that
is not Hudi's format (a truncated last block, a crashed writer's tail, is skipped).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)

from airflow_hudi_occ.core.config import ReadConfig
from airflow_hudi_occ.core.format.base_file import read_parquet
from airflow_hudi_occ.core.format.instant import Action, Instant
from airflow_hudi_occ.core.format.layout import FileGroupId, join_partition
from airflow_hudi_occ.core.format.schema import avro_to_arrow
from airflow_hudi_occ.core.format.log_file import (BlockType, DeleteRecord, LogBlock, LogFileName,
                                                   decode_blocks, read_avro_records,
                                                   read_delete_records, read_parquet_block)
from airflow_hudi_occ.core.table.file_system_view import (FileSlice, FileSystemView, list_base_files,
                                                         list_partitions)
from airflow_hudi_occ.core.table.file_listing import FileListing, StorageListing
from airflow_hudi_occ.core.table.history import TimelineHistory
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.time_travel import check_as_of_readable, check_not_archived

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


def list_log_files(table: Table, partition: str, listing: FileListing | None = None) -> list[LogFileName]:
    """The log files of ``partition`` that ``listing`` names (default: the storage's)."""
    names = (listing or StorageListing(table)).names(partition)
    return [lf for lf in (LogFileName.parse(n) for n in names) if lf is not None]


class _Completion:
    """Completion times of the table's writes. An instant on the active timeline has its own;
    one older than the active timeline was archived, hence committed, and its completion time
    is taken from the LSM history (the requested time stands in only when the history does not
    have it: an instant archived before completion times were recorded)."""

    def __init__(self, view: FileSystemView):
        self.view = view
        self.times = {i.requested_time: i.completion_time or i.requested_time
                      for i in view.timeline.completed() if i.is_write}
        self._archived: dict[str, str] | None = None

    def _archived_times(self) -> dict[str, str]:
        if self._archived is None:
            self._archived = TimelineHistory(self.view.table).completion_times()
        return self._archived

    def completion_time(self, instant_time: str) -> str | None:
        if instant_time in self.times:
            return self.times[instant_time]
        if not self.view.completion.is_visible(instant_time):
            return None
        return self._archived_times().get(instant_time, instant_time)


#: completion times as the merge sees them (compaction plans filter log files by them)
CompletionTimes = _Completion


@dataclass(frozen=True)
class ReadBound:
    """Which committed instants a read sees.

    - ``as_of``: time travel, Hudi's rule: instants *requested* at or before it that are
      completed now (Java's log scanner and hudi-rs skip blocks whose instant time is later,
      and take the slice with the latest base instant at or before it);
    - ``completed_by``: the table as it was when the instant completing at that time had
      completed (incremental reads end there): instants whose completion time is at or before it.

    Log files are still assigned to slices by completion time against *every* committed base
    file, as both Hudi readers do: a log that completed after a compaction belongs to the
    compaction's slice, which a read before that compaction does not see."""

    as_of: str | None = None
    completed_by: str | None = None

    def includes(self, instant_time: str, completion_time: str | None) -> bool:
        if completion_time is None:
            return False
        if self.as_of is not None and instant_time > self.as_of:
            return False
        if self.completed_by is not None and completion_time > self.completed_by:
            return False
        return True

    @property
    def unbounded(self) -> bool:
        return self.as_of is None and self.completed_by is None


_LATEST = ReadBound()


def _replaced(view: FileSystemView, completion: _Completion, bound: ReadBound) -> set[FileGroupId]:
    out: set[FileGroupId] = set()
    tl = view.timeline
    for inst in tl.completed():
        if inst.action is Action.REPLACE_COMMIT and bound.includes(
                inst.requested_time, completion.completion_time(inst.requested_time)):
            out |= tl.commit_metadata(inst).replaced_file_groups()
    return out


def merge_file_slices(table: Table, view: FileSystemView | None = None,
                      bound: ReadBound = _LATEST) -> list[MergeFileSlice]:
    """The latest slice (within ``bound``) of every file group with its committed log files."""
    view = view or FileSystemView(table)
    completion = _Completion(view)
    if bound.unbounded:
        latest = {s.file_group: s for s in view.latest_file_slices()}
        committed = None
        replaced = view.completion.replaced_file_groups()
    else:
        # a log belongs to the slice of the latest committed base file at or before its
        # completion time. Time travel counts every base file committed now, even one beyond
        # the bound (both Hudi readers list them all); a read as of a completion time counts
        # those committed by then (a compaction still pending then did not own later logs)
        replaced = _replaced(view, completion, bound)
        latest, committed = {}, {}
        for part in list_partitions(table, view.listing):
            for bf in list_base_files(table, part, view.listing):
                done = completion.completion_time(bf.instant_time)
                if done is None or (bound.completed_by is not None and done > bound.completed_by):
                    continue
                committed.setdefault(bf.file_group, []).append(bf.instant_time)
                if bf.file_group in replaced or not bound.includes(bf.instant_time, done):
                    continue
                cur = latest.get(bf.file_group)
                if cur is None or bf.instant_time > cur.instant_time:
                    latest[bf.file_group] = FileSlice(bf)
    logs: dict[FileGroupId, list[tuple[str, LogFileName]]] = {}
    # every partition, not only those with base files: a partition may hold log-only groups
    for part in sorted(set(view.partitions())):
        for lf in list_log_files(table, part, view.listing):
            done = completion.completion_time(lf.instant_time)
            if done is not None and bound.includes(lf.instant_time, done):
                logs.setdefault(FileGroupId(part, lf.file_id), []).append((done, lf))
    out = []
    for fg, s in sorted(latest.items()):
        bases = committed.get(fg, []) if committed is not None else [s.instant_time]
        mine = [(c, lf) for c, lf in logs.pop(fg, [])
                if c >= s.instant_time and max((b for b in bases if b <= c), default=None) == s.instant_time]
        out.append(MergeFileSlice(s, _in_read_order(mine)))
    # log-only file groups (no visible base file yet; a pending compaction's is invisible):
    # one slice of every committed log, as Java's HoodieFileGroup keeps the logs of a group
    # without a base file in its one slice. Within a bound, a group whose base file exists
    # now but not then keeps the logs that completed before its first base file.
    for fg, mine in sorted(logs.items()):
        if fg in replaced:
            continue
        if committed is not None and fg in committed:
            first = min(committed[fg])
            mine = [(c, lf) for c, lf in mine if c < first]
        if mine:
            out.append(MergeFileSlice(None, _in_read_order(mine), fg))
    return out


def _in_read_order(logs: list[tuple[str, LogFileName]]) -> tuple[LogFileName, ...]:
    """Completion time, then version, then write token: the order a serial replay applies
    the deltacommits in, so that equal ordering values go to the later *completed* write."""
    return tuple(lf for _, lf in sorted(logs, key=lambda cl: (cl[0], cl[1].version, cl[1].write_token)))


def _valid_blocks(table: Table, fs: MergeFileSlice, completion: _Completion,
                  bound: ReadBound = _LATEST) -> list[LogBlock]:
    blocks: list[LogBlock] = []
    for rel in fs.log_paths():
        blocks.extend(decode_blocks(table.storage.read(table.storage.path(rel)),
                                    allow_truncated_tail=True))
    rolled_back = {b.target_instant_time for b in blocks if b.is_rollback}
    return [b for b in blocks if b.block_type is not BlockType.COMMAND
            and b.instant_time not in rolled_back
            and b.instant_time is not None
            and bound.includes(b.instant_time, completion.completion_time(b.instant_time))]


def _newer(new, old) -> bool:
    """Whether an ordering value ``new`` of a later write beats ``old`` (ties to the later)."""
    if new is None or old is None:
        return True
    return new >= old


def _fold(events: list, ordering: bool, base: list | tuple = ()) -> list[int]:
    """Merge one slice per key as Java's file-group reader does (Hudi 1.x, event-time
    ordering), returning the surviving row numbers.

    First the log records are folded in write order: a later record replaces the current one
    unless its ordering value is smaller; a delete with the natural zero ordering removes
    whatever came before it; a delete with an ordering value only removes a record it is not
    older than; a record after a natural delete replaces it. Then each key's folded log record
    meets the base file's record (``base``: ``(key, row, value)``), as Java's final merge:
    a natural delete removes it, an ordered delete or a record replaces it unless the base
    record's ordering value is larger.

    The base file is not replayed as the first write: base ts 5, a delete, then an upsert
    with ts 3 (before a compaction) gives the base row, because the delete disappears into the
    later upsert before the base is consulted. Java reads that (checked on Java-written tables
    and ours, ``tests/interop/test_java_merge_semantics.py``), and hudi-rs 0.5.0 agrees."""
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
    out: list[int] = []
    base_keys = set()
    for key, row, value in base:
        base_keys.add(key)
        cur = state.get(key)
        if cur is None:
            out.append(row)
        elif cur[0] == "row":
            out.append(cur[1] if not ordering or _newer(cur[2], value) else row)
        elif cur[2] is not None and ordering and not _newer(cur[2], value):
            out.append(row)  # an ordered delete older than the base record
    out.extend(st[1] for key, st in state.items() if st[0] == "row" and key not in base_keys)
    return sorted(out)


def read_file_slice(table: Table, fs: MergeFileSlice, completion: _Completion | None = None,
                    bound: ReadBound = _LATEST) -> pa.Table:
    """The merged rows of one slice (meta columns first, the base file's column order)."""
    completion = completion or _Completion(FileSystemView(table))
    blocks = _valid_blocks(table, fs, completion, bound) if fs.log_files else []
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
    ordering = table.config.ordering_field  # None under COMMIT_TIME_ORDERING: the later write wins
    if ordering not in rows.column_names:
        ordering = None
    keys = rows.column("_hoodie_record_key").to_pylist()
    values = rows.column(ordering).to_pylist() if ordering else [None] * len(keys)
    n = parts[0].num_rows  # the base file's rows (none for a log-only slice)
    base_events = [(keys[i], i, values[i]) for i in range(n)]
    events: list = [("del", d.record_key, d.ordering_value) for d in delete_after[0]]
    for p, dels in zip(parts[1:], delete_after[1:]):
        events.extend(("row", keys[i], i, values[i]) for i in range(n, n + p.num_rows))
        n += p.num_rows
        events.extend(("del", d.record_key, d.ordering_value) for d in dels)
    survivors = _fold(events, ordering is not None, base_events)
    merged = rows.take(pa.array(survivors, pa.int64()))
    return merged.select([c for c in schema.names if c in merged.column_names])


def _concat(parts: list[pa.Table]) -> pa.Table:
    parts = [p for p in parts if p.num_rows or p.num_columns]
    if not parts:
        return pa.table({})
    return pa.concat_tables(parts, promote_options="permissive")


def read_snapshot(table: Table, as_of: str | None = None, options: Mapping[str, Any] | None = None) -> pa.Table:
    """Every file group's latest slice, base merged with its logs; with ``as_of``, the table
    as of that instant (time travel: instants requested at or before it, Hudi's rule).

    Raises :class:`~airflow_hudi_occ.core.errors.ArchivedInstantError` when ``as_of`` is older
    than the active timeline and :class:`~airflow_hudi_occ.core.errors.CleanedInstantError`
    when clean deleted files that version needs, as the copy-on-write reader does. ``options``:
    the reader's ``hoodie.*`` keys (:class:`~airflow_hudi_occ.core.config.ReadConfig`: whether
    files are listed through the metadata table)."""
    view = _view(table, options)
    bound = ReadBound(as_of=as_of)
    if as_of is not None:
        check_as_of_readable(table, as_of, view.timeline)
    return _read_slices(table, view, bound)


def _view(table: Table, options: Mapping[str, Any] | None, **kw) -> FileSystemView:
    return FileSystemView(table, metadata_enable=ReadConfig.from_options(options).metadata_enable, **kw)


def _read_slices(table: Table, view: FileSystemView, bound: ReadBound,
                 groups: set[FileGroupId] | None = None) -> pa.Table:
    completion = _Completion(view)
    return _concat([read_file_slice(table, fs, completion, bound)
                    for fs in merge_file_slices(table, view, bound)
                    if groups is None or fs.file_group in groups])


def incremental_instants(table: Table, start: str | None, end: str | None, timeline=None) -> list[Instant]:
    """Completed writes whose *completion* time is in ``(start, end]`` (table version 8
    semantics: an instant that completes late is read by the window its completion falls in,
    neither lost nor read twice), in completion order.

    Raises :class:`~airflow_hudi_occ.core.errors.ArchivedInstantError` when writes completed
    after ``start`` were archived (``start=None`` reads from the beginning: any archived write)."""
    tl = timeline or table.timeline()
    check_not_archived(table, tl, start=start or "0")
    return [i for i in tl.completed_by_completion_time() if i.is_write
            and (start is None or (i.completion_time or i.requested_time) > start)
            and (end is None or (i.completion_time or i.requested_time) <= end)]


def read_incremental(table: Table, start: str | None = None, end: str | None = None,
                     options: Mapping[str, Any] | None = None) -> pa.Table:
    """Records written by writes that completed in ``(start, end]``, as they were once the
    write completing at ``end`` had completed: log-block records of those deltacommits and
    base-file records of those instants, merged as a snapshot would merge them, keeping the
    rows whose ``_hoodie_commit_time`` is one of them (Hudi's incremental query on MOR:
    the merged slices of the file groups they touched, filtered by commit time). A key the
    window deleted is absent; a record that lost to a stored one on its ordering value is not
    returned (it was never the table's row)."""
    view = _view(table, options)
    selected = incremental_instants(table, start, end, view.timeline)
    if not selected:
        return pa.table({})
    times = {i.requested_time for i in selected}
    groups: set[FileGroupId] = set()
    for inst in selected:
        groups |= {s.file_group for s in view.timeline.commit_metadata(inst).write_stats()}
    merged = _read_slices(table, view, ReadBound(completed_by=end), groups)
    if merged.num_rows == 0:
        return merged
    keep = pa.compute.is_in(merged.column("_hoodie_commit_time"), pa.array(sorted(times)))
    return merged.filter(keep)


def read_optimized(table: Table, as_of: str | None = None, options: Mapping[str, Any] | None = None) -> pa.Table:
    """Base files only (Hudi's read-optimised query): fast, and behind by the logs."""
    view = _view(table, options, as_of=as_of)
    if as_of is not None:
        check_as_of_readable(table, as_of, view.timeline)
    return _concat([read_parquet(table.storage, s.base_file.relative_path)
                    for s in view.latest_file_slices()])


__all__ = ["CompletionTimes", "MergeFileSlice", "ReadBound", "incremental_instants", "list_log_files",
           "merge_file_slices", "read_file_slice", "read_incremental", "read_snapshot", "read_optimized"]
