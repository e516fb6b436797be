"""Your first Hudi DAG: make a small batch, upsert it into a Hudi table with OCC.

Copy this file into ``$AIRFLOW_HOME/dags/`` (README, "Your first DAG"). It needs no
connection: without ``hudi_occ_default`` the table lives at ``MY_TABLE`` with the file-system
lock, without ``spark_default`` Spark runs as ``local[*]`` beside the Airflow worker.
Change the two paths (or set the Airflow Variables ``my_table`` / ``my_landing``) to your own.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

HOME = os.environ.get("AIRFLOW_HOME", os.path.expanduser("~/airflow"))
MY_TABLE = "{{ var.value.get('my_table', '%s') }}" % os.path.join(HOME, "lake", "orders")
MY_LANDING = "{{ var.value.get('my_landing', '%s') }}" % os.path.join(HOME, "landing")

with DAG(dag_id="my_first_hudi_dag", schedule="@daily", start_date=datetime(2024, 1, 1),
         catchup=False, tags=["hudi"]) as dag:

    @task
    def land_batch(landing: str, ds=None) -> str:
        """Stands in for your ingestion: one parquet file per day under ``landing/<ds>/``."""
        import pyarrow as pa
        import pyarrow.parquet as pq
        folder = os.path.join(landing, ds)
        os.makedirs(folder, exist_ok=True)
        rows = [{"id": i, "day": ds, "ts": int(datetime.now().timestamp()), "amount": i * 10}
                for i in range(100)]
        pq.write_table(pa.Table.from_pylist(rows), os.path.join(folder, "batch.parquet"))
        return folder

    HudiWriteOperator(
        task_id="upsert_orders",
        source=land_batch(MY_LANDING),
        table_path=MY_TABLE,
        operation="upsert",
        options={
            "hoodie.datasource.write.recordkey.field": "id",
            "hoodie.datasource.write.partitionpath.field": "day",
            "hoodie.datasource.write.precombine.field": "ts",
            # stop a write that another writer has doomed, before it writes everything
            "hoodie.write.concurrency.early.conflict.detection.enable": "true",
            "hoodie.write.concurrency.early.conflict.check.commit.conflict": "true",
        },
        conflict_retries=5,
    )
