"""DAGs used only by the provider tests (copied into the test AIRFLOW_HOME's dags folder)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider import examples
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB


class CrashAfterCommitOperator(HudiWriteOperator):
    """Commits, then fails its first try: Airflow retries a batch that is already committed."""

    def execute(self, context):
        out = super().execute(context)
        if context["ti"].try_number == 1:
            raise RuntimeError(f"simulated crash after commit of {out.get('instant')}")
        return out


TABLE = examples.setting("hudi_occ_table", examples.default_table_path())

with DAG(dag_id="hudi_occ_test_retry_after_commit", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 1, "retry_delay": timedelta(seconds=0)}) as retry_dag:

    @task
    def make_batch(staging: str, run_id=None) -> str:
        return examples.make_batch("ingestion", run_id, staging)

    CrashAfterCommitOperator(
        task_id="upsert", source=make_batch(examples.setting("hudi_occ_staging", examples.default_staging_dir())),
        table_path=TABLE, options=examples.TABLE_OPTIONS, conflict_retries=RetryPolicy(max_conflict_retries=8, base_delay_s=0.5, max_delay_s=4.0))

with DAG(dag_id="hudi_occ_test_long_write", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}) as long_dag:

    @task
    def make_big_batch(staging: str, run_id=None) -> str:
        return examples.make_batch("backfill", run_id, staging.rstrip("/") + "_killed")  # never committed

    HudiWriteOperator(
        task_id="rewrite", source=make_big_batch(examples.setting("hudi_occ_staging", examples.default_staging_dir())),
        table_path=TABLE, options={**examples.TABLE_OPTIONS, "hoodie.client.heartbeat.interval_in_ms": "1000"},
        conflict_retries=0, launcher=SparkSubmitLauncher(
            spark_env={"HUDI_OCC_TEST_COMMIT_BARRIER": os.environ.get("HUDI_OCC_TEST_HOLD", "")},
            application=TEST_JOB))

with DAG(dag_id="hudi_occ_test_admission", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}) as admission_dag:
    # test_dags_e2e.py: admission before spark-submit (waits for an overlapping live writer)
    HudiWriteOperator(
        task_id="upsert", source=os.environ.get("HUDI_OCC_ADMISSION_SOURCE", "/nonexistent"),
        table_path=os.environ.get("HUDI_OCC_ADMISSION_TABLE", "/tmp/hudi-occ-admission"), hudi_conn_id=None,
        options={"hoodie.datasource.write.recordkey.field": "id",
                 "hoodie.datasource.write.partitionpath.field": "p",
                 "hoodie.datasource.write.precombine.field": "ts",
                 "hoodie.write.lock.provider": "filesystem",
                 "hoodie.client.heartbeat.interval_in_ms": "2000"},
        conflict_retries=0, write_windows=None, admission=AdmissionSettings(
            poll_s=0.5, timeout_s=300, kind=os.environ.get("HUDI_OCC_ADMISSION_KIND", "ingestion")))

# test_admission_e2e.py: 2 ingestion writers, a backfill and a clustering, started at
# once on one table (the table and the batches made by the test; the ZooKeeper lock of the
# default connection).
FOUR_TABLE = os.environ.get("HUDI_OCC_FOUR_TABLE", "/tmp/hudi-occ-four")
FOUR_SOURCES = os.environ.get("HUDI_OCC_FOUR_SOURCES", "/nonexistent")
FOUR_OPTIONS = {"hoodie.datasource.write.recordkey.field": "id",
                "hoodie.datasource.write.partitionpath.field": "p",
                "hoodie.datasource.write.precombine.field": "ts",
                "hoodie.client.heartbeat.interval_in_ms": "2000"}
for _name, _kind in (("ingest_ab", "ingestion"), ("ingest_c", "ingestion"), ("backfill_bc", "backfill")):
    with DAG(dag_id=f"hudi_occ_test_four_{_name}", schedule=None, start_date=datetime(2024, 1, 1),
             catchup=False, default_args={"retries": 0}) as _four_dag:
        HudiWriteOperator(
            task_id="write", source=os.path.join(FOUR_SOURCES, f"{_name}.parquet"), table_path=FOUR_TABLE,
            options=FOUR_OPTIONS, conflict_retries=3, write_windows=None,
            admission=AdmissionSettings(kind=_kind, poll_s=0.5, timeout_s=1500))
    globals()[f"four_{_name}_dag"] = _four_dag

with DAG(dag_id="hudi_occ_test_four_cluster_a", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}) as four_cluster_dag:
    from airflow_hudi_occ.provider.admission import AdmissionSettings
    from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
    HudiTableServiceOperator(
        task_id="cluster", service="cluster", table_path=FOUR_TABLE,
        options={**FOUR_OPTIONS, "hoodie.clustering.plan.strategy.partition.selected": "a"},
        admission=AdmissionSettings(poll_s=0.5, timeout_s=1500, kind="table_service"))
