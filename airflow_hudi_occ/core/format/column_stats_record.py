"""The records of the metadata table's ``column_stats`` and ``partition_stats`` partitions.

Java Hudi 1.x at its defaults keeps, beside the ``files`` listing, one record per (data file,
column) in ``column_stats`` and one per (partition, column) in ``partition_stats``; Spark's
data skipping (``hoodie.enable.data.skipping``) prunes files and partitions with them, so a
missing or wrong record drops rows from a filtered read. This module builds them from scratch
as Java's ``HoodieMetadataPayload.createColumnStatsRecords`` / ``createPartitionStatsRecords``
do (Hudi 1.2.0), from a parquet footer the way ``ParquetUtils.readColumnStatsFromMetadata``
reads one (:func:`ranges_from_parquet`): Java computes the stats of a file from the same
footer, so the stats of the files we write are the ones Java would have recorded for them.

A record is a ``HoodieMetadataRecord`` (:mod:`.metadata_record`'s schema and encoding) with
``type`` 3 (column stats) or 6 (partition stats), an empty ``key`` field (the HFile key
carries it) and ``ColumnStatsMetadata``:

- ``fileName``: the file's name (column stats), the partition path (partition stats);
- ``columnName``; ``minValue`` / ``maxValue`` in a wrapper record of the union
  (``LongWrapper``, ``StringWrapper``, ...; null when the column holds only nulls);
- ``valueCount`` (values in the column chunks, nulls included), ``nullCount``, ``totalSize``
  and ``totalUncompressedSize`` (the chunks' compressed and uncompressed bytes), summed over
  the row groups (min of mins, max of maxes);
- ``isDeleted``; ``isTightBound`` (false for column stats, true for partition stats computed
  over a partition's latest files); ``valueType``: the index version. Version 1 (tables of
  version 8, ``.hoodie/.index_defs/index.json`` says ``V1``) leaves it null; version 2 (tables
  of version 9) names Hudi's ``ValueType`` ordinal (:data:`VALUE_TYPE_ORDINALS`).

Keys (:mod:`.index_id`): column stats ``column_id + partition_id + file_id``, partition stats
``column_id + partition_id`` (the partition identifier is ``.`` for a table without
partitions). A key goes to file group ``mapRecordKeyToFileGroupIndex(key, n)`` of the
partition's ``n`` file groups sorted by file id (:func:`file_group_index`;
``col-stats-0000-0``, ``col-stats-0001-0`` at Java's default of two; ``partition-stats-0000-0``).

Records of one key merge as ``HoodieTableMetadataUtil.mergeColumnStatsRecords``
(:func:`merge_column_stats`, the rule ``metadata_record.MERGERS`` applies to types 3 and 6 in
the metadata table's compaction): a deletion on either side or a tight-bound newer record
replaces the older one, otherwise min/max widen and the counts and sizes add up. A record is
decoded with its value wrappers' names (``metadata_record.decode_record``), so that it encodes
back to the same bytes.

Column types rendered: boolean, int32 (8/16/32-bit signed), int64, float, double and UTF-8
strings; any other type among the columns to index (dates, timestamps, decimals, binary,
unsigned) raises :class:`UnsupportedColumnStatsTypeError` rather than write a stat that Java's
reader would decode differently.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Iterable, Mapping, Sequence

from airflow_hudi_occ.core.errors import UnsupportedColumnStatsTypeError
from airflow_hudi_occ.core.format.index_id import column_id, file_id, partition_id
from airflow_hudi_occ.core.format.layout import META_COLUMNS as LAYOUT_META_COLUMNS
from airflow_hudi_occ.core.format.metadata_record import MERGERS, NON_PARTITIONED_KEY

TYPE_COLUMN_STATS = 3
TYPE_PARTITION_STATS = 6
#: the metadata-table partitions and their file-id prefixes (Hudi's ``MetadataPartitionType``)
COLUMN_STATS_PARTITION = "column_stats"
PARTITION_STATS_PARTITION = "partition_stats"
FILE_ID_PREFIXES = {COLUMN_STATS_PARTITION: "col-stats-", PARTITION_STATS_PARTITION: "partition-stats-"}
#: the meta columns Java always indexes first when a table populates them
META_COLUMNS_INDEXED = ("_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key")
#: every meta column, the operation one included: never among a schema's first columns indexed
META_COLUMNS = (*LAYOUT_META_COLUMNS, "_hoodie_operation")

_NS = "org.apache.hudi.avro.model."
#: Hudi's ``ValueType`` enum ordinals (index version 2) of the types rendered here
VALUE_TYPE_ORDINALS = {"NULL": 1, "BOOLEAN": 2, "INT": 3, "LONG": 4, "FLOAT": 5, "DOUBLE": 6, "STRING": 7}
_WRAPPERS = {"BOOLEAN": "BooleanWrapper", "INT": "IntWrapper", "LONG": "LongWrapper", "FLOAT": "FloatWrapper",
             "DOUBLE": "DoubleWrapper", "STRING": "StringWrapper"}


@dataclass(frozen=True)
class ColumnRange:
    """One column's statistics in one file (``name``: the file's name) or one partition
    (``name``: the partition path); ``value_type``: a key of :data:`VALUE_TYPE_ORDINALS`
    (``"NULL"`` for a deletion's stub)."""

    name: str
    column: str
    value_type: str
    min_value: Any = None
    max_value: Any = None
    null_count: int = 0
    value_count: int = 0
    total_size: int = 0
    total_uncompressed_size: int = 0

    def merged(self, other: "ColumnRange") -> "ColumnRange":
        """Java's ``HoodieColumnRangeMetadata.merge``: min of mins and max of maxes (nulls
        ignored), counts and sizes added; the name is this one's."""
        return replace(self, min_value=_pick(min, self.min_value, other.min_value),
                       max_value=_pick(max, self.max_value, other.max_value),
                       null_count=self.null_count + other.null_count,
                       value_count=self.value_count + other.value_count,
                       total_size=self.total_size + other.total_size,
                       total_uncompressed_size=self.total_uncompressed_size + other.total_uncompressed_size)


def _pick(fn, a, b):
    vals = [v for v in (a, b) if v is not None]
    return fn(vals) if vals else None


def partition_identifier(partition: str) -> str:
    """Hudi's ``getPartitionIdentifier``: ``.`` for the empty partition path."""
    return partition or NON_PARTITIONED_KEY


def column_stats_key(partition: str, file_name: str, column: str) -> str:
    return column_id(column) + partition_id(partition_identifier(partition)) + file_id(file_name)


def partition_stats_key(partition: str, column: str) -> str:
    return column_id(column) + partition_id(partition_identifier(partition))


def file_group_index(key: str, count: int) -> int:
    """``HoodieTableMetadataUtil.mapRecordKeyToFileGroupIndex``: Java's ``String.hashCode``
    of the key, modulo the number of file groups."""
    if count == 1:
        return 0
    units = key.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return abs(abs(h) % count)


def file_group_id(mdt_partition: str, index: int) -> str:
    """``getFileIDForFileGroup``: ``col-stats-0000-0``, ``partition-stats-0000-0``, ..."""
    return f"{FILE_ID_PREFIXES[mdt_partition]}{index:04d}-0"


def _value_type(physical: str, logical) -> str | None:
    logical_name = getattr(logical, "type", None) if logical is not None else None
    logical_name = None if logical_name in (None, "NONE") else logical_name
    if physical == "BOOLEAN" and logical_name is None:
        return "BOOLEAN"
    if physical == "INT32" and (logical_name is None or (logical_name == "INT" and _signed_int(logical))):
        return "INT"
    if physical == "INT64" and (logical_name is None or (logical_name == "INT" and _signed_int(logical))):
        return "LONG"
    if physical == "FLOAT" and logical_name is None:
        return "FLOAT"
    if physical == "DOUBLE" and logical_name is None:
        return "DOUBLE"
    if physical == "BYTE_ARRAY" and logical_name == "STRING":
        return "STRING"
    return None


def _signed_int(logical) -> bool:
    return '"isSigned":true' in logical.to_json().replace(' ', '')


def ranges_from_parquet(metadata, file_name: str, columns: Sequence[str], *, where: str = "") -> list[ColumnRange]:
    """The statistics of ``columns`` in one parquet file, from its footer (``metadata``: a
    ``pyarrow.parquet.FileMetaData``), merged over its row groups in order, as Java's
    ``ParquetUtils.readColumnStatsFromMetadata``; in ``columns`` order, a column the file
    lacks left out (Java indexes what the file has)."""
    wanted = set(columns)
    schema = metadata.schema
    index = {schema.column(i).path: i for i in range(len(schema)) if schema.column(i).path in wanted}
    by_column: dict[str, ColumnRange] = {}
    for rg in range(metadata.num_row_groups):
        group = metadata.row_group(rg)
        for column, i in index.items():
            chunk = group.column(i)
            descr = schema.column(i)
            vtype = _value_type(descr.physical_type, descr.logical_type)
            if vtype is None:
                raise UnsupportedColumnStatsTypeError(
                    f"column {column!r} of {where or file_name} is {descr.physical_type} "
                    f"({descr.logical_type}), a type whose column statistics this writer does not "
                    "write yet; Java's column_stats index covers it", column=column,
                    remedy="leave the column out of Java's column stats (hoodie.metadata.index.column."
                           "stats.column.list, the same in every writer) or disable column stats in "
                           "Java (hoodie.metadata.index.column.stats.enable=false and "
                           "hoodie.metadata.index.partition.stats.enable=false), or write this table "
                           "with hoodie.metadata.enable=false")
            stats = chunk.statistics
            has_values = stats is not None and stats.has_min_max
            null_count = (stats.null_count if stats is not None and stats.has_null_count else chunk.num_values)
            found = ColumnRange(file_name, column, vtype,
                                _native(vtype, stats.min) if has_values else None,
                                _native(vtype, stats.max) if has_values else None,
                                int(null_count), int(chunk.num_values), int(chunk.total_compressed_size),
                                int(chunk.total_uncompressed_size))
            by_column[column] = by_column[column].merged(found) if column in by_column else found
    return [by_column[c] for c in columns if c in by_column]


def _native(vtype: str, value):
    if vtype == "STRING" and isinstance(value, bytes):
        return value.decode("utf-8")
    if vtype in ("INT", "LONG"):
        return int(value)
    if vtype in ("FLOAT", "DOUBLE"):
        return float(value)
    return value


def partition_range(partition: str, ranges: Iterable[ColumnRange]) -> ColumnRange:
    """One column's statistics over a partition's files (``FileFormatUtils.getColumnRangeInPartition``):
    named by the partition path."""
    out = None
    for r in ranges:
        r = replace(r, name=partition)
        out = r if out is None else out.merged(r)
    if out is None:
        raise ValueError(f"no file statistics to aggregate for partition {partition!r}")
    return out


def _wrap(vtype: str, value):
    if value is None or vtype == "NULL":
        return None
    return (_NS + _WRAPPERS[vtype], {"value": value})


def _stats(r: ColumnRange, *, deleted: bool, tight: bool, index_version: int) -> dict[str, Any]:
    vtype = None if index_version < 2 else {"typeOrdinal": VALUE_TYPE_ORDINALS[r.value_type], "additionalInfo": None}
    return {"fileName": r.name, "columnName": r.column, "minValue": _wrap(r.value_type, r.min_value),
            "maxValue": _wrap(r.value_type, r.max_value), "valueCount": r.value_count, "nullCount": r.null_count,
            "totalSize": r.total_size, "totalUncompressedSize": r.total_uncompressed_size, "isDeleted": deleted,
            "isTightBound": tight, "valueType": vtype}


def _envelope(kind: int, stats: Mapping[str, Any]) -> dict[str, Any]:
    return {"_hoodie_commit_time": None, "_hoodie_commit_seqno": None, "_hoodie_record_key": None,
            "_hoodie_partition_path": None, "_hoodie_file_name": None, "key": "", "type": kind,
            "filesystemMetadata": None, "BloomFilterMetadata": None, "ColumnStatsMetadata": dict(stats),
            "recordIndexMetadata": None, "SecondaryIndexMetadata": None}


def column_stats_record(r: ColumnRange, *, index_version: int) -> dict[str, Any]:
    """A file's column record (``r.name``: the file's name)."""
    return _envelope(TYPE_COLUMN_STATS, _stats(r, deleted=False, tight=False, index_version=index_version))


def deleted_column_stats_record(file_name: str, column: str, *, index_version: int) -> dict[str, Any]:
    """The tombstone of a deleted file's column (``HoodieColumnRangeMetadata.stub``: no values,
    counts -1), as Java's clean and rollback write it."""
    stub = ColumnRange(file_name, column, "NULL", None, None, -1, -1, -1, -1)
    return _envelope(TYPE_COLUMN_STATS, _stats(stub, deleted=True, tight=False, index_version=index_version))


def partition_stats_record(r: ColumnRange, *, index_version: int, tight_bound: bool = True) -> dict[str, Any]:
    """A partition's column record (``r.name``: the partition path); tight-bound when computed
    over the partition's latest files, which Java does when ``column_stats`` is there."""
    return _envelope(TYPE_PARTITION_STATS, _stats(r, deleted=False, tight=tight_bound, index_version=index_version))


def column_stats_records(partition: str, ranges: Iterable[ColumnRange], *,
                         index_version: int) -> dict[str, dict[str, Any]]:
    """HFile key -> record for files' ranges in ``partition``."""
    return {column_stats_key(partition, r.name, r.column): column_stats_record(r, index_version=index_version)
            for r in ranges}


def partition_stats_records(partition: str, ranges: Iterable[ColumnRange], *, index_version: int,
                            tight_bound: bool = True) -> dict[str, dict[str, Any]]:
    """HFile key -> record for one partition: its files' ``ranges`` aggregated per column."""
    by_column: dict[str, list[ColumnRange]] = {}
    for r in ranges:
        by_column.setdefault(r.column, []).append(r)
    return {partition_stats_key(partition, column): partition_stats_record(
                partition_range(partition, rs), index_version=index_version, tight_bound=tight_bound)
            for column, rs in by_column.items()}


def _unwrap(value):
    if isinstance(value, tuple):
        return value[1]["value"]
    if isinstance(value, dict):
        return value.get("value")
    return value


def merge_column_stats(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``ColumnStatsMetadata`` of one key merged as Java's ``mergeColumnStatsRecords``."""
    if newer["isDeleted"] or older["isDeleted"] or newer.get("isTightBound"):
        return dict(newer)
    out = dict(newer)
    for field, fn in (("minValue", min), ("maxValue", max)):
        vals = [(_unwrap(v), v) for v in (older.get(field), newer.get(field)) if v is not None]
        out[field] = fn(vals, key=lambda p: p[0])[1] if vals else None
    for field in ("valueCount", "nullCount", "totalSize", "totalUncompressedSize"):
        out[field] = (older.get(field) or 0) + (newer.get(field) or 0)
    return out


def merge_stats_records(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Two records (types 3 and 6) of one key, as ``HoodieMetadataPayload`` combines them: the
    newer record with its ``ColumnStatsMetadata`` merged (:func:`merge_column_stats`)."""
    return {**newer, "ColumnStatsMetadata": merge_column_stats(older["ColumnStatsMetadata"],
                                                               newer["ColumnStatsMetadata"])}


# the metadata table's compaction merges these records by this rule (metadata_record.MERGERS)
MERGERS[TYPE_COLUMN_STATS] = MERGERS[TYPE_PARTITION_STATS] = merge_stats_records


__all__ = ["TYPE_COLUMN_STATS", "TYPE_PARTITION_STATS", "COLUMN_STATS_PARTITION", "PARTITION_STATS_PARTITION",
           "FILE_ID_PREFIXES", "META_COLUMNS_INDEXED", "META_COLUMNS", "VALUE_TYPE_ORDINALS",
           "ColumnRange", "partition_identifier", "column_stats_key",
           "partition_stats_key", "file_group_index", "file_group_id", "ranges_from_parquet", "partition_range",
           "column_stats_record", "deleted_column_stats_record", "partition_stats_record", "column_stats_records",
           "partition_stats_records", "merge_column_stats", "merge_stats_records"]
