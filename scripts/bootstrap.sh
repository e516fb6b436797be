#!/usr/bin/env bash
# Set up everything this project needs on a fresh machine, idempotently:
#   - Java (for Spark and the ZooKeeper server), from Debian if missing;
#   - Debian's zookeeper package (the real server the lock tests start), and Curator for the
#     Java-interop lock test (scripts/install-zookeeper.sh);
#   - Java Hudi for the interop tests: Hudi's Spark 3.5 bundle (Maven) and pyspark 3.5 in
#     .work/java-hudi/ (scripts/install-java-hudi.sh);
#   - the same-Spark benchmark's venv (pyspark 3.5 with this package's runtime dependencies)
#     and Delta Lake for Spark 3.5 in .work/spark35-bench/ (scripts/install-spark35-bench.sh;
#     only for `scripts/test.sh --slow`, whose smoke test of that bench needs it: about 850 MB);
#   - one venv per Spark line the engine runs on beside 4.2 (.venv): 3.5 and 4.0 for the
#     default run's smoke, 4.1 too with --slow, in .work/spark-lines/ (about 500 MB each,
#     scripts/install-spark-lines.sh);
#   - Debian's chromium + chromium-driver (the UI page is checked in headless Chromium) and
#     docker-compose 1.29 (docker-compose.yaml is validated offline with `docker-compose config`);
#   - a class-data archive of Spark's classes for the test run's JVMs (airflow_hudi_occ/testing/jvm.py);
#   - a virtualenv in .venv with the package and its test, spark, airflow, bench and hive extras
#     (HUDI_OCC_EXTRAS, default "test,spark,airflow,bench,hive"; bench: deltalake, the peer of
#     bench/peers.py, which the bench smoke test runs), at the exact versions of constraints.txt
#     (pyproject.toml gives ranges; pyspark stays within 4.2, the newest pyspark-client, so the
#     Airflow Spark provider cannot overwrite it with other files).
# A second run does nothing but check: the venv is rebuilt only when pyproject.toml or
# constraints.txt changed.
# Quiet: one line per step (what it downloaded, its time); apt, pip and Maven write to
# .work/bootstrap.log, whose end is shown only when a step fails (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
EXTRAS=${HUDI_OCC_EXTRAS:-test,spark,airflow,bench,hive}
STEP_PREFIX=bootstrap
source scripts/steps.sh

missing=""
if ! command -v java >/dev/null 2>&1 || ! command -v javac >/dev/null 2>&1; then
  missing="$missing openjdk-17-jdk-headless"
fi
command -v chromium >/dev/null 2>&1 || missing="$missing chromium"
command -v chromedriver >/dev/null 2>&1 || missing="$missing chromium-driver"
command -v docker-compose >/dev/null 2>&1 || missing="$missing docker-compose"
if [ -n "$missing" ]; then
  apt_install $missing
else
  up_to_date "JDK, Chromium, docker-compose"
fi
bash scripts/install-zookeeper.sh

PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
stamp=.venv/.airflow_hudi_occ-installed
want="$(cat pyproject.toml constraints.txt | sha256sum | cut -c1-16)-$EXTRAS"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  up_to_date ".venv" "airflow_hudi_occ[$EXTRAS]"
else
  if [ ! -x .venv/bin/python ]; then
    step ".venv ($PY -m venv)" "$PY" -m venv .venv
  fi
  pip_install() {
    .venv/bin/python -m pip install --progress-bar off --upgrade pip
    .venv/bin/python -m pip install --progress-bar off -e ".[$EXTRAS]" -c constraints.txt  # the versions tested together
  }
  step ".venv (pip install -e .[$EXTRAS])" pip_install
  echo "$want" > "$stamp"
fi
# The test run's spark-submit JVMs map Spark's classes from an archive (airflow_hudi_occ/testing/jvm.py:
# about a fifth less CPU per job on top of its JVM settings); built once per venv, PySpark and JDK.
archive=$(.venv/bin/python -c "from airflow_hudi_occ.testing import jvm; p = jvm.archive_path()
print('absent' if p is None else 'current' if p.is_file() else 'missing')")  # absent: no PySpark or JDK
if [ "$archive" = current ]; then
  up_to_date "Spark class-data archive"
elif [ "$archive" = missing ]; then
  step "Spark class-data archive (.venv/share/airflow_hudi_occ)" .venv/bin/python -m airflow_hudi_occ.testing.jvm
fi
bash scripts/install-java-hudi.sh
if [ "${HUDI_OCC_SLOW:-}" = "1" ]; then
  bash scripts/install-spark35-bench.sh
  bash scripts/install-spark-lines.sh 3.5 4.0 4.1   # the smoke on every line (4.2 is .venv)
else
  bash scripts/install-spark-lines.sh 3.5 4.0       # the default run's Spark-line smoke
fi
