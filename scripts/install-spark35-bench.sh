#!/usr/bin/env bash
# Install the same-Spark benchmark's set-up (bench/same_spark.py, issue 31 item 2), idempotently,
# into .work/spark35-bench/ (git-ignored; HUDI_OCC_SPARK35_BENCH_DIR moves it):
#   venv/        pyspark==3.5.5 (the Spark Java Hudi's bundle is built for) with this package's
#                runtime dependencies at the versions constraints.txt pins, so our engine, Java
#                Hudi and Delta Lake run in one Spark session, one JVM
#   jars/        Delta Lake for Spark 3.5 (delta-spark_2.12 and delta-storage), fetched by Maven
#   setup.json   what was installed, read by bench/same_spark.py
# Java Hudi's bundle is the one scripts/install-java-hudi.sh installs (run first). A second run
# only checks (a few ms). Nothing here is needed by the tests' default run.
# Quiet: one line per step, Maven's and pip's output in .work/bootstrap.log (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STEP_PREFIX=install-spark35-bench
source scripts/steps.sh
did=""  # the steps that ran; none: one "up to date" line
DIR=${HUDI_OCC_SPARK35_BENCH_DIR:-$ROOT/.work/spark35-bench}
JAVA_DIR=${HUDI_OCC_JAVA_HUDI_DIR:-$ROOT/.work/java-hudi}

# Pinned: the newest Delta 3.x line for Spark 3.5 (Delta 4 needs Spark 4, whose Hudi bundle
# this Maven Central does not serve); the SHA-256 are the jars' as first fetched.
DELTA_VERSION=3.3.2
DELTA_SPARK_SHA256=4e92085d5d794cf949c50bb665b91384857cad58680c2d0bfc9c7ad353e98e85
DELTA_STORAGE_SHA256=c096975a2ca97ccc9b4005aa5cce16c9ac3903139d340da6665b66ace67d7c36
PYSPARK_VERSION=3.5.5

[ -f "$JAVA_DIR/setup.json" ] || { echo "install-spark35-bench: $JAVA_DIR/setup.json missing: run scripts/install-java-hudi.sh first" >&2; exit 1; }
mkdir -p "$DIR/jars"

fetch_jar() {  # artifact version sha256
  local jar="$DIR/jars/$1-$2.jar"
  rm -f "$jar"
  mvn -B -q --strict-checksums org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      "-Dartifact=io.delta:$1:$2:jar" "-DoutputDirectory=$DIR/jars" -Dmdep.overWriteReleases=true
  echo "$3  $jar" | sha256sum -c --status || {
    echo "install-spark35-bench: $jar does not have the pinned SHA-256 $3" >&2; exit 1; }
}
fetch() {  # artifact version sha256
  local jar="$DIR/jars/$1-$2.jar"
  if ! { [ -s "$jar" ] && echo "$3  $jar" | sha256sum -c --status; }; then
    step --size-of "$jar" "$1 $2 (mvn)" fetch_jar "$@"
    did=1
  fi
}
fetch delta-spark_2.12 "$DELTA_VERSION" "$DELTA_SPARK_SHA256"
fetch delta-storage "$DELTA_VERSION" "$DELTA_STORAGE_SHA256"

# -- Spark 3.5 with our runtime dependencies ---------------------------------------------------
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV="$DIR/venv"
PACKAGES="fsspec fastavro kazoo pyarrow numpy pandas<3 hudi psutil"
stamp="$VENV/.ready-$PYSPARK_VERSION-$( (cat constraints.txt; echo "$PACKAGES") | sha256sum | cut -c1-12)"
if [ ! -f "$stamp" ]; then
  make_venv() {
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --progress-bar off --upgrade pip
    # constraints.txt pins PySpark 4.2 (and its py4j): everything else at the tested versions
    grep -v -E '^(pyspark|py4j)==' constraints.txt > "$DIR/constraints-spark35.txt"
    # pyarrow, fastavro, kazoo, fsspec, numpy: pyproject's runtime dependencies; pandas for
    # Spark's Arrow transfer; hudi (hudi-rs) to check what the bench wrote; delta-spark for
    # DeltaTable.merge (Python files only: its jars are the ones fetched above); psutil for the
    # bench's peak memory of the session's process tree
    "$VENV/bin/python" -m pip install --progress-bar off -c "$DIR/constraints-spark35.txt" \
        "pyspark==$PYSPARK_VERSION" "delta-spark==$DELTA_VERSION" $PACKAGES
  }
  step "pyspark $PYSPARK_VERSION venv with the runtime dependencies (pip)" make_venv
  touch "$stamp"
  did=1
fi

cat > "$DIR/setup.json.tmp" <<JSON
{
  "delta_version": "$DELTA_VERSION",
  "delta_jars": ["$DIR/jars/delta-spark_2.12-$DELTA_VERSION.jar", "$DIR/jars/delta-storage-$DELTA_VERSION.jar"],
  "pyspark_version": "$PYSPARK_VERSION",
  "python": "$VENV/bin/python",
  "java_hudi_setup": "$JAVA_DIR/setup.json"
}
JSON
mv "$DIR/setup.json.tmp" "$DIR/setup.json"
[ -n "$did" ] || up_to_date "Delta $DELTA_VERSION, Spark $PYSPARK_VERSION" "${DIR#"$ROOT"/}"
