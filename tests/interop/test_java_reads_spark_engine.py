"""Java Hudi reads tables written by our Spark engine (``SparkHudiWriter``, PySpark 4.2):
COW and MOR at version 8 and 9, after an insert, an upsert and a delete. Java's snapshot must
equal the model, and its read-optimised read hudi-rs's. Slow: a PySpark 4.2 session and a Java
JVM (Spark 3.5) side by side, 1 GiB each."""

from __future__ import annotations

import pytest

from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.testing.java_hudi import Read
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

pytestmark = pytest.mark.slow

COLS = ["id", "p", "ts", "v"]
SCHEMA = "id long, p string, ts long, v string"
KINDS = [("COPY_ON_WRITE", 8), ("COPY_ON_WRITE", 9), ("MERGE_ON_READ", 8), ("MERGE_ON_READ", 9)]
WRITES = [([(i, "a" if i % 2 else "b", 1, f"v{i}") for i in range(6)], "insert"),
          ([(1, "a", 2, "one"), (6, "b", 2, "six")], "upsert"),
          ([(4, "b", 3, "x")], "delete")]


@pytest.fixture(scope="module")
def written(tmp_path_factory, java_hudi, spark):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    root = tmp_path_factory.mktemp("spark-engine")
    paths, model = {}, {}
    for rows, op in WRITES:
        for r in rows:
            model.pop(r[0], None) if op == "delete" else model.__setitem__(r[0], dict(zip(COLS, r)))
    for table_type, version in KINDS:
        path = str(root / f"{table_type.lower()}_v{version}")
        writer = SparkHudiWriter(spark, path, {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.name": "t",
            "hoodie.datasource.write.table.type": table_type,
            "hoodie.write.table.version": str(version),
            "hoodie.write.lock.provider": "filesystem",
            "hoodie.time.generator.max_expected_clock_skew_ms": "2"})
        for rows, op in WRITES:
            writer.write(spark.createDataFrame(rows, SCHEMA), op)
        paths[table_type, version] = path
    steps = [Read(p, query=q) for p in paths.values() for q in ("snapshot", "read_optimized")]
    results = iter(java_hudi.run(*steps))
    reads = {(kind, q): next(results).rows for kind in paths for q in ("snapshot", "read_optimized")}
    return paths, model, reads


@pytest.mark.parametrize("kind", KINDS, ids=[f"{t[:3].lower()}-v{v}" for t, v in KINDS])
def test_java_reads_our_spark_engine_tables(written, kind):
    paths, model, reads = written
    config = Table.open(paths[kind]).config
    assert (config.table_type, config.version) == kind
    assert rows_by_key(reads[kind, "snapshot"], columns=COLS) == model
    assert rows_by_key(hudi_read(paths[kind]), columns=COLS) == model
    assert rows_by_key(reads[kind, "read_optimized"], columns=COLS) == \
        rows_by_key(hudi_read(paths[kind], read_optimized=True), columns=COLS)
