"""The metadata table's deltacommit that goes with one action of ours on the data table.

With ``hoodie.occ.metadata.files.maintain=true`` (the default; false: the table is refused or
its metadata table removed, :mod:`.metadata_table`), on a table whose metadata table holds only the
partitions we maintain, our writers keep it up to date as Java's writer does (issue 32, item
1): under the table lock, after the conflict check and before the data instant completes, they
write a deltacommit on the metadata table's own timeline at the *same instant time*
(:func:`write_metadata_deltacommit`):

1. ``<t>.deltacommit.requested`` and ``.inflight`` on ``.hoodie/metadata/.hoodie/timeline``;
2. per metadata file group written (``files/files-0000-0``; the stats partitions' groups),
   one new log file ``<partition>/.<fileId>_<t>.log.1_<token>`` (Hudi 1.x names a log file by
   the instant that wrote it, as Java's metadata writer does) holding one HFile data block
   (:func:`~airflow_hudi_occ.core.format.metadata_record.hfile_data_block`) of that group's
   records;
3. the completed deltacommit, its Avro commit metadata naming every log file written;

and only then the data instant completes (a later completion time). A write transaction writes
the log files of step 2 before it takes the lock (:func:`stage_metadata_logs`, issue 43: no
instant names them yet, so no reader takes them) and steps 1, 3 and the data completion under
it, keeping the staged files whose records still hold. That is Java's order, and
the reason it is safe: Java's metadata reader only takes records of instants completed on the
data table, so a writer killed between 3 and the data completion leaves records no reader uses.

A rollback of a data instant rolls back the metadata table's deltacommit of the same instant,
if there is one (:func:`rollback_metadata_deltacommit`), as Java 1.x's metadata writer does
(``HoodieBackedTableMetadataWriter.update(HoodieRollbackMetadata, ...)``: the metadata table's
write client rolls back that deltacommit at the data rollback's instant time; no records are
written). It happens before the data rollback completes: Java's metadata reader takes the
records of the instants a completed data rollback names as valid
(``HoodieTableMetadataUtil.getValidInstantTimestamps``), so a deltacommit left behind would
have the listing name the files the rollback deleted (Java's file-system view still skips
them, their instant being off the timeline; the listing itself, and whoever checks it against
the storage, would be wrong).

The ``files`` partition's records come from a
:class:`~airflow_hudi_occ.core.format.files_change.FilesChange` (what the action changed),
:func:`files_block`. Not here: the metadata table's own compaction, clean and archival (Java's
next writer compacts it once ``hoodie.metadata.compact.max.delta.commits`` deltacommits have
piled up).
"""

from __future__ import annotations

import posixpath
import time
from typing import Callable, Iterable, Mapping

from airflow_hudi_occ.core.errors import InstantStateError
from airflow_hudi_occ.core.format.instant import Action, Instant, State, parse_file_name
from airflow_hudi_occ.core.format.log_file import LogFileName, encode_blocks
from airflow_hudi_occ.core.format.metadata import CommitMetadata, RollbackMetadata, RollbackPlan, WriteStat
from airflow_hudi_occ.core.format.storage import delete_planned_files
from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.format.metadata_record import files_records, hfile_data_block
from airflow_hudi_occ.core.table.metadata_compaction import completed_times, remember_written
from airflow_hudi_occ.core.table.metadata_listing import FILES_FILE_ID, note_own_deltacommit
from airflow_hudi_occ.core.table.metadata_table import FILES_PARTITION, METADATA_FOLDER
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import (complete, create_requested, delete_pending_files,
                                                  transition_to_inflight)

#: the write token of our metadata-table log files (any token reads; this one says who wrote it)
WRITE_TOKEN = "0-0-0"

#: what one deltacommit writes: (metadata partition, file id) -> {HFile key: HoodieMetadataRecord}
Blocks = Mapping[tuple[str, str], Mapping[str, dict]]


def files_block(change: FilesChange) -> dict[tuple[str, str], dict[str, dict]]:
    """The ``files`` partition's part of a deltacommit for ``change``."""
    return {(FILES_PARTITION, FILES_FILE_ID): files_records(change)}


#: log files written before the lock (:func:`stage_metadata_logs`): ``(metadata partition, file
#: id) -> (the records written, the file's size)``
Staged = Mapping[tuple[str, str], tuple[Mapping[str, dict], int]]


def _log_name(file_id: str, instant_time: str) -> str:
    return LogFileName(file_id, instant_time, 1, WRITE_TOKEN).name


def stage_metadata_logs(table, instant_time: str, blocks: Blocks) -> Callable[[], Staged]:
    """The log files of the deltacommit ``instant_time``, to write before the table lock (issue
    43: they were four requests of every commit's hold): the records of ``blocks`` as computed
    before the lock, encoded now; the call returned writes them (their requests sent at once)
    and returns what was staged. Two steps because a commit sends them with its request for the
    lock: encoded only then, they would leave after that request was answered, inside the hold.
    No instant of the metadata table names them yet, so nobody reads them: readers (ours, Java's
    log scanner) take the blocks of completed instants only, and a metadata table's clean keeps
    a log whose instant is not on its timeline with the newest slice (Java's file-group rule for
    a pending instant; :mod:`.metadata_clean`). :func:`write_metadata_deltacommit` then, under
    the lock, keeps each file whose records are still the ones to write and replaces the others.
    A file already there (a dead attempt of the same instant, re-committed) is left to it."""
    mdt = table.metadata_table()
    if mdt is None:
        return lambda: {}
    files = [(group, mdt.storage.path(group[0], _log_name(group[1], instant_time)),
              encode_blocks([hfile_data_block(instant_time, records)]), records)
             for group, records in sorted(blocks.items()) if records]

    def write() -> Staged:
        staged: dict[tuple[str, str], tuple[dict, int]] = {}

        def stage(group, path, data, records) -> None:
            try:
                mdt.storage.create_if_absent(path, data)
            except FileExistsError:
                return
            remember_written(path, data)
            staged[group] = (dict(records), len(data))
        # one file per file group, each a PUT of its own: they overlap on an object store
        mdt.storage.concurrently([lambda f=f: stage(*f) for f in files])
        return dict(sorted(staged.items()))
    return write


def discard_staged_logs(table, instant_time: str, staged: Staged) -> None:
    """Delete log files staged for ``instant_time`` that will not be part of its deltacommit
    (the commit failed, or the metadata table is no longer kept)."""
    mdt = table.metadata_table()
    if mdt is None or not staged:
        return
    mdt.storage.delete_many([mdt.storage.path(p, _log_name(f, instant_time)) for p, f in staged])


def write_metadata_deltacommit(table, instant_time: str, blocks: Blocks, completion_time: str,
                               staged: Staged | None = None) -> Instant:
    """Write and complete the metadata table's deltacommit ``instant_time``: one log file with
    one HFile data block per ``(metadata partition, file id)`` in ``blocks``. The caller holds
    the table lock and completes the data instant afterwards, at a later completion time.
    Returns the completed metadata-table instant. ``staged``: the log files
    :func:`stage_metadata_logs` wrote before the lock; one whose records equal the block's is
    kept as it is (no request), one that differs (a commit into the same partition completed
    meanwhile: its partition stats moved) is deleted and written again, and one no block wants
    is deleted.

    Idempotent for one instant, because a staged batch is re-committed after its writer died
    (core/commit/recovery.py) and a service re-runs a plan: a deltacommit a dead attempt
    completed is returned as it is (the same action wrote it), and one it left pending is
    finished, the log files it wrote kept (each created whole or not at all)."""
    mdt = table.metadata_table() or Table.open(posixpath.join(table.base_uri, METADATA_FOLDER),
                                               table.storage.storage_options)
    left = dict(staged or {})
    timeline = mdt.timeline()
    current = timeline.get(instant_time)
    if current is not None and current.is_completed:
        return current
    before = completed_times(timeline)
    requested = Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED)
    if current is None:
        create_requested(mdt, requested)
    inflight = transition_to_inflight(mdt, requested)
    stats = []
    for (partition, file_id), records in sorted(blocks.items()):
        if not records:
            continue  # nothing for that file group: no log file (an HFile holds at least one key)
        name = _log_name(file_id, instant_time)
        path = mdt.storage.path(partition, name)
        kept = left.pop((partition, file_id), None)
        if kept is not None and kept[0] == records:
            size = kept[1]
        else:
            if kept is not None:
                mdt.storage.delete(path)  # staged with records that are no longer the ones
            data = encode_blocks([hfile_data_block(instant_time, records)])
            try:
                mdt.storage.create_if_absent(path, data)
                remember_written(path, data)
            except FileExistsError:
                data = mdt.storage.read(path)  # a dead attempt's, whole
            size = len(data)
        stats.append(WriteStat(file_id=file_id, path=f"{partition}/{name}", partition_path=partition,
                               prev_commit=instant_time, num_writes=len(records),
                               num_update_writes=len(records), file_size_in_bytes=size,
                               total_write_bytes=size, base_file="", log_files=[name], log_version=1,
                               log_offset=0))
    discard_staged_logs(table, instant_time, left)
    meta = CommitMetadata.from_stats(stats, operation_type="UPSERT_PREPPED")
    done = complete(mdt, inflight, completion_time, meta.encode())
    note_own_deltacommit(table, before, instant_time, done.completion_time or completion_time,
                         [s.log_files[0] for s in stats if s.partition_path == FILES_PARTITION])
    return done


def write_files_deltacommit(table, instant_time: str, stats: Iterable[WriteStat], completion_time: str) -> Instant:
    """The deltacommit of a data commit that wrote ``stats`` (its ``files`` records only)."""
    return write_metadata_deltacommit(table, instant_time, files_block(FilesChange.of_write_stats(stats)),
                                      completion_time)


def open_metadata_table(table) -> Table | None:
    """The metadata table of ``table`` as a table of its own, or None when there is none with a
    ``hoodie.properties`` (a removal's leftover folder: no reader uses it)."""
    return table.metadata_table()


def _files_of_deltacommit(mdt: Table, instant_time: str) -> dict[str, list[str]]:
    """The files a metadata-table deltacommit wrote, found by their names (Hudi 1.x names a
    log file, and a base file, by the instant that wrote it), in every metadata partition."""
    files: dict[str, list[str]] = {}
    for part in sorted(mdt.storage.list_dirs(mdt.storage.path(""))):
        part = part.rstrip("/").rsplit("/", 1)[-1]
        if part.startswith("."):
            continue
        for name in mdt.storage.list_names(mdt.storage.path(part)):
            parsed = LogFileName.parse(name)
            if ((parsed is not None and parsed.instant_time == instant_time)
                    or name.endswith(f"_{instant_time}.hfile")):
                files.setdefault(part, []).append(f"{part}/{name}")
    return {p: sorted(v) for p, v in files.items()}


def rollback_metadata_deltacommit(table, instant_time: str, rollback_time: str,
                                  completion_time: str | Callable[[], str]) -> Instant | None:
    """Roll back the metadata table's deltacommit ``instant_time`` (pending or completed) as the
    metadata table's rollback ``rollback_time`` (the data rollback's own instant time, as Java
    does), under the caller's table lock and before the data rollback completes; None when the
    metadata table has no such deltacommit (nothing to do, as in Java). ``completion_time``
    (or a function giving it, called only when a rollback is written) must be earlier than the
    data rollback's completion.

    Steps, each idempotent so a rollback interrupted anywhere is finished by running it again
    (the data rollback re-runs from its plan and calls this again): ``<r>.rollback.requested``
    (the plan: the deltacommit's files), ``.inflight``; the deltacommit's completed file (readers
    stop taking its blocks), its files, its inflight and requested files; ``<r>_<c>.rollback``."""
    mdt = open_metadata_table(table)
    if mdt is None:
        return None
    timeline = mdt.timeline()
    rb = timeline.get(rollback_time)
    if rb is not None and rb.is_completed:
        return rb
    if rb is None:
        target = timeline.get(instant_time)
        if target is None:
            # no deltacommit: only log files a writer staged before its lock, if any
            # (stage_metadata_logs), named by the instant and never read: deleted. Not for an
            # instant older than the timeline's start (its deltacommit may be archived)
            first = next(iter(timeline), None)
            if first is not None and instant_time > first.requested_time:
                staged = _files_of_deltacommit(mdt, instant_time)
                mdt.storage.delete_many([mdt.storage.path(f) for files in staged.values() for f in files])
            return None
        plan = RollbackPlan(instant_time, target.action.value, _files_of_deltacommit(mdt, instant_time))
        rb = Instant(rollback_time, Action.ROLLBACK, State.REQUESTED)
        create_requested(mdt, rb, plan.encode(mdt.base_uri))
    else:
        path = timeline.file_path(Instant(rollback_time, Action.ROLLBACK, State.REQUESTED))
        plan = RollbackPlan.decode(mdt.storage.read(path), path, mdt.base_uri)
    t0 = time.time()
    if rb.state is not State.INFLIGHT:
        rb = transition_to_inflight(mdt, rb)
    names = timeline.files_of(instant_time)
    for n in names:
        inst = parse_file_name(n)
        if inst is not None and inst.requested_time == instant_time and inst.is_completed:
            mdt.storage.delete(mdt.storage.path(mdt.config.timeline_folder, n))
    deleted, failed = delete_planned_files(mdt.storage, plan.files_by_partition, with_temp_copies=True)
    if failed:
        raise InstantStateError(
            f"the rollback {rollback_time} of the metadata table's deltacommit {instant_time} could "
            f"not delete {sum(len(v) for v in failed.values())} files", instant=instant_time,
            remedy="check storage permissions; the data rollback stays pending and is re-run by "
                   "the next writer or clean, which finishes this one")
    delete_pending_files(mdt, instant_time, names)
    meta = RollbackMetadata(rollback_time, [(instant_time, plan.action or Action.DELTA_COMMIT.value)], deleted,
                            time_taken_ms=int((time.time() - t0) * 1000))
    done_at = completion_time() if callable(completion_time) else completion_time
    return complete(mdt, rb, done_at, meta.encode())


__all__ = ["Blocks", "Staged", "files_block", "write_metadata_deltacommit", "stage_metadata_logs",
           "discard_staged_logs",
           "write_files_deltacommit", "rollback_metadata_deltacommit", "open_metadata_table", "WRITE_TOKEN"]
