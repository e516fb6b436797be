#!/usr/bin/env bash
# Install S3Proxy (org.gaul:s3proxy, a Java S3 server) for the scale bench (issue 43), idempotently,
# into .work/s3proxy/ (git-ignored; HUDI_OCC_S3PROXY_DIR moves it):
#   s3proxy-<v>-jar-with-dependencies.jar   fetched by Maven's own client from Maven Central
# Not called by scripts/bootstrap.sh: no default test needs it (the tests use moto's server,
# airflow_hudi_occ/testing/s3.py). A second run only checks the jar's SHA-256 (a few ms).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$(pwd)
DIR=${HUDI_OCC_S3PROXY_DIR:-$ROOT/.work/s3proxy}

VERSION=4.1.0
SHA256=${HUDI_OCC_S3PROXY_SHA256:-}
JAR="$DIR/s3proxy-$VERSION-jar-with-dependencies.jar"

log() { echo "install-s3-server: $*"; }
command -v java >/dev/null 2>&1 && command -v mvn >/dev/null 2>&1 || {
  echo "install-s3-server: needs java and mvn (scripts/install-java-hudi.sh installs both)" >&2; exit 1; }
mkdir -p "$DIR"
if [ -s "$JAR" ] && { [ -z "$SHA256" ] || echo "$SHA256  $JAR" | sha256sum -c --status; }; then
  exit 0
fi
log "fetching org.gaul:s3proxy:$VERSION:jar-with-dependencies with mvn"
rm -f "$JAR"
mvn -B -q --strict-checksums org.apache.maven.plugins:maven-dependency-plugin:3.6.1:copy \
    "-Dartifact=org.gaul:s3proxy:$VERSION:jar:jar-with-dependencies" \
    "-DoutputDirectory=$DIR" -Dmdep.overWriteReleases=true
log "$(sha256sum "$JAR")"
