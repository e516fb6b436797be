"""Java Hudi reads tables with virtual keys (``hoodie.populate.meta.fields=false``) written by
our Spark engine, by each of its routes for new files, exactly as hudi-rs does: the model's
rows, every key once, no meta column in any base file (issue 31, item 3). Slow: a PySpark 4.2
session and a Java JVM (Spark 3.5) side by side."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.testing.java_hudi import Read
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key

pytestmark = pytest.mark.slow

COLS = ["id", "p", "ts", "v"]
ROUTES = {"pair_write": {}, "native_write": {"hoodie.combine.before.insert": "true"}}


@pytest.fixture(scope="module")
def written(tmp_path_factory, java_hudi, spark):
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    root = tmp_path_factory.mktemp("spark-virtual-keys")
    paths = {}
    for route, extra in ROUTES.items():
        path = str(root / route)
        w = SparkHudiWriter(spark, path, {
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.datasource.write.table.name": "t", "hoodie.write.table.version": "9",
            "hoodie.write.lock.provider": "filesystem", "hoodie.populate.meta.fields": "false",
            **extra})
        for lo, hi in ((0, 40), (40, 60)):
            w.write(spark.createDataFrame([(i, f"p{i % 3}", 1, f"v{i}") for i in range(lo, hi)],
                                          "id long, p string, ts long, v string"), "bulk_insert")
        paths[route] = path
    reads = dict(zip(paths, (r.rows for r in java_hudi.run(*[Read(p) for p in paths.values()]))))
    return paths, reads


@pytest.mark.parametrize("route", list(ROUTES))
def test_java_and_hudi_rs_read_spark_written_virtual_keys_exactly(written, route):
    paths, reads = written
    table = Table.open(paths[route])
    assert table.config.populates_meta_fields is False
    for s in FileSystemView(table).latest_file_slices():
        assert not set(pq.read_schema(table.storage.path(s.base_file.relative_path)).names) & set(META_COLUMNS)
    model = {i: {"id": i, "p": f"p{i % 3}", "ts": 1, "v": f"v{i}"} for i in range(60)}
    java = reads[route]
    assert java.num_rows == 60
    assert rows_by_key(java, columns=COLS) == model
    assert rows_by_key(hudi_read(paths[route]), columns=COLS) == model
