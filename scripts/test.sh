#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/bootstrap.sh), then runs pytest.
#   scripts/test.sh            the default suite (a representative slice of the slow suites)
#   scripts/test.sh --slow     everything, including the long stress and crash suites
# Extra arguments go to pytest. HUDI_OCC_TEST_WORKERS=N runs the files on N pytest-xdist workers
# (each file on one worker, the longest files first: tests/conftest.py LONGEST_FIRST). The default
# is 3 on the 2 cores: about a quarter of the run is waiting (a JVM's start, a server's, a
# subprocess's poll), and the third worker fills it; measured in docs/setup.md ("The tests").
# HUDI_OCC_TEST_WORKERS=0 runs everything in one process (see docs/setup.md).
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--slow" ]; then export HUDI_OCC_SLOW=1; shift; fi
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
workers=${HUDI_OCC_TEST_WORKERS:-3}
parallel=()
if [ "$workers" != "0" ]; then parallel=(-n "$workers" --dist loadfile --no-loadscope-reorder); fi
exec .venv/bin/python -m pytest -q -p no:cacheprovider "${parallel[@]}" "$@"
