"""The metadata table's own compaction, as Java's writer runs it (issue 32, item 1).

Every deltacommit of ours appends a log file to the metadata table (:mod:`.metadata_commit`);
without compaction a table written only by us would pile them up without bound, and every
reader would merge them all. Java compacts the metadata table in its writer
(``HoodieBackedTableMetadataWriter.performTableServices``, run under the data table's lock as a
write starts); ours runs the same steps under the lock of our commit, after the data instant
has completed (:mod:`~airflow_hudi_occ.core.commit.metadata_services` orders them):

- **finish** a pending compaction first (Java's ``runAnyPendingCompactions``): a writer killed
  mid-compaction left a plan, maybe a base file; the base files of that instant are deleted and
  the plan executed again, as Java rolls back an inflight compaction and re-runs it;
- **trigger** (``ScheduleCompactionActionExecutor.needCompact``, ``NUM_COMMITS``): at least
  ``hoodie.metadata.compact.max.delta.commits`` (10) deltacommits completed after the latest
  completed compaction's instant (all of them before the first compaction);
- **instant time** (Hudi 1.2's ``compactIfNecessary``): the earliest data-table instant that is
  still pending there but completed on the metadata table, minus 1 ms (its records must stay out
  of the base file, it may yet be rolled back); otherwise a new instant time. Skipped when a
  completed compaction already has that time;
- **plan** (``HoodieCompactionPlan``, ``UnBoundedCompactionStrategy``): every file group of every
  completed metadata partition whose latest slice has log files of deltacommits completed
  before the compaction's instant (Hudi 1.x slices logs by completion time), with Java's
  metrics; ``<c>.compaction.requested``, then an empty ``.compaction.inflight``. Unlike Java, a
  partition whose records have no merge rule here (bloom filters and indexes we do not
  maintain; column and partition stats have theirs, ``format/column_stats_record``) is left
  out: its logs wait for Java's writer's compaction rather than be merged wrongly;
- **execute**: per file group, the base file's records, then the log blocks of completed
  deltacommits in completion order, merged by key as ``HoodieMetadataPayload`` merges them
  (:func:`~airflow_hudi_occ.core.format.metadata_record.merge_records`: the log records among
  themselves first, then over the base file), written as the new base HFile
  ``<fileId>_<token>_<c>.hfile``
  (:func:`~airflow_hudi_occ.core.format.metadata_record.base_file_hfile`: data and bloom-filter
  blocks byte-identical to Java's for the same records);
- **complete**: ``<c>_<completion>.commit``, Java's ``COMPACT`` commit metadata (one write stat
  per file group with the log counters, ``compacted``, the record schema).

Crash safety: a base file of a compaction that has not completed is read by nobody (readers take
the latest *completed* base file and the logs after it); the next writer, ours or Java's,
re-runs the plan. Readers switch to the new base file only when the completed instant appears,
and the logs it folded in are still there until the metadata table's clean removes them.
"""

from __future__ import annotations

import logging
import posixpath
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Callable

from airflow_hudi_occ.core.errors import CorruptMetadataError
from airflow_hudi_occ.core.format.hfile import read_hfile
from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.instant_time import format_ms, parse_ms
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, LogFileName, LogFormatError, decode_blocks
from airflow_hudi_occ.core.format.metadata import CommitMetadata, CompactionOperation, CompactionPlan, WriteStat
# imported for its merge rule of column and partition stats records, registered in MERGERS
from airflow_hudi_occ.core.format import column_stats_record  # noqa: F401
from airflow_hudi_occ.core.format.metadata_record import MERGERS, base_file_hfile, decode_record, merge_records, schema_json
from airflow_hudi_occ.core.table.metadata_table import METADATA_FOLDER, declared_state
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import complete, create_requested, transition_to_inflight

log = logging.getLogger(__name__)

#: Hudi's default of ``hoodie.metadata.compact.max.delta.commits``
DEFAULT_MAX_DELTA_COMMITS = 10
#: the write token of our base files (Java's is ``<partition>-<stage>-<attempt>``; any reads)
BASE_WRITE_TOKEN = "0-0-0"
COMPACT = "COMPACT"
BASE_FILE_RE = re.compile(r"^(?P<file_id>[^_]+)_(?P<token>[^_]+)_(?P<instant>\d+)\.hfile$")
_MB = 1024 * 1024


def open_metadata_table(table) -> Table:
    """``table``'s metadata table (:meth:`~airflow_hudi_occ.core.table.table.Table.metadata_table`,
    opened once per version of the data table's properties); opened as it is when it has no
    properties file (which raises, as a service on a metadata table without one should)."""
    return table.metadata_table() or Table.open(posixpath.join(table.base_uri, METADATA_FOLDER),
                                                table.storage.storage_options)


def metadata_partitions(mdt) -> list[str]:
    """The metadata table's partition folders (``files``, ``column_stats``, ...)."""
    return sorted(d for d in mdt.storage.list_dirs(mdt.storage.path()) if not d.startswith("."))


@dataclass
class MetadataFileSlice:
    """The latest file slice of one metadata-table file group: its completed base file (name,
    instant) and the log files written after it by completed deltacommits, as
    ``(completion time, instant, version, name)`` in merge order."""

    partition: str
    file_id: str
    base_name: str | None = None
    base_instant: str | None = None
    logs: list[tuple[str, str, int, str]] = field(default_factory=list)


def latest_file_slices(mdt, completed: dict[str, str], partitions=None, *,
                       names: dict[str, list[str]] | None = None) -> list[MetadataFileSlice]:
    """Every file group's latest slice on ``mdt`` (in ``partitions``; None: all) given its
    completed instants (``requested -> completion``): the latest base file whose instant
    completed, and the log files of completed deltacommits that completed after that instant
    (Hudi 1.x places a log in the slice whose base instant precedes the log's completion).
    ``names``: a partition's folder listed already (else it is listed here)."""
    out = []
    for partition in (metadata_partitions(mdt) if partitions is None else sorted(partitions)):
        groups: dict[str, MetadataFileSlice] = {}
        listed = (names or {}).get(partition)
        if listed is None:
            listed = mdt.storage.list_names(mdt.storage.path(partition))
        for name in listed:
            m = BASE_FILE_RE.match(name)
            if m and m["instant"] in completed:
                fs = groups.setdefault(m["file_id"], MetadataFileSlice(partition, m["file_id"]))
                if fs.base_instant is None or m["instant"] > fs.base_instant:
                    fs.base_name, fs.base_instant = name, m["instant"]
        for name in listed:
            lf = LogFileName.parse(name)
            if lf is None or lf.instant_time not in completed:
                continue
            fs = groups.setdefault(lf.file_id, MetadataFileSlice(partition, lf.file_id))
            done = completed[lf.instant_time]
            if fs.base_instant is None or done > fs.base_instant:
                fs.logs.append((done, lf.instant_time, lf.version, name))
        for fs in groups.values():
            fs.logs.sort()
            out.append(fs)
    return sorted(out, key=lambda s: (s.partition, s.file_id))


def completed_times(timeline) -> dict[str, str]:
    return {i.requested_time: i.completion_time or "" for i in timeline.completed()}


def deltacommits_since_compaction(timeline) -> int:
    """Deltacommits completed after the latest completed compaction's instant (Hudi's
    ``CompactionUtils.getDeltaCommitsSinceLatestCompaction``; all of them before the first)."""
    compactions = [i for i in timeline.completed() if i.action is Action.COMMIT]
    since = compactions[-1].requested_time if compactions else None
    return sum(1 for i in timeline.completed() if i.action is Action.DELTA_COMMIT
               and (since is None or (i.completion_time or "") > since))


def compaction_instant_time(data_timeline, mdt_timeline, new_time: Callable[[], str]) -> str:
    """Java 1.2's choice: the earliest data-table instant pending there and completed on the
    metadata table, minus 1 ms; otherwise a new instant time."""
    done = {i.requested_time for i in mdt_timeline.completed()}
    held = [i.requested_time for i in data_timeline.pending() if i.requested_time in done]
    if held:
        return format_ms(parse_ms(min(held)) - 1)
    return new_time()


#: the record types of each metadata partition (Hudi's ``MetadataPartitionType``; the names
#: ending in ``_`` are prefixes): a compaction of ours takes a partition only when every one of
#: its types has a merge rule (``metadata_record.MERGERS``). The others keep their logs until
#: Java's writer compacts the metadata table, or until the module that maintains them
#: registers their rule.
PARTITION_RECORD_TYPES = {"files": (1, 2), "column_stats": (3,), "bloom_filters": (4,), "record_index": (5,),
                          "partition_stats": (6,), "secondary_index_": (7,), "expr_index_": (3,)}


def compactable(partition: str) -> bool:
    """Whether our compaction can merge ``partition``'s records (see PARTITION_RECORD_TYPES)."""
    for name, kinds in PARTITION_RECORD_TYPES.items():
        if partition == name or (name.endswith("_") and partition.startswith(name)):
            return all(k in MERGERS for k in kinds)
    return False


def plan_metadata_compaction(mdt, timeline, instant_time: str, partitions=None) -> CompactionPlan:
    """The plan of a compaction at ``instant_time``: one operation per file group with log
    files of deltacommits completed before it (see the module doc), in ``partitions`` (the
    data table's completed metadata partitions; None: every folder) whose records we can
    merge (:func:`compactable`)."""
    completed = completed_times(timeline)
    storage = mdt.storage
    ops = []
    wanted = [p for p in (metadata_partitions(mdt) if partitions is None else partitions) if compactable(p)]
    # one listing per partition with the sizes the plan's metrics need (it runs under the
    # table lock: a HEAD per log file was 40 requests at every compaction), all at once (one
    # after the other they were a round trip per partition the whole table waited for)
    sizes = dict(zip(wanted, storage.concurrently([lambda p=p: storage.list_sizes(storage.path(p))
                                                   for p in wanted])))
    for fs in latest_file_slices(mdt, completed, wanted, names={p: list(v) for p, v in sizes.items()}):
        logs = [entry for entry in fs.logs if entry[0] < instant_time]
        if not logs:
            continue
        here = sizes[fs.partition]
        log_size = sum(here[name] for *_, name in logs)
        base_size = here[fs.base_name] if fs.base_name else 0
        read_mb, write_mb = float((base_size + log_size) // _MB), float(base_size // _MB)
        ops.append(CompactionOperation(
            fs.partition, fs.file_id, fs.base_instant or logs[0][1], fs.base_name, [name for *_, name in logs],
            {"TOTAL_LOG_FILES": float(len(logs)), "TOTAL_IO_MB": read_mb + write_mb, "TOTAL_IO_READ_MB": read_mb,
             "TOTAL_LOG_FILES_SIZE": float(log_size), "TOTAL_IO_WRITE_MB": write_mb}))
    return CompactionPlan(ops)


def _corrupt(path: str, e: Exception) -> CorruptMetadataError:
    return CorruptMetadataError(f"{path}: {e}", path=path,
                                remedy="let Java Hudi rebuild the metadata table (hoodie.metadata.enable=false "
                                       "once, then true), or restore the file")


@dataclass
class _Merged:
    records: dict[str, dict | bytes]  # bytes: a base record no log changed, still encoded
    inserts: int
    updates: int
    log_records: int
    log_blocks: int
    from_logs: int
    log_size: int


#: the bytes of metadata-table log files this process wrote, by path: a log file is written once
#: under a name of its own (metadata_commit), so a compaction of this process's logs merges them
#: without reading them back under the lock, and this process's next listing of the metadata
#: table reads its own last log from here (bounded, oldest out)
_WRITTEN: "OrderedDict[str, bytes]" = OrderedDict()
_WRITTEN_MAX = 256
_WRITTEN_LOCK = threading.Lock()


def remember_written(path: str, data: bytes) -> None:
    """``data`` is what this process wrote at ``path`` (see :data:`_WRITTEN`)."""
    with _WRITTEN_LOCK:
        _WRITTEN[path] = data
        _WRITTEN.move_to_end(path)
        while len(_WRITTEN) > _WRITTEN_MAX:
            _WRITTEN.popitem(last=False)


def read_log(storage, path: str) -> bytes:
    """The bytes of the log file at ``path``: what this process wrote there, or the store's."""
    with _WRITTEN_LOCK:
        data = _WRITTEN.get(path)
    return data if data is not None else storage.read(path)


def _merge_slice(mdt, op: CompactionOperation, completed: dict[str, str]) -> _Merged:
    storage = mdt.storage
    base: dict[str, dict | bytes] = {}
    base_path = storage.path(op.partition_path, op.data_file_name) if op.data_file_name else None
    log_paths = [storage.path(op.partition_path, name) for name in op.delta_file_names]
    # the slice's files fetched at once (it runs under the table lock: one request after the
    # other, a slice of ten logs was ten round trips every writer of the table waited for)
    fetched = storage.concurrently(([lambda: storage.read(base_path)] if base_path else [])
                                   + [lambda p=p: read_log(storage, p) for p in log_paths])
    base_data = fetched.pop(0) if base_path else None
    if base_path:
        hf = read_hfile(base_data, path=base_path)
        writer = hf.file_info.get("schema")
        writer = writer.decode() if writer else None
        if writer is None or writer == schema_json():
            # kept encoded: a record no log block changes goes to the new base file as it was,
            # only its file name restamped (most of a compaction's records, and its time)
            base = dict(hf.entries)
        else:  # another schema (an older Java's): decoded, to be encoded in ours
            try:
                base = {k: decode_record(v, writer) for k, v in hf.entries}
            except (ValueError, EOFError, TypeError, KeyError) as e:
                raise _corrupt(base_path, e) from e
    delta: dict[str, dict | bytes] = {}
    ours = schema_json()
    records = blocks = size = 0
    for path, data in zip(log_paths, fetched):
        size += len(data)
        try:
            decoded = decode_blocks(data, allow_truncated_tail=True)
        except LogFormatError as e:
            raise _corrupt(path, e) from e
        for block in decoded:
            if block.block_type is not BlockType.HFILE_DATA or block.instant_time not in completed:
                continue
            blocks += 1
            hf = read_hfile(block.content, path=path)
            schema = block.header.get(HeaderKey.SCHEMA)
            try:
                for key, value in hf.entries:
                    records += 1
                    prev = delta.get(key)
                    if prev is None and (schema is None or schema == ours):
                        delta[key] = value  # kept encoded until another block names the key
                        continue
                    if isinstance(prev, bytes):
                        prev = decode_record(prev)
                    delta[key] = merge_records(prev, decode_record(value, schema))
            except (ValueError, EOFError, TypeError, KeyError) as e:
                raise _corrupt(path, e) from e
    merged = dict(base)
    for key, rec in delta.items():
        older = base.get(key)
        if older is None:
            merged[key] = rec
            continue
        try:
            if isinstance(older, bytes):
                older = decode_record(older)
            if isinstance(rec, bytes):
                rec = decode_record(rec)
        except (ValueError, EOFError, TypeError, KeyError) as e:
            raise _corrupt(base_path, e) from e
        merged[key] = merge_records(older, rec)
    inserts = sum(1 for k in delta if k not in base)
    return _Merged(merged, inserts, len(delta) - inserts, records, blocks, len(delta), size)


def base_file_name(file_id: str, instant_time: str) -> str:
    return f"{file_id}_{BASE_WRITE_TOKEN}_{instant_time}.hfile"


def execute_operation(mdt, instant_time: str, op: CompactionOperation, completed: dict[str, str], *,
                      rerun: bool = True) -> WriteStat:
    """Write one file group's new base file (any earlier attempt's base file of this instant
    deleted first, as Java's rollback of an inflight compaction does; ``rerun=False``: the plan
    was just made, no attempt before this one, nothing to look for); its write stat."""
    storage = mdt.storage
    t0 = time.time()
    for name in storage.list_names(storage.path(op.partition_path)) if rerun else ():
        m = BASE_FILE_RE.match(name)
        if m and m["file_id"] == op.file_id and m["instant"] == instant_time:
            storage.delete(storage.path(op.partition_path, name))
    merged = _merge_slice(mdt, op, completed)
    name = base_file_name(op.file_id, instant_time)
    data = base_file_hfile(merged.records, name)
    storage.create_if_absent(storage.path(op.partition_path, name), data)
    return WriteStat(file_id=op.file_id, path=f"{op.partition_path}/{name}", partition_path=op.partition_path,
                     prev_commit=op.base_instant_time, num_writes=len(merged.records),
                     num_update_writes=merged.updates, num_inserts=merged.inserts,
                     file_size_in_bytes=len(data), total_write_bytes=len(data), prev_base_file=op.data_file_name,
                     upsert_time_ms=int((time.time() - t0) * 1000),
                     log_counts={"totalLogRecords": merged.log_records, "totalLogBlocks": merged.log_blocks,
                                 "totalUpdatedRecordsCompacted": merged.from_logs,
                                 "totalLogFilesCompacted": len(op.delta_file_names),
                                 "totalLogSizeCompacted": merged.log_size})


def run_compaction(mdt, instant_time: str, plan: CompactionPlan, completion_time: Callable[[], str], *,
                   rerun: bool = True) -> Instant:
    """Execute ``plan`` (requested already) and complete the compaction; the caller holds the
    data table's lock. Returns the completed instant. ``rerun=False``: the plan was requested
    by the caller just before (no earlier attempt's files to look for)."""
    requested = Instant(instant_time, Action.COMPACTION, State.REQUESTED)
    inflight = transition_to_inflight(mdt, requested)  # empty, as Java's
    completed = completed_times(mdt.timeline())
    # one file group per call, all at once: each reads its slice and writes its base file
    stats = mdt.storage.concurrently([lambda op=op: execute_operation(mdt, instant_time, op, completed, rerun=rerun)
                                      for op in plan.operations])
    meta = CommitMetadata.from_stats(stats, operation_type=COMPACT, extra_metadata={"schema": schema_json()})
    meta.compacted = True
    done = complete(mdt, inflight, completion_time(), meta.encode())
    log.info("compacted the metadata table of %s at %s (%d file group(s))",
             mdt.base_uri, instant_time, len(stats))
    return done


def finish_pending_compactions(mdt, completion_time: Callable[[], str]) -> list[str]:
    """Re-run every pending compaction from its plan (see the module doc); their instants."""
    timeline = mdt.timeline()
    done = []
    for inst in timeline.pending_compactions():
        plan = timeline.compaction_plan(inst) or CompactionPlan()
        log.warning("finishing the metadata table's pending compaction %s of %s (a writer stopped "
                    "inside it)", inst.requested_time, mdt.base_uri)
        run_compaction(mdt, inst.requested_time, plan, completion_time)
        done.append(inst.requested_time)
    return done


#: how far a compaction due may be put off while other writers wait for the lock: until this
#: many times ``hoodie.metadata.compact.max.delta.commits`` deltacommits have piled up
DEFER_LIMIT_FACTOR = 2


def compact_if_needed(table, mdt, max_delta_commits: int, new_time: Callable[[], str], *,
                      defer: Callable[[], bool] | None = None) -> str | None:
    """Schedule and run a compaction of ``table``'s metadata table ``mdt`` when Java's trigger
    says so (see the module doc); its instant, or None. The caller holds the table lock and has
    finished pending compactions first.

    ``defer()``, asked when a compaction is due and fewer than :data:`DEFER_LIMIT_FACTOR` times
    the trigger's deltacommits have piled up: true puts it off to a later commit. The caller
    answers "other writers wait for the lock" (issue 43: at 10,000 partitions a compaction held
    the lock 7.45 s, every writer of the table waiting), so it runs when the table is quiet, or
    at the limit. Readers merge a few more log files meanwhile; nothing else changes (Java's
    writer compacts a metadata table whose logs passed its trigger at its next commit)."""
    timeline = mdt.timeline()
    piled = deltacommits_since_compaction(timeline)
    if piled < max_delta_commits:
        return None
    if defer is not None and piled < DEFER_LIMIT_FACTOR * max_delta_commits and defer():
        log.info("the metadata table's compaction is due (%d deltacommits) and put off: other writers "
                 "wait for the lock (it runs by %d)", piled, DEFER_LIMIT_FACTOR * max_delta_commits)
        return None
    instant_time = compaction_instant_time(table.timeline(), timeline, new_time)
    if any(i.requested_time == instant_time for i in timeline.completed()):
        log.info("the metadata table already has a compaction at %s", instant_time)
        return None
    plan = plan_metadata_compaction(mdt, timeline, instant_time, declared_state(table).partitions)
    if not plan.operations:
        return None
    create_requested(mdt, Instant(instant_time, Action.COMPACTION, State.REQUESTED), plan.encode())
    run_compaction(mdt, instant_time, plan, new_time, rerun=False)
    return instant_time


def latest_compaction_time(mdt_timeline) -> str | None:
    """The instant of the metadata table's latest completed compaction (Java's
    ``HoodieTableMetadata.getLatestCompactionTime``), the bound of data-table archival."""
    done = [i.requested_time for i in mdt_timeline.completed() if i.action is Action.COMMIT]
    return done[-1] if done else None


__all__ = ["open_metadata_table", "metadata_partitions", "MetadataFileSlice", "latest_file_slices",
           "deltacommits_since_compaction", "compaction_instant_time", "plan_metadata_compaction",
           "execute_operation", "run_compaction", "finish_pending_compactions", "compact_if_needed",
           "latest_compaction_time", "DEFAULT_MAX_DELTA_COMMITS", "DEFER_LIMIT_FACTOR", "base_file_name", "BASE_FILE_RE",
           "completed_times", "compactable", "PARTITION_RECORD_TYPES", "remember_written"]
