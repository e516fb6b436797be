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
from typing import Any, Callable, Iterable, Mapping

import fastavro

from airflow_hudi_occ.core.format.bloom_filter import TYPE_CODE as BLOOM_TYPE_CODE, bloom_filter_of
from airflow_hudi_occ.core.format.files_change import FilesChange
from airflow_hudi_occ.core.format.hfile import write_hfile
from airflow_hudi_occ.core.format.log_file import BlockType, HeaderKey, LogBlock

ALL_PARTITIONS_KEY = "__all_partitions__"
#: what Java writes a metadata-table base HFile with: 1 MB data blocks (hoodie.hfile.block.size),
#: GZ (hoodie.hfile.compression.algorithm)
BASE_FILE_BLOCK_SIZE = 1024 * 1024
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


@lru_cache(maxsize=16)
def _parsed_writer(writer_schema: str):
    """A writer schema named by a block header or file info, parsed once: every record of a
    block or base file names the same one, and parsing it per record was most of a
    metadata-table compaction's time (33,922 parses on 1,000 partitions)."""
    return fastavro.parse_schema(json.loads(writer_schema))


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
    """One record; a union of several records (the column stats' value wrappers) keeps the
    branch's name (``("org.apache.hudi.avro.model.LongWrapper", {"value": 5})``), so the record
    encodes back to the same bytes (plain, ``{"value": 5}`` would encode as the first wrapper
    that fits, an ``IntWrapper``)."""
    schema = _parsed() if writer_schema is None else _parsed_writer(writer_schema)
    return fastavro.schemaless_reader(io.BytesIO(data), schema, return_record_name=True,
                                      return_record_name_override=True)


def _varint_end(data: bytes, at: int) -> tuple[int, int]:
    """The zig-zag varint (Avro's int and long) at ``at``: ``(value, offset after it)``."""
    shift = raw = 0
    while True:
        b = data[at]
        at += 1
        raw |= (b & 0x7F) << shift
        if not b & 0x80:
            return (raw >> 1) ^ -(raw & 1), at
        shift += 7


def _optional_string_end(data: bytes, at: int) -> int:
    """The offset after a ``["null", "string"]`` value at ``at``."""
    branch, at = _varint_end(data, at)
    if branch == 0:
        return at
    if branch != 1:
        raise ValueError(f"union branch {branch} of a [null, string] field")
    length, at = _varint_end(data, at)
    if length < 0 or at + length > len(data):
        raise ValueError(f"a string of {length} bytes at {at} runs past the record ({len(data)} bytes)")
    return at + length


def _zigzag(n: int) -> bytes:
    z, out = (n << 1) ^ (n >> 63), bytearray()
    while True:
        if z < 0x80:
            out.append(z)
            return bytes(out)
        out.append((z & 0x7F) | 0x80)
        z >>= 7


def with_file_name(encoded: bytes, file_name: str | None) -> bytes:
    """A record encoded with this module's schema, its ``_hoodie_file_name`` set to
    ``file_name`` and every other byte as it was: what decoding it, setting the field and
    encoding it again gives (the first five fields are Hudi's optional meta strings), at a
    fraction of the cost. A compaction rewrites every record of the base file with the new
    file's name, and most of them are otherwise untouched (``test_metadata_record.py`` checks
    both ways agree)."""
    at = 0
    for _ in range(4):
        at = _optional_string_end(encoded, at)
    end = _optional_string_end(encoded, at)
    if file_name is None:
        field = b"\x00"
    else:
        raw = file_name.encode("utf-8")
        field = b"\x02" + _zigzag(len(raw)) + raw
    return encoded[:at] + field + encoded[end:]


def hfile_data_block(instant_time: str, records: Mapping[str, Mapping[str, Any]], *,
                     create_time_ms: int | None = None) -> LogBlock:
    """The log block of one deltacommit: ``records`` by HFile key (see the module doc), in an
    HFile whose file info names the schema, as Java's ``HoodieHFileDataBlock`` writes it."""
    content = write_hfile({key: encode_record(r) for key, r in records.items()},
                          file_info={"schema": schema_json().encode()}, create_time_ms=create_time_ms)
    return LogBlock(BlockType.HFILE_DATA, {HeaderKey.INSTANT_TIME: instant_time, HeaderKey.SCHEMA: schema_json()},
                    content, {})


# -- merging: HoodieMetadataPayload's rules -----------------------------------------------------

def _merge_file_lists(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Types 1 and 2 (``HoodieMetadataPayload.combineFileSystemMetadata``): the maps are merged
    entry by entry; a deletion of an entry the older record holds removes it (tombstone and
    all), a deletion of one it does not hold is kept (the older state may still come from a
    base file merged later); two additions keep the larger size (a log file only grows)."""
    merged = dict(older.get("filesystemMetadata") or {})
    for name, info in (newer.get("filesystemMetadata") or {}).items():
        old = merged.get(name)
        if old is None:
            merged[name] = dict(info)
        elif info.get("isDeleted"):
            if old.get("isDeleted"):
                merged[name] = dict(info)
            else:
                del merged[name]
        else:
            merged[name] = {"size": max(int(info.get("size") or 0), int(old.get("size") or 0)),
                            "isDeleted": False}
    return {**newer, "filesystemMetadata": merged}


def _newer_wins(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    return dict(newer)


TYPE_BLOOM_FILTER = 4
TYPE_RECORD_INDEX = 5
#: how two records of one key merge, by record type (``type``): Java's rules for the files
#: partition, and "the newer record" for bloom filters and the record index. Column and
#: partition stats merge their ranges (``HoodieTableMetadataUtil.mergeColumnStatsRecords``):
#: ``column_stats_record``, which maintains them, registers that rule here when imported (the
#: metadata table's compaction imports it); a record type without a rule stops a compaction
#: (:func:`merge_records` raises) rather than keep a wrong value.
MERGERS: dict[int, Callable[[Mapping[str, Any], Mapping[str, Any]], dict[str, Any]]] = {
    TYPE_PARTITION_LIST: _merge_file_lists, TYPE_FILE_LIST: _merge_file_lists,
    TYPE_BLOOM_FILTER: _newer_wins, TYPE_RECORD_INDEX: _newer_wins}


def merge_records(older: Mapping[str, Any] | None, newer: Mapping[str, Any]) -> dict[str, Any]:
    """``newer`` combined over ``older`` (one key), as ``HoodieMetadataPayload.preCombine``;
    ValueError for two types under one key or a type without a rule in :data:`MERGERS`."""
    if older is None:
        return dict(newer)
    kind = int(newer.get("type") or 0)
    if older.get("type") != kind:
        raise ValueError(f"records of types {older.get('type')} and {kind} under one key")
    if kind not in MERGERS:
        raise ValueError(f"no merge rule for metadata records of type {kind} (see metadata_record.MERGERS)")
    return MERGERS[kind](older, newer)


def _stamped(record: Mapping[str, Any] | bytes, file_name: str | None) -> bytes:
    if isinstance(record, bytes):
        return with_file_name(record, file_name)
    return encode_record({**record, "_hoodie_file_name": file_name})


def base_file_hfile(records: Mapping[str, Mapping[str, Any] | bytes], file_name: str, *,
                    create_time_ms: int | None = None, stamp_file_name: bool = True) -> bytes:
    """A metadata-table base HFile of ``records`` (by key; a record is a dict, or ``bytes``
    already encoded with this module's schema), as Java's ``HoodieAvroHFileWriter``
    writes one at a compaction: each record's ``_hoodie_file_name`` is the file's own name (the
    only meta field Java fills in there; its initialisation's bulk insert leaves it null:
    ``stamp_file_name=False``), keys sorted, the ``DYNAMIC_V0`` bloom filter of the
    keys as the ``bloomFilter`` meta block, and the schema, the bloom filter's type and the
    first and last key in the file info; 1 MB GZ data blocks."""
    keys = sorted(records)
    if not keys:
        raise ValueError("a metadata-table base file needs at least one record")
    stamp = file_name if stamp_file_name else None
    entries = {k: _stamped(records[k], stamp) for k in keys}
    info = {"schema": schema_json().encode(), "bloomFilterTypeCode": BLOOM_TYPE_CODE.encode(),
            "minRecordKey": keys[0].encode(), "maxRecordKey": keys[-1].encode()}
    return write_hfile(entries, meta={"bloomFilter": bloom_filter_of(keys).serialize()}, file_info=info,
                       block_size=BASE_FILE_BLOCK_SIZE, create_time_ms=create_time_ms)


__all__ = ["merge_records", "MERGERS", "base_file_hfile", "BASE_FILE_BLOCK_SIZE", "ALL_PARTITIONS_KEY",
           "NON_PARTITIONED_KEY", "TYPE_PARTITION_LIST", "TYPE_FILE_LIST", "schema_json",
           "partition_key", "partition_list_record", "files_record", "files_records", "encode_record", "decode_record",
           "with_file_name",
           "hfile_data_block"]
