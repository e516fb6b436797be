"""Spark readers against hudi-rs: snapshot, time travel, incremental by completion time."""

import pyarrow as pa

from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.compat import to_arrow
from airflow_hudi_occ.spark.reader import read_incremental, read_snapshot
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import hudi_read

SCHEMA = "id long, p string, ts long, v string"
OPTS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
COLS = ["_hoodie_commit_time", "_hoodie_record_key", "id", "p", "ts", "v"]


def rows(df_or_table):
    t = df_or_table if isinstance(df_or_table, pa.Table) else to_arrow(df_or_table)
    if t.num_rows == 0:
        return []
    return sorted(tuple(r[c] for c in COLS) for r in t.select(COLS).to_pylist())


def test_readers_match_hudi_rs(spark, tmp_path):
    path = str(tmp_path / "tbl")
    w = SparkHudiWriter(spark, path, OPTS)
    r1 = w.write(spark.createDataFrame([(i, "ab"[i % 2], 1, "one") for i in range(10)], SCHEMA), "upsert")
    r2 = w.write(spark.createDataFrame([(i, "ab"[i % 2], 2, "two") for i in range(5, 15)], SCHEMA), "upsert")
    r3 = w.write(spark.createDataFrame([(i, "ab"[i % 2], 1, "x") for i in range(0, 4)], SCHEMA), "delete")
    assert rows(read_snapshot(spark, path)) == rows(hudi_read(path))
    assert len(rows(read_snapshot(spark, path))) == 11
    for r in (r1, r2, r3):
        assert rows(read_snapshot(spark, path, as_of=r.instant)) == rows(hudi_read(path, as_of=r.instant))
    tl = Table.open(path).timeline()
    c = {i.requested_time: i.completion_time for i in tl.completed()}
    windows = [(None, c[r1.instant]), (c[r1.instant], c[r2.instant]), (c[r1.instant], c[r3.instant]),
               (c[r2.instant], None)]
    for start, end in windows:
        want = rows(hudi_read(path, start=start or "0", end=end))
        assert rows(read_incremental(spark, path, start=start, end=end)) == want, (start, end)
    assert rows(read_incremental(spark, path, start=c[r1.instant], end=c[r2.instant]))  # not vacuous


def test_the_snapshot_reader_lists_files_through_the_metadata_table(spark, tmp_path, monkeypatch):
    """On Java's v9 table (metadata table on): no partition folder listed, the same rows as
    with hoodie.metadata.enable=false (core/table/file_listing.py)."""
    # not through tests/core/table/test_file_listing: it imports the S3 server's tests, whose
    # Airflow helpers a Spark line's venv does not have (its suite runs this file)
    from airflow_hudi_occ.testing.tables import ListCalls, java_fixture
    path = str(java_fixture("v9_txns_simple_overwrite", tmp_path))
    calls = ListCalls(monkeypatch)
    through_mdt = to_arrow(read_snapshot(spark, path))
    assert calls.of_data(Table.open(path)) == []
    through_storage = to_arrow(read_snapshot(spark, path, options={"hoodie.metadata.enable": "false"}))
    assert len(calls.of_data(Table.open(path))) == 4
    ids = sorted(through_mdt.column("txn_id").to_pylist())
    assert ids and ids == sorted(through_storage.column("txn_id").to_pylist())
    assert ids == sorted(hudi_read(path).column("txn_id").to_pylist())


def test_read_merged_slices_is_cores_merge_on_the_executors(spark, tmp_path):
    """The merged rows of merge-on-read slices with log files (an update, a delete), read by
    executor tasks, are core's snapshot of them (the one merge), each row named by its slice;
    a column the slices lack reads as null."""
    from pyspark.sql.types import StringType, StructField, StructType

    from airflow_hudi_occ.core.table.mor_reader import merge_file_slices, read_snapshot
    from airflow_hudi_occ.spark.reader import read_merged_slices
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
    from tests.core.services.test_clustering import mor_table_with_an_update_and_a_delete
    path, _ = mor_table_with_an_update_and_a_delete(tmp_path, FAST_WRITE_OPTIONS)
    table = Table.open(path)
    [fs] = merge_file_slices(table)
    assert len(fs.log_files) == 2
    base = spark.read.parquet(f"{path}/{fs.base.base_file.relative_path}").schema
    schema = StructType(base.fields + [StructField("added", StringType(), True)])
    got = to_arrow(read_merged_slices(spark, table, [fs], schema, file_column="src", names=["slice-0"]))
    assert rows(got) == rows(read_snapshot(table)) and len(rows(got)) == 2
    assert set(got.column("src").to_pylist()) == {"slice-0"} and got.column("added").null_count == 2
