"""DAGs of test_catalog_sync_e2e.py: a Hudi user's writers with Hudi's own catalog-sync keys
pointing at the test Hive Metastore. The table, its type, the metastore, the source of each run
of each DAG come from the environment (read when the file is parsed: the test reserializes the
DAGs with it before starting runs at once, whose first parse would otherwise insert the table's
asset twice), so one test drives a copy-on-write and a merge-on-read table alike. Each DAG's
batch is ``$HUDI_OCC_SYNC_SOURCES/<name>.parquet``, written by the test before each run."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_hudi_occ.provider.admission import AdmissionSettings
from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator
from airflow_hudi_occ.provider.operators.write import HudiWriteOperator

SYNC_TABLE = os.environ.get("HUDI_OCC_SYNC_TABLE", "/tmp/hudi-occ-sync/t")
SYNC_OPTIONS = {
    "hoodie.datasource.write.table.name": os.path.basename(SYNC_TABLE.rstrip("/")),
    "hoodie.datasource.write.table.type": os.environ.get("HUDI_OCC_SYNC_TYPE", "COPY_ON_WRITE"),
    "hoodie.datasource.write.recordkey.field": "id",
    "hoodie.datasource.write.partitionpath.field": "p",
    "hoodie.datasource.write.precombine.field": "ts",
    "hoodie.client.heartbeat.interval_in_ms": "2000",
    "hoodie.clean.commits.retained": "1",
    # what a Hudi user's job sets for its catalog (docs/catalog-sync.md)
    "hoodie.datasource.meta.sync.enable": "true",
    "hoodie.datasource.hive_sync.mode": "hms",
    "hoodie.datasource.hive_sync.metastore.uris": os.environ.get("HUDI_OCC_SYNC_URI", "thrift://127.0.0.1:9083"),
    "hoodie.datasource.hive_sync.database": "e2e",
    "hoodie.occ.meta.sync.timeout.ms": "3000",
}
SYNC_SOURCES = os.environ.get("HUDI_OCC_SYNC_SOURCES", "/nonexistent")
#: a sync that failed (the metastore down) is retried by Airflow a minute later: the test brings
#: the metastore back within that minute
SYNC_ARGS = {"retries": 1, "retry_delay": timedelta(seconds=60)}

for _name, _kind, _operation in (("ingestion", "ingestion", "upsert"), ("backfill", "backfill", "upsert"),
                                 ("overwrite", "ingestion", "insert_overwrite")):
    with DAG(dag_id=f"hudi_occ_test_sync_{_name}", schedule=None, start_date=datetime(2024, 1, 1),
             catchup=False, default_args=SYNC_ARGS) as _dag:
        HudiWriteOperator(
            task_id="write", source=os.path.join(SYNC_SOURCES, f"{_name}.parquet"),
            operation=_operation, table_path=SYNC_TABLE, options=SYNC_OPTIONS, conflict_retries=3,
            write_windows=None, admission=AdmissionSettings(kind=_kind, on_overlap="go"))
    globals()[f"sync_{_name}_dag"] = _dag

with DAG(dag_id="hudi_occ_test_sync_clean", schedule=None, start_date=datetime(2024, 1, 1),
         catchup=False, default_args=SYNC_ARGS) as sync_clean_dag:
    HudiTableServiceOperator(task_id="clean", service="clean", table_path=SYNC_TABLE, options=SYNC_OPTIONS)
