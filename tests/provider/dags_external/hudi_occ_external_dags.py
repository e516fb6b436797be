"""The external launcher in ``airflow standalone`` (tests/provider/test_external_launcher_e2e.py):
two writes into one table at once, each of whose attempts is launched by an operator that is
not this package's: the Spark provider's ``SparkSubmitOperator`` (synchronous) and a
``BashOperator`` running ``spark-submit {{ hudi_occ_job.command }}`` (deferrable: the trigger
decides from the table). The job is the engine's entry point under the test harness
(``testing/spark_job.py``: the same arguments, and a barrier that holds each commit until both
attempts have begun, so they overlap and one loses)."""

from __future__ import annotations

import os
import sys
from datetime import datetime

from airflow.providers.apache.spark.operators.spark_submit import SparkSubmitOperator
from airflow.providers.standard.operators.bash import BashOperator
from airflow.sdk import DAG

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.launchers.external import ExternalLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.testing.spark_job import BARRIER_ENV
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB

TABLE = os.environ.get("HUDI_OCC_EXT_TABLE", "/tmp/hudi-occ-external")
SOURCES = os.environ.get("HUDI_OCC_EXT_SOURCES", "/nonexistent")
OPTIONS = {"hoodie.datasource.write.recordkey.field": "id", "hoodie.datasource.write.partitionpath.field": "p",
           "hoodie.datasource.write.precombine.field": "ts", "hoodie.client.heartbeat.interval_in_ms": "2000"}
#: what the platform's image would give the job: the package and an interpreter for it
JOB_ENV = {"PYTHONPATH": os.environ.get("PYTHONPATH", ""), "PYSPARK_PYTHON": sys.executable,
           "PYSPARK_DRIVER_PYTHON": sys.executable, BARRIER_ENV: os.environ.get(BARRIER_ENV, "")}
COMMON = dict(table_path=TABLE, hudi_conn_id=None, options=OPTIONS, write_windows=None,
              admission=AdmissionSettings(on_overlap="go"),  # both at once: the race is the point
              conflict_retries=RetryPolicy(max_conflict_retries=3, base_delay_s=0.5, max_delay_s=2.0))

with DAG(dag_id="hudi_occ_test_external", schedule=None, start_date=datetime(2024, 1, 1), catchup=False,
         default_args={"retries": 0}):
    HudiWriteOperator(
        task_id="via_spark_submit", source=os.path.join(SOURCES, "a.parquet"),
        launcher=ExternalLauncher(lambda job: SparkSubmitOperator(
            task_id="spark_submit", conn_id="spark_local", application=job.application,
            application_args=job.args, env_vars=JOB_ENV, conf={"spark.ui.enabled": "false"}),
            application=TEST_JOB),
        **COMMON)
    HudiWriteOperator(
        task_id="via_bash", source=os.path.join(SOURCES, "b.parquet"), deferrable=True,
        launcher=ExternalLauncher(lambda job: BashOperator(
            task_id="bash", bash_command="spark-submit --master 'local[1]' --conf spark.ui.enabled=false "
                                         "{{ hudi_occ_job.command }}",
            env=JOB_ENV, append_env=True), application=TEST_JOB, poll_interval=1.0),
        **COMMON)
