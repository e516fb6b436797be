"""A large historical rewrite of every partition of the example table, run beside ingestion.

``wait_for_window`` (HudiWriteWindowSensor, deferrable polling in reschedule mode) files a
write-window request for the partitions the backfill rewrites: new ingestion writes yield to
it and running ones drain, so the long rewrite gets its turn instead of losing every race;
the request expires if this run dies and ingestion never waits more than its own timeout.
``rewrite`` then upserts every key (conflict retries on fresh instants, more of them and
longer backoff than ingestion). ``watch_rewrite`` (HudiEarlyConflictSensor, deferrable: its
trigger polls in the triggerer) watches the running rewrite's instant and raises the engine's
abort signal as soon as another writer has doomed it, so the rewrite stops early and retries.
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
from airflow_hudi_occ.provider.sensors.hudi_occ import HudiEarlyConflictSensor, HudiWriteWindowSensor
from airflow_hudi_occ.provider.write_window import WriteWindows

TABLE = examples.setting("hudi_occ_table", examples.default_table_path())

with DAG(
    dag_id="hudi_occ_backfill",
    schedule=None,
    start_date=datetime(2024, 1, 1),
    catchup=False,
    default_args={"retries": 1, "retry_delay": timedelta(seconds=5)},
    tags=["hudi", "occ", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def make_batch(staging: str, run_id=None) -> str:
        return examples.make_batch("backfill", run_id, staging)

    batch = make_batch(examples.setting("hudi_occ_staging", examples.default_staging_dir()))

    window = None if os.environ.get("HUDI_OCC_WRITE_WINDOW", "on") == "off" else HudiWriteWindowSensor(
        task_id="wait_for_window",
        table_path=TABLE,
        partitions=examples.PARTITIONS,
        options=examples.TABLE_OPTIONS,
        poke_interval=2,
        timeout=600,
        hold_s=1800,
        mode="reschedule",
    )

    rewrite = HudiWriteOperator(
        task_id="rewrite",
        source=batch,
        table_path=TABLE,
        options=examples.TABLE_OPTIONS,
        launcher=SparkSubmitLauncher(spark_conn_id=os.environ.get("HUDI_OCC_SPARK_CONN", "spark_default")),
        write_windows=WriteWindows(partitions=examples.PARTITIONS),
        conflict_retries=RetryPolicy(max_conflict_retries=10, base_delay_s=2.0, max_delay_s=20.0),
        priority_weight=10,
        # admission: waits (before spark-submit) while a live writer shares its partitions;
        # a backfill lets waiting ingestion go first (docs/concurrency.md)
        admission=AdmissionSettings(on_overlap=examples.admission_policy(), kind="backfill"),
        outlets=[examples.table_asset()],
    )

    if window is None:  # HUDI_OCC_WRITE_WINDOW=off: raw OCC contention, no window, no watch
        rewrite.write_windows = None
        batch >> rewrite
    else:
        watch = HudiEarlyConflictSensor(
            task_id="watch_rewrite",
            table_path=TABLE,
            write_task_id="rewrite",
            options=examples.TABLE_OPTIONS,
            poke_interval=2,
            missing_instant_timeout_s=60,
            deferrable=True,
        )
        [batch, window] >> rewrite
        window >> watch
