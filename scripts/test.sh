#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/bootstrap.sh), then runs pytest.
#   scripts/test.sh            the default suite (a representative slice of the slow suites)
#   scripts/test.sh --slow     everything, including the long stress and crash suites
# Extra arguments go to pytest. HUDI_OCC_TEST_WORKERS=N runs the files on N pytest-xdist workers
# (each file on one worker); the default, 0, runs them in one process: on 2 cores, 3 workers made
# the run slower, 33:20 instead of about 16 minutes (each worker starts its own Spark, Airflow
# and Java processes, and the machine is CPU-bound: 45 min of user time), see docs/setup.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--slow" ]; then export HUDI_OCC_SLOW=1; shift; fi
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
workers=${HUDI_OCC_TEST_WORKERS:-0}
parallel=()
if [ "$workers" != "0" ]; then parallel=(-n "$workers" --dist loadfile); fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@"
