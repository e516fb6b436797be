"""HudiWriteOperator and the job's recovery outcomes, through a real spark-submit.

The task instance is a stub (the Airflow runtime is the seam here; the DAG-level retry is
covered by test_dags_e2e.py); the job, the table and the crash are real. Neither job starts a
Spark session: both outcomes are decided before the source is read.
"""

from __future__ import annotations

import os
import time

import pyarrow as pa
import pyarrow.parquet as pq

from airflow_hudi_occ.core.config import WriteConfig
from airflow_hudi_occ.core.concurrency.heartbeat import is_expired
from airflow_hudi_occ.core.table.table import Table
from airflow_hudi_occ.provider import attempt_loop
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators import write as ops
from airflow_hudi_occ.provider.task_keys import XCOM_ATTEMPTS
from airflow_hudi_occ.testing.crash import run_writer
from airflow_hudi_occ.testing.tables import hudi_read, rows_by_key
from airflow_hudi_occ.testing.tables import FAST_WRITE_OPTIONS

# The crashed child's heartbeat expires fast so the test need not wait long for it; the jobs
# under test keep a 3 s expiry (1 s beats, 3 misses): at 0.8 s a busy machine starved the
# recovering job's own heartbeat, and it rightly stopped itself as expired.
OPTS = {**FAST_WRITE_OPTIONS, "hoodie.client.heartbeat.interval_in_ms": "400",
        "hoodie.client.heartbeat.tolerable.misses": "2"}
JOB_OPTS = {**OPTS, "hoodie.client.heartbeat.interval_in_ms": "1000",
            "hoodie.client.heartbeat.tolerable.misses": "3"}
ROWS = [{"id": 1, "p": "a", "ts": 1, "value": "x"}, {"id": 2, "p": "b", "ts": 1, "value": "x"}]


class StubTI:
    dag_id, task_id, run_id, try_number, map_index = "ingest", "upsert", "manual__1", 2, -1

    def __init__(self):
        self.xcom = {}

    def xcom_push(self, key, value):
        self.xcom[key] = value


def test_operator_reports_recommitted_and_already_committed_from_the_job(tmp_path, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_SPARK_LOCAL", '{"conn_type": "spark", "host": "local[1]"}')
    table = Table.create(str(tmp_path / "t"), "t", record_key_fields=["id"], partition_fields=["p"],
                         precombine_field="ts")
    key = "ingest/manual__1/upsert"
    child = run_writer(table.base_uri, OPTS, ROWS, crash_at="after_staged", batch_key=key,
                       writer_id="try1")
    assert child.killed, child.stderr[-2000:]
    dead = child.crash["instant"]
    cfg = WriteConfig.from_options(JOB_OPTS)  # expired as the recovering job judges it
    deadline = time.monotonic() + 20
    while not is_expired(table, dead, cfg.heartbeat):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    src = str(tmp_path / "src.parquet")
    pq.write_table(pa.Table.from_pylist(ROWS), src)

    def op():
        return ops.HudiWriteOperator(task_id="upsert", source=src, table_path=table.base_uri,
                                     options=JOB_OPTS, conflict_retries=0, write_windows=None,
                                     launcher=SparkSubmitLauncher(
                                         spark_conn_id="spark_local",
                                         spark_env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")}))

    ti = StubTI()
    out = op().execute({"ti": ti})
    assert (out["outcome"], out["instant"], out["recovered_from"]) == ("recommitted", dead, "try1")
    assert ti.xcom[XCOM_ATTEMPTS][0]["outcome"] == "recommitted"
    assert {k: v["value"] for k, v in rows_by_key(hudi_read(table.base_uri)).items()} == {1: "x", 2: "x"}

    # The operator's own pre-check misses the commit (as when a twin commits right after it):
    # the job finds it under its own check and says so; the operator reports it, not a commit.
    monkeypatch.setattr(attempt_loop, "committed_instant", lambda *a, **k: None)
    out = op().execute({"ti": StubTI()})
    assert (out["outcome"], out["instant"]) == ("already_committed", dead)
    assert out["attempts"][0]["exit_code"] == 0
    assert len(table.timeline().completed_writes()) == 1
