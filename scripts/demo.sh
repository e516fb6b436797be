#!/usr/bin/env bash
# The main job on embedded defaults: installs what it needs (scripts/bootstrap.sh), then runs
# the example ingestion and backfill DAGs at the same time (each its own `airflow dags test`
# process, Airflow on SQLite, local Spark, a local table, the file-system lock), then the
# table-services DAG, and prints every admission wait (who waited for whom, on which
# partitions, how long), every conflict and its retry, and the final rows checked with the
# independent hudi-rs reader. Exit 0 when the table is exactly right, 1 otherwise.
#   scripts/demo.sh [--ingestion-runs N] [--zookeeper HOST:PORT] [--no-window] [--home DIR] [--on-overlap go|wait|fail]
# --ui: the same DAGs through `airflow standalone`'s scheduler (LocalExecutor, SQLite), one
# conflict forced (both writers held before their commits until both have begun), the UI's
# address and login and the timeline page's printed; Airflow stays up until Ctrl-C, which stops
# it and every process it started. Exit 0/1 by the runs and the table, as above.
#   scripts/demo.sh --ui [--port 8080] [--ingestion-runs N] [--zookeeper HOST:PORT] [--home DIR]
# The library-only demo (plain Python writer processes, no Airflow or Spark):
#   .venv/bin/python -m airflow_hudi_occ.testing.demo --writers 8 --batches 10
exec bash "$(dirname "$0")/airflow-demo.sh" "$@"
