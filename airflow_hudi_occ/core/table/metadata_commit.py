"""The metadata table's deltacommit that goes with one of our copy-on-write commits.

Behind ``hoodie.occ.metadata.files.maintain=true`` (default false: the table is refused or its
metadata table removed, :mod:`.metadata_table`), on a table whose metadata table holds only the
``files`` partition, our core copy-on-write writer keeps that listing up to date as Java's
writer does (issue 32, item 1, first slice): under the table lock, after the conflict check
and before the data instant completes, it writes a deltacommit on the metadata table's own
timeline at the *same instant time*:

1. ``<t>.deltacommit.requested`` and ``.inflight`` on ``.hoodie/metadata/.hoodie/timeline``;
2. the log file ``files/.files-0000-0_<t>.log.1_<token>``: one HFile data block
   (:func:`~airflow_hudi_occ.core.format.metadata_record.hfile_data_block`) with the partition
   list record and one record per partition the commit wrote, its new files with their sizes;
3. the completed deltacommit, its Avro commit metadata naming that log file;

and only then the data instant completes (a later completion time). That is Java's order, and
the reason it is safe: Java's metadata reader only takes records of instants completed on the
data table, so a writer killed between 3 and the data completion leaves records no reader uses.

What it does not do yet (so the guard keeps refusing them with the switch on): merge-on-read
deltacommits, replacecommits (insert_overwrite, clustering), clean, rollback, compaction,
archival, the Spark engine, other metadata partitions, the metadata table's own compaction
(Java's next writer compacts it once ``hoodie.metadata.compact.max.delta.commits`` deltacommits
have piled up), and the crash matrix of issue 32's item 4.
"""

from __future__ import annotations

import posixpath
from typing import Iterable

from airflow_hudi_occ.core.format.instant import Action, Instant, State
from airflow_hudi_occ.core.format.log_file import LogFileName, encode_blocks
from airflow_hudi_occ.core.format.metadata import CommitMetadata, WriteStat
from airflow_hudi_occ.core.format.metadata_record import (ALL_PARTITIONS_KEY, files_record, hfile_data_block,
                                                          partition_key, partition_list_record)
from airflow_hudi_occ.core.table.metadata_listing import FILES_FILE_ID
from airflow_hudi_occ.core.table.metadata_table import FILES_PARTITION, METADATA_FOLDER
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.table.timeline import complete, create_requested, transition_to_inflight

#: the write token of our metadata-table log files (any token reads; this one says who wrote it)
WRITE_TOKEN = "0-0-0"


def files_records(stats: Iterable[WriteStat]) -> dict[str, dict]:
    """The records of one commit's deltacommit: the partition list and, per partition, the
    files the commit wrote (file name -> size)."""
    by_partition: dict[str, dict[str, int]] = {}
    for s in stats:
        by_partition.setdefault(s.partition_path, {})[posixpath.basename(s.path)] = int(s.file_size_in_bytes)
    records = {ALL_PARTITIONS_KEY: partition_list_record(added=sorted(by_partition))}
    for partition, files in sorted(by_partition.items()):
        records[partition_key(partition)] = files_record(added=files)
    return records


def write_files_deltacommit(table, instant_time: str, stats: Iterable[WriteStat], completion_time: str) -> Instant:
    """Write and complete the metadata table's deltacommit ``instant_time`` for a data commit
    that wrote ``stats``; the caller holds the table lock and completes the data instant
    afterwards, at a later completion time. Returns the completed metadata-table instant.

    Idempotent for one instant, because a staged batch is re-committed after its writer died
    (core/commit/recovery.py): a deltacommit a dead attempt completed is returned as it is
    (the same staged stats wrote it), and one it left pending is finished, its log file kept
    (created whole or not at all)."""
    mdt = Table.open(posixpath.join(table.base_uri, METADATA_FOLDER), table.storage.storage_options)
    current = mdt.timeline().get(instant_time)
    if current is not None and current.is_completed:
        return current
    records = files_records(stats)
    requested = Instant(instant_time, Action.DELTA_COMMIT, State.REQUESTED)
    if current is None:
        create_requested(mdt, requested)
    inflight = transition_to_inflight(mdt, requested)
    name = LogFileName(FILES_FILE_ID, instant_time, 1, WRITE_TOKEN).name
    data = encode_blocks([hfile_data_block(instant_time, records)])
    try:
        mdt.storage.create_if_absent(mdt.storage.path(FILES_PARTITION, name), data)
    except FileExistsError:
        data = mdt.storage.read(mdt.storage.path(FILES_PARTITION, name))  # a dead attempt's, whole
    stat = WriteStat(file_id=FILES_FILE_ID, path=f"{FILES_PARTITION}/{name}", partition_path=FILES_PARTITION,
                     prev_commit=instant_time, num_writes=len(records), num_update_writes=len(records),
                     file_size_in_bytes=len(data), total_write_bytes=len(data), base_file="", log_files=[name],
                     log_version=1, log_offset=0)
    meta = CommitMetadata.from_stats([stat], operation_type="UPSERT_PREPPED")
    return complete(mdt, inflight, completion_time, meta.encode())


__all__ = ["files_records", "write_files_deltacommit", "WRITE_TOKEN"]
