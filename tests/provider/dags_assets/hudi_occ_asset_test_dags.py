"""DAGs of tests/provider/test_assets_e2e.py: a write whose every attempt loses a conflict
(no Spark: the job's answer is simulated), a write to a templated table path (committed in
the task's process by the core writer instead of a Spark job), and hudi:// assets used
wrongly by operators."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.core.job_protocol import EXIT_OK, EXIT_RETRYABLE
from airflow_hudi_occ.provider.assets import create_asset
from airflow_hudi_occ.provider.launchers.base import Launched
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

BASE = os.environ.get("HUDI_OCC_ASSET_TEST_BASE", "/tmp/hudi-occ-asset-test")
TABLE = f"{BASE}/table"


class AlwaysLoses(SparkSubmitLauncher):
    """Every attempt is answered as a job that lost a conflict (its instant rolled back)."""

    def run_attempt(self, run, n, on_began):
        instant = f"2026010100000{n:04d}"
        return Launched(EXIT_RETRYABLE, {"instant": instant}, {
            "outcome": "conflict", "instant": instant, "other_instant": "20260101000000000",
            "file_groups": ["d1/fg-0"], "seconds_discarded": 0.0}, 0.01)


class InProcess(SparkSubmitLauncher):
    """Commits its source with the core writer in the task's process instead of a Spark job:
    everything around the job (assets, events, lineage) runs as in production."""

    def run_attempt(self, run, n, on_began):
        import pyarrow.parquet as pq

        from airflow_hudi_occ.core.commit.writer import ArrowTableWriter
        from airflow_hudi_occ.core.config import WriteConfig
        from airflow_hudi_occ.core.table.table import Table

        r = ArrowTableWriter(Table.open(run.table_path), WriteConfig.from_options(run.options)).write(
            pq.read_table(run.source), run.operation, batch_key=run.batch_key)
        return Launched(EXIT_OK, {"instant": r.instant.requested_time}, {
            "outcome": "committed", "instant": r.instant.requested_time,
            "completion_time": r.instant.completion_time}, 0.1)


common = dict(source=f"{BASE}/landing/batch.parquet", table_path=TABLE, write_windows=None, hudi_conn_id=None,
              conflict_retries=RetryPolicy(max_conflict_retries=1, base_delay_s=0.01, max_delay_s=0.02))

with DAG(dag_id="hudi_occ_test_conflicts_exhausted", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiWriteOperator(task_id="upsert", launcher=AlwaysLoses(), **common)

with DAG(dag_id="hudi_occ_test_bad_asset_use", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiWriteOperator(task_id="inlet_not_a_table", inlets=[create_asset(path=f"{BASE}/plain")], **common)
    HudiWriteOperator(task_id="outlet_not_its_table", outlets=[create_asset(path=f"{BASE}/other")], **common)

with DAG(dag_id="hudi_occ_test_templated_table", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiWriteOperator(task_id="upsert", launcher=InProcess(), source=f"{BASE}/landing/batch.parquet",
                      table_path="{{ var.value.get('hudi_occ_asset_test_table', '%s/templated') }}" % BASE,
                      options={"hoodie.write.lock.provider": "filesystem"}, conflict_retries=0,
                      write_windows=None, hudi_conn_id=None)
