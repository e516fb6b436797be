#!/usr/bin/env bash
# The main job on embedded defaults: installs what it needs (scripts/bootstrap.sh), then runs
# concurrent writers against a local table with the file-system lock and shows the result.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/bootstrap.sh
export PYSPARK_PYTHON="$(pwd)/.venv/bin/python"
exec .venv/bin/python -m airflow_hudi_occ.demo "$@"
