"""The scale backfill's DAGs (issue 43, item 5; run by ``scripts/scale-backfill.sh``).

- ``hudi_scale_backfill``: one run rewrites ``HUDI_OCC_SCALE_DAYS`` daily partitions of the
  ``mixed`` table, one mapped write task per day (``expand_kwargs`` over the days a first task
  stages), ``HUDI_OCC_SCALE_PARALLELISM`` at a time, each a Spark ``local[1]`` job admitted
  before submission as a backfill (it lets waiting ingestion go first);
- ``hudi_scale_ingestion``: every minute, a small upsert into the same table (new keys of the
  live day and late updates of backfilled days), admitted as ingestion;
- ``hudi_scale_backfill_alone``: the same backfill into the ``alone`` table, with nothing
  beside it: the makespan the mixed run is compared with.

Every setting comes from the environment the harness gives Airflow
(``testing/scale_backfill.py``: tables, staging folder, days, parallelism, rows per day); the
table connection ``hudi_occ_default`` carries the store and the lock.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from airflow.sdk import DAG, task

from airflow_hudi_occ.core.commit.retry import RetryPolicy
from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator
from airflow_hudi_occ.testing import scale_backfill as scale

SETTINGS = scale.Settings.from_env()


def backfill_dag(dag_id: str, table: str, staging: str) -> DAG:
    with DAG(dag_id=dag_id, schedule=None, start_date=datetime(2025, 1, 1), catchup=False,
             max_active_tasks=SETTINGS.parallelism + 1, tags=["hudi", "occ", "scale"],
             default_args={"retries": 1, "retry_delay": timedelta(seconds=5)}, doc_md=__doc__) as dag:

        @task
        def stage_days(run_id=None) -> list[dict]:
            return scale.stage_backfill(staging, run_id, SETTINGS.days, SETTINGS.rows_per_day)

        HudiWriteOperator.partial(
            task_id="rewrite_day",
            table_path=table,
            options=scale.TABLE_OPTIONS,
            admission=AdmissionSettings(on_overlap="wait", kind="backfill"),
            conflict_retries=RetryPolicy(max_conflict_retries=10, base_delay_s=2.0, max_delay_s=20.0),
            max_active_tis_per_dagrun=SETTINGS.parallelism,
        ).expand_kwargs(stage_days())
    return dag


backfill = backfill_dag("hudi_scale_backfill", SETTINGS.table_mixed, SETTINGS.staging_mixed)
backfill_alone = backfill_dag("hudi_scale_backfill_alone", SETTINGS.table_alone, SETTINGS.staging_alone)

with DAG(dag_id="hudi_scale_ingestion", schedule=timedelta(minutes=1), start_date=datetime(2025, 1, 1),
         catchup=False, max_active_runs=2, tags=["hudi", "occ", "scale"],
         default_args={"retries": 1, "retry_delay": timedelta(seconds=5)}, doc_md=__doc__) as ingestion:

    @task
    def stage_ingestion(run_id=None) -> str:
        return scale.stage_ingestion(SETTINGS.staging_mixed, run_id, SETTINGS.days, SETTINGS.rows_per_day)

    HudiWriteOperator(
        task_id="upsert",
        source=stage_ingestion(),
        table_path=SETTINGS.table_mixed,
        options=scale.TABLE_OPTIONS,
        admission=AdmissionSettings(on_overlap="wait", kind="ingestion"),
        conflict_retries=RetryPolicy(max_conflict_retries=8, base_delay_s=1.0, max_delay_s=8.0),
    )
