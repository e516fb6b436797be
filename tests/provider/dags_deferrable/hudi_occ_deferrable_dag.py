"""A deferrable write (tests/provider/test_deferrable_e2e.py): the job is held before its
commit by the test harness's barrier until the test has seen the task ``deferred``."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.testing.spark_job import PATH as TEST_JOB

with DAG(dag_id="hudi_occ_test_deferrable", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiWriteOperator(
        task_id="upsert", deferrable=True, source=os.environ.get("HUDI_OCC_DEFER_SOURCE", "/nonexistent"),
        table_path=os.environ.get("HUDI_OCC_TABLE", "/tmp/hudi-occ-deferrable"), hudi_conn_id=None,
        options={"hoodie.datasource.write.recordkey.field": "id",
                 "hoodie.datasource.write.partitionpath.field": "p",
                 "hoodie.datasource.write.precombine.field": "ts"},
        launcher=SparkSubmitLauncher(application=TEST_JOB, poll_interval=1.0), write_windows=None)
