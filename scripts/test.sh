#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/bootstrap.sh), then runs pytest.
#   scripts/test.sh            the default suite (a representative slice of the slow suites)
#   scripts/test.sh --slow     everything, including the long stress and crash suites
# Extra arguments go to pytest. The files run on HUDI_OCC_TEST_WORKERS pytest-xdist workers (default
# 3 on 2 cores: most tests wait on processes, ZooKeeper sessions and heartbeats rather than
# compute; each file stays on one worker, so a file's shared set-up runs once); 0 runs in-process.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--slow" ]; then export HUDI_OCC_SLOW=1; shift; fi
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
workers=${HUDI_OCC_TEST_WORKERS:-3}
parallel=()
if [ "$workers" != "0" ]; then parallel=(-n "$workers" --dist loadfile); fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@"
