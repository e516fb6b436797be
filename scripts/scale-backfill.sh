#!/usr/bin/env bash
# A year of backfill through the real scheduler (issue 43, item 5): `airflow standalone`
# (LocalExecutor) on a private PostgreSQL cluster (Debian's postgresql package, run by pg_ctl as
# a local process in the work folder: no systemd), the loopback S3 server behind the latency
# proxy, the storage lock; a backfill DAG mapped over --days daily partitions (--parallelism at a
# time, Spark local[1] a task) beside an ingestion DAG every minute into the same table, then the
# same backfill alone; every partition checked with hudi-rs and Java Hudi against the model; lost
# attempts and admission waits from the attempt log; the timeline page rendered in headless
# Chromium (time and screenshot). A summary at the end; exit 0/1.
#   scripts/scale-backfill.sh [--days 365] [--parallelism 16] [--latency-ms 20] [--rows-per-day 50]
#                             [--workdir .work/scale-backfill] [--timeout S] [--no-alone] [--port P]
# Set-up (quiet, one line a step, idempotent; scripts/steps.sh): the postgresql package if no
# server binaries are found, the venv of scripts/bootstrap.sh (its test extra holds psycopg2 and
# asyncpg, Airflow's PostgreSQL drivers) unless HUDI_OCC_PYTHON names a Python of your own, Java
# Hudi with the s3a jars. The cluster's folder (data, password, port, log) is kept between runs;
# each run gets a fresh Airflow database.
# Heavy: on 2 shared cores run small sizes (e.g. --days 14 --parallelism 4) under
# `flock /tmp/heavy.lock nice -n 5`.
set -euo pipefail
cd "$(dirname "$0")/.."
STEP_PREFIX=scale-backfill
source scripts/steps.sh

if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || [ -n "${HUDI_OCC_POSTGRES_BIN:-}" ]; then
  up_to_date "postgresql" "$(ls -d /usr/lib/postgresql/*/bin | tail -n1)"
else
  apt_install postgresql
fi
if [ -n "${HUDI_OCC_PYTHON:-}" ]; then
  PY=$HUDI_OCC_PYTHON
else
  bash scripts/bootstrap.sh
  PY=.venv/bin/python
fi
if ! "$PY" -c "import psycopg2, asyncpg" 2>/dev/null; then
  echo "$STEP_PREFIX: $PY cannot import psycopg2 and asyncpg (Airflow's PostgreSQL drivers): run" \
       "scripts/bootstrap.sh (the test extra installs them) or pip install them into that venv" >&2
  exit 1
fi
export PYSPARK_PYTHON=${PYSPARK_PYTHON:-$(cd "$(dirname "$PY")" && pwd)/$(basename "$PY")}
exec env PYTHONPATH="$(pwd)${PYTHONPATH:+:$PYTHONPATH}" "$PY" -m airflow_hudi_occ.testing.scale_backfill "$@"
