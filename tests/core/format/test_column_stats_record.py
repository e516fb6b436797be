"""Column and partition stats records (core/format/column_stats_record.py): footers read as
Java reads them, keys and file groups as Java places them, records as Java encodes and merges
them. Byte equality with Java's own records: tests/interop/test_java_metadata_stats.py."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.errors import UnsupportedColumnStatsTypeError
from airflow_hudi_occ.core.format.column_stats_record import (ColumnRange, column_stats_key, column_stats_records,
                                                              deleted_column_stats_record, file_group_id,
                                                              file_group_index, merge_column_stats,
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


@pytest.mark.parametrize("array", [pa.array([1], pa.date32()), pa.array([1], pa.timestamp("us")),
                                   pa.array([b"x"], pa.binary()), pa.array([1], pa.uint32())])
def test_a_type_not_rendered_is_refused_naming_the_column(tmp_path, array):
    with pytest.raises(UnsupportedColumnStatsTypeError) as refused:
        ranges_from_parquet(footer(tmp_path, pa.table({"c": array})), "f.parquet", ["c"])
    assert refused.value.column == "c" and "column.list" in refused.value.remedy


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
