"""Frequent small upserts into the example table (every 10 minutes; any number of runs at once).

Each run writes a deterministic batch (24 keys spread over recent and historical partitions)
with OCC: when it loses a conflict (to the backfill or to another ingestion run) the write
operator retries on a fresh instant, within its own ``conflict_retries`` budget; it yields to
an older write-window request of the backfill before starting (see
``airflow_hudi_occ/provider/write_window.py``).

Settings (Airflow Variable, else environment, else embedded default): ``hudi_occ_table``,
``hudi_occ_staging``, ``hudi_occ_spark_conn`` (env ``HUDI_OCC_SPARK_CONN``, default
``spark_default``; a missing connection means ``local[*]``), the table connection
``hudi_occ_default`` (lock provider, ZooKeeper; missing = file-system lock).
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider import examples
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.launchers.spark_submit import SparkSubmitLauncher
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.provider.write_window import WriteWindows

with DAG(
    dag_id="hudi_occ_ingestion",
    schedule=timedelta(minutes=10),
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=4,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=5)},
    tags=["hudi", "occ", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def make_batch(staging: str, run_id=None) -> str:
        return examples.make_batch("ingestion", run_id, staging)

    batch = make_batch(examples.setting("hudi_occ_staging", examples.default_staging_dir()))

    HudiWriteOperator(
        task_id="upsert",
        source=batch,
        table_path=examples.setting("hudi_occ_table", examples.default_table_path()),
        options=examples.TABLE_OPTIONS,
        launcher=SparkSubmitLauncher(spark_conn_id=os.environ.get("HUDI_OCC_SPARK_CONN", "spark_default")),
        conflict_retries=RetryPolicy(max_conflict_retries=8, base_delay_s=1.0, max_delay_s=8.0),
        write_windows=WriteWindows(timeout_s=120.0),
        admission=AdmissionSettings(on_overlap=examples.admission_policy()),
        # [START hudi_occ_table_outlet]
        outlets=[examples.table_asset()],  # each commit: an event of hudi://file/<table path>
        # [END hudi_occ_table_outlet]
    )
