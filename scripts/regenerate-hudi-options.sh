#!/usr/bin/env bash
# Regenerate Hudi's option set (issue 41): every `hoodie.*` key Hudi 1.2's config classes define,
# read by reflection from the Spark bundle that scripts/install-java-hudi.sh installs, into the
# pinned file airflow_hudi_occ/core/hudi_options.json; then the generated section of
# docs/configuration.md from it (a pure-Python step, also run alone by `--doc-only`).
#
#   bash scripts/regenerate-hudi-options.sh            # one JVM run (a few seconds), then the doc
#   bash scripts/regenerate-hudi-options.sh --doc-only # the doc section only, from the pinned file
#   bash scripts/regenerate-hudi-options.sh --out F    # dump to F instead (the slow test compares)
#
# A key's status (honored / no effect here / refused) is not in the dump: it is kept by hand in
# airflow_hudi_occ/core/hudi_options.py, where a test fails for any dumped key without one.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
PY=${PYTHON:-$ROOT/.venv/bin/python}
PINNED=airflow_hudi_occ/core/hudi_options.json
OUT=$PINNED
DOC_ONLY=0
while [ $# -gt 0 ]; do
  case "$1" in
    --doc-only) DOC_ONLY=1 ;;
    --out) OUT=$2; shift ;;
    *) echo "regenerate-hudi-options: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done

if [ "$DOC_ONLY" = 0 ]; then
  SETUP=${HUDI_OCC_JAVA_HUDI_DIR:-$ROOT/.work/java-hudi}/setup.json
  [ -s "$SETUP" ] || { echo "regenerate-hudi-options: no $SETUP: run scripts/install-java-hudi.sh" >&2; exit 1; }
  read -r JAR SPARK_HOME BUNDLE < <("$PY" -c "import json,sys; s=json.load(open(sys.argv[1])); \
print(s['hudi_jar'], s['spark_home'], s['hudi_bundle'])" "$SETUP")
  CLASSES=$(mktemp -d)
  trap 'rm -rf "$CLASSES"' EXIT
  javac -d "$CLASSES" -cp "$JAR" scripts/hudi_options/DumpHudiOptions.java
  # Spark's jars: the bundle's Scala objects (DataSourceWriteOptions, ...) need them to load
  java -Xmx1g -cp "$JAR:$SPARK_HOME/jars/*:$CLASSES" DumpHudiOptions "$JAR" "$OUT" "$BUNDLE"
fi
if [ "$OUT" = "$PINNED" ]; then
  PYTHONPATH=$ROOT "$PY" scripts/hudi_options/write_doc.py docs/configuration.md
fi
