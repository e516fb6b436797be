"""The executor task on its own (outside Spark): the abort signal is honoured between the
Arrow batches of ONE file group, so even a long file stops early, and a stopped task returns
(it is not failed, so Spark never retries it)."""

import os
import subprocess
import sys
import time

import pyarrow as pa
import pytest

from airflow_hudi_occ.core.concurrency import abort_signal
from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.table.file_system_view import list_base_files
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.commit.transaction import WriteTransaction
from airflow_hudi_occ.spark.executor import KEY, TaskContext, write_file_group

OPTS = {"hoodie.write.lock.provider": "filesystem",
        "hoodie.time.generator.max_expected_clock_skew_ms": "2"}
SCHEMA = pa.schema([("id", pa.int64()), ("v", pa.string())])
RAISE = ("import sys; from airflow_hudi_occ.core.table.table import Table; "
         "from airflow_hudi_occ.core.concurrency.abort_signal import raise_abort; "
         "raise_abort(Table.open(sys.argv[1]), sys.argv[2], 'sensor: doomed', source='test')")


def inflight_task(tmp_path, file_id: str):
    """(table path, table, its inflight bulk_insert transaction, the context of a task writing
    the new file group ``file_id`` of it)."""
    path = str(tmp_path / "tbl")
    table = Table.create(path, "tbl", record_key_fields=["id"], partition_fields=[])
    tx = WriteTransaction(table, WriteConfig.from_options(OPTS), operation_type="BULK_INSERT")
    tx.begin()
    tx.start_inflight(planned_file_groups=[("", file_id)])
    return path, table, tx, TaskContext(base_uri=table.base_uri, storage_options={}, options=OPTS,
                                        instant=tx.instant_time, mode="create", user_columns=["id", "v"],
                                        target_schema=SCHEMA, precombine=None)


def test_abort_signal_from_another_process_stops_a_file_between_batches(tmp_path):
    path, table, tx, ctx = inflight_task(tmp_path, "fg-1")
    total, signal_at = 200, 3
    seen = []

    def batches():
        # A slow upstream (a shuffle read): 200 batches would take 10 s; after batch 3 a
        # separate process (the sensor's role) leaves the abort signal.
        for i in range(total):
            seen.append(i)
            if i == signal_at:
                subprocess.run([sys.executable, "-c", RAISE, path, tx.instant_time], check=True,
                               env=dict(os.environ), timeout=120)
            time.sleep(0.05)
            ids = pa.array(range(i * 100, (i + 1) * 100), pa.int64())
            yield pa.RecordBatch.from_arrays([ids, pa.array(["x"] * 100), ids.cast(pa.string())],
                                             names=["id", "v", KEY])

    out = write_file_group(ctx, "", "fg-1", batches()).to_pylist()
    assert out[0]["stopped"] == "WriteAbortedError" and out[0]["path"] is None
    # Stopped within the check interval (0.2 s = 4 batches here), far from the end.
    assert signal_at < len(seen) <= signal_at + 8, len(seen)
    assert list_base_files(Table.open(path), "") == []
    assert abort_signal.abort_reason(table, tx.instant_time)["reason"] == "sensor: doomed"
    tx.abort(reason="test")


def test_abort_signal_before_the_task_leaves_no_marker_and_no_file(tmp_path):
    path, table, tx, ctx = inflight_task(tmp_path, "fg-2")
    abort_signal.raise_abort(table, tx.instant_time, "doomed", source="test")
    consumed = []

    def batches():
        consumed.append(1)
        yield pa.RecordBatch.from_arrays([pa.array([1], pa.int64()), pa.array(["x"]), pa.array(["1"])],
                                         names=["id", "v", KEY])

    out = write_file_group(ctx, "", "fg-2", batches()).to_pylist()
    assert out[0]["stopped"] == "WriteAbortedError"
    assert consumed == []  # not even the first batch was pulled
    assert tx.markers.data_files() == [] and list_base_files(table, "") == []
    tx.abort(reason="test")


def test_a_task_that_outlives_its_instants_rollback_removes_the_file_it_made(tmp_path):
    """A cancelled task's Python worker may finish its file after the driver rolled the instant
    back and cleared the signal (Spark 4 closes a cancelled task's socket instead of killing
    its worker): the task sees its instant gone from the timeline and removes its file."""
    path, table, tx, ctx = inflight_task(tmp_path, "fg-3")

    def batches():
        # the driver rolls back (and clears the signal) while the task reads its rows
        tx.abort(reason="the driver was stopped")
        assert abort_signal.abort_reason(table, tx.instant_time) is None
        yield pa.RecordBatch.from_arrays([pa.array([1], pa.int64()), pa.array(["x"]), pa.array(["1"])],
                                         names=["id", "v", KEY])

    out = write_file_group(ctx, "", "fg-3", batches()).to_pylist()
    assert out[0]["stopped"] == "WriteAbortedError" and out[0]["path"] is None
    assert list_base_files(Table.open(path), "") == []
    assert Table.open(path).timeline().get(tx.instant_time) is None


WATCH = r"""
import os, sys, time
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.core.concurrency.abort_signal import raise_abort
root = os.path.join(sys.argv[1], ".hoodie", ".temp")
deadline = time.time() + 300
while time.time() < deadline:
    for inst in (os.listdir(root) if os.path.isdir(root) else []):
        if any(".marker." in f for _, _, fs in os.walk(os.path.join(root, inst)) for f in fs):
            raise_abort(Table.open(sys.argv[1]), inst, "sensor: doomed", source="test")
            print(inst, flush=True)
            sys.exit(0)
    time.sleep(0.02)
sys.exit(1)
"""


def test_abort_signal_stops_a_spark_write_and_rolls_it_back(spark, tmp_path):
    """The sensor's path end to end: another process raises the signal as soon as the first
    marker exists; the Spark write stops, raises a retryable WriteAbortedError, and leaves
    neither a commit nor a file."""
    from airflow_hudi_occ.core.errors import WriteAbortedError
    from airflow_hudi_occ.spark.writer import SparkHudiWriter

    path = str(tmp_path / "tbl")
    opts = {**OPTS, "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.table.name": "tbl"}
    w = SparkHudiWriter(spark, path, opts)
    w.write(spark.createDataFrame([(0, "seed")], "id long, v string"), "upsert")
    watcher = subprocess.Popen([sys.executable, "-c", WATCH, path], stdout=subprocess.PIPE, text=True)
    try:
        df = spark.range(1, 100_001).selectExpr("id", "cast(id as string) as v")
        with pytest.raises(WriteAbortedError) as e:
            w.write(df, "upsert")
        out, _ = watcher.communicate(timeout=60)
    finally:
        if watcher.poll() is None:
            watcher.kill()
    assert out.strip() == e.value.instant
    assert "sensor: doomed" in e.value.message
    t = Table.open(path)
    assert [i.requested_time for i in t.timeline().completed()] != [] and \
        e.value.instant not in {i.requested_time for i in t.timeline().completed()}
    assert all(bf.instant_time != e.value.instant for bf in list_base_files(t, ""))
    assert not os.path.exists(os.path.join(path, ".hoodie", ".aux", ".abort", e.value.instant))


def test_a_task_stopped_by_the_signal_does_not_raise_it_again_after_the_driver_cleared_it(tmp_path):
    """A cancelled task's Python worker can run on for Spark's kill timeout. If it caught the
    error the signal raised and signalled again, the driver's rollback would leave a signal
    behind for an instant it removed; a conflict the task finds itself is still signalled."""
    from airflow_hudi_occ.core.errors import EarlyConflictError, WriteAbortedError
    from airflow_hudi_occ.spark.executor import leave_abort_signal

    table = Table.create(str(tmp_path / "tbl"), "tbl", record_key_fields=["id"], partition_fields=[])
    abort_signal.raise_abort(table, "20260101000000000", "sensor: doomed", source="test")
    try:
        abort_signal.check_abort(table, "20260101000000000")
    except Exception as e:  # noqa: BLE001 - the signal's own error
        from_signal = e
    abort_signal.clear_abort(table, "20260101000000000")  # the driver's rollback
    leave_abort_signal(table, "20260101000000000", from_signal)
    # a file created just before the driver's abort: removed by its writer, the error not re-signalled
    abort_signal.raise_abort(table, "20260101000000000", "sensor: doomed", source="test")
    created = tmp_path / "tbl" / "f.parquet"
    created.write_bytes(b"x")
    with pytest.raises(WriteAbortedError) as raised:
        abort_signal.remove_if_aborted(table, "20260101000000000", str(created), "f.parquet")
    assert not created.exists()
    abort_signal.clear_abort(table, "20260101000000000")
    leave_abort_signal(table, "20260101000000000", raised.value)
    assert abort_signal.abort_reason(table, "20260101000000000") is None
    found = EarlyConflictError(instant="20260101000000001", other_instant="20260101000000000",
                               file_groups=[("", "fg-1")])
    leave_abort_signal(table, "20260101000000001", found)
    assert abort_signal.abort_reason(table, "20260101000000001")["source"] == "spark-executor"
