#!/usr/bin/env bash
# load.sh — what loading costs next to fetching: the same Avro page-view topic
# (Confluent-framed through the broker's embedded schema registry) read three
# ways on this machine, in one run:
#   1. `sluice bench consume` — the raw fetch rate of franz-go (no decode, no write);
#   2. `sluice load run`      — decode, map (identity), Parquet-zstd by hour on local disk, commit;
#   3. Apache Spark           — testdata/bench/spark_load.py: PySpark's batch Kafka source over
#                               the same explicit offset ranges, from_avro, Parquet-zstd by dt/hr,
#                               spark-submit --master local[$WORKERS].
# Prints records/s, MB/s of input, CPU-seconds, records per CPU-second and peak
# RSS for each, and issue 18's three aims as ratios. Both loads' outputs are
# read back (pyarrow) and must hold exactly RECORDS rows, else the script fails.
#
# Not part of `make test`. The first run with Spark installs PySpark and two
# connector jars under testdata/.cache (testdata/bench/spark/install.sh, ~3 min).
# Usage (from anywhere in the repo):
#   testdata/bench/load.sh                      # 5M records (several minutes on 2 cores)
#   RECORDS=1000000 testdata/bench/load.sh      # quicker
# Environment: RECORDS, PARTITIONS (default 4), WORKERS (default 2: loader workers
# and Spark cores), SPARK=0 skips Spark, FRAMED=0 produces bare Avro (schema_file),
# KEEP=1 keeps the work directory.
# VARIANT adds loads of other topics, each against the Avro identity load above
# in the same run (comma-separated; "all" for both):
#   protobuf  the same page views as Confluent-framed Protobuf (loadgen --value protobuf,
#             ts a google.protobuf.Timestamp): Protobuf's CPU per record / Avro's (aim <= 1.5);
#   explode   Avro page views with an items array of ITEMS (default 4) records, loaded with
#             map: {mapper: explode, field: items}: explode's CPU per output row / identity's
#             CPU per record (aim <= 1).
#   SPARK=0 VARIANT=all RECORDS=1000000 testdata/bench/load.sh
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RECORDS=${RECORDS:-5000000}
PARTITIONS=${PARTITIONS:-4}
WORKERS=${WORKERS:-2}
SPARK=${SPARK:-1}
FRAMED=${FRAMED:-1}
VARIANT=${VARIANT:-}
[ "$VARIANT" = all ] && VARIANT=protobuf,explode
ITEMS=${ITEMS:-4}
has_variant() { case ",$VARIANT," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
for v in ${VARIANT//,/ }; do
  case $v in protobuf | explode) ;; *) echo "load-bench: VARIANT $v: want protobuf, explode or all" >&2; exit 1 ;; esac
done

log() { echo "[load-bench] $*" >&2; }
die() { echo "load-bench: $*" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || die "/usr/bin/time not found (apt-get install time)"
python3 -c 'import pyarrow.dataset' 2>/dev/null || die "python3 cannot import pyarrow (make deps-python installs it)"

if [ "$SPARK" = 1 ]; then
  log "Spark: checking its install (testdata/bench/spark/install.sh)"
  t0=$(date +%s)
  testdata/bench/spark/install.sh
  log "Spark: install check took $(($(date +%s) - t0)) s"
  SPARK_VENV=$ROOT/testdata/.cache/spark-venv
  SPARK_JARS=$(ls "$ROOT"/testdata/.cache/spark/jars/*.jar | paste -sd, -)
fi

WORK=$(mktemp -d /tmp/sluice-load-bench.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] && log "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

log "building sluice and the generator"
go build -o "$WORK/sluice" ./cmd/sluice
go build -o "$WORK/loadgen" ./testdata/bench/loadgen
SLUICE="$WORK/sluice"

PORT=$(free_port)
B=127.0.0.1:$PORT
REG=http://127.0.0.1:$(free_port)
"$SLUICE" broker --data-dir "$WORK/data" --listen "$B" --registry-listen "${REG#http://}" >"$WORK/broker.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do "$SLUICE" topics list --bootstrap "$B" >/dev/null 2>&1 && break; sleep 0.1; done
"$SLUICE" topics create pageviews --partitions "$PARTITIONS" --bootstrap "$B" >&2

if [ "$FRAMED" = 1 ]; then
  log "producing $RECORDS Avro page views, Confluent-framed (schema registry $REG)"
  "$WORK/loadgen" --bootstrap "$B" --topic pageviews --records "$RECORDS" --schema-out "$WORK/pageview.avsc" --registry "$REG" >"$WORK/loadgen.out"
  DECODE="registry: $REG"
else
  log "producing $RECORDS Avro page views, unframed"
  "$WORK/loadgen" --bootstrap "$B" --topic pageviews --records "$RECORDS" --schema-out "$WORK/pageview.avsc" >"$WORK/loadgen.out"
  DECODE="schema_file: pageview.avsc"
fi
# The input: the topic's partition logs (batches as produced, zstd) on the broker,
# what every reader fetches. RAW_BYTES: the records' keys and values before
# batching and compression, as loadgen counted them.
INPUT_BYTES=$(cat "$WORK"/data/pageviews-*/*.log | wc -c)
[ "$INPUT_BYTES" -gt 0 ] || die "no pageviews-*/*.log under $WORK/data: has the broker's layout changed?"
read -r _ n _ kb _ vb <"$WORK/loadgen.out" || die "loadgen printed no sizes"
[ "$n" = "$RECORDS" ] || die "loadgen produced $n records, want $RECORDS"
RAW_BYTES=$((kb + vb))
# The offset ranges every reader loads: [log start, high watermark) per partition.
OFFSETS=$("$SLUICE" topics describe pageviews --bootstrap "$B" | awk '
  $1 ~ /^[0-9]+$/ && NF >= 6 { printf "%s\"%s\":[%s,%s]", sep, $1, $(NF-1), $NF; sep = "," }
  END { print "" }')
OFFSETS="{$OFFSETS}"
python3 -c "
import json, sys
r = json.loads(sys.argv[1]); n = sum(e - s for s, e in r.values())
sys.exit(0 if len(r) == $PARTITIONS and n == $RECORDS else f'load-bench: offsets {r} hold {n} records, want $RECORDS in $PARTITIONS partitions')" "$OFFSETS"
log "offset ranges: $OFFSETS"

# check_rows NAME DIR [ROWS KEYS]: the Parquet dataset under DIR (hive dt=/hr=
# directories; names starting with _ or ., such as _sluice and _SUCCESS, are
# not data) must hold ROWS (default RECORDS) rows, each of its KEYS (default
# _partition,_offset; explode's rows add _row) once: nothing lost or doubled.
check_rows() {
  local n want=${3:-$RECORDS} keys=${4:-_partition,_offset}
  n=$(python3 -c "
import pyarrow.dataset as ds, sys
keys = sys.argv[2].split(',')
t = ds.dataset(sys.argv[1], format='parquet', partitioning='hive').to_table(columns=keys)
print(t.num_rows, t.group_by(keys).aggregate([]).num_rows)" "$2" "$keys")
  [ "$n" = "$want $want" ] ||
    die "$1 wrote (rows, distinct $keys) = ($n) to $2, want $want of each: the benchmark would be void"
  log "$1: $want rows, each ($keys) once, read back from $2"
}

# measure NAME CMD...: runs CMD under /usr/bin/time; sets WALL, CPU, RSS_MB.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" ||
    { tail -n 40 "$WORK/$name.err" >&2; die "$name failed (its stderr: $WORK/$name.err; KEEP=1 keeps it)"; }
  read -r WALL U S RSS <"$WORK/$name.time"
  CPU=$(python3 -c "print(round($U + $S, 2))")
  RSS_MB=$((RSS / 1024))
}

ROWS=()
row() { # name records wall cpu rss
  ROWS+=("$(python3 -c "
n, w, c = $2, $3, $4
print(f'| $1 | {n/w:,.0f} | {$INPUT_BYTES/w/1e6:,.1f} | {c:.2f} | {n/c:,.0f} | $5 |')")")
}

log "raw fetch: sluice bench consume"
measure consume "$SLUICE" bench consume --bootstrap "$B" --topic pageviews --records "$RECORDS" --report-interval 1h
row "sluice bench consume (raw fetch)" "$RECORDS" "$WALL" "$CPU" "$RSS_MB"
FETCH_RATE=$(python3 -c "print($RECORDS / $WALL)")

cat >"$WORK/job.yaml" <<JOB
name: bench
source:
  bootstrap: [$B]
  topics: [pageviews]
  max_records_per_task: 1000000
decode:
  format: avro
  $DECODE
partition:
  by: hour
  time_field: ts
output:
  uri: $WORK/warehouse
  format: parquet
  compression: zstd
  metadata_columns: true
JOB
log "load: sluice load run (Parquet-zstd, $WORKERS workers)"
measure load "$SLUICE" load run "$WORK/job.yaml" --workers "$WORKERS" --quiet
row "sluice load run → Parquet-zstd" "$RECORDS" "$WALL" "$CPU" "$RSS_MB"
LOAD_RATE=$(python3 -c "print($RECORDS / $WALL)")
LOAD_CPU=$CPU
OUT_BYTES=$(du -sb --exclude=_sluice "$WORK/warehouse" | cut -f1)
check_rows "sluice load run" "$WORK/warehouse"

# variant_load NAME TOPIC DECODE MAP: loads TOPIC (produced by the caller) with
# its own job and measures it; sets CPU as measure does.
variant_load() {
  local name=$1 topic=$2 decode=$3 map=$4
  cat >"$WORK/$name.yaml" <<JOB
name: bench-$name
source:
  bootstrap: [$B]
  topics: [$topic]
  max_records_per_task: 1000000
decode:
  $decode
$map
partition:
  by: hour
  time_field: ts
output:
  uri: $WORK/warehouse-$name
  format: parquet
  compression: zstd
  metadata_columns: true
JOB
  log "load ($name): sluice load run (Parquet-zstd, $WORKERS workers)"
  measure "load-$name" "$SLUICE" load run "$WORK/$name.yaml" --workers "$WORKERS" --quiet
}
if has_variant protobuf; then
  [ "$FRAMED" = 1 ] || die "VARIANT=protobuf compares with the Confluent-framed Avro load: leave FRAMED=1"
  "$SLUICE" topics create pageviews-pb --partitions "$PARTITIONS" --bootstrap "$B" >&2
  log "protobuf: producing $RECORDS page views as Confluent-framed Protobuf"
  "$WORK/loadgen" --bootstrap "$B" --topic pageviews-pb --records "$RECORDS" --registry "$REG" --value protobuf >"$WORK/loadgen-pb.out"
  variant_load protobuf pageviews-pb "format: protobuf
  registry: $REG" ""
  row "sluice load run, Protobuf → Parquet-zstd" "$RECORDS" "$WALL" "$CPU" "$RSS_MB"
  PB_CPU=$CPU
  check_rows "sluice load run (protobuf)" "$WORK/warehouse-protobuf"
fi
if has_variant explode; then
  "$SLUICE" topics create pageviews-items --partitions "$PARTITIONS" --bootstrap "$B" >&2
  log "explode: producing $RECORDS Avro page views with $ITEMS items each"
  if [ "$FRAMED" = 1 ]; then
    "$WORK/loadgen" --bootstrap "$B" --topic pageviews-items --records "$RECORDS" --items "$ITEMS" --registry "$REG" >"$WORK/loadgen-items.out"
    XDECODE="format: avro
  registry: $REG"
  else
    "$WORK/loadgen" --bootstrap "$B" --topic pageviews-items --records "$RECORDS" --items "$ITEMS" --schema-out "$WORK/items.avsc" >"$WORK/loadgen-items.out"
    XDECODE="format: avro
  schema_file: items.avsc"
  fi
  variant_load explode pageviews-items "$XDECODE" "map:
  mapper: explode
  field: items"
  XROWS=$((RECORDS * ITEMS))
  row "sluice load run, explode $ITEMS items → Parquet-zstd (records/s: input records)" "$RECORDS" "$WALL" "$CPU" "$RSS_MB"
  EXPLODE_CPU=$CPU
  check_rows "sluice load run (explode)" "$WORK/warehouse-explode" "$XROWS" _partition,_offset,_row
fi

if [ "$SPARK" = 1 ]; then
  log "Spark: spark-submit --master local[$WORKERS] spark_load.py (Parquet-zstd by dt/hr)"
  if [ "$FRAMED" = 1 ]; then SCHEMA_ARGS=(--registry "$REG"); else SCHEMA_ARGS=(--schema-file "$WORK/pageview.avsc"); fi
  # spark-submit execs the JVM, whose child is the Python driver: /usr/bin/time
  # counts both. Spark binds to loopback only.
  spark_submit() {
    SPARK_LOCAL_IP=127.0.0.1 PYSPARK_PYTHON="$SPARK_VENV/bin/python" \
      measure "$1" "$SPARK_VENV/bin/spark-submit" --master "local[$WORKERS]" --jars "$SPARK_JARS" \
      --conf spark.driver.host=127.0.0.1 --conf spark.driver.bindAddress=127.0.0.1 \
      testdata/bench/spark_load.py "${@:2}"
  }
  spark_submit spark --bootstrap "$B" --topic pageviews --offsets "$OFFSETS" "${SCHEMA_ARGS[@]}" --out "$WORK/spark"
  row "Spark $(cat "$SPARK_VENV/.complete") → Parquet-zstd (local[$WORKERS])" "$RECORDS" "$WALL" "$CPU" "$RSS_MB"
  SPARK_CPU=$CPU
  SPARK_OUT_BYTES=$(du -sb "$WORK/spark" | cut -f1)
  check_rows "Spark" "$WORK/spark"
  log "Spark: its fixed cost (spark_load.py --startup-only)"
  spark_submit spark-startup --startup-only
  SPARK_STARTUP="Spark's fixed cost, in the row above: $WALL s wall, $CPU CPU-s (a one-row job)"
fi

mb() { python3 -c "print(f'{$1 / 1e6:.1f}')"; }
echo
echo "$RECORDS records ($([ "$FRAMED" = 1 ] && echo Confluent-framed || echo unframed) Avro), $PARTITIONS partitions, input $(mb "$INPUT_BYTES") MB on the broker ($(mb "$RAW_BYTES") MB of keys and values uncompressed); output: sluice $(mb "$OUT_BYTES") MB Parquet${SPARK_OUT_BYTES:+, Spark $(mb "$SPARK_OUT_BYTES") MB}"
echo
echo "| reader | records/s | MB/s of input | CPU-s | records per CPU-s | peak RSS MiB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for r in "${ROWS[@]}"; do echo "$r"; done
echo
[ -z "${SPARK_STARTUP:-}" ] || { echo "$SPARK_STARTUP"; echo; }
python3 -c "
def aim(ok): return 'met' if ok else 'NOT met'
r = $LOAD_RATE / $FETCH_RATE
print(f'load / raw fetch rate:               {r:.2f} (aim >= 0.75: {aim(r >= 0.75)})')
m = $INPUT_BYTES / 1e6 / $LOAD_CPU
u = $RAW_BYTES / 1e6 / $LOAD_CPU
print(f'load MB of input per CPU-second:     {m:.1f} as fetched; {u:.1f} of uncompressed keys and values (aim >= 150: {aim(u >= 150)})')
pb_cpu = '${PB_CPU:-}'
if pb_cpu:
    x = float(pb_cpu) / $LOAD_CPU
    print(f'Protobuf / Avro CPU per record:      {x:.2f} (aim <= 1.5: {aim(x <= 1.5)})')
x_cpu = '${EXPLODE_CPU:-}'
if x_cpu:
    x = (float(x_cpu) / ${XROWS:-1}) / ($LOAD_CPU / $RECORDS)
    print(f'explode CPU per output row / identity CPU per record: {x:.2f} (aim <= 1: {aim(x <= 1)}; {$ITEMS} rows per record)')
spark_cpu = '${SPARK_CPU:-}'
if spark_cpu:
    x = float(spark_cpu) / $LOAD_CPU
    print(f'load / Spark records per CPU-second: {x:.2f} (aim >= 15: {aim(x >= 15)})')
"
