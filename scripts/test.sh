#!/usr/bin/env bash
# The test command: installs what the tests need (scripts/bootstrap.sh), then runs pytest.
#   scripts/test.sh            the default suite (a representative slice of the slow suites)
#   scripts/test.sh --slow     everything, including the long stress and crash suites
# Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = "--slow" ]; then export HUDI_OCC_SLOW=1; shift; fi
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
exec .venv/bin/python -m pytest -q -p no:cacheprovider "$@"
