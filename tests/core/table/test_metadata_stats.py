"""Which columns, which index version and which file groups a commit's stats records use
(core/table/metadata_stats.py). The records themselves against Java's:
tests/interop/test_java_metadata_stats.py."""

from __future__ import annotations

import datetime
import json
import os
from decimal import Decimal

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import MetadataTableConfig, WriteConfig
from airflow_hudi_occ.core.errors import MetadataTableEnabledError, UnsupportedColumnStatsTypeError
from airflow_hudi_occ.core.format.column_stats_record import column_stats_key, file_group_index
from airflow_hudi_occ.core.table.metadata_stats import (clean_stats_blocks, columns_to_index, file_group_ids,
                                                        index_version, log_file_ranges, stats_blocks)
from airflow_hudi_occ.core.table.metadata_table import MetadataTableState
from airflow_hudi_occ.core.format.log_file import LogFileName, avro_data_block, encode_blocks
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
from tests.interop.rows import batch

META = ["_hoodie_commit_time", "_hoodie_partition_path", "_hoodie_record_key"]


def schema(*fields) -> str:
    return json.dumps({"type": "record", "name": "t", "fields": [{"name": n, "type": t} for n, t in fields]})


SCHEMA = schema(("id", "long"), ("tags", {"type": "array", "items": "string"}), ("p", ["null", "string"]),
                ("amount", ["null", {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}]),
                ("raw", "bytes"), ("day", {"type": "int", "logicalType": "date"}), ("v", "string"))


def test_columns_as_java_chooses_them():
    # bytes and decimals counted under index version 1 too (Java does with an Avro record type)
    default = MetadataTableConfig()
    assert columns_to_index(SCHEMA, default, meta_fields=True) == META + ["id", "p", "amount", "raw", "day", "v"]
    assert columns_to_index(SCHEMA, default, meta_fields=False) == ["id", "p", "amount", "raw", "day", "v"]
    limited = MetadataTableConfig.from_options({"hoodie.metadata.index.column.stats.max.columns.to.index": "2"})
    assert columns_to_index(SCHEMA, limited, meta_fields=True) == META + ["id", "p"]
    listed = MetadataTableConfig.from_options(
        {"hoodie.metadata.index.column.stats.column.list": "v, tags,_hoodie_record_key,absent,id"})
    assert columns_to_index(SCHEMA, listed, meta_fields=True) == META + ["v", "id"]
    assert columns_to_index(None, default, meta_fields=True) == META


def test_the_index_version_from_the_index_definitions_else_the_table_version(tmp_path):
    t8 = Table.create(str(tmp_path / "t8"), "t", record_key_fields=["id"], version=8)
    t9 = Table.create(str(tmp_path / "t9"), "t", record_key_fields=["id"], version=9)
    assert index_version(t8, "column_stats") == 1 and index_version(t9, "partition_stats") == 2
    defs = os.path.join(t9.base_uri, ".hoodie", ".index_defs")
    os.makedirs(defs)
    with open(os.path.join(defs, "index.json"), "w") as f:  # a table upgraded from 8 keeps V1
        json.dump({"indexDefinitions": {"column_stats": {"indexName": "column_stats", "version": "V1"}}}, f)
    t9.update_properties({"hoodie.table.index.defs.path": ".hoodie/.index_defs/index.json"})
    t9 = Table.open(t9.base_uri)
    assert index_version(t9, "column_stats") == 1
    assert index_version(t9, "partition_stats") == 1  # its sibling's, as Java


def test_file_groups_from_storage_and_a_partition_without_any_refused(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], version=9)
    folder = os.path.join(t.base_uri, ".hoodie", "metadata", "column_stats")
    os.makedirs(folder)
    for name in (".col-stats-0001-0_00000000000000001.log.1_0-0-0", "..col-stats-0001-0_00000000000000001.log.1_0-0-0.crc",
                 "col-stats-0000-0_0-1-2_00000000000000001.hfile", ".hoodie_partition_metadata"):
        open(os.path.join(folder, name), "w").close()
    assert file_group_ids(t, "column_stats") == ["col-stats-0000-0", "col-stats-0001-0"]
    os.makedirs(os.path.join(t.base_uri, ".hoodie", "metadata", "partition_stats"))
    with pytest.raises(MetadataTableEnabledError) as refused:
        file_group_ids(t, "partition_stats")
    assert "partition_stats" in refused.value.message and refused.value.remedy


def test_a_metadata_table_without_stats_partitions_gets_no_stats_records(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], version=9)
    assert stats_blocks(t, MetadataTableState(partitions=("files",)), None, MetadataTableConfig()) == {}


def test_a_clean_writes_a_tombstone_per_column_of_each_deleted_file(tmp_path):
    t = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                     precombine_field="ts", version=8)
    ArrowTableWriter(t, WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
        pa.table({"id": [1], "p": ["a"], "ts": [1], "v": ["x"]}), "upsert")
    t = Table.open(t.base_uri)
    folder = os.path.join(t.base_uri, ".hoodie", "metadata", "column_stats")
    os.makedirs(folder)
    for group in ("0000", "0001"):
        open(os.path.join(folder, f".col-stats-{group}-0_00000000000000001.log.1_0-0-0"), "w").close()
    state = MetadataTableState(partitions=("column_stats", "files"))
    blocks = clean_stats_blocks(t, state, {"a": ["f1.parquet"]}, MetadataTableConfig())
    records = {k: r for group in blocks.values() for k, r in group.items()}
    columns = META + ["id", "p", "ts", "v"]
    assert set(records) == {column_stats_key("a", "f1.parquet", c) for c in columns}
    for (_, group), recs in blocks.items():
        assert all(f"col-stats-000{file_group_index(k, 2)}-0" == group for k in recs)
    stats = [r["ColumnStatsMetadata"] for r in records.values()]
    assert all(s["isDeleted"] and s["fileName"] == "f1.parquet" and s["valueType"] is None for s in stats)  # index v1
    assert clean_stats_blocks(t, MetadataTableState(partitions=("files",)), {"a": ["f1.parquet"]}, MetadataTableConfig()) == {}


def test_a_column_stats_record_of_a_log_file_counts_its_records(tmp_path):
    """A log file's ranges (the interop tests check them against Java's) are over the records of its
    data blocks (nulls counted, sizes 0), a log of deletes only has empty, untyped ranges."""
    path = str(tmp_path / "t")
    opts = {**FAST_WRITE_OPTIONS, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.table.name": "t"}
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                         table_type="MERGE_ON_READ")
    MergeOnReadWriter(table, WriteConfig.from_options(opts)).write(batch([(1, "a", 1, "x"), (2, "a", 1, "y")]),
                                                                   "insert")
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options(opts)).write(
        batch([(1, "a", 2, None), (2, "a", 2, "b")]), "upsert")
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options(opts)).write(batch([(1, "a", 3, "")]), "delete")
    logs = sorted((LogFileName.parse(n).instant_time, n) for n in os.listdir(os.path.join(path, "a"))
                  if LogFileName.parse(n))
    assert len(logs) == 2
    upsert = {r.column: r for r in log_file_ranges(Table.open(path), f"a/{logs[0][1]}", ["id", "v", "ts"])}
    assert (upsert["v"].min_value, upsert["v"].max_value, upsert["v"].null_count, upsert["v"].value_count) == \
        ("b", "b", 1, 2)
    assert (upsert["id"].value_type, upsert["id"].min_value, upsert["id"].max_value) == ("LONG", 1, 2)
    assert upsert["id"].total_size == 0
    deletes = log_file_ranges(Table.open(path), f"a/{logs[1][1]}", ["id", "v"])
    assert [(r.column, r.value_type, r.value_count) for r in deletes] == [("id", "NULL", 0), ("v", "NULL", 0)]


def test_a_log_file_with_dates_timestamps_decimals_and_binary(tmp_path):
    """Our merge-on-read writer's log file of logical types: the raw values Java's append handle
    records (days, the timestamp's unit since the epoch, the decimal at its scale), one file's
    strings in code point order and binary signed (Java's byte-for-byte records of the same
    types: tests/interop/test_java_metadata_stats_log_types.py)."""
    utc = datetime.timezone.utc
    path = str(tmp_path / "t")
    opts = {**FAST_WRITE_OPTIONS, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts", "hoodie.table.name": "t"}

    def rows(ns, ts):
        return pa.table({
            "id": pa.array(range(len(ns)), pa.int64()), "p": ["a"] * len(ns), "ts": pa.array([ts] * len(ns), pa.int64()),
            "v": [None if n is None else ("\U0001F600" if n % 2 else "\ue000") + str(n) for n in ns],
            "day": pa.array([None if n is None else datetime.date(1969, 12, 31) + datetime.timedelta(days=n)
                             for n in ns], pa.date32()),
            "at": pa.array([None if n is None else datetime.datetime(2026, 1, 1, 0, 0, n, 1000 * n, tzinfo=utc)
                            for n in ns], pa.timestamp("us", tz="UTC")),
            "ms": pa.array([None if n is None else datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc)
                            + datetime.timedelta(milliseconds=n) for n in ns], pa.timestamp("ms", tz="UTC")),
            "amt": pa.array([None if n is None else Decimal(f"{n - 5}.25") for n in ns], pa.decimal128(10, 2)),
            "raw": pa.array([None if n is None else bytes([n * 0x51 & 0xFF]) for n in ns], pa.binary())})

    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"], precombine_field="ts",
                         table_type="MERGE_ON_READ")
    MergeOnReadWriter(table, WriteConfig.from_options(opts)).write(rows([1, 2, 3], 1), "insert")
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options(opts)).write(rows([2, 7, None], 2), "upsert")
    [log] = [n for n in os.listdir(os.path.join(path, "a")) if LogFileName.parse(n)]
    found = {r.column: r for r in log_file_ranges(Table.open(path), f"a/{log}", ["v", "day", "at", "ms", "amt", "raw"])}
    assert {c: r.value_type for c, r in found.items()} == {
        "v": "STRING", "day": "DATE", "at": "TIMESTAMP_MICROS", "ms": "TIMESTAMP_MILLIS", "amt": "DECIMAL",
        "raw": "BYTES"}
    assert (found["day"].min_value, found["day"].max_value, found["day"].null_count) == (1, 6, 1)
    assert (found["at"].min_value, found["at"].max_value) == (1767225602002000, 1767225607007000)
    assert (found["ms"].min_value, found["ms"].max_value) == (-998, -993)  # before the epoch: negative millis
    assert (found["amt"].min_value, found["amt"].max_value, found["amt"].decimal) == \
        (Decimal("-3.25"), Decimal("2.25"), (10, 2))
    assert (found["v"].min_value, found["v"].max_value) == ("\ue0002", "\U0001F6007")  # code points
    assert (found["raw"].min_value, found["raw"].max_value) == (bytes([0xA2]), bytes([0x37]))  # signed
    assert found["v"].value_count == 3 and found["v"].null_count == 1


def test_a_log_column_of_a_type_without_log_stats_is_refused_naming_it(tmp_path):
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], table_type="MERGE_ON_READ")
    schema_json = json.dumps({"type": "record", "name": "r", "fields": [
        {"name": "id", "type": "long"}, {"name": "t", "type": ["null", {"type": "int", "logicalType": "time-millis"}]}]})
    name = LogFileName("f1-0", "00000000000000001", 1, "0-0-0").name
    with open(os.path.join(table.base_uri, name), "wb") as f:
        f.write(encode_blocks([avro_data_block("00000000000000001", schema_json,
                                               [{"id": 1, "t": datetime.time(0, 0, 1)}])]))
    with pytest.raises(UnsupportedColumnStatsTypeError) as refused:
        log_file_ranges(Table.open(table.base_uri), name, ["id", "t"])
    assert refused.value.column == "t" and "time-millis" in refused.value.message
    assert "column.list" in refused.value.remedy
