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

Column types (what ``ValueType.fromParquetPrimitiveType`` / ``ParquetUtils.convertToNativeJavaType``
make of a footer's column; the value kept in :class:`ColumnRange` in brackets):

============================  ===============================  =================================
parquet column                index version 2 (ordinal, wrapper) index version 1 (wrapper)
============================  ===============================  =================================
boolean, int32, int64,        BOOLEAN/INT/LONG/FLOAT/DOUBLE,     the same wrappers
float, double, UTF-8 string   STRING (2-7), their wrappers
DATE (int32) [days]           DATE (12), IntWrapper              DateWrapper
DECIMAL(p, s) int32 / int64 / DECIMAL (10, ``"p,s"``),           DecimalWrapper (Avro decimal(30,
fixed / binary [Decimal]      BytesWrapper: the unscaled value's  15): the value at scale 15)
                              minimal two's complement bytes
binary [bytes]                BYTES (8), BytesWrapper            BytesWrapper
fixed, not a decimal          FIXED (9), BytesWrapper            refused (Java fails on it)
TIMESTAMP(unit, UTC) int64    TIMESTAMP_MILLIS/MICROS/NANOS      LongWrapper, the raw value
[the raw long]                (15-17), LongWrapper, raw value
TIMESTAMP(unit, local) int64  LOCAL_TIMESTAMP_* (18-20)          LongWrapper, the raw value
TIME millis / micros          TIME_MILLIS (13) IntWrapper,       Int / LongWrapper, raw
                              TIME_MICROS (14) LongWrapper
ints with an INT annotation  refused: Java fails on the         Int / LongWrapper
(pyarrow's int8 / int16)      annotation (cast to int32)
============================  ===============================  =================================

A merge-on-read log file's values (:func:`avro_value_type`, :func:`native_from_avro`) get the
same value types and raw values as the footer of a parquet column of the same type: the
block's Avro ``date`` a DATE, ``timestamp-millis`` / ``-micros`` a TIMESTAMP, ``local-timestamp-*``
a LOCAL_TIMESTAMP, a ``bytes`` or ``fixed`` decimal a DECIMAL with its precision and scale,
``bytes`` BYTES (Java's append handle, tests/interop/test_java_metadata_stats_log_types.py).

Mins and maxes merge (row groups, files of a partition, records of one key) in Java's
``compareTo`` order (:func:`java_order`): numbers and decimals by value, binary as
``ByteBuffer`` compares, byte by byte *signed*, strings as ``String.compareTo``, by UTF-16
code units (U+1F600, 0xD83D 0xDE00, before U+E000). Within one file the order is the file's:
a footer's min and max as its writer computed them (unsigned bytes: code point order), a log
file's by Avro's compare (:func:`log_record_order`: code points, binary signed). Java's value types are taken from the file's footer, not the table schema: a
file written with a local (not UTC-adjusted) timestamp gets a ``LOCAL_TIMESTAMP`` record, as
Java's own computation over that file. Refused with :class:`UnsupportedColumnStatsTypeError`
(never a stat Java would decode differently): UUID (Java's reader of the footer fails on it),
INT96 timestamps (no parquet statistics), unsigned integers, intervals, a non-decimal fixed
column under index version 1 and an integer with parquet's INT annotation under version 2 (Java's own
writer never annotates one: an Avro ``int`` is a plain INT32). Java never indexes records, arrays, maps or enums (the columns
to index leave them out: :mod:`~airflow_hudi_occ.core.table.metadata_stats`).
"""

from __future__ import annotations

import datetime
import json
from dataclasses import dataclass, replace
from decimal import Decimal
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
VALUE_TYPE_ORDINALS = {"NULL": 1, "BOOLEAN": 2, "INT": 3, "LONG": 4, "FLOAT": 5, "DOUBLE": 6, "STRING": 7,
                       "BYTES": 8, "FIXED": 9, "DECIMAL": 10, "DATE": 12, "TIME_MILLIS": 13, "TIME_MICROS": 14,
                       "TIMESTAMP_MILLIS": 15, "TIMESTAMP_MICROS": 16, "TIMESTAMP_NANOS": 17,
                       "LOCAL_TIMESTAMP_MILLIS": 18, "LOCAL_TIMESTAMP_MICROS": 19, "LOCAL_TIMESTAMP_NANOS": 20}
_ORDINAL_TYPES = {v: k for k, v in VALUE_TYPE_ORDINALS.items()}
_WRAPPERS = {"BOOLEAN": "BooleanWrapper", "INT": "IntWrapper", "LONG": "LongWrapper", "FLOAT": "FloatWrapper",
             "DOUBLE": "DoubleWrapper", "STRING": "StringWrapper", "BYTES": "BytesWrapper", "FIXED": "BytesWrapper",
             "DECIMAL": "BytesWrapper", "DATE": "IntWrapper", "TIME_MILLIS": "IntWrapper",
             **{t: "LongWrapper" for t in VALUE_TYPE_ORDINALS if "TIMESTAMP" in t or t == "TIME_MICROS"}}
#: index version 1 wraps Java's native value of the footer (``HoodieAvroWrapperUtils.wrapValueIntoAvro``)
_WRAPPERS_V1 = {**_WRAPPERS, "DATE": "DateWrapper", "DECIMAL": "DecimalWrapper", "ANNOTATED_INT": "IntWrapper",
                "ANNOTATED_LONG": "LongWrapper"}
#: the Avro decimal of ``DecimalWrapper`` (index version 1): every decimal at this scale
V1_DECIMAL_PRECISION, V1_DECIMAL_SCALE = 30, 15
_TIME_UNITS = {"milliseconds": "MILLIS", "microseconds": "MICROS", "nanoseconds": "NANOS"}


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
    #: a decimal's ``(precision, scale)``; ``None`` for other types
    decimal: tuple[int, int] | None = None

    def merged(self, other: "ColumnRange") -> "ColumnRange":
        """Java's ``HoodieColumnRangeMetadata.merge``: min of mins and max of maxes (nulls
        ignored, Java's order: :func:`java_order`), counts and sizes added; the name is this one's."""
        return replace(self, min_value=_pick(min, self.min_value, other.min_value),
                       max_value=_pick(max, self.max_value, other.max_value),
                       null_count=self.null_count + other.null_count,
                       value_count=self.value_count + other.value_count,
                       total_size=self.total_size + other.total_size,
                       total_uncompressed_size=self.total_uncompressed_size + other.total_uncompressed_size)


def java_order(value):
    """A sort key giving Java's ``compareTo`` order, the order Java merges ranges in (row
    groups, a partition's files, one key's records): ``bytes`` as ``ByteBuffer.compareTo``
    (signed bytes: 0x80 sorts before 0x00), a string as ``String.compareTo`` (UTF-16 code
    units: a character beyond the BMP, a surrogate pair from 0xD800, sorts before U+E000 to
    U+FFFF, where code point order puts it after them), any other value as itself."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(b ^ 0x80 for b in value)
    if isinstance(value, str):
        return value.encode("utf-16-be")
    return value


def log_record_order(value):
    """The order of one log file's values as Java's append handle compares them (Avro's
    ``GenericData.compare`` over the column's schema): a string as UTF-8 bytes (code point
    order, Python's own: not :func:`java_order`'s UTF-16), ``bytes`` signed as
    ``ByteBuffer.compareTo``, any other value as itself."""
    if isinstance(value, (bytes, bytearray)):
        return bytes(b ^ 0x80 for b in value)
    return value


#: a log block's Avro types -> the value types Java's append handle records for them (index
#: version 2; version 1 wraps them as a footer's: the module doc's table). Java's Spark writer
#: writes Spark dates as ``date``, timestamps as ``timestamp-micros``, timestamps without a
#: time zone as ``local-timestamp-micros``, decimals as ``fixed`` decimals; this package's
#: writers write ``bytes`` decimals and ``timestamp-millis`` / ``-micros``
_AVRO_PLAIN = {"boolean": "BOOLEAN", "int": "INT", "long": "LONG", "float": "FLOAT", "double": "DOUBLE",
               "string": "STRING", "bytes": "BYTES"}
_AVRO_LOGICAL = {("int", "date"): "DATE", ("long", "timestamp-millis"): "TIMESTAMP_MILLIS",
                 ("long", "timestamp-micros"): "TIMESTAMP_MICROS",
                 ("long", "local-timestamp-millis"): "LOCAL_TIMESTAMP_MILLIS",
                 ("long", "local-timestamp-micros"): "LOCAL_TIMESTAMP_MICROS",
                 ("bytes", "decimal"): "DECIMAL", ("fixed", "decimal"): "DECIMAL"}
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_EPOCH_NAIVE = datetime.datetime(1970, 1, 1)
_UNIT_MICROS = {"MILLIS": 1000, "MICROS": 1}


def avro_value_type(avro) -> tuple[str, tuple[int, int] | None] | None:
    """``(value type, decimal (precision, scale) or None)`` of a log block's column of Avro
    type ``avro`` (a nullable union allowed), or ``None`` for a type this module renders no
    log-file statistics for: a logical type neither Java's Spark writer nor this package's
    writers put in a log file (``time-*``, ``uuid``, ``timestamp-nanos``, ...) and a plain
    ``fixed`` (neither writes one), whose records nothing here has compared with Java's."""
    if isinstance(avro, list):
        rest = [t for t in avro if t != "null"]
        if len(rest) != 1:
            return None
        avro = rest[0]
    if isinstance(avro, str):
        return (_AVRO_PLAIN[avro], None) if avro in _AVRO_PLAIN else None
    if not isinstance(avro, dict):
        return None
    kind, logical = avro.get("type"), avro.get("logicalType")
    if logical is None:
        return avro_value_type(kind) if isinstance(kind, str) else None
    vtype = _AVRO_LOGICAL.get((kind, logical))
    if vtype is None:
        return None
    return vtype, ((int(avro["precision"]), int(avro.get("scale", 0))) if vtype == "DECIMAL" else None)


def native_from_avro(vtype: str, value):
    """A decoded log record's value (fastavro's or pyarrow's Python object) as the raw value a
    footer's statistics give for the same type (:func:`_native`): a date as its day number,
    a timestamp as its count of the unit since the epoch (a local one read as wall-clock time
    at UTC), a decimal as itself, binary as ``bytes``; ints already raw pass through."""
    if value is None or isinstance(value, bool) or not isinstance(value, (datetime.date, bytearray, memoryview)):
        return value
    if vtype == "DATE":
        return (value - datetime.date(1970, 1, 1)).days
    if "TIMESTAMP" in vtype:
        epoch = _EPOCH if value.tzinfo is not None else _EPOCH_NAIVE
        delta = value - epoch
        micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
        return micros // _UNIT_MICROS[vtype.rsplit("_", 1)[1]]
    return bytes(value)


def _pick(fn, a, b):
    vals = [v for v in (a, b) if v is not None]
    return fn(vals, key=java_order) if vals else None


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
    if logical_name == "DECIMAL" and physical in ("INT32", "INT64", "FIXED_LEN_BYTE_ARRAY", "BYTE_ARRAY"):
        return "DECIMAL"
    if logical_name == "DATE" and physical == "INT32":
        return "DATE"
    if logical_name in ("TIMESTAMP", "TIME") and physical in ("INT32", "INT64"):
        spec = _logical_json(logical)
        unit = _TIME_UNITS.get(spec.get("timeUnit"))
        if logical_name == "TIME":
            wanted = {"MILLIS": "INT32", "MICROS": "INT64"}
            return f"TIME_{unit}" if wanted.get(unit) == physical else None
        if physical == "INT64" and unit:
            return f"{'' if spec.get('isAdjustedToUTC') else 'LOCAL_'}TIMESTAMP_{unit}"
        return None
    if physical == "BYTE_ARRAY" and logical_name is None:
        return "BYTES"
    if physical == "FIXED_LEN_BYTE_ARRAY" and logical_name is None:
        return "FIXED"
    if physical == "BOOLEAN" and logical_name is None:
        return "BOOLEAN"
    if physical == "INT32" and logical_name is None:
        return "INT"
    if physical == "INT32" and logical_name == "INT" and _signed_int(logical):
        return "ANNOTATED_INT"
    if physical == "INT64" and logical_name is None:
        return "LONG"
    if physical == "INT64" and logical_name == "INT" and _signed_int(logical):
        return "ANNOTATED_LONG"
    if physical == "FLOAT" and logical_name is None:
        return "FLOAT"
    if physical == "DOUBLE" and logical_name is None:
        return "DOUBLE"
    if physical == "BYTE_ARRAY" and logical_name == "STRING":
        return "STRING"
    return None


def _signed_int(logical) -> bool:
    spec = _logical_json(logical)
    return bool(spec.get("isSigned")) and spec.get("bitWidth") in (8, 16, 32, 64)


def _logical_json(logical) -> dict:
    return json.loads(logical.to_json())


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
                    f"({descr.logical_type}), a type whose column statistics Java Hudi 1.2 cannot record "
                    "either (UUID, INT96, unsigned, interval: its footer reader fails or finds no "
                    "statistics)", column=column,
                    remedy="leave the column out of Java's column stats (hoodie.metadata.index.column."
                           "stats.column.list, the same in every writer) or disable column stats in "
                           "Java (hoodie.metadata.index.column.stats.enable=false and "
                           "hoodie.metadata.index.partition.stats.enable=false), or write this table "
                           "with hoodie.metadata.enable=false")
            stats = chunk.statistics
            has_values = stats is not None and stats.has_min_max
            null_count = (stats.null_count if stats is not None and stats.has_null_count else chunk.num_values)
            decimal = (descr.precision, descr.scale) if vtype == "DECIMAL" else None
            found = ColumnRange(file_name, column, vtype,
                                _native(vtype, stats.min_raw, decimal) if has_values else None,
                                _native(vtype, stats.max_raw, decimal) if has_values else None,
                                int(null_count), int(chunk.num_values), int(chunk.total_compressed_size),
                                int(chunk.total_uncompressed_size), decimal)
            by_column[column] = by_column[column].merged(found) if column in by_column else found
    return [by_column[c] for c in columns if c in by_column]


def _native(vtype: str, raw, decimal: tuple[int, int] | None = None):
    """A footer's physical min or max (``Statistics.min_raw``) as the value Java compares:
    a decimal's unscaled integer (int32, int64, or big-endian two's complement bytes) at its
    scale, dates and times as their raw integers, binary as bytes."""
    if vtype == "STRING" and isinstance(raw, bytes):
        return raw.decode("utf-8")
    if vtype == "DECIMAL":
        unscaled = int.from_bytes(raw, "big", signed=True) if isinstance(raw, bytes) else int(raw)
        return Decimal(unscaled).scaleb(-decimal[1])
    if vtype in ("BYTES", "FIXED"):
        return bytes(raw)
    if vtype in ("FLOAT", "DOUBLE"):
        return float(raw)
    if vtype == "BOOLEAN":
        return bool(raw)
    return int(raw)


def _java_bytes(n: int) -> bytes:
    """``BigInteger.toByteArray``: the minimal big-endian two's complement bytes of ``n``."""
    return n.to_bytes((n if n >= 0 else ~n).bit_length() // 8 + 1, "big", signed=True)


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


def _wrap(r: ColumnRange, value, index_version: int):
    vtype = r.value_type
    if value is None or vtype == "NULL":
        return None
    if vtype in ("ANNOTATED_INT", "ANNOTATED_LONG") and index_version >= 2:
        raise UnsupportedColumnStatsTypeError(
            f"column {r.column!r} of {r.name} is an integer with parquet's INT annotation (pyarrow "
            "writes one for int8 / int16): Java's index version 2 fails on such a footer (\"Unsupported logical type "
            "annotation\"), so it could neither check nor rebuild this file's column statistics",
            column=r.column,
            remedy="cast the column to int32 before writing (Java's own writer stores an Avro int as a "
                   "plain INT32), or leave it out of hoodie.metadata.index.column.stats.column.list (the "
                   "same in every writer), or write this table with hoodie.metadata.enable=false")
    if index_version < 2:
        if vtype == "FIXED":
            raise UnsupportedColumnStatsTypeError(
                f"column {r.column!r} of {r.name} is a fixed-length binary that is not a decimal: Java's "
                "index version 1 (tables of version 8) cannot record its column statistics", column=r.column,
                remedy="leave the column out of hoodie.metadata.index.column.stats.column.list (the same in "
                       "every writer), upgrade the table to version 9 (index version 2), or write this table "
                       "with hoodie.metadata.enable=false")
        if vtype == "DECIMAL":  # tryUpcastDecimal to DecimalWrapper's scale; fastavro encodes it
            value = value.quantize(Decimal(1).scaleb(-V1_DECIMAL_SCALE))
        return (_NS + _WRAPPERS_V1[vtype], {"value": value})
    if vtype == "DECIMAL":
        value = _java_bytes(int(value.scaleb(r.decimal[1])))
    return (_NS + _WRAPPERS[vtype], {"value": value})


def _stats(r: ColumnRange, *, deleted: bool, tight: bool, index_version: int) -> dict[str, Any]:
    low, high = _wrap(r, r.min_value, index_version), _wrap(r, r.max_value, index_version)
    info = f"{r.decimal[0]},{r.decimal[1]}" if r.value_type == "DECIMAL" else None
    vtype = None if index_version < 2 else {"typeOrdinal": VALUE_TYPE_ORDINALS[r.value_type], "additionalInfo": info}
    return {"fileName": r.name, "columnName": r.column, "minValue": low,
            "maxValue": high, "valueCount": r.value_count, "nullCount": r.null_count,
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


def _unwrap(value, value_type=None):
    """A wrapped min or max as the value Java compares (``valueType``: the record's index
    version 2 type, a decimal's unscaled bytes read back as a number)."""
    if isinstance(value, tuple):
        value = value[1]["value"]
    elif isinstance(value, dict):
        value = value.get("value")
    if value_type and _ORDINAL_TYPES.get(value_type.get("typeOrdinal")) == "DECIMAL" and isinstance(value, bytes):
        return int.from_bytes(value, "big", signed=True)  # one key, one scale: the unscaled order
    return java_order(value)


def merge_column_stats(older: Mapping[str, Any], newer: Mapping[str, Any]) -> dict[str, Any]:
    """Two ``ColumnStatsMetadata`` of one key merged as Java's ``mergeColumnStatsRecords``."""
    if newer["isDeleted"] or older["isDeleted"] or newer.get("isTightBound"):
        return dict(newer)
    out = dict(newer)
    for field, fn in (("minValue", min), ("maxValue", max)):
        vals = [(_unwrap(v, rec.get("valueType")), v) for rec in (older, newer)
                if (v := rec.get(field)) is not None]
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
           "V1_DECIMAL_PRECISION", "V1_DECIMAL_SCALE", "java_order", "log_record_order", "avro_value_type",
           "native_from_avro",
           "ColumnRange", "partition_identifier", "column_stats_key",
           "partition_stats_key", "file_group_index", "file_group_id", "ranges_from_parquet", "partition_range",
           "column_stats_record", "deleted_column_stats_record", "partition_stats_record", "column_stats_records",
           "partition_stats_records", "merge_column_stats", "merge_stats_records"]
