"""Runs after every commit to the example table: scheduled on its ``hudi://`` asset.

The ingestion, backfill and table-services DAGs list the table's asset in their outlets
(``examples.table_asset()``: ``hudi://file/<table path>``); each successful write or service
run emits an event whose extra carries the instant, the operation and the commit's counts
(docs/assets-and-lineage.md). This DAG lists the triggering commits from those events: the
scheduler may batch several events into one run, and a downstream job that reads by instant
(an incremental query from the first to the last of them) sees each commit once.
"""

from __future__ import annotations

from datetime import datetime

from airflow.sdk import DAG, task

from airflow_hudi_occ.provider import examples

#: the operations that change rows (a clean, an archive or a rollback changes none)
DATA_OPERATIONS = {"upsert", "insert", "bulk_insert", "delete", "insert_overwrite"}

# [START hudi_occ_asset_schedule]
with DAG(
    dag_id="hudi_occ_downstream",
    schedule=[examples.table_asset()],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["hudi", "occ", "example"],
    doc_md=__doc__,
) as dag:

    @task
    def commits_to_read(triggering_asset_events=None) -> list[dict]:
        """The triggering commits, as their events describe them."""
        out = []
        for asset, events in (triggering_asset_events or {}).items():
            for ev in events:
                extra = dict(ev.extra or {})
                if extra.get("operation") in DATA_OPERATIONS and extra.get("instant"):
                    out.append({"table": asset.uri, **extra})
        print(f"{len(out)} commit(s) to read: {[(c['instant'], c.get('rows_written')) for c in out]}")
        return out
# [END hudi_occ_asset_schedule]

    commits_to_read()
