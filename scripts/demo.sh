#!/usr/bin/env bash
# The main job on embedded defaults: installs what it needs (scripts/bootstrap.sh), then runs
# the example ingestion and backfill DAGs at the same time (each its own `airflow dags test`
# process, Airflow on SQLite, local Spark, a local table, the file-system lock), then the
# table-services DAG, and prints commits, conflicts, retries and the final row count checked
# with the independent hudi-rs reader. Exit 0 when the table is exactly right, 1 otherwise.
#   scripts/demo.sh [--ingestion-runs N] [--zookeeper HOST:PORT] [--no-window] [--home DIR] [--on-overlap go|wait|fail]
# The library-only demo (plain Python writer processes, no Airflow or Spark):
#   .venv/bin/python -m airflow_hudi_occ.testing.demo --writers 8 --batches 10
exec bash "$(dirname "$0")/airflow-demo.sh" "$@"
