"""The Spark engine writes tables with virtual keys (``hoodie.populate.meta.fields=false``),
as the core writer does: base files with the user's columns alone, by each of its three
routes for new files (pyarrow in the input tasks, Spark's parquet writer, a Python task per
file group); hudi-rs reads exactly the rows written. Operations that look keys up refuse the
table before an instant exists, and the core writer carries on where the engine stops.
(Java Hudi's reads: tests/interop/test_java_reads_spark_virtual_keys.py.)
"""

from __future__ import annotations

import datetime as dt

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.errors import ConfigError
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.format.layout import META_COLUMNS
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS, hudi_read, rows_by_key

OPTS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.write.lock.provider": "filesystem",
        "hoodie.populate.meta.fields": "false"}
#: each route for new files: the pyarrow route (pair_write), Spark's writer (native_write: a
#: bulk_insert that combines), a Python task per file group (executor: a timestamp column)
ROUTES = {"pair_write": ({}, False), "native_write": ({"hoodie.combine.before.insert": "true"}, False),
          "executor": ({"hoodie.combine.before.insert": "true"}, True)}
COLS = ["id", "p", "ts", "v"]


def _df(spark, ids, ts, v, with_time=False):
    rows = [(i, f"p{i % 3}", ts, f"{v}{i}") + ((dt.datetime(2026, 1, 1, tzinfo=dt.timezone.utc),) if with_time else ())
            for i in ids]
    schema = "id long, p string, ts long, v string" + (", at timestamp" if with_time else "")
    return spark.createDataFrame(rows, schema)


def _base_files(table):
    return [s.base_file.relative_path for s in FileSystemView(table).latest_file_slices()]


@pytest.mark.parametrize("route", [pytest.param(r, marks=() if r == "pair_write" else pytest.mark.slow)
                                   for r in ROUTES])  # the default run: the bulk_insert's usual route
def test_bulk_insert_writes_virtual_keys_by_every_route(spark, tmp_path, route):
    extra, with_time = ROUTES[route]
    path = str(tmp_path / route)
    w = SparkHudiWriter(spark, path, {**OPTS, **extra})
    w.write(_df(spark, range(60), 1, "a", with_time), "bulk_insert")
    w.write(_df(spark, range(60, 90), 1, "b", with_time), "bulk_insert")
    table = Table.open(path)
    assert table.config.populates_meta_fields is False
    files = _base_files(table)
    assert len(files) >= 6  # two instants x three partitions
    for rel in files:
        names = pq.read_schema(table.storage.path(rel)).names
        assert not set(names) & set(META_COLUMNS), (rel, names)
    model = {i: {"id": i, "p": f"p{i % 3}", "ts": 1, "v": f"{'a' if i < 60 else 'b'}{i}"} for i in range(90)}
    assert rows_by_key(hudi_read(path), columns=COLS) == model


def test_lookups_refuse_the_table_before_an_instant_and_core_carries_on(spark, tmp_path):
    path = str(tmp_path / "t")
    SparkHudiWriter(spark, path, OPTS).write(_df(spark, range(30), 1, "a"), "bulk_insert")
    hoodie = tmp_path / "t" / ".hoodie"
    before = sorted(str(p.relative_to(hoodie)) for p in hoodie.rglob("*"))
    for op in ("upsert", "insert", "delete"):
        with pytest.raises(ConfigError) as e:
            SparkHudiWriter(spark, path, OPTS).write(_df(spark, range(5), 2, "x"), op)
        assert e.value.key == "hoodie.populate.meta.fields" and "ArrowTableWriter" in e.value.remedy
    assert sorted(str(p.relative_to(hoodie)) for p in hoodie.rglob("*")) == before  # no instant
    # the core writer upserts the Spark-written table, keeping virtual keys
    import pyarrow as pa
    ArrowTableWriter(Table.open(path), WriteConfig.from_options(FAST_WRITE_OPTIONS)).write(
        pa.table({"id": pa.array([1, 40], pa.int64()), "p": ["p1", "p1"], "ts": pa.array([2, 2], pa.int64()),
                  "v": ["up", "new"]}), "upsert")
    model = {i: {"id": i, "p": f"p{i % 3}", "ts": 1, "v": f"a{i}"} for i in range(30)}
    model[1] = {"id": 1, "p": "p1", "ts": 2, "v": "up"}
    model[40] = {"id": 40, "p": "p1", "ts": 2, "v": "new"}
    assert rows_by_key(hudi_read(path), columns=COLS) == model
    for rel in _base_files(Table.open(path)):
        assert not set(pq.read_schema(Table.open(path).storage.path(rel)).names) & set(META_COLUMNS)
