"""spark/compat.py: the engine's PySpark 3.5 route for ``applyInArrow`` gives what 4.x gives.

The 3.5 route runs here on the real PySpark 4.2 session (forced by ``has_apply_in_arrow``
returning False): ``mapInArrow`` and ``repartition`` behave the same on both; the run on a
real Spark 3.5.5 is bench/same_spark.py's smoke test (tests/bench, slow).
"""

from __future__ import annotations

from collections import Counter
from typing import Iterator, Tuple

import pyarrow as pa
import pytest

from airflow_hudi_occ.spark import compat


def _count_groups(key, batches):
    rows = sum(b.num_rows for b in batches)
    yield pa.RecordBatch.from_pydict({"p": [key[0].as_py()], "f": [key[1].as_py()], "n": [rows]},
                                     schema=GROUP_SCHEMA)


# the iterator form of applyInArrow, picked by PySpark 4 from real type hints (as executor.py)
_count_groups.__annotations__ = {"key": Tuple[pa.Scalar, ...], "batches": Iterator[pa.RecordBatch],
                                 "return": Iterator[pa.RecordBatch]}
GROUP_SCHEMA = pa.schema([("p", pa.string()), ("f", pa.int32()), ("n", pa.int64())])


def test_runs_of_keys_split_across_batches_and_nulls_are_one_group_each():
    batches = [pa.RecordBatch.from_pydict({"p": ["a", "a", "b"], "f": [1, 1, 1], "x": [0, 1, 2]}),
               pa.RecordBatch.from_pydict({"p": ["b", "b", None], "f": [1, 2, None], "x": [3, 4, 5]}),
               pa.RecordBatch.from_pydict({"p": [None, "c"], "f": [None, 1], "x": [6, 7]})]
    out = pa.Table.from_batches(list(compat.by_runs_of_keys(_count_groups, ["p", "f"])(iter(batches))))
    assert out.to_pylist() == [{"p": "a", "f": 1, "n": 2}, {"p": "b", "f": 1, "n": 2},
                               {"p": "b", "f": 2, "n": 1}, {"p": None, "f": None, "n": 2},
                               {"p": "c", "f": 1, "n": 1}]
    assert list(compat.by_runs_of_keys(_count_groups, ["p", "f"])(iter([]))) == []


def test_to_arrow_schema_gives_utc_timestamps():
    from pyspark.sql import types as T
    sch = compat.to_arrow_schema(T.StructType([T.StructField("t", T.TimestampType())]))
    assert sch.field("t").type == pa.timestamp("us", tz="UTC")


@pytest.mark.parametrize("route", ["applyInArrow", "mapInArrow (3.5)"])
def test_both_routes_group_every_row_once_on_real_spark(spark, monkeypatch, route):
    if route != "applyInArrow":
        monkeypatch.setattr(compat, "has_apply_in_arrow", lambda: False)
    df = spark.range(5000).selectExpr("concat('p', cast(id % 3 as string)) as p",
                                      "cast(id % 7 as int) as f", "id as x").repartition(3)
    rows = compat.apply_in_arrow(df, ("p", "f"), _count_groups, "p string, f int, n long").collect()
    got = {(r.p, r.f): r.n for r in rows}
    assert len(rows) == len(got) == 21
    assert got == dict(Counter((f"p{i % 3}", i % 7) for i in range(5000)))


def test_an_upsert_through_the_3_5_route_matches_the_model(spark, tmp_path, monkeypatch):
    monkeypatch.setattr(compat, "has_apply_in_arrow", lambda: False)
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    from airflow_hudi_occ.testing.tables import hudi_read
    opts = {"hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "p",
            "hoodie.datasource.write.precombine.field": "ts",
            "hoodie.write.lock.provider": "filesystem"}
    path = str(tmp_path / "t")
    base = spark.range(400).selectExpr("id", "concat('p', cast(id % 4 as string)) as p",
                                       "cast(1 as bigint) as ts", "'old' as v")
    SparkHudiWriter(spark, path, opts).write(base, "bulk_insert")
    up = spark.range(300, 500).selectExpr("id", "concat('p', cast(id % 4 as string)) as p",
                                          "cast(2 as bigint) as ts", "'new' as v")
    res = SparkHudiWriter(spark, path, opts).write(up, "upsert")
    assert res.summary()["updates"] == 100 and res.summary()["inserts"] == 100
    got = {r["id"]: r["v"] for r in hudi_read(path).to_pylist()}
    assert got == {i: ("new" if i >= 300 else "old") for i in range(500)}


def test_one_task_per_item_returns_each_items_result_in_order_from_its_own_task(spark):
    """``task_per_item`` (what ``parallelize(items, n).map(fn)`` did, without an RDD, so it
    runs on Spark Connect too): one task per item, results in the items' order."""
    def task(item):
        from pyspark import TaskContext
        return (item, TaskContext.get().partitionId())
    got = compat.task_per_item(spark, ["a", "b", "c", "d", "e"], task)()
    assert [g[0] for g in got] == ["a", "b", "c", "d", "e"]
    assert sorted(g[1] for g in got) == [0, 1, 2, 3, 4]  # a task each
    assert compat.task_per_item(spark, [], task)() == []


def test_a_classic_session_is_not_connect_and_its_parallelism_is_the_contexts(spark):
    assert compat.is_connect(spark) is False
    assert compat.default_parallelism(spark) == spark.sparkContext.defaultParallelism == 2


@pytest.mark.parametrize("version, native", [("3.5.5", False), ("4.0.5", False), ("4.1.4", True), ("4.2.0", True)])
def test_apply_in_arrow_is_pysparks_own_only_where_it_takes_batches(monkeypatch, version, native):
    """PySpark added the iterator-of-batches form of ``applyInArrow`` in 4.1; 3.5 and 4.0 take
    the ``mapInArrow`` route (4.0's applyInArrow hands the function a whole ``pa.Table``)."""
    import pyspark
    from pyspark.sql.group import GroupedData
    if native and not hasattr(GroupedData, "applyInArrow"):
        pytest.skip(f"PySpark {pyspark.__version__} has no GroupedData.applyInArrow at all: "
                    "the version gate is tested on the 4.x lines")
    monkeypatch.setattr(pyspark, "__version__", version)
    assert compat.has_apply_in_arrow() is native


@pytest.mark.parametrize("version, bounded", [("3.5.5", False), ("4.0.5", True), ("4.2.0", True)])
def test_an_arrow_batch_is_bounded_by_its_bytes_from_spark_4(version, bounded):
    """spark.sql.execution.arrow.maxBytesPerBatch came with Spark 4.0: on 3.5 a batch's only
    bound is its row count (session.arrow_batches keeps it there)."""
    from types import SimpleNamespace
    assert compat.bounds_arrow_batch_bytes(SimpleNamespace(version=version)) is bounded
