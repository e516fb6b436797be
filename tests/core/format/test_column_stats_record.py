"""Column and partition stats records (core/format/column_stats_record.py): footers read as
Java reads them, keys and file groups as Java places them, records as Java encodes and merges
them. Byte equality with Java's own records: tests/interop/test_java_metadata_stats.py."""

from __future__ import annotations

import datetime
from dataclasses import replace
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.errors import UnsupportedColumnStatsTypeError
from airflow_hudi_occ.core.format.column_stats_record import (ColumnRange, avro_value_type, column_stats_key,
                                                              column_stats_records, deleted_column_stats_record,
                                                              file_group_id, file_group_index, java_order,
                                                              log_record_order, merge_column_stats,
                                                              native_from_avro, partition_range,
                                                              partition_stats_key, partition_stats_records,
                                                              ranges_from_parquet)
from airflow_hudi_occ.core.format.metadata_record import decode_record, encode_record


def footer(tmp_path, table: pa.Table, **kw):
    path = tmp_path / "f.parquet"
    pq.write_table(table, path, **kw)
    return pq.read_metadata(path)


def test_a_footer_read_as_java_reads_it_merging_row_groups(tmp_path):
    t = pa.table({"id": pa.array([5, 1, 9, 3], pa.int64()), "s": ["m", None, "b", "x"],
                  "n": pa.array([None] * 4, pa.string()), "i": pa.array([2, 7, -1, 0], pa.int32()),
                  "d": [0.5, 2.5, -1.0, 1.0], "b": [True, False, True, True]})
    meta = footer(tmp_path, t, row_group_size=2)
    assert meta.num_row_groups == 2
    ranges = {r.column: r for r in ranges_from_parquet(meta, "f.parquet", ["id", "s", "n", "i", "d", "b", "absent"])}
    assert sorted(ranges) == ["b", "d", "i", "id", "n", "s"]  # a column the file lacks is left out
    assert (ranges["id"].min_value, ranges["id"].max_value, ranges["id"].value_type) == (1, 9, "LONG")
    assert (ranges["s"].min_value, ranges["s"].max_value, ranges["s"].null_count) == ("b", "x", 1)
    assert (ranges["n"].min_value, ranges["n"].null_count, ranges["n"].value_count) == (None, 4, 4)
    assert (ranges["i"].min_value, ranges["i"].value_type) == (-1, "INT")
    assert (ranges["d"].max_value, ranges["b"].min_value, ranges["b"].max_value) == (2.5, False, True)
    sizes = [meta.row_group(g).column(0) for g in range(2)]
    assert ranges["id"].total_size == sum(c.total_compressed_size for c in sizes)
    assert ranges["id"].total_uncompressed_size == sum(c.total_uncompressed_size for c in sizes)


@pytest.mark.parametrize("array,kw", [(pa.array([1], pa.uint32()), {}),
                                      (pa.array([1], pa.timestamp("ns")), {"use_deprecated_int96_timestamps": True})])
def test_a_type_java_cannot_record_is_refused_naming_the_column(tmp_path, array, kw):
    with pytest.raises(UnsupportedColumnStatsTypeError) as refused:
        ranges_from_parquet(footer(tmp_path, pa.table({"c": array}), **kw), "f.parquet", ["c"])
    assert refused.value.column == "c" and "column.list" in refused.value.remedy


def typed_table() -> pa.Table:
    utc = datetime.timezone.utc
    return pa.table({
        "day": pa.array([datetime.date(2026, 1, 3), None, datetime.date(1969, 12, 31)], pa.date32()),
        "at": pa.array([datetime.datetime(2026, 1, 1, 0, 0, 1, 5, tzinfo=utc), None,
                        datetime.datetime(1970, 1, 1, tzinfo=utc)], pa.timestamp("us", tz="UTC")),
        "ms": pa.array([7, 3, None], pa.timestamp("ms")),
        "amt": pa.array([Decimal("-1.25"), Decimal("1.28"), None], pa.decimal128(10, 2)),
        "raw": pa.array([b"\x01", b"\x81", b"\x02"], pa.binary()),
        "fix": pa.array([b"ab", b"\xffz", None], pa.binary(2)),
        "t": pa.array([5, 1, 2], pa.time32("ms")),
    })


def test_dates_timestamps_decimals_and_binary_read_as_java_reads_them(tmp_path):
    meta = footer(tmp_path, typed_table(), row_group_size=2)
    r = {x.column: x for x in ranges_from_parquet(meta, "f.parquet", typed_table().column_names)}
    assert (r["day"].value_type, r["day"].min_value, r["day"].max_value) == ("DATE", -1, 20456)
    assert (r["at"].value_type, r["at"].min_value, r["at"].max_value) == ("TIMESTAMP_MICROS", 0, 1767225601000005)
    assert (r["ms"].value_type, r["ms"].min_value, r["ms"].max_value) == ("LOCAL_TIMESTAMP_MILLIS", 3, 7)
    assert (r["amt"].value_type, r["amt"].decimal) == ("DECIMAL", (10, 2))
    assert (r["amt"].min_value, r["amt"].max_value) == (Decimal("-1.25"), Decimal("1.28"))
    # binary merged over row groups in ByteBuffer.compareTo's order (signed: 0x81 before 0x02),
    # each row group's own min / max as parquet found them (unsigned)
    assert (r["raw"].value_type, r["raw"].min_value, r["raw"].max_value) == ("BYTES", b"\x01", b"\x02")
    assert r["fix"].value_type == "FIXED" and r["t"].value_type == "TIME_MILLIS"


def wrapped(r: ColumnRange, version: int) -> dict:
    rec = column_stats_records("p", [r], index_version=version)[column_stats_key("p", r.name, r.column)]
    return decode_record(encode_record(rec))["ColumnStatsMetadata"]


def test_each_type_wrapped_as_java_wraps_it_under_both_index_versions():
    ns = "org.apache.hudi.avro.model."
    amt = ColumnRange("f", "amt", "DECIMAL", Decimal("-1.25"), Decimal("3.25"), decimal=(10, 2))
    v2 = wrapped(amt, 2)
    # the unscaled value's BigInteger.toByteArray, as Java's bytes for this column
    assert (v2["minValue"], v2["maxValue"]) == ((ns + "BytesWrapper", {"value": b"\x83"}),
                                                (ns + "BytesWrapper", {"value": b"\x01E"}))
    assert v2["valueType"] == {"typeOrdinal": 10, "additionalInfo": "10,2"}
    v1 = wrapped(amt, 1)
    assert v1["minValue"] == (ns + "DecimalWrapper", {"value": Decimal("-1.250000000000000")})
    day = ColumnRange("f", "day", "DATE", 20455, 20459)
    assert wrapped(day, 2)["minValue"] == (ns + "IntWrapper", {"value": 20455})
    assert wrapped(day, 2)["valueType"]["typeOrdinal"] == 12
    assert wrapped(day, 1)["maxValue"] == (ns + "DateWrapper", {"value": 20459})
    at = ColumnRange("f", "at", "TIMESTAMP_MICROS", 1, 2)
    assert wrapped(at, 2)["minValue"] == (ns + "LongWrapper", {"value": 1})
    assert wrapped(at, 2)["valueType"]["typeOrdinal"] == 16 and wrapped(at, 1)["valueType"] is None
    raw = ColumnRange("f", "raw", "BYTES", b"\x00\x80", b"\x04")
    assert wrapped(raw, 1)["minValue"] == wrapped(raw, 2)["minValue"] == (ns + "BytesWrapper", {"value": b"\x00\x80"})
    with pytest.raises(UnsupportedColumnStatsTypeError):  # Java's version 1 cannot wrap a fixed that is no decimal
        wrapped(ColumnRange("f", "fix", "FIXED", b"a", b"b"), 1)
    assert wrapped(ColumnRange("f", "fix", "FIXED", b"a", b"b"), 2)["valueType"]["typeOrdinal"] == 9


def test_an_annotated_short_is_an_int_under_version_1_and_refused_under_version_2(tmp_path):
    """Java's version-2 footer reader fails on parquet's INT(16) annotation (pyarrow writes one
    for int8 / int16; Java's own writer never does): refused there, an IntWrapper under version 1."""
    (r,) = ranges_from_parquet(footer(tmp_path, pa.table({"s": pa.array([3, -2], pa.int16())})), "f.parquet", ["s"])
    assert (r.min_value, r.max_value) == (-2, 3)
    assert wrapped(r, 1)["minValue"] == ("org.apache.hudi.avro.model.IntWrapper", {"value": -2})
    with pytest.raises(UnsupportedColumnStatsTypeError) as refused:
        wrapped(r, 2)
    assert refused.value.column == "s" and "int32" in refused.value.remedy


@pytest.mark.parametrize("n", [0, 1, -1, 127, 128, -128, -129, 255, 256, 10**20, -(10**20)])
def test_a_decimal_merges_by_value_not_by_its_bytes(n):
    r1 = ColumnRange("f", "amt", "DECIMAL", Decimal(n).scaleb(-2), Decimal(n).scaleb(-2), decimal=(38, 2))
    r2 = ColumnRange("f", "amt", "DECIMAL", Decimal(n + 1).scaleb(-2), Decimal(n + 1).scaleb(-2), decimal=(38, 2))
    older, newer = wrapped(r2, 2), wrapped(r1, 2)
    assert int.from_bytes(older["minValue"][1]["value"], "big", signed=True) == n + 1
    merged = merge_column_stats(older, newer)
    assert (merged["minValue"], merged["maxValue"]) == (newer["minValue"], older["maxValue"])


def test_keys_and_file_groups_as_java_places_them():
    # keys and groups Java 1.2.0 wrote (two col-stats file groups, Java's default)
    name = "d128cbb2-bbe2-4a68-93a1-15ee16e769b5-0_1-22-22_20261127193804690.parquet"
    key = column_stats_key("b", name, "_hoodie_commit_time")
    assert key == "JBBzUToHtLc=Ikp1UxohNwU=+li9GD4Ly5PxIhaKS1FEWw=="
    assert file_group_index(key, 2) == 0
    assert file_group_index("JBBzUToHtLc=BFHqp2KLzrM=L1+61dVr/pYJqbLOJ5IRGQ==", 2) == 1
    assert file_group_index(key, 1) == 0
    assert partition_stats_key("a", "v") == "hPjzBX1OK5M=BFHqp2KLzrM="
    assert partition_stats_key("", "v") == "hPjzBX1OK5M=" + partition_stats_key(".", "v")[12:]
    assert file_group_id("column_stats", 1) == "col-stats-0001-0"
    assert file_group_id("partition_stats", 0) == "partition-stats-0000-0"


def test_records_encode_and_aggregate_per_partition():
    a = ColumnRange("f1.parquet", "v", "STRING", "b", "k", 0, 3, 10, 20)
    b = ColumnRange("f2.parquet", "v", "STRING", "a", "c", 1, 2, 5, 6)
    files = column_stats_records("p", [a, b], index_version=2)
    assert set(files) == {column_stats_key("p", "f1.parquet", "v"), column_stats_key("p", "f2.parquet", "v")}
    stats = decode_record(encode_record(files[column_stats_key("p", "f1.parquet", "v")]))["ColumnStatsMetadata"]
    assert stats["valueType"] == {"typeOrdinal": 7, "additionalInfo": None} and stats["isTightBound"] is False
    v1 = decode_record(encode_record(column_stats_records("p", [a], index_version=1)[column_stats_key(
        "p", "f1.parquet", "v")]))["ColumnStatsMetadata"]
    assert v1["valueType"] is None and v1["minValue"][1] == {"value": "b"}
    (key, rec), = partition_stats_records("p", [a, b], index_version=2).items()
    assert key == partition_stats_key("p", "v") and rec["type"] == 6
    got = decode_record(encode_record(rec))["ColumnStatsMetadata"]
    assert (got["fileName"], got["minValue"][1], got["maxValue"][1]) == ("p", {"value": "a"}, {"value": "k"})
    assert (got["nullCount"], got["valueCount"], got["totalSize"], got["isTightBound"]) == (1, 5, 15, True)


def test_records_of_one_key_merge_as_javas_payload():
    def stats(lo, hi, n, deleted=False, tight=False):
        return {"fileName": "f", "columnName": "c", "minValue": {"value": lo}, "maxValue": {"value": hi},
                "valueCount": n, "nullCount": 0, "totalSize": n, "totalUncompressedSize": n,
                "isDeleted": deleted, "isTightBound": tight, "valueType": None}
    merged = merge_column_stats(stats(3, 5, 2), stats(1, 4, 1))
    assert (merged["minValue"], merged["maxValue"], merged["valueCount"]) == ({"value": 1}, {"value": 5}, 3)
    assert merge_column_stats(stats(3, 5, 2), stats(7, 8, 1, tight=True))["minValue"] == {"value": 7}
    tomb = decode_record(encode_record(deleted_column_stats_record("f", "c", index_version=2)))["ColumnStatsMetadata"]
    assert tomb["isDeleted"] and tomb["valueCount"] == -1 and tomb["valueType"]["typeOrdinal"] == 1
    assert merge_column_stats(stats(3, 5, 2), tomb) == tomb
    assert merge_column_stats(tomb, stats(3, 5, 2))["valueCount"] == 2


def test_a_stats_record_decoded_keeps_its_wrappers_and_encodes_back_to_the_same_bytes():
    data = encode_record(column_stats_records("p", [ColumnRange("f", "id", "LONG", 1, 5, 0, 3, 10, 10)],
                                              index_version=2)[column_stats_key("p", "f", "id")])
    decoded = decode_record(data)
    assert decoded["ColumnStatsMetadata"]["minValue"] == ("org.apache.hudi.avro.model.LongWrapper", {"value": 1})
    assert encode_record(decoded) == data


def test_the_compactions_merge_rule_for_stats_records():
    from airflow_hudi_occ.core.format.metadata_record import merge_records
    a = column_stats_records("p", [ColumnRange("f", "id", "LONG", 3, 5, 0, 2, 10, 10)], index_version=2)
    b = column_stats_records("p", [ColumnRange("f", "id", "LONG", 1, 4, 1, 1, 5, 6)], index_version=2)
    key = column_stats_key("p", "f", "id")
    older, newer = decode_record(encode_record(a[key])), decode_record(encode_record(b[key]))
    merged = decode_record(encode_record(merge_records(older, newer)))["ColumnStatsMetadata"]
    wrapper = "org.apache.hudi.avro.model.LongWrapper"
    assert (merged["minValue"], merged["maxValue"]) == ((wrapper, {"value": 1}), (wrapper, {"value": 5}))
    assert (merged["valueCount"], merged["nullCount"], merged["totalSize"]) == (3, 1, 15)
    part = partition_stats_records("p", [ColumnRange("f", "id", "LONG", 7, 9, 0, 1, 1, 1)], index_version=2)
    (pkey, prec), = part.items()
    assert merge_records(decode_record(encode_record(prec)), prec)["ColumnStatsMetadata"]["minValue"][1] == {"value": 7}


#: U+E000 (UTF-16 0xE000) and U+1F600 (UTF-16 0xD83D 0xDE00): code point order puts the first
#: first, Java's String.compareTo (UTF-16 units) the second (tests/interop/
#: test_java_metadata_stats_log_types.py shows Java doing both, each where it does)
PRIVATE, BEYOND = "\ue000", "\U0001F600"


def test_strings_merge_in_javas_utf16_order_across_row_groups_files_and_records(tmp_path):
    assert PRIVATE < BEYOND and java_order(BEYOND) < java_order(PRIVATE)
    assert sorted([PRIVATE, "\uffff", BEYOND, "a"], key=java_order) == ["a", BEYOND, PRIVATE, "\uffff"]
    # row groups of one footer (Java's ParquetUtils merges them as Strings)
    meta = footer(tmp_path, pa.table({"s": [PRIVATE + "x", BEYOND + "y"]}), row_group_size=1)
    [r] = ranges_from_parquet(meta, "f.parquet", ["s"])
    assert (r.min_value, r.max_value) == (BEYOND + "y", PRIVATE + "x")
    # a partition's files
    one = ColumnRange("f1", "s", "STRING", PRIVATE, PRIVATE, 0, 1)
    two = ColumnRange("f2", "s", "STRING", BEYOND, BEYOND, 0, 1)
    agg = partition_range("a", [one, two])
    assert (agg.min_value, agg.max_value) == (BEYOND, PRIVATE)
    # one key's records, merged as mergeColumnStatsRecords (naturalOrder of the unwrapped Strings)
    older = column_stats_records("a", [one], index_version=2)
    newer = column_stats_records("a", [replace(two, name="f1")], index_version=2)
    [(key, o)], [(key2, n)] = older.items(), newer.items()
    assert key == key2
    merged = merge_column_stats(o["ColumnStatsMetadata"], n["ColumnStatsMetadata"])
    assert (merged["minValue"][1]["value"], merged["maxValue"][1]["value"]) == (BEYOND, PRIVATE)
    # one log file's records: Avro's compare, code point order
    assert min([PRIVATE, BEYOND], key=log_record_order) == PRIVATE
    assert min([b"\x01", b"\x81"], key=log_record_order) == b"\x81"  # binary signed in both


def test_a_log_blocks_avro_types_as_javas_value_types():
    decimal = {"type": "fixed", "name": "f", "size": 5, "logicalType": "decimal", "precision": 10, "scale": 2}
    assert avro_value_type(["null", decimal]) == ("DECIMAL", (10, 2))
    assert avro_value_type({"type": "bytes", "logicalType": "decimal", "precision": 22, "scale": 4}) == \
        ("DECIMAL", (22, 4))
    assert avro_value_type(["null", {"type": "int", "logicalType": "date"}]) == ("DATE", None)
    for logical, vtype in (("timestamp-millis", "TIMESTAMP_MILLIS"), ("timestamp-micros", "TIMESTAMP_MICROS"),
                           ("local-timestamp-micros", "LOCAL_TIMESTAMP_MICROS")):
        assert avro_value_type({"type": "long", "logicalType": logical}) == (vtype, None)
    assert [avro_value_type(t)[0] for t in ("string", "bytes", "int", {"type": "long"}, ["null", "double"])] == \
        ["STRING", "BYTES", "INT", "LONG", "DOUBLE"]
    # none of Java's Spark writer's nor ours: no log-file stats rendered (refused at commit)
    for t in ({"type": "int", "logicalType": "time-millis"}, {"type": "string", "logicalType": "uuid"},
              {"type": "long", "logicalType": "timestamp-nanos"}, {"type": "fixed", "name": "g", "size": 2},
              ["null", "int", "string"], {"type": "array", "items": "int"}):
        assert avro_value_type(t) is None, t


def test_a_log_records_values_as_the_raw_values_java_records():
    utc = datetime.timezone.utc
    assert native_from_avro("DATE", datetime.date(2026, 1, 3)) == 20456
    assert native_from_avro("DATE", datetime.date(1969, 12, 31)) == -1
    at = datetime.datetime(2026, 1, 1, 0, 0, 1, 5000, tzinfo=utc)
    assert native_from_avro("TIMESTAMP_MICROS", at) == 1767225601005000
    assert native_from_avro("TIMESTAMP_MILLIS", at) == 1767225601005
    assert native_from_avro("TIMESTAMP_MILLIS", datetime.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=utc)) == -1
    assert native_from_avro("LOCAL_TIMESTAMP_MICROS", datetime.datetime(1970, 1, 1, 0, 0, 0, 7)) == 7
    assert native_from_avro("DECIMAL", Decimal("-1.25")) == Decimal("-1.25")
    assert native_from_avro("BYTES", bytearray(b"\x81")) == b"\x81"
    assert native_from_avro("LONG", 5) == 5 and native_from_avro("BOOLEAN", True) is True
    assert native_from_avro("DATE", None) is None
