#!/usr/bin/env bash
# Install Java Hudi for the interop tests (issue 30), idempotently, into .work/java-hudi/
# (git-ignored; HUDI_OCC_JAVA_HUDI_DIR moves it):
#   jars/hudi-spark3.5-bundle_2.12-<v>.jar   Hudi's Spark bundle, fetched by Maven's own client
#   jars/hadoop-aws-3.3.4.jar, jars/aws-java-sdk-bundle-1.12.262.jar
#                                            Hadoop's s3a connector for Java jobs on S3 tables
#   venv/                                    a second Python env with pyspark==3.5.5: Spark 3.5,
#                                            the Spark line that bundle is built for
#   setup.json                               what was installed, read by
#                                            airflow_hudi_occ/testing/java_hudi.py
# Why Spark 3.5 next to our PySpark 4.2, and why no utilities bundle: docs/java-interop.md
# ("Running Java Hudi"). A second run only checks (a few ms): nothing is downloaded at test time.
# Quiet: one line per step, Maven's and pip's output in .work/bootstrap.log (scripts/steps.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
STEP_PREFIX=install-java-hudi
source scripts/steps.sh
did=""  # the steps that ran; none: one "up to date" line
DIR=${HUDI_OCC_JAVA_HUDI_DIR:-$ROOT/.work/java-hudi}

# Pinned. The bundle is the newest Hudi 1.2.x Spark bundle whose jar Maven Central serves to this
# project's machines (1.2.1's pom is served, its jar is not); Hudi 1.2.0 is built against
# Spark 3.5.5 (spark35.version in its pom). The SHA-256 is the jar's as first fetched.
HUDI_VERSION=1.2.0
HUDI_ARTIFACT=hudi-spark3.5-bundle_2.12
HUDI_JAR_SHA256=cc79fba00822f3a6c3a860df99375c2e3d4a034d037dbf4213a4966a706a7676
PYSPARK_VERSION=3.5.5


# -- tools: a JDK (Spark 3.5 runs on 17) and Maven ---------------------------------------------
missing=""
command -v java >/dev/null 2>&1 || missing="$missing openjdk-17-jdk-headless"
command -v mvn >/dev/null 2>&1 || missing="$missing maven"
if [ -n "$missing" ]; then
  apt_install $missing
  did=1
fi

mkdir -p "$DIR/jars"

# -- the Hudi bundle --------------------------------------------------------------------------
JAR="$DIR/jars/$HUDI_ARTIFACT-$HUDI_VERSION.jar"
fetch_jar() {  # group artifact version sha256: a jar by Maven's own client, checked against its pin
  local jar="$DIR/jars/$2-$3.jar"
  rm -f "$jar"
  # --strict-checksums: Maven refuses a jar whose SHA-1 does not match the repository's.
  mvn -B -q --strict-checksums org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
      "-Dartifact=$1:$2:$3:jar" "-DoutputDirectory=$DIR/jars" -Dmdep.overWriteReleases=true
  echo "$4  $jar" | sha256sum -c --status || {
    echo "install-java-hudi: $jar does not have the pinned SHA-256 $4" >&2; exit 1; }
}
if ! { [ -s "$JAR" ] && echo "$HUDI_JAR_SHA256  $JAR" | sha256sum -c --status; }; then
  step --size-of "$JAR" "$HUDI_ARTIFACT $HUDI_VERSION (mvn)" \
      fetch_jar org.apache.hudi "$HUDI_ARTIFACT" "$HUDI_VERSION" "$HUDI_JAR_SHA256"
  did=1
fi

# -- Hadoop's s3a connector: Java jobs on S3 tables (HudiJavaWriteOperator / HudiJavaTableServiceOperator
# with jars=..., docs/java-engine.md). hadoop-aws matches the Hadoop in pyspark 3.5.5 (3.3.4),
# and the AWS SDK bundle is the version that Hadoop release pins. SHA-256s as first fetched.
S3A_ARTIFACTS="org.apache.hadoop:hadoop-aws:3.3.4:53f9ae03c681a30a50aa17524bd9790ab596b28481858e54efd989a826ed3a4a
com.amazonaws:aws-java-sdk-bundle:1.12.262:873fe7cf495126619997bec21c44de5d992544aea7e632fdc77adb1a0915bae5"
S3A_JARS=""
while IFS=: read -r group artifact version sha; do
  jar="$DIR/jars/$artifact-$version.jar"
  if ! { [ -s "$jar" ] && echo "$sha  $jar" | sha256sum -c --status; }; then
    step --size-of "$jar" "$artifact $version (mvn)" fetch_jar "$group" "$artifact" "$version" "$sha"
    did=1
  fi
  S3A_JARS="$S3A_JARS${S3A_JARS:+, }\"$jar\""
done <<< "$S3A_ARTIFACTS"

# -- Spark 3.5: pyspark in its own virtualenv (our .venv keeps PySpark 4.2) ---------------------
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null 2>&1 || PY=python3
VENV="$DIR/venv"
stamp="$VENV/.pyspark-$PYSPARK_VERSION"
if ! { [ -f "$stamp" ] && [ -x "$VENV/bin/spark-submit" ]; }; then
  make_venv() {  # pyspark's sdist is large: a minute or two
    rm -rf "$VENV"
    "$PY" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --progress-bar off --upgrade pip
    "$VENV/bin/python" -m pip install --progress-bar off "pyspark==$PYSPARK_VERSION"
  }
  step "pyspark $PYSPARK_VERSION venv (pip)" make_venv
  touch "$stamp"
  did=1
fi

# -- what the harness reads -------------------------------------------------------------------
SPARK_HOME_DIR=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))')
cat > "$DIR/setup.json.tmp" <<EOF
{
  "hudi_version": "$HUDI_VERSION",
  "hudi_bundle": "org.apache.hudi:$HUDI_ARTIFACT:$HUDI_VERSION",
  "hudi_jar": "$JAR",
  "pyspark_version": "$PYSPARK_VERSION",
  "python": "$VENV/bin/python",
  "spark_submit": "$VENV/bin/spark-submit",
  "spark_home": "$SPARK_HOME_DIR",
  "s3a_jars": [$S3A_JARS]
}
EOF
mv "$DIR/setup.json.tmp" "$DIR/setup.json"
[ -n "$did" ] || up_to_date "Java Hudi $HUDI_VERSION, Spark $PYSPARK_VERSION" "${DIR#"$ROOT"/}"
