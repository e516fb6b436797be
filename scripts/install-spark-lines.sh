#!/usr/bin/env bash
# Install one venv per Spark line the engine runs on (issue 42 item 1), idempotently:
#   scripts/install-spark-lines.sh [LINE ...]      LINE: 3.5 4.0 4.1 4.2 (default: 3.5 4.0)
# into .work/spark-lines/<line>/venv (HUDI_OCC_SPARK_LINES_DIR moves the folder): that line's
# PySpark at constraints/spark-<line>.txt's version, with this package's runtime dependencies,
# pandas (Spark's Arrow transfer), hudi (hudi-rs, the smoke's reader) and the engine suite's
# test tools (pytest, pytest-timeout, hypothesis) at the versions
# constraints.txt pins (its pyspark, py4j and pyspark-client pins dropped: the line's own win).
# The package itself is not installed there: the smoke runs the checkout's (PYTHONPATH), so a
# line's venv serves every checkout. Line 4.2 is the project's .venv (scripts/bootstrap.sh).
# A venv is rebuilt only when the pin of a package in it changes (its stamp holds the hash of
# the line's pins and of constraints.txt's lines for the packages installed there, so a pin
# added to constraints.txt for another extra rebuilds nothing); a second run only checks. PySpark is an sdist on PyPI for some lines: its first install builds a wheel
# (about 400 MB, a minute or two), which pip's cache then serves.
# Quiet: one line per step, pip's output in .work/bootstrap.log (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STEP_PREFIX=install-spark-lines
source scripts/steps.sh
DIR=${HUDI_OCC_SPARK_LINES_DIR:-$ROOT/.work/spark-lines}
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
lines=("$@")
[ ${#lines[@]} -gt 0 ] || lines=(3.5 4.0)
# What each line's venv holds besides its pyspark: pyproject's runtime dependencies (fsspec,
# fastavro, kazoo, pyarrow, numpy), pandas for Spark's Arrow transfer, hudi (hudi-rs) to read
# back what the smoke wrote, and what the engine's test suite needs to run on the line with
# --slow (pytest, pytest-timeout, hypothesis)
PACKAGES="fsspec fastavro kazoo pyarrow numpy pandas<3 hudi pytest pytest-timeout hypothesis"
# The hash of what a line's venv was built from: the package list, the line's pins, and
# constraints.txt's pins of the distributions installed in the venv (names normalized as pip
# does: case, - _ .).
pins_hash() {  # venv pins-file
  local names
  names=$(ls -d "$1"/lib/python*/site-packages/*.dist-info 2>/dev/null | sed 's#.*/##; s/-[^-]*\.dist-info$//' \
          | tr 'A-Z.-' 'a-z__' | sort -u)
  { echo "$PACKAGES"; cat "$2"; awk -F'==' -v names="$names" 'BEGIN { n = split(names, a, "\n"); for (i = 1; i <= n; i++) want[a[i]] = 1 }
        { k = tolower($1); gsub(/[-.]/, "_", k); if (k in want) print }' constraints.txt; } | sha256sum | cut -c1-12
}
ready=()  # the lines with nothing to do: one "up to date" line for all of them

for line in "${lines[@]}"; do
  pins="constraints/spark-$line.txt"
  [ -f "$pins" ] || { echo "install-spark-lines: no $pins: the lines are $(ls constraints | sed -n 's/^spark-\(.*\)\.txt$/\1/p' | tr '\n' ' ')" >&2; exit 2; }
  if [ "$line" = "4.2" ]; then
    ready+=("4.2 in .venv")
    continue
  fi
  venv="$DIR/$line/venv"
  stamp="$venv/.ready"
  version=$(sed -n 's/^pyspark==//p' "$pins")
  if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$(pins_hash "$venv" "$pins")" ]; then
    ready+=("$line: pyspark $version")
    continue
  fi
  make_venv() {
    rm -rf "$venv"
    mkdir -p "$DIR/$line"
    "$PY" -m venv "$venv"
    "$venv/bin/python" -m pip install --progress-bar off --upgrade pip
    { grep -v -E '^(pyspark|pyspark-client|py4j)==' constraints.txt; cat "$pins"; } > "$DIR/$line/constraints.txt"
    # shellcheck disable=SC2086 # the list splits into its names
    "$venv/bin/python" -m pip install --progress-bar off -c "$DIR/$line/constraints.txt" \
        "pyspark==$version" $PACKAGES
  }
  step "Spark $line: pyspark $version venv with the runtime dependencies (pip)" make_venv
  pins_hash "$venv" "$pins" > "$stamp"
done
if [ ${#ready[@]} -gt 0 ]; then
  up_to_date "Spark lines" "$(IFS=,; echo "${ready[*]}" | sed 's/,/, /g')"
fi
