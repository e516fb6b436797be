"""Compaction executed by Spark (one task per file slice): the same table as core's Arrow
executor gives, read exactly by hudi-rs; a Spark compaction killed mid-way is re-run."""

from __future__ import annotations

import pytest

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.commit.mor_writer import MergeOnReadWriter
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.services.compaction import execute_compaction, schedule_compaction
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.spark.compaction import SparkCompactionExecutor
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from tests.spark.test_mor_writer import hudi_read_optimized

OPTS = {"hoodie.write.lock.provider": "filesystem",
        "hoodie.write.lock.client.wait_time_ms_between_retry": "50",
        "hoodie.time.generator.max_expected_clock_skew_ms": "1",
        "hoodie.client.heartbeat.interval_in_ms": "300",
        "hoodie.client.heartbeat.tolerable.misses": "2"}


def _mor_table(path: str) -> tuple[Table, dict]:
    """Base files in partitions a, b, c; then upserts and a delete as log files."""
    table = Table.create(path, "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(table, WriteConfig.from_options(OPTS))
    model = {}
    for i in range(3):
        rows = [{"id": k, "p": "abc"[k % 3], "ts": i, "v": f"v{i}"} for k in range(12) if i == 0 or k % (i + 1) == 0]
        w.write(pa.Table.from_pylist(rows))
        model.update({r["id"]: r for r in rows})
    w.write(pa.Table.from_pylist([{"id": 4, "p": "b"}, {"id": 5, "p": "c"}]), "delete")
    model.pop(4), model.pop(5)
    return table, model


def _read(path: str, ro: bool = False) -> dict:
    return rows_by_key(hudi_read_optimized(path) if ro else hudi_read(path),
                       columns=["id", "p", "ts", "v", "_hoodie_commit_time", "_hoodie_commit_seqno"])


def test_spark_compaction_equals_the_arrow_executor_and_hudi_rs_reads_it(spark, tmp_path):
    table, model = _mor_table(str(tmp_path / "arrow"))
    plan = schedule_compaction(table, OPTS, force=True)
    assert plan is not None
    shutil.copytree(table.base_uri, str(tmp_path / "spark"))  # the same table, the same plan
    before = _read(table.base_uri)
    arrow = execute_compaction(Table.open(table.base_uri), OPTS, plan)
    res = SparkCompactionExecutor(spark, str(tmp_path / "spark"), OPTS).execute(plan)
    assert res.instant == arrow.instant == plan
    sp = str(tmp_path / "spark")
    tl = Table.open(sp).timeline()
    assert tl.get(plan).is_completed and tl.pending() == []
    meta = tl.commit_metadata(tl.get(plan))
    assert meta.operation_type == "COMPACT" and meta.compacted
    # the same rows (commit times and sequence numbers kept), snapshot and read-optimised
    assert _read(sp) == _read(table.base_uri) == before
    assert _read(sp, ro=True) == _read(table.base_uri, ro=True) == before
    assert {k: {c: v[c] for c in ("id", "p", "ts", "v")} for k, v in _read(sp).items()} == model
    key = lambda s: (s.partition_path, s.file_id)  # noqa: E731
    got = sorted(((key(s), s.num_writes, s.prev_commit, s.prev_base_file,
                   s.log_counts.get("totalLogFilesCompacted")) for s in res.stats))
    want = sorted(((key(s), s.num_writes, s.prev_commit, s.prev_base_file,
                    s.log_counts.get("totalLogFilesCompacted")) for s in arrow.stats))
    assert got == want and len(got) == 3
    # the new base files hold what the Arrow executor's hold, row for row
    for s, a in zip(sorted(res.stats, key=key), sorted(arrow.stats, key=key)):
        ours = pq.read_table(os.path.join(sp, s.path)).drop_columns(["_hoodie_file_name"])
        theirs = pq.read_table(os.path.join(table.base_uri, a.path)).drop_columns(["_hoodie_file_name"])
        assert ours.sort_by("_hoodie_record_key").equals(theirs.sort_by("_hoodie_record_key"))


KILLED = textwrap.dedent("""
    import sys, time
    from airflow_hudi_occ.spark import compaction as C
    from airflow_hudi_occ.spark.session import local_session
    base, opts = sys.argv[1], eval(sys.argv[2])
    spark = local_session("local[1]", "killed-compaction")

    def task(ctx, op):  # writes its new base file, then hangs until the driver is killed
        stat = C.compact_operation(ctx, op)
        time.sleep(600)
        return stat

    C.SparkCompactionExecutor(spark, base, opts).execute(task=task)
""")


@pytest.mark.slow  # a slower case (a second Spark driver, or a race); the default run keeps the model checks
def test_spark_compaction_killed_mid_way_is_rerun_by_the_next_attempt(spark, tmp_path):
    """The driver process (and its Spark) is SIGKILLed once the first new base file exists:
    readers see the old slices (0 lost, 0 exposed); the next Spark attempt rolls the dead
    executor's inflight compaction back to requested and runs the same plan; only its files
    remain."""
    table, model = _mor_table(str(tmp_path / "t"))
    plan = schedule_compaction(table, OPTS, force=True)
    before, ro_before = _read(table.base_uri), _read(table.base_uri, ro=True)
    env = dict(os.environ, PYSPARK_PYTHON=sys.executable)
    log = open(tmp_path / "killed.log", "w")
    p = subprocess.Popen([sys.executable, "-c", KILLED, table.base_uri, repr(OPTS)], env=env,
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and p.poll() is None:
            if any(b.instant_time == plan for part in "abc" for b in list_base_files(table, part)):
                break
            time.sleep(0.2)
        assert p.poll() is None, open(tmp_path / "killed.log").read()[-3000:]
    finally:
        os.killpg(p.pid, signal.SIGKILL)  # the driver, its JVM and its Python workers
        p.wait(timeout=60)
    dead = [b.name for part in "abc" for b in list_base_files(table, part) if b.instant_time == plan]
    assert dead
    inst = Table.open(table.base_uri).timeline().get(plan)
    assert inst is not None and inst.is_pending
    assert _read(table.base_uri) == before  # the dead executor's file is of a pending instant
    assert _read(table.base_uri, ro=True) == ro_before
    time.sleep(1.0)  # its heartbeat (300 ms x 2) expires

    res = SparkCompactionExecutor(spark, table.base_uri, OPTS).execute()
    assert res.instant == plan
    tl = Table.open(table.base_uri).timeline()
    assert tl.get(plan).is_completed and tl.pending() == []
    assert _read(table.base_uri) == before
    assert _read(table.base_uri, ro=True) == before  # every log merged into the base files
    written = {s.path for s in res.stats}
    on_disk = {f"{part}/{b.name}" for part in "abc" for b in list_base_files(table, part)
               if b.instant_time == plan}
    assert on_disk == written and len(written) == 3 and not set(dead) & {os.path.basename(w) for w in written}
    assert {k: {c: v[c] for c in ("id", "p", "ts", "v")} for k, v in _read(table.base_uri).items()} == model


@pytest.mark.slow  # a slower case (a second Spark driver, or a race); the default run keeps the model checks
def test_spark_writes_racing_a_spark_compaction(spark, tmp_path):
    """Spark MOR writes before and after a compaction is planned on their file group: the later
    log file is recorded in the slice the compaction starts (prevCommit = the compaction, no
    base file, as Java writes it), the compaction merges only the planned logs, and hudi-rs
    reads the model throughout (read-optimised: the rows as of the plan)."""
    from airflow_hudi_occ.spark.writer import SparkHudiWriter
    from tests.spark.test_mor_writer import SCHEMA, Model, check, options
    path = str(tmp_path / "mor")
    w = SparkHudiWriter(spark, path, options(**OPTS))
    model = Model()
    for rows in ([(i, "ab"[i % 2], 1, "seed") for i in range(8)], [(0, "a", 2, "u1"), (1, "b", 2, "u1")]):
        w.write(spark.createDataFrame(rows, SCHEMA), "upsert")
        model.upsert(rows)
    plan = schedule_compaction(Table.open(path), OPTS, force=True)
    as_planned = dict(model.rows)
    late = [(0, "a", 3, "late"), (2, "a", 3, "late")]
    r = w.write(spark.createDataFrame(late, SCHEMA), "upsert")
    model.upsert(late)
    [stat] = r.stats
    assert stat.log_files and stat.prev_commit == plan and stat.base_file == ""
    check(path, model)
    SparkCompactionExecutor(spark, path, OPTS).execute(plan)
    check(path, model)
    ro = rows_by_key(hudi_read_optimized(path), columns=["id", "p", "ts", "v"])
    assert ro == as_planned


def test_spark_compaction_of_nbcc_log_only_slices_equals_the_arrow_executor(spark, tmp_path):
    """An NBCC table (core writer, bucket index) has log-only file groups: core's
    compact_file_slice gives them their first base file, under Spark as under Arrow."""
    nbcc = {**OPTS, "hoodie.write.concurrency.mode": "NON_BLOCKING_CONCURRENCY_CONTROL",
            "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "2"}
    table = Table.create(str(tmp_path / "arrow"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts", table_type="MERGE_ON_READ")
    w = MergeOnReadWriter(table, WriteConfig.from_options(nbcc))
    for i in range(2):
        w.write(pa.Table.from_pylist([{"id": k, "p": "ab"[k % 2], "ts": i, "v": f"v{i}"} for k in range(8)]))
    plan = schedule_compaction(table, nbcc, force=True)
    ops = Table.open(table.base_uri).timeline().compaction_plan(Table.open(table.base_uri).timeline().get(plan)).operations
    assert ops and all(not op.data_file_name for op in ops)  # log-only slices
    shutil.copytree(table.base_uri, str(tmp_path / "spark"))
    before = _read(table.base_uri)
    execute_compaction(Table.open(table.base_uri), nbcc, plan)
    SparkCompactionExecutor(spark, str(tmp_path / "spark"), nbcc).execute(plan)
    assert _read(str(tmp_path / "spark")) == _read(table.base_uri) == before
    assert _read(str(tmp_path / "spark"), ro=True) == _read(table.base_uri, ro=True) == before
