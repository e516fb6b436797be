#!/usr/bin/env bash
# The Airflow demo on embedded defaults: ingestion and backfill DAG runs at the same time
# (each its own `airflow dags test` process, SQLite), then the table-services DAG, then
# admission waits / conflicts / retries from the attempt log and the final table checked with
# hudi-rs; with --ui in `airflow standalone` instead, until Ctrl-C (scripts/demo.sh says more).
# Installs what it needs first (scripts/bootstrap.sh with the airflow extra). Exit 0/1.
#   scripts/airflow-demo.sh [--ingestion-runs N] [--zookeeper HOST:PORT] [--no-window] [--ui [--port P]]
set -euo pipefail
cd "$(dirname "$0")/.."
HUDI_OCC_EXTRAS=${HUDI_OCC_EXTRAS:-test,spark,airflow,bench,hive} bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
exec .venv/bin/python -m airflow_hudi_occ.testing.airflow_demo "$@"
