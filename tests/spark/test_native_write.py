"""New file groups written by Spark's own parquet writer (spark/native_write.py): Hudi names and
meta columns, markers before data, rollback of published files, the Python route where the
native one does not apply. hudi-rs is the reader throughout."""

import os

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.concurrency.markers.write_markers import markers_for
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark import native_write
from airflow_hudi_occ.spark.errors import SparkWriteError
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import hudi_read

SCHEMA = "id long, p string, ts long, v string"
OPTS = {"hoodie.datasource.write.recordkey.field": "id",
        "hoodie.datasource.write.partitionpath.field": "p",
        "hoodie.datasource.write.precombine.field": "ts",
        "hoodie.datasource.write.table.name": "tbl",
        "hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2",
        "hoodie.parquet.max.file.size": "3000",
        "hoodie.copyonwrite.record.size.estimate": "100"}


def _rows(n, ts=1, v="x"):
    return [(i, "ab"[i % 2], ts, f"{v}{i}") for i in range(n)]


def test_bulk_insert_files_carry_hudi_names_meta_columns_and_one_record_per_key(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    seen = {}
    real_job = native_write.write_job

    def job(spark_, records, cols, instant, names, out, **kw):
        action = real_job(spark_, records, cols, instant, names, out, **kw)

        def checked():  # markers before data: every file group's marker exists when the job starts
            seen["markers"] = set(markers_for(Table.open(path), instant).data_files())
            seen["names"] = {f"{p}/{n}" for (p, _), n in names.items()}
            return action()
        return checked
    monkeypatch.setattr(native_write, "write_job", job)
    # 60 keys, 10 of them twice: combined on request, the larger ts wins
    rows = _rows(60) + [(i, "ab"[i % 2], 5, f"dup{i}") for i in range(10)]
    res = SparkHudiWriter(spark, path, {**OPTS, "hoodie.combine.before.insert": "true"}).write(
        spark.createDataFrame(rows, SCHEMA), "bulk_insert")
    assert seen["markers"] == seen["names"] and len(seen["names"]) >= 2  # several file groups
    got = hudi_read(path).to_pylist()
    assert sorted(r["id"] for r in got) == list(range(60))
    assert {r["id"]: r["v"] for r in got if r["id"] < 12} == {**{i: f"dup{i}" for i in range(10)},
                                                              10: "x10", 11: "x11"}
    assert {r["_hoodie_commit_time"] for r in got} == {res.instant}
    assert len({r["_hoodie_commit_seqno"] for r in got}) == 60
    for r in got:
        assert r["_hoodie_partition_path"] == r["p"] and r["_hoodie_record_key"] == str(r["id"])
        assert os.path.exists(os.path.join(path, r["p"], r["_hoodie_file_name"]))
    files = [bf for p in "ab" for bf in list_base_files(Table.open(path), p)]
    assert sorted(s.path for s in res.stats) == sorted(bf.relative_path for bf in files)
    assert sum(s.num_writes for s in res.stats) == 60
    for bf in files:  # every column nullable, as the Python route writes them
        schema = pq.read_schema(os.path.join(path, bf.relative_path))
        assert all(f.nullable for f in schema)
    assert not os.path.exists(os.path.join(path, ".hoodie", ".temp", res.instant))


def test_a_failure_after_publishing_rolls_the_files_back(spark, tmp_path, monkeypatch):
    path = str(tmp_path / "t")
    w = SparkHudiWriter(spark, path, OPTS)
    w.write(spark.createDataFrame(_rows(10), SCHEMA), "bulk_insert")
    before = sorted((r["id"], r["v"]) for r in hudi_read(path).to_pylist())
    real = native_write.publish
    published = []

    def publish_then_fail(table, instant, names, out, started, **kw):
        published.extend(real(table, instant, names, out, started, **kw))
        raise RuntimeError("driver failure after publishing")
    monkeypatch.setattr(native_write, "publish", publish_then_fail)
    with pytest.raises(SparkWriteError):
        w.write(spark.createDataFrame(_rows(20, ts=2, v="y"), SCHEMA), "insert_overwrite")
    assert published  # files were in place before the failure ...
    for s in published:  # ... and the rollback (from the markers) removed every one
        assert not os.path.exists(os.path.join(path, s.path))
    assert sorted((r["id"], r["v"]) for r in hudi_read(path).to_pylist()) == before
    assert not [n for n in os.listdir(os.path.join(path, ".hoodie", ".temp")) if n.startswith("2")]


def test_only_new_file_groups_of_a_local_table_without_timestamps_take_the_native_route():
    from pyspark.sql import types as T
    local = type("T", (), {"storage": type("S", (), {"is_local": True})()})()
    remote = type("T", (), {"storage": type("S", (), {"is_local": False})()})()
    plain = T.StructType([T.StructField("id", T.LongType())])
    nested_ts = T.StructType([T.StructField("id", T.LongType()), T.StructField(
        "s", T.ArrayType(T.StructType([T.StructField("at", T.TimestampType())])))])
    assert native_write.applies(local, "create", plain)
    assert not native_write.applies(local, "merge", plain)  # merges need the previous file
    assert not native_write.applies(local, "append", plain)  # small-file top-ups too
    assert not native_write.applies(remote, "create", plain)
    assert not native_write.applies(local, "create", nested_ts)  # Spark would write INT96


def test_a_batch_without_duplicates_is_written_by_its_input_tasks_without_a_shuffle(spark, tmp_path, monkeypatch):
    """Each input task writes file groups of its own (Hudi's bulk_insert without a sort mode):
    here task 0 holds partition a and task 1 partition b, so the plan by task is the sized one."""
    from airflow_hudi_occ.spark import file_group_plan, tagging
    path = str(tmp_path / "t")
    df = spark.range(0, 60, numPartitions=2).selectExpr(
        "id", "if(id < 30, 'a', 'b') as p", "cast(1 as bigint) as ts", "concat('x', cast(id as string)) as v")
    opts = {**OPTS, "hoodie.parquet.max.file.size": "2000",  # 20 records a file
            "hoodie.combine.before.insert": "true"}
    keyed = tagging.keyed(df, ["id"], ["p"], False)
    by_pair = tagging.count_by_task(keyed)
    assert sorted((p, t, n, d) for p, t, n, d in by_pair) == [("a", 0, 30, 1), ("b", 1, 30, 1)]
    real, plans = file_group_plan.plan_by_task, []
    monkeypatch.setattr(file_group_plan, "plan_by_task", lambda *a: plans.append(real(*a)) or plans[-1])
    res = SparkHudiWriter(spark, path, opts).write(df, "bulk_insert")
    assert plans[0] is not None  # planned by task: the write job has no shuffle
    got = hudi_read(path).to_pylist()
    assert sorted(r["id"] for r in got) == list(range(60))
    assert all(r["v"] == f"x{r['id']}" and r["p"] == ("a" if r["id"] < 30 else "b") for r in got)
    assert sorted(s.partition_path for s in res.stats) == ["a", "a", "b", "b"]  # 2 x 20 >= 30
    assert sum(s.num_writes for s in res.stats) == 60
    # with a duplicate key the batch takes the shuffle, and the copies are combined
    dup = df.unionByName(df.where("id = 3").selectExpr("id", "p", "cast(9 as bigint) as ts", "'again' as v"))
    assert max(d for *_, d in tagging.count_by_task(tagging.keyed(dup, ["id"], ["p"], False))) == 2
    SparkHudiWriter(spark, str(tmp_path / "d"), opts).write(dup, "bulk_insert")
    assert plans[-1] is None
    got = {r["id"]: r["v"] for r in hudi_read(str(tmp_path / "d")).to_pylist()}
    assert len(got) == 60 and got[3] == "again"


@pytest.mark.parametrize("op,combine", [("insert_overwrite", "true"),
                                        pytest.param("bulk_insert", "true", marks=pytest.mark.slow),
                                        ("bulk_insert", "false")])
def test_a_small_driver_side_frame_over_two_partitions_is_written_whole(spark, tmp_path, op, combine):
    """A frame made from pandas (a LocalRelation) whose rows alternate between two partitions:
    the plan by input task counted every row in task 0 (Spark's optimizer folds
    ``spark_partition_id()`` over such a frame on the driver) while the write job's scan spread
    them over two tasks. insert_overwrite and a combining bulk_insert failed with ``Spark wrote
    2 files for file group``; a bulk_insert that does not combine (pair_write) committed 4 of
    its 9 rows. Now every row is written, one base file per file group."""
    import pandas as pd
    path = str(tmp_path / "t")
    w = SparkHudiWriter(spark, path, {**OPTS, "hoodie.parquet.max.file.size": str(120 * 1024 * 1024),
                                      "hoodie.combine.before.insert": combine})
    w.write(spark.createDataFrame(_rows(4), SCHEMA), "insert")
    rows = [(100 + i, "ab"[i % 2], 5, f"n{i}") for i in range(9)]
    df = spark.createDataFrame(pd.DataFrame(rows, columns=["id", "p", "ts", "v"]))
    assert df.rdd.getNumPartitions() == 2
    res = w.write(df, op)
    got = {r["id"]: r["v"] for r in hudi_read(path).to_pylist()}
    expected = {r[0]: r[3] for r in rows}
    if op == "bulk_insert":
        expected.update({i: f"x{i}" for i in range(4)})
    assert got == expected
    assert sum(s.num_writes for s in res.stats) == 9
    assert len({s.file_id for s in res.stats}) == len(res.stats)  # one base file per file group
