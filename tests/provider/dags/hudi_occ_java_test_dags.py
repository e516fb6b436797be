"""DAGs of the Java-engine tests (tests/provider/operators/test_java_write.py): a user's Java
Hudi job (``tests/provider/java_jobs/write_rows.py``) under :class:`HudiJavaWriteOperator`, and
our engine's write of the same table, both through the ``hudi_occ_java`` connection the test
defines (ZooKeeper lock, the Java set-up in its ``java`` extra). What each run writes comes
from the environment of its ``airflow dags test`` process."""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider.operators.java_write import HudiJavaWriteOperator
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

#: the user's job, named by the test (the DAGs are copied into AIRFLOW_HOME, the job is not)
JOB = os.environ.get("HUDI_OCC_JAVA_JOB", "write_rows.py")
TABLE = os.environ.get("HUDI_OCC_JAVA_TABLE", "/tmp/hudi-occ-java-test-table")
GATE = os.environ.get("HUDI_OCC_JAVA_GATE")
RETRY = {"conflict_retries": RetryPolicy(max_conflict_retries=3, base_delay_s=0.2, max_delay_s=1.0),
         "write_windows": None}

with DAG(dag_id="hudi_occ_test_java_write", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiJavaWriteOperator(
        task_id="java_upsert", application=JOB,
        application_args=[TABLE, os.environ.get("HUDI_OCC_JAVA_ROWS", "[]")] + (["--gate", GATE] if GATE else []),
        table_path=TABLE, hudi_conn_id="hudi_occ_java", batch_key="java/{{ ds }}", **RETRY)

with DAG(dag_id="hudi_occ_test_ours_write", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args={"retries": 0}):
    HudiWriteOperator(
        task_id="ours_upsert", source=os.environ.get("HUDI_OCC_OURS_SOURCE", "/tmp/none.parquet"),
        table_path=TABLE, hudi_conn_id="hudi_occ_java", operation="upsert",
        batch_key="ours/{{ ds }}", **RETRY)
