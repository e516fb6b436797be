#!/usr/bin/env bash
# docker-compose.yaml's topology from local processes on 127.0.0.1 (no Docker needed):
# ZooKeeper, the loopback S3 server, a Spark standalone master + worker, `airflow standalone`
# (SQLite), the compose file's connections; triggers the example DAGs through the REST API,
# checks the table with hudi-rs against the model, tears everything down. Exit 0/1.
#   scripts/topology.sh [--workdir DIR] [--ingestion-runs N] [--timeout S]
# Needs the venv of scripts/bootstrap.sh (airflow, spark extras) and scripts/install-zookeeper.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${HUDI_OCC_PYTHON:-.venv/bin/python}
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$(realpath "$PY")}
exec env PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m airflow_hudi_occ.testing.topology "$@"
