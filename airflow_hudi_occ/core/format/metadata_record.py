"""The records of the metadata table's ``files`` partition, and the log block that carries them.

A metadata-table deltacommit (issue 32, item 1) appends to the ``files`` partition's log one
HFile data block (:mod:`.hfile`) of Avro ``HoodieMetadataRecord`` values, keyed by the HFile
key: ``__all_partitions__`` for the partition list (type 1) and the partition path (``.`` for
a table without partitions) for that partition's files (type 2). Each record's
``filesystemMetadata`` maps a name to ``HoodieMetadataFileInfo {size, isDeleted}``; the
record's own ``key`` field is left empty, as Java leaves it (the HFile key carries it). The
block's header holds the instant and the writer schema, which the HFile's file info repeats.

``schemas/HoodieMetadataRecord.avsc`` is that schema as Java Hudi writes it (taken from a
metadata table Java 1.2 wrote; the v9 fixture's is the same). Encoding is fastavro's
schemaless binary encoding, as ``HoodieAvroUtils.avroToBytes``. Map entries are written in the
order given; Java orders them by its hash map, which readers do not depend on.
"""

from __future__ import annotations

import io
import json
from functools import lru_cache
from importlib import resources
from typing import Any, Iterable, Mapping

import fastavro

from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.format.hfile import write_hfile
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, LogBlock

ALL_PARTITIONS_KEY = "__all_partitions__"
#: the key of a table without partitions (Hudi's NON_PARTITIONED_NAME)
NON_PARTITIONED_KEY = "."
TYPE_PARTITION_LIST = 1
TYPE_FILE_LIST = 2


@lru_cache(maxsize=1)
def schema_json() -> str:
    """The writer schema's text, exactly as Java writes it into block headers and file info."""
    return resources.files(__package__).joinpath("schemas", "HoodieMetadataRecord.avsc").read_text().strip()


@lru_cache(maxsize=1)
def _parsed():
    return fastavro.parse_schema(json.loads(schema_json()))


def partition_key(partition: str) -> str:
    return partition or NON_PARTITIONED_KEY


def _record(kind: int, entries: Mapping[str, tuple[int, bool]]) -> dict[str, Any]:
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": None, "key": "", "type": kind,
            "filesystemMetadata": {name: {"size": size, "isDeleted": deleted}
                                   for name, (size, deleted) in entries.items()},
            "BloomFilterMetadata": None, "ColumnStatsMetadata": None, "recordIndexMetadata": None,
            "SecondaryIndexMetadata": None}


def partition_list_record(added: Iterable[str] = (), deleted: Iterable[str] = ()) -> dict[str, Any]:
    """The ``__all_partitions__`` record: partitions a commit added (or touched) and deleted."""
    entries = {partition_key(p): (0, False) for p in added}
    entries.update({partition_key(p): (0, True) for p in deleted})
    return _record(TYPE_PARTITION_LIST, entries)


def files_record(added: Mapping[str, int] | None = None, deleted: Iterable[str] = ()) -> dict[str, Any]:
    """One partition's record: files added (name -> size in bytes) and deleted (names)."""
    entries = {name: (int(size), False) for name, size in (added or {}).items()}
    entries.update({name: (0, True) for name in deleted})
    return _record(TYPE_FILE_LIST, entries)


def files_records(change: FilesChange) -> dict[str, dict[str, Any]]:
    """The ``files`` partition's records of one action (by HFile key): the partition list when
    the change adds or deletes partitions, and one record per partition it touched, its added
    files with their sizes and its deleted files (see :mod:`.files_change`)."""
    records: dict[str, dict[str, Any]] = {}
    if change.partitions_added or change.partitions_deleted:
        records[ALL_PARTITIONS_KEY] = partition_list_record(added=change.partitions_added,
                                                            deleted=change.partitions_deleted)
    for partition in change.partitions:
        records[partition_key(partition)] = files_record(added=change.added.get(partition),
                                                         deleted=change.deleted.get(partition, ()))
    return records


def encode_record(record: Mapping[str, Any]) -> bytes:
    out = io.BytesIO()
    fastavro.schemaless_writer(out, _parsed(), dict(record))
    return out.getvalue()


def decode_record(data: bytes, writer_schema: str | None = None) -> dict[str, Any]:
    schema = _parsed() if writer_schema is None else fastavro.parse_schema(json.loads(writer_schema))
    return fastavro.schemaless_reader(io.BytesIO(data), schema)


def hfile_data_block(instant_time: str, records: Mapping[str, Mapping[str, Any]], *,
                     create_time_ms: int | None = None) -> LogBlock:
    """The log block of one deltacommit: ``records`` by HFile key (see the module doc), in an
    HFile whose file info names the schema, as Java's ``HoodieHFileDataBlock`` writes it."""
    content = write_hfile({key: encode_record(r) for key, r in records.items()},
                          file_info={"schema": schema_json().encode()}, create_time_ms=create_time_ms)
    return LogBlock(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json()},
                    content, {})


__all__ = ["ALL_PARTITIONS_KEY", "NON_PARTITIONED_KEY", "TYPE_PARTITION_LIST", "TYPE_FILE_LIST", "schema_json",
           "partition_key", "partition_list_record", "files_record", "files_records", "encode_record", "decode_record",
           "hfile_data_block"]
