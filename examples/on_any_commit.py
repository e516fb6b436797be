"""Runs after every commit to a Hudi table, whoever made it: an Airflow task, a Java Hudi job,
the ``hudi-occ`` CLI (clustering, compaction), a plain Python writer.

The table's ``hudi://`` asset carries an asset watcher (``HudiCommitTrigger``): the triggerer
lists the table's timeline every ``poll_interval`` seconds and records an asset event for each
commit completed since its cursor (docs/assets-and-lineage.md). Each event's extra is
``{"from_trigger": true, "payload": {...}}``, the payload naming the instant, its completion
time, the action, the operation and the counts. The scheduler may batch several events into one
run; this DAG lists each commit once, in completion order (an event an operator emitted for the
same commit, when the table is also one of its outlets, is folded into it by instant).

Set ``HUDI_OCC_WATCHED_TABLE`` to the table's base path before the DAG is parsed (and
``HUDI_OCC_WATCH_POLL_S``, default 30 s). Needs a triggerer.
"""

from __future__ import annotations

import os
from datetime import datetime

from airflow.sdk import DAG, task

from airflow_hudi_occ.provider.triggers.commits import watched_table_asset

TABLE = os.environ.get("HUDI_OCC_WATCHED_TABLE", "/data/lake/orders")

with DAG(
    dag_id="hudi_occ_on_any_commit",
    schedule=[watched_table_asset(TABLE, poll_interval=float(os.environ.get("HUDI_OCC_WATCH_POLL_S", "30")))],
    start_date=datetime(2024, 1, 1),
    catchup=False,
    tags=["hudi", "occ", "example"],
    doc_md=__doc__,
):

    @task
    def commits_to_read(triggering_asset_events=None) -> list[dict]:
        """The triggering commits, once each, in the order they completed."""
        by_instant: dict[str, dict] = {}
        for asset, events in (triggering_asset_events or {}).items():
            for ev in events:
                extra = dict(ev.extra or {})
                commit = extra.get("payload") if extra.get("from_trigger") else extra
                if isinstance(commit, dict) and commit.get("instant"):
                    by_instant.setdefault(commit["instant"], {"table": asset.uri, **commit})
        out = sorted(by_instant.values(), key=lambda c: (c.get("completion_time") or "", c["instant"]))
        print(f"{len(out)} commit(s) to read: "
              f"{[(c['instant'], c.get('action'), c.get('rows_written')) for c in out]}")
        return out

    commits_to_read()
