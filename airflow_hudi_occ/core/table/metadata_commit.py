"""The metadata table's deltacommit that goes with one action of ours on the data table.

Behind ``hoodie.occ.metadata.files.maintain=true`` (default false: the table is refused or its
metadata table removed, :mod:`.metadata_table`), on a table whose metadata table holds only the
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

and only then the data instant completes (a later completion time). That is Java's order, and
the reason it is safe: Java's metadata reader only takes records of instants completed on the
data table, so a writer killed between 3 and the data completion leaves records no reader uses.

The ``files`` partition's records come from a
:class:`~airflow_hudi_occ.core.format.files_change.FilesChange` (what the action changed),
:func:`files_block`. Not here: the metadata table's own compaction, clean and archival (Java's
next writer compacts it once ``hoodie.metadata.compact.max.delta.commits`` deltacommits have
piled up).
"""

from __future__ import annotations

import posixpath
from typing import Iterable, Mapping

from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.log_file import LogFileName, encode_blocks
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat
from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.format.metadata_record import files_records, hfile_data_block
from airflow_hudi_occ.core.table.metadata_listing import FILES_FILE_ID
from airflow_hudi_occ.core.table.metadata_table import FILES_PARTITION, METADATA_FOLDER
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import complete, create_requested, transition_to_inflight

#: the write token of our metadata-table log files (any token reads; this one says who wrote it)
WRITE_TOKEN = "0-0-0"

#: what one deltacommit writes: (metadata partition, file id) -> {HFile key: HoodieMetadataRecord}
Blocks = Mapping[tuple[str, str], Mapping[str, dict]]


def files_block(change: FilesChange) -> dict[tuple[str, str], dict[str, dict]]:
    """The ``files`` partition's part of a deltacommit for ``change``."""
    return {(FILES_PARTITION, FILES_FILE_ID): files_records(change)}


def write_metadata_deltacommit(table, instant_time: str, blocks: Blocks, completion_time: str) -> Instant:
    """Write and complete the metadata table's deltacommit ``instant_time``: one log file with
    one HFile data block per ``(metadata partition, file id)`` in ``blocks``. The caller holds
    the table lock and completes the data instant afterwards, at a later completion time.
    Returns the completed metadata-table instant.

    Idempotent for one instant, because a staged batch is re-committed after its writer died
    (core/commit/recovery.py) and a service re-runs a plan: a deltacommit a dead attempt
    completed is returned as it is (the same action wrote it), and one it left pending is
    finished, the log files it wrote kept (each created whole or not at all)."""
    mdt = Table.open(posixpath.join(table.base_uri, METADATA_FOLDER), table.storage.storage_options)
    current = mdt.timeline().get(instant_time)
    if current is not None and current.is_completed:
        return current
    requested = Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED)
    if current is None:
        create_requested(mdt, requested)
    inflight = transition_to_inflight(mdt, requested)
    stats = []
    for (partition, file_id), records in sorted(blocks.items()):
        if not records:
            continue  # nothing for that file group: no log file (an HFile holds at least one key)
        name = LogFileName(file_id, instant_time, 1, WRITE_TOKEN).name
        data = encode_blocks([hfile_data_block(instant_time, records)])
        try:
            mdt.storage.create_if_absent(mdt.storage.path(partition, name), data)
        except FileExistsError:
            data = mdt.storage.read(mdt.storage.path(partition, name))  # a dead attempt's, whole
        stats.append(WriteStat(file_id=file_id, path=f"{partition}/{name}", partition_path=partition,
                               prev_commit=instant_time, num_writes=len(records),
                               num_update_writes=len(records), file_size_in_bytes=len(data),
                               total_write_bytes=len(data), base_file="", log_files=[name], log_version=1,
                               log_offset=0))
    meta = CommitMetadata.from_stats(stats, operation_type="UPSERT_PREPPED")
    return complete(mdt, inflight, completion_time, meta.encode())


def write_files_deltacommit(table, instant_time: str, stats: Iterable[WriteStat], completion_time: str) -> Instant:
    """The deltacommit of a data commit that wrote ``stats`` (its ``files`` records only)."""
    return write_metadata_deltacommit(table, instant_time, files_block(FilesChange.of_write_stats(stats)),
                                      completion_time)


__all__ = ["Blocks", "FilesChange", "files_block", "files_records", "write_metadata_deltacommit",
           "write_files_deltacommit", "WRITE_TOKEN"]
