"""The Spark engine's copy-on-write commits keep Java's column and partition stats (issue 32,
item 2): a table Java wrote at its defaults (``files``, ``column_stats``, ``partition_stats``,
a timestamp and decimals among the columns), upserted by the Spark engine with
``hoodie.occ.metadata.files.maintain=true``.

The Spark engine commits through the core transaction (spark/writer.py), which writes the
stats of the files the executors wrote from their footers, as for the core writer; the job's
preflight (spark/job.py) judges the table as that commit will (``stats_writer``) instead of
refusing it before Spark starts. What must hold: Java's snapshot and its reads with data
skipping (timestamp, decimal) are exact; Java's next writer adds one deltacommit (no rebuild);
Java's metadata checks pass.
"""

from __future__ import annotations

import os
import types

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import read_table
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.job import preflight
from airflow_hudi_occ.testing.java_hudi import MetadataCheck, Read, Write
from tests.interop.test_java_metadata_stats import MAINTAIN, SKIPPING, assert_java_metadata_agrees
from tests.interop.test_java_metadata_stats_types import INDEXED, ORDER, mdt_kinds, model_of, plain, typed
from tests.interop.test_java_metadata_table import KEYS, metadata_partitions

SPARK_KEYS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
              "hoodie.datasource.write.precombine.field": "ts", "hoodie.datasource.write.table.name": "t"}


@pytest.mark.slow  # a Spark write and seven Java steps: 2 to 3 minutes here (the default run checks the
# preflight in tests/spark/test_job.py and the stats of every type in test_java_metadata_stats_types)
@pytest.mark.parametrize("version", [9])
def test_java_reads_filters_and_checks_the_stats_the_spark_engine_keeps(tmp_path, java_hudi, spark, version):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    path = str(tmp_path / "t")
    first = typed([(i, "a" if i % 2 else "b", 1, i) for i in range(6)])
    java_hudi.run(Write(path, first, operation="insert", table_version=version, **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]

    ours = typed([(1, "a", 2, 40), (9, "c", 2, 50), (10, "c", 2, None)])
    source = str(tmp_path / "ours.parquet")
    pq.write_table(ours, source)
    options = {**MAINTAIN, **SPARK_KEYS}
    # the job's check before its Spark session: a copy-on-write upsert keeps the stats
    preflight(types.SimpleNamespace(table=path, operation="upsert", source=source, source_format="parquet"), options)
    res = SparkHudiWriter(spark, path, options).write(spark.read.parquet(source), "upsert")
    assert res.outcome == "committed"
    model = {**model_of(first), **model_of(ours)}
    stats_logs = [p for p in ("column_stats", "partition_stats")
                  if any(f"_{res.instant}.log." in n for n in _names(path, p))]
    assert stats_logs == ["column_stats", "partition_stats"]  # the commit wrote both

    more = typed([(3, "a", 4, 30)])
    snap, by_time, by_amount, written, check = java_hudi.run(
        Read(path), Read(path, options=SKIPPING, where="at = TIMESTAMP '2026-01-01 00:00:50.05'"),
        Read(path, options=SKIPPING, where="amt >= 38.00"), Write(path, more, **KEYS),
        MetadataCheck(path, INDEXED[version]))
    assert plain(snap.rows) == model
    assert plain(by_time.rows) == {9: model[9]}
    assert plain(by_amount.rows) == {1: model[1], 9: model[9]}
    model.update(model_of(more))
    assert plain(read_table(Table.open(path))) == model
    assert mdt_kinds(path, written) == ["deltacommit"]  # no rebuild
    assert_java_metadata_agrees(check.metadata_check(), path, INDEXED[version], ORDER)


def _names(path: str, partition: str) -> list[str]:
    import os
    return os.listdir(os.path.join(path, ".hoodie", "metadata", partition))


def test_spark_clustering_of_a_java_merge_on_read_table_merges_its_log_files(tmp_path, java_hudi, spark):
    """A merge-on-read table Java wrote at its defaults (metadata table with ``files``,
    ``column_stats``, ``partition_stats``), with an update and a delete in Java's log files,
    clustered by the Spark engine: the clustered file groups come from their merged slices
    (spark/reader.read_merged_slices), so Java's snapshot read (and its data-skipping read),
    hudi-rs and our reader all equal the serial replay; the metadata table's listing is the
    storage and Java's metadata checks pass (listing, column and partition stats)."""
    from airflow_hudi_occ.core.format.log_file import LogFileName
    from airflow_hudi_occ.core.table.mor_reader import read_snapshot
    from airflow_hudi_occ.spark.clustering import SparkClusteringExecutor
    from airflow_hudi_occ.core.services.clustering import schedule_clustering
    from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
    from tests.interop.rows import COLS, apply, batch
    from tests.interop.test_java_metadata_every_action import MAINTAIN as EVERY_ACTION
    from tests.interop.test_java_metadata_stats_actions import check_step

    path = str(tmp_path / "t")
    first = [(i, "a" if i % 2 else "b", 1, f"java{i}") for i in range(8)]
    update, delete = [(1, "a", 2, "java-upd-one"), (2, "b", 2, "java-upd-two")], [(3, "a", 3, "")]
    java_hudi.run(Write(path, batch(first), operation="insert", table_type="MERGE_ON_READ", **KEYS),
                  Write(path, batch(update), **KEYS), Write(path, batch(delete), operation="delete", **KEYS))
    assert metadata_partitions(path) == ["column_stats", "files", "partition_stats"]
    model = apply(apply(apply({}, first, "insert"), update, "upsert"), delete, "delete")
    logs = [n for p in ("a", "b") for n in os.listdir(os.path.join(path, p)) if LogFileName.parse(n)]
    assert len(logs) >= 3  # the updates and the delete are in Java's log files

    options = {**EVERY_ACTION, **SPARK_KEYS}
    planned = schedule_clustering(Table.open(path), options)
    res = SparkClusteringExecutor(spark, path, options).execute(planned)
    assert sorted(res.replaced) == ["a", "b"]
    for t in (read_snapshot(Table.open(path)), hudi_read(path)):
        assert rows_by_key(t, columns=COLS) == model
    check_step(java_hudi, path, model, "spark clustering", "v = 'java-upd-one' or v = 'java4'", {1, 4})
