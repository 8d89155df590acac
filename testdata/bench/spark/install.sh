#!/usr/bin/env bash
# install.sh — what testdata/bench/load.sh needs for its Spark column, under
# testdata/.cache (not part of `make test`):
#   testdata/.cache/spark-venv   a venv with PySpark $PYSPARK_VERSION from PyPI
#                                (Spark's own jars and spark-submit come with it);
#   testdata/.cache/spark/jars   the Kafka source and spark-avro with their runtime
#                                dependencies, from Maven through testdata/bench/spark/pom.xml
#                                (local repository testdata/.cache/m2), less the jars
#                                PySpark already ships.
# Idempotent: a stamp holds the version and the pom's checksum; a second run
# with both unchanged does nothing. Needs python3 (venv), java 17+ and mvn.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../../.." && pwd)
cd "$ROOT"
PYSPARK_VERSION=4.1.1 # must equal spark.version in testdata/bench/spark/pom.xml
VENV=testdata/.cache/spark-venv
JARS=testdata/.cache/spark/jars
POM=testdata/bench/spark/pom.xml

log() { echo "[spark-install] $*" >&2; }
die() { echo "spark-install: $*" >&2; exit 1; }
for c in java mvn python3; do
  command -v "$c" >/dev/null || die "$c not found (make deps-kafka installs java and maven)"
done
grep -q "<spark.version>$PYSPARK_VERSION</spark.version>" "$POM" ||
  die "$POM: spark.version differs from PYSPARK_VERSION=$PYSPARK_VERSION in $0"

if [ "$(cat "$VENV/.complete" 2>/dev/null)" != "$PYSPARK_VERSION" ]; then
  log "installing PySpark $PYSPARK_VERSION into $VENV (about 500 MB)"
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "python3 -m venv failed (apt-get install python3-venv)"
  "$VENV/bin/pip" install -q --disable-pip-version-check "pyspark==$PYSPARK_VERSION"
  echo "$PYSPARK_VERSION" >"$VENV/.complete"
fi

SPARK_JARS=$("$VENV/bin/python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))')
sum=$( (sha256sum "$POM" | cut -d' ' -f1; echo "$PYSPARK_VERSION") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$JARS/.complete" 2>/dev/null)" != "$sum" ]; then
  log "fetching the Spark Kafka source and spark-avro jars into $JARS"
  rm -rf "$JARS.tmp" "$JARS.all" && mkdir -p "$JARS.tmp"
  mvn -q -B -Dstyle.color=never -Dmaven.repo.local="$ROOT/testdata/.cache/m2" -f "$POM" \
    dependency:copy-dependencies -DoutputDirectory="$ROOT/$JARS.all" -DincludeScope=runtime
  # Keep only what Spark lacks: a second scala-library or slf4j-api of
  # another version on the class path would clash with Spark's own.
  for f in "$JARS.all"/*.jar; do
    b=$(basename "$f" .jar)
    artifact=${b%-*}
    if ! ls "$SPARK_JARS" | grep -q "^$artifact-[0-9]"; then cp "$f" "$JARS.tmp/"; fi
  done
  rm -rf "$JARS.all"
  echo "$sum" >"$JARS.tmp/.complete"
  rm -rf "$JARS" && mv "$JARS.tmp" "$JARS"
fi
