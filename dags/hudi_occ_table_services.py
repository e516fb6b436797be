"""Table services for the example table, under the same table lock the writers use:
roll back failed writes whose heartbeat expired, clean old file versions, archive old instants
(so that the active timeline, which every commit lists, stays short), then plan and run
clustering (a Spark job). The example table uses the bucket index (so that concurrent
writers of the same new keys conflict instead of duplicating them), and a bucket-index table
cannot be clustered (a record's file group is its bucket): the clustering task is only part of
the DAG for a table on the simple index. Compaction runs for every table: on a merge-on-read
table it plans under the lock when Hudi's trigger says so (``hoodie.compact.inline.max.delta.commits``)
and runs the plan as a job; on a copy-on-write table, like the example's, it logs "nothing to
compact" and ends (the table's type is read at run time, never at parse time)."""

from __future__ import annotations

import os
from datetime import datetime, timedelta

from airflow.sdk import DAG

from airflow_hudi_occ.provider import examples
from airflow_hudi_occ.provider.operators.table_service import HudiTableServiceOperator

TABLE = examples.setting("hudi_occ_table", examples.default_table_path())

with DAG(
    dag_id="hudi_occ_table_services",
    schedule=timedelta(hours=1),
    start_date=datetime(2024, 1, 1),
    catchup=False,
    max_active_runs=1,
    tags=["hudi", "occ", "example"],
    doc_md=__doc__,
) as dag:
    # outlets: every service run is an event of the table's asset too (extra "operation" says
    # which), so a DAG scheduled on the table can tell a clean from a commit
    common = dict(table_path=TABLE, options=examples.TABLE_OPTIONS,
                  spark_conn_id=os.environ.get("HUDI_OCC_SPARK_CONN", "spark_default"),
                  outlets=[examples.table_asset()])
    rollback = HudiTableServiceOperator(task_id="rollback_failed_writes", service="rollback", **common)
    clean = HudiTableServiceOperator(task_id="clean", service="clean", **common)
    archive = HudiTableServiceOperator(task_id="archive", service="archive", **common)
    rollback >> clean >> archive
    # [START howto_operator_hudi_compact]
    compact = HudiTableServiceOperator(task_id="compact", service="compact", **common)
    # [END howto_operator_hudi_compact]
    archive >> compact
    if examples.TABLE_OPTIONS.get("hoodie.index.type", "SIMPLE").upper() != "BUCKET":
        archive >> HudiTableServiceOperator(task_id="cluster", service="cluster", **common)
