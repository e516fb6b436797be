"""Clustering executed with Spark, checked with hudi-rs: same rows, original commit times,
sorted new files; and the service job's exit codes when the clustering loses to ingestion."""

import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from airflow_hudi_occ.core.services.clustering import schedule_clustering
from airflow_hudi_occ.core.table.file_system_view import FileSystemView
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.clustering import SparkClusteringExecutor
from airflow_hudi_occ.core.job_protocol import EXIT_RETRYABLE, last_payload
from airflow_hudi_occ.spark.writer import SparkHudiWriter
from airflow_hudi_occ.testing.tables import SPARK_TEST_OPTIONS, hudi_read, rows_by_key

OPTS = {**SPARK_TEST_OPTIONS, "hoodie.parquet.small.file.limit": "0"}
SCHEMA = "id long, p string, ts long, v string"


def _small_files(spark, path, batches=3, per=6):
    w = SparkHudiWriter(spark, path, OPTS)
    for b in range(batches):
        rows = [(b * 100 + (50 if p == "b" else 0) + i, p, b, f"z{(per - i) % per}-{b}") for p in ("a", "b") for i in range(per)]
        w.write(spark.createDataFrame(rows, SCHEMA), "insert")


def test_spark_clustering_keeps_rows_and_commit_times_and_sorts(spark, tmp_path):
    path = str(tmp_path / "tbl")
    _small_files(spark, path)
    table = Table.open(path)
    before = hudi_read(path)
    times_before = dict(zip(before.column("id").to_pylist(), before.column("_hoodie_commit_time").to_pylist()))
    opts = {**OPTS, "hoodie.clustering.plan.strategy.sort.columns": "v"}
    t = schedule_clustering(table, opts)
    assert t is not None
    res = SparkClusteringExecutor(spark, path, opts).execute(t)
    assert res.instant == t and sum(len(v) for v in res.replaced.values()) == 6
    after = hudi_read(path)
    assert rows_by_key(after) == rows_by_key(before)
    assert dict(zip(after.column("id").to_pylist(), after.column("_hoodie_commit_time").to_pylist())) == times_before
    slices = FileSystemView(table).latest_file_slices()
    assert len(slices) == 2 and all(s.instant_time == t for s in slices)
    for s in slices:
        v = pq.read_table(os.path.join(path, s.base_file.relative_path)).column("v").to_pylist()
        assert v == sorted(v)
    # incremental after the clustering: nothing new was written
    assert hudi_read(path, start=res.completion_time).num_rows == 0


def _service_job(path, args, env_extra=None):
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable, **(env_extra or {}))
    cmd = [sys.executable, "-m", "airflow_hudi_occ.testing.spark_job", "--table", path] + args
    for k, v in OPTS.items():
        cmd += ["--option", f"{k}={v}"]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.slow
def test_service_job_clustering_yields_to_ingestion_under_prefer_writer(spark, tmp_path):
    """The clustering job (its own process) is held before its commit while ingestion updates
    the same file groups and commits; the clustering then exits 75 and is rolled back."""
    path = str(tmp_path / "tbl")
    _small_files(spark, path, batches=2)
    pw = {"hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}
    barrier = tmp_path / "barrier"
    p = _service_job(path, ["--service", "cluster"] + [a for k, v in pw.items() for a in ("--option", f"{k}={v}")],
                     {"HUDI_OCC_TEST_COMMIT_BARRIER": f"{barrier}:2"})
    import time
    deadline = time.time() + 240
    while not (barrier.exists() and os.listdir(barrier)) and time.time() < deadline:
        assert p.poll() is None, p.communicate()
        time.sleep(0.2)
    # the clustering has written its files and waits to commit: ingestion updates key 0
    res = SparkHudiWriter(spark, path, {**OPTS, **pw}).write(
        spark.createDataFrame([(0, "a", 9, "ingested")], SCHEMA), "upsert")
    (barrier / "ingestion").touch()
    out, err = p.communicate(timeout=240)
    assert p.returncode == EXIT_RETRYABLE, err[-3000:]
    result = last_payload(out)
    assert result["outcome"] == "conflict" and result["other_instant"] == res.instant
    rows = rows_by_key(hudi_read(path))
    assert rows[0]["v"] == "ingested" and len(rows) == 24
    tl = Table.open(path).timeline()
    assert not [i for i in tl if i.action.value in ("replacecommit", "clustering")]  # rolled back, plan included
    # and it can be scheduled again
    assert schedule_clustering(Table.open(path), {**OPTS, **pw}) is not None


def _mor_table_with_logs_and_a_plain_group(tmp_path, extra=None):
    """core's MOR table whose file group in ``a`` has a base file and two log files (1 updated,
    2 deleted), plus a second file group in ``a`` without log files (id 4): a plan over both
    reads one merged slice and one base file. (path, options, the model {id: v})."""
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS
    from tests.core.services.test_clustering import mor_table_with_an_update_and_a_delete
    from tests.interop.rows import batch
    path, opts = mor_table_with_an_update_and_a_delete(tmp_path, {**FAST_WRITE_OPTIONS, **(extra or {})})
    MergeOnReadWriter(Table.open(path), WriteConfig.from_options(opts)).write(batch([(4, "a", 1, "w")]), "insert")
    return path, opts, {1: "updated", 3: "z", 4: "w"}


def _readers(path) -> list[dict]:
    """{id: v} by our reader and hudi-rs (a duplicate key fails)."""
    from airflow_hudi_occ.core.table.mor_reader import read_snapshot
    return [{k: r["v"] for k, r in rows_by_key(t).items()}
            for t in (read_snapshot(Table.open(path)), hudi_read(path))]


def test_spark_clustering_merges_merge_on_read_slices_with_log_files(spark, tmp_path):
    """A merge-on-read file group whose latest slice has log files (an update, a delete) is
    clustered from its merged slice (core's merge on the executors), beside a file group
    without logs read by Spark's parquet reader: our reader and hudi-rs read the model after,
    the updated row keeps its update's commit time, and the new base files hold every row
    (no log file left in the new slices)."""
    from airflow_hudi_occ.core.table.mor_reader import merge_file_slices
    path, opts, model = _mor_table_with_logs_and_a_plain_group(tmp_path)
    assert _readers(path) == [model, model]
    times = {r["id"]: r["_hoodie_commit_time"] for r in hudi_read(path).to_pylist()}
    planned = schedule_clustering(Table.open(path), opts)
    res = SparkClusteringExecutor(spark, path, opts).execute(planned)
    assert sorted(res.replaced["a"]) and len(res.replaced["a"]) == 2
    assert sum(s.num_writes for s in res.stats) == 3  # the deleted row is not written back
    assert _readers(path) == [model, model]
    assert {r["id"]: r["_hoodie_commit_time"] for r in hudi_read(path).to_pylist()} == times
    new = merge_file_slices(Table.open(path))
    assert new and all(fs.base.instant_time == planned and not fs.log_files for fs in new)


def _upsert(path, options, rows):
    from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
    from airflow_hudi_occ.core.config import WriteConfig
    from tests.interop.rows import batch
    return MergeOnReadWriter(Table.open(path), WriteConfig.from_options(options)).write(batch(rows), "upsert")


PREFER_WRITER = {"hoodie.write.lock.conflict.resolution.strategy": "prefer-writer"}


def test_spark_clustering_yields_to_a_deltacommit_into_its_file_groups_after_the_plan(spark, tmp_path):
    """Hudi's rule for an upsert into a file group of a pending clustering plan: Reject (the
    default, except under prefer-writer) refuses it before it writes, and the clustering
    commits the merged slices; under prefer-writer (Allow) the upsert writes its log file and
    commits after the plan, before the clustering starts: the clustering's merged read takes
    that log in, but the plan's snapshot does not include it (Java reads only the plan's log
    files), so the clustering loses at its commit, rolled back with its plan, and every reader
    keeps the update."""
    from airflow_hudi_occ.core.errors import PendingClusteringConflictError, WriteConflictError
    path, opts, model = _mor_table_with_logs_and_a_plain_group(tmp_path)
    planned = schedule_clustering(Table.open(path), opts)
    with pytest.raises(PendingClusteringConflictError):  # Reject: nothing written
        _upsert(path, opts, [(3, "a", 5, "refused")])
    assert _readers(path) == [model, model]
    SparkClusteringExecutor(spark, path, opts).execute(planned)
    assert _readers(path) == [model, model]

    pw = {**opts, **PREFER_WRITER}
    _upsert(path, pw, [(3, "a", 6, "logged")])  # the clustered file group gets a log file again
    model[3] = "logged"
    planned = schedule_clustering(Table.open(path), pw)
    before = _upsert(path, pw, [(1, "a", 7, "before")])  # completes after the plan, before its read
    model[1] = "before"
    with pytest.raises(WriteConflictError) as ei:
        SparkClusteringExecutor(spark, path, pw).execute(planned)
    assert ei.value.other_instant == before.instant.requested_time
    assert Table.open(path).timeline().get(planned) is None
    assert _readers(path) == [model, model]


@pytest.mark.slow
def test_spark_clustering_yields_to_a_deltacommit_that_completes_while_it_runs(spark, tmp_path):
    """Prefer-writer: the clustering has read the merged slices (without the upsert's log
    file) when a deltacommit into one of its file groups completes; the clustering loses at
    its commit and the update is kept; scheduled again, it merges the new log and commits."""
    from airflow_hudi_occ.core.errors import WriteConflictError
    path, opts, model = _mor_table_with_logs_and_a_plain_group(tmp_path, PREFER_WRITER)
    planned = schedule_clustering(Table.open(path), opts)
    done = {}

    def ingest_first(tx):
        done["w"] = _upsert(path, opts, [(3, "a", 6, "during")])
    with pytest.raises(WriteConflictError) as ei:
        SparkClusteringExecutor(spark, path, opts).execute(planned, before_commit=ingest_first)
    assert ei.value.other_instant == done["w"].instant.requested_time
    model[3] = "during"
    assert Table.open(path).timeline().get(planned) is None
    assert _readers(path) == [model, model]
    planned = schedule_clustering(Table.open(path), opts)
    SparkClusteringExecutor(spark, path, opts).execute(planned)
    assert _readers(path) == [model, model]
