#!/usr/bin/env bash
# vs-kafka.sh — sluice broker side by side with Apache Kafka 4.1 on this machine.
#
# Starts a single-node KRaft Apache Kafka (from the jars `make deps-kafka`
# fetches) and a sluice broker, then runs Kafka's own ProducerPerformance and
# ConsumerPerformance, and `sluice bench produce|consume`, against both with the
# same settings: 100-byte and 1 KiB records, acks=1 and acks=all, 1 and 6
# partitions, plus p99 produce latency at a fixed 50,000 records/s. Prints a
# table of records/s, MB/s, p99 latency and broker RSS with sluice/Kafka ratios.
#
# Not part of `make test`. Usage (from anywhere in the repo):
#   testdata/bench/vs-kafka.sh                # ~10 minutes on 2 cores
#   RECORDS_100=500000 RECORDS_1K=100000 testdata/bench/vs-kafka.sh   # quicker
#   CONFIGS="100:6:1" FIXED=0 REPEAT=1 RECORDS_100=200000 testdata/bench/vs-kafka.sh   # a smoke run
# Environment: RECORDS_100, RECORDS_1K (records per produce run), FIXED_RATE,
# FIXED_RECORDS, REPEAT (runs per measurement, best kept; default 2), KAFKA_HEAP (default "-Xms1g -Xmx1g", as kafka-server-start.sh),
# CONFIGS (space-separated size:partitions:acks, default all 8), FIXED=0 skips
# the fixed-rate latency rows, COMPRESSION (the producers' codec: none, gzip,
# snappy, lz4, zstd; both brokers then validate compressed batches), KEEP=1
# keeps the work directory.
# MODE=txn runs the transactional comparison instead (testdata/bench/vs-kafka.sh
# with MODE=txn; README "Benchmarks", "Transactions"): for each TXN_CONFIGS
# entry size:ms, ProducerPerformance --transactional-id --transaction-duration-ms
# ms, and `sluice bench produce --transactional-id --txn-records N` with N the
# records a Kafka transaction held in a calibration run (its records/s x ms), so
# both clients commit transactions of the same size, against both brokers,
# acks=all, 1 partition; then ConsumerPerformance with isolation.level
# read_committed and read_uncommitted over the transactional topic on each
# broker, all the topic's records, CONSUME_REPEAT times (default 4).
# TXN_RECORDS_100, TXN_RECORDS_1K are the records per produce run (default
# 500000 and 100000), TXN_CONFIGS defaults to "100:100 1024:100 100:1000".
# The consume rows run ConsumerPerformance (a group consumer: FindCoordinator,
# JoinGroup, SyncGroup, OffsetCommit) against both brokers, each run in a new
# group, and `sluice bench consume` (direct partition reads) beside it.
# MODE=replicated compares a three-broker sluice cluster (one ZooKeeper)
# with a three-broker Apache Kafka cluster (KRaft): replication factor 3,
# min.insync.replicas 2, acks=all; see testdata/bench/vs-kafka-replicated.sh
# for what it measures and its environment variables.
# MODE=tls compares PLAINTEXT with SASL_SSL (SCRAM-SHA-512) on one sluice
# broker and on one Apache Kafka broker, produce and consume (ratio of
# ratios); see testdata/bench/vs-kafka-tls.sh.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RECORDS_100=${RECORDS_100:-1000000}
RECORDS_1K=${RECORDS_1K:-200000}
FIXED_RATE=${FIXED_RATE:-50000}
# 30 s at 50,000/s: a shorter run measures mostly the Java client warming up
# (the first send waits for metadata, then a cold JVM drains the backlog).
FIXED_RECORDS=${FIXED_RECORDS:-1500000}
REPEAT=${REPEAT:-2}
CONFIGS=${CONFIGS:-"100:1:1 100:1:all 100:6:1 100:6:all 1024:1:1 1024:1:all 1024:6:1 1024:6:all"}
FIXED=${FIXED:-1}
COMPRESSION=${COMPRESSION:-none}
KAFKA_HEAP=${KAFKA_HEAP:-"-Xms1g -Xmx1g"}
MODE=${MODE:-plain}
TXN_CONFIGS=${TXN_CONFIGS:-"100:100 1024:100 100:1000"}
TXN_RECORDS_100=${TXN_RECORDS_100:-500000}
TXN_RECORDS_1K=${TXN_RECORDS_1K:-100000}
CONSUME_REPEAT=${CONSUME_REPEAT:-4}

log() { echo "[vs-kafka] $*" >&2; }
die() { echo "vs-kafka: $*" >&2; exit 1; }

make -s deps-kafka >&2 || die "make deps-kafka failed"
CP="$ROOT/testdata/.cache/kafka/lib/*"
command -v java >/dev/null || die "java not found: run make deps-kafka"

WORK=$(mktemp -d /tmp/sluice-vs-kafka.XXXXXX)
PIDS=()
cleanup() {
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && kill "$p" 2>/dev/null || true; done
  for p in "${PIDS[@]:-}"; do [ -n "$p" ] && wait "$p" 2>/dev/null || true; done
  [ "${KEEP:-0}" = 1 ] && log "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }

cat > "$WORK/log4j2.properties" <<'L4J'
status = error
appender.console.type = Console
appender.console.name = STDERR
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
L4J
# The JVM flags of Kafka's kafka-run-class.sh.
KAFKA_JVM="-server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 -XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true -Dlog4j2.configurationFile=$WORK/log4j2.properties"
TOOL_JVM="-Xmx512m $KAFKA_JVM"

log "building sluice"
go build -o "$WORK/sluice" ./cmd/sluice
SLUICE="$WORK/sluice"

wait_ready() { # name addr pid
  local i
  for i in $(seq 1 600); do
    kill -0 "$3" 2>/dev/null || die "$1 exited during start-up (see logs in $WORK, KEEP=1 keeps them)"
    if "$SLUICE" topics list --bootstrap "$2" --timeout 2s >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  die "$1 not ready at $2"
}

# --- runners ----------------------------------------------------------------
# Each prints "records_per_sec MB_per_sec p99_ms" (p99 "-" for consumers), or "n/a".
perf_produce() { # addr topic records size acks throughput
  local out
  # shellcheck disable=SC2086
  out=$(timeout 300 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic "$2" \
    --num-records "$3" --record-size "$4" --throughput "$6" \
    --producer-props bootstrap.servers="$1" acks="$5" compression.type="$COMPRESSION" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records sent/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1); if($i=="99th") p=$(i-2)}; print r, m, p; f=1} END{if(!f) print "n/a"}'
}
sluice_produce() { # addr topic records size acks throughput
  local out
  out=$(timeout 300 "$SLUICE" bench produce --bootstrap "$1" --topic "$2" --records "$3" --record-size "$4" \
    --acks "$5" --throughput "$6" --compression "$COMPRESSION" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records sent/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1); if($i=="99th") p=$(i-2)}; print r, m, p; f=1} END{if(!f) print "n/a"}'
}
# A new group for every run: the runners run in $( ), so a counter kept in a
# variable would not advance and a second run would join the first's group and
# start from its committed offsets, at the end (no records: n/a).
new_group() { echo "vs-kafka-$$-$(date +%s%N)"; }
perf_consume() { # addr topic records
  local out
  # shellcheck disable=SC2086
  out=$(timeout 120 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$1" \
    --topic "$2" --messages "$3" --timeout 20000 --group "$(new_group)" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  # start, end, MB, MB.sec, nMsg, nMsg.sec, rebalance.ms, fetch.ms, fetch.MB.sec, fetch.nMsg.sec
  echo "$out" | awk -F', *' 'NF>=10 && $5+0>0 {print $10, $9, "-"; f=1} END{if(!f) print "n/a"}'
}
sluice_consume() { # addr topic records
  local out
  out=$(timeout 120 "$SLUICE" bench consume --bootstrap "$1" --topic "$2" --records "$3" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records received/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1)}; print r, m, "-"; f=1} END{if(!f) print "n/a"}'
}

# Transactional produce: ProducerPerformance commits every ms milliseconds,
# sluice bench every N records.
perf_produce_txn() { # addr topic records size ms
  local out
  # shellcheck disable=SC2086
  out=$(timeout 300 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic "$2" \
    --num-records "$3" --record-size "$4" --throughput -1 --transactional-id "perf-txn-$$-$RANDOM" --transaction-duration-ms "$5" \
    --producer-props bootstrap.servers="$1" acks=all compression.type="$COMPRESSION" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records sent/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1); if($i=="99th") p=$(i-2)}; print r, m, p; f=1} END{if(!f) print "n/a"}'
}
sluice_produce_txn() { # addr topic records size txn_records
  local out
  out=$(timeout 300 "$SLUICE" bench produce --bootstrap "$1" --topic "$2" --records "$3" --record-size "$4" \
    --acks all --compression "$COMPRESSION" --transactional-id "sbench-txn-$$-$RANDOM" --txn-records "$5" 2>>"$WORK/tools.log" | grep 'records sent' | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records sent/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1); if($i=="99th") p=$(i-2)}; print r, m, p; f=1} END{if(!f) print "n/a"}'
}
# ConsumerPerformance with isolation.level read_committed or read_uncommitted.
perf_consume_iso() { # addr topic records isolation
  local out
  echo "isolation.level=$4" >"$WORK/consumer-$4.properties"
  # shellcheck disable=SC2086
  out=$(timeout 120 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$1" \
    --topic "$2" --messages "$3" --timeout 20000 --group "$(new_group)" \
    --consumer.config "$WORK/consumer-$4.properties" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F', *' 'NF>=10 && $5+0>0 {print $10, $9, "-"; f=1} END{if(!f) print "n/a"}'
}

# pair runs a runner against Kafka and sluice alternately, REPEAT times each
# (so a burst of load on the shared machine hits both alike), and keeps for
# each broker the run with the highest records/s, or with MODE=latency the
# lowest p99. The runner's first argument @ADDR@ is replaced by the broker.
# Sets K and S.
better() { # new old mode
  [ "$2" = n/a ] && return 0
  [ "$1" = n/a ] && return 1
  if [ "$3" = latency ]; then
    awk -v a="$(echo "$1" | cut -d' ' -f3)" -v b="$(echo "$2" | cut -d' ' -f3)" 'BEGIN{exit !(a+0 < b+0)}'
  else
    awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN{exit !(a+0 > b+0)}'
  fi
}
pair() { # mode runner args... (first arg @ADDR@)
  local mode=$1 runner=$2 i r; shift 2
  K=n/a; S=n/a
  local kdone=no sdone=no
  for i in $(seq 1 "$REPEAT"); do
    if [ $kdone = no ]; then
      r=$("$runner" "$KAFKA" "${@:2}"); better "$r" "$K" "$mode" && K=$r; [ "$r" = n/a ] && kdone=yes
    fi
    if [ $sdone = no ]; then
      r=$("$runner" "$SLUICE_ADDR" "${@:2}"); better "$r" "$S" "$mode" && S=$r; [ "$r" = n/a ] && sdone=yes
    fi
  done
  return 0
}

if [ "$MODE" = replicated ]; then
  # shellcheck source=testdata/bench/vs-kafka-replicated.sh
  . "$ROOT/testdata/bench/vs-kafka-replicated.sh"
  exit 0
fi
if [ "$MODE" = tls ]; then
  # shellcheck source=testdata/bench/vs-kafka-tls.sh
  . "$ROOT/testdata/bench/vs-kafka-tls.sh"
  exit 0
fi

# --- Apache Kafka -----------------------------------------------------------
KPORT=$(free_port); CPORT=$(free_port)
mkdir -p "$WORK/kafka"
cat > "$WORK/kafka/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$KPORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$WORK/kafka/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
log "formatting and starting Apache Kafka on 127.0.0.1:$KPORT"
# shellcheck disable=SC2086
java $TOOL_JVM -cp "$CP" kafka.tools.StorageTool format -t "$(python3 -c 'import base64,os;print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')" \
  -c "$WORK/kafka/server.properties" >"$WORK/kafka/format.log" 2>&1 || { cat "$WORK/kafka/format.log"; die "kafka-storage format failed"; }
# shellcheck disable=SC2086
java $KAFKA_HEAP $KAFKA_JVM -cp "$CP" kafka.Kafka "$WORK/kafka/server.properties" >"$WORK/kafka/server.log" 2>&1 &
KAFKA_PID=$!; PIDS+=("$KAFKA_PID")
KAFKA="127.0.0.1:$KPORT"

# --- sluice -----------------------------------------------------------------
mkdir -p "$WORK/sluice-data"
# The same group settings as the Kafka broker above.
echo "group.initial.rebalance.delay.ms=0" >"$WORK/sluice.properties"
"$SLUICE" broker --data-dir "$WORK/sluice-data" --listen 127.0.0.1:0 --config "$WORK/sluice.properties" >"$WORK/sluice.log" 2>&1 &
SLUICE_PID=$!; PIDS+=("$SLUICE_PID")

for i in $(seq 1 300); do
  SLUICE_ADDR=$(sed -n 's/.*msg=listening .*[ ]addr=\([^ ]*\).*/\1/p' "$WORK/sluice.log" | head -1)
  [ -n "$SLUICE_ADDR" ] && break
  kill -0 "$SLUICE_PID" 2>/dev/null || { cat "$WORK/sluice.log"; die "sluice broker exited"; }
  sleep 0.1
done
[ -n "$SLUICE_ADDR" ] || die "sluice broker logged no listening address"
wait_ready kafka "$KAFKA" "$KAFKA_PID"
wait_ready sluice "$SLUICE_ADDR" "$SLUICE_PID"
log "kafka $KAFKA (pid $KAFKA_PID), sluice $SLUICE_ADDR (pid $SLUICE_PID)"

RESULTS="$WORK/results.txt"; : >"$RESULTS"
record() { # label client kafka_result sluice_result
  echo "$1|$2|$3|$4" >>"$RESULTS"
  log "$1 $2: kafka [$3] sluice [$4]"
}

run_config() { # size partitions acks
  local size=$1 parts=$2 acks=$3 n
  n=$RECORDS_100; [ "$size" -ge 1024 ] && n=$RECORDS_1K
  local label="${size}B p=${parts} acks=${acks}"
  for b in kafka sluice; do
    local addr=$KAFKA; [ $b = sluice ] && addr=$SLUICE_ADDR
    "$SLUICE" topics create "perf-$size-$parts-$acks" --bootstrap "$addr" -p "$parts" >/dev/null
    "$SLUICE" topics create "sbench-$size-$parts-$acks" --bootstrap "$addr" -p "$parts" >/dev/null
  done
  pair throughput perf_produce @ADDR@ "perf-$size-$parts-$acks" "$n" "$size" "$acks" -1
  record "$label produce" "ProducerPerformance" "$K" "$S"
  pair throughput sluice_produce @ADDR@ "sbench-$size-$parts-$acks" "$n" "$size" "$acks" -1
  record "$label produce" "sluice bench" "$K" "$S"
  # Consumers read what ProducerPerformance wrote (acks=1 and acks=all give the same log).
  if [ "$acks" = 1 ]; then
    pair throughput perf_consume @ADDR@ "perf-$size-$parts-$acks" "$n"
    record "${size}B p=${parts} consume" "ConsumerPerformance" "$K" "$S"
    pair throughput sluice_consume @ADDR@ "perf-$size-$parts-$acks" "$n"
    record "${size}B p=${parts} consume" "sluice bench" "$K" "$S"
  fi
}

# keep sets $1's variable to the better of its value and $2 (records/s).
keep() { local cur=${!1}; better "$2" "$cur" throughput && printf -v "$1" '%s' "$2"; return 0; }
ISO_RESULTS="$WORK/isolation.txt"; : >"$ISO_RESULTS"
run_txn_config() { # size ms
  local size=$1 ms=$2 n i r cal krate txn
  n=$TXN_RECORDS_100; [ "$size" -ge 1024 ] && n=$TXN_RECORDS_1K
  local t="txn-$size-$ms"
  for addr in "$KAFKA" "$SLUICE_ADDR"; do
    "$SLUICE" topics create "p$t" --bootstrap "$addr" -p 1 >/dev/null
    "$SLUICE" topics create "s$t" --bootstrap "$addr" -p 1 >/dev/null
    "$SLUICE" topics create "cal$t" --bootstrap "$addr" -p 1 >/dev/null
  done
  # calibration: the records one of Kafka's transactions holds, its rate x ms
  cal=$(perf_produce_txn "$KAFKA" "cal$t" "$n" "$size" "$ms")
  [ "$cal" = n/a ] && die "ProducerPerformance --transactional-id against Kafka failed (see $WORK/tools.log, KEEP=1)"
  krate=${cal%% *}
  txn=$(awk -v r="$krate" -v ms="$ms" 'BEGIN{n=int(r*ms/1000+0.5); if(n<1)n=1; print n}')
  log "txn ${size}B ${ms} ms: Kafka calibration $krate records/s, so $txn records a transaction"
  local KP=n/a SP=n/a KS=n/a SS=n/a
  for i in $(seq 1 "$REPEAT"); do
    r=$(perf_produce_txn "$KAFKA" "p$t" "$n" "$size" "$ms"); keep KP "$r"
    r=$(perf_produce_txn "$SLUICE_ADDR" "p$t" "$n" "$size" "$ms"); keep SP "$r"
    r=$(sluice_produce_txn "$KAFKA" "s$t" "$n" "$size" "$txn"); keep KS "$r"
    r=$(sluice_produce_txn "$SLUICE_ADDR" "s$t" "$n" "$size" "$txn"); keep SS "$r"
  done
  record "${size}B txn ${ms} ms ~ $txn rec" "ProducerPerformance" "$KP" "$SP"
  record "${size}B txn $txn rec" "sluice bench" "$KS" "$SS"
  # the same transactional data read both ways, alternately, on each broker
  # (all REPEAT x n records of the topic, CONSUME_REPEAT times, the order of
  # the two isolation levels swapped every time: a one-second read is noisy)
  local KC=n/a KU=n/a SC=n/a SU=n/a m=$((n * REPEAT))
  for i in $(seq 1 "$CONSUME_REPEAT"); do
    if [ $((i % 2)) = 1 ]; then
      r=$(perf_consume_iso "$KAFKA" "p$t" "$m" read_committed); keep KC "$r"
      r=$(perf_consume_iso "$KAFKA" "p$t" "$m" read_uncommitted); keep KU "$r"
      r=$(perf_consume_iso "$SLUICE_ADDR" "p$t" "$m" read_committed); keep SC "$r"
      r=$(perf_consume_iso "$SLUICE_ADDR" "p$t" "$m" read_uncommitted); keep SU "$r"
    else
      r=$(perf_consume_iso "$SLUICE_ADDR" "p$t" "$m" read_uncommitted); keep SU "$r"
      r=$(perf_consume_iso "$SLUICE_ADDR" "p$t" "$m" read_committed); keep SC "$r"
      r=$(perf_consume_iso "$KAFKA" "p$t" "$m" read_uncommitted); keep KU "$r"
      r=$(perf_consume_iso "$KAFKA" "p$t" "$m" read_committed); keep KC "$r"
    fi
  done
  echo "${size}B txn ${ms} ms|$KC|$KU|$SC|$SU" >>"$ISO_RESULTS"
  log "${size}B consume: kafka rc [$KC] ru [$KU]; sluice rc [$SC] ru [$SU]"
}

if [ "$MODE" = txn ]; then
  CONFIGS=""; FIXED=0
  for c in $TXN_CONFIGS; do
    IFS=: read -r size ms <<<"$c"
    run_txn_config "$size" "$ms"
  done
fi

for c in $CONFIGS; do
  IFS=: read -r size parts acks <<<"$c"
  run_config "$size" "$parts" "$acks"
done

# Latency at a fixed rate: 100-byte records, acks=all, 1 partition.
[ "$FIXED" = 0 ] || for b in kafka sluice; do
  addr=$KAFKA; [ $b = sluice ] && addr=$SLUICE_ADDR
  "$SLUICE" topics create fixed-perf --bootstrap "$addr" -p 1 >/dev/null
  "$SLUICE" topics create fixed-sbench --bootstrap "$addr" -p 1 >/dev/null
done
if [ "$FIXED" != 0 ]; then
  pair latency perf_produce @ADDR@ fixed-perf "$FIXED_RECORDS" 100 all "$FIXED_RATE"
  record "100B p=1 acks=all @${FIXED_RATE}/s" "ProducerPerformance" "$K" "$S"
  pair latency sluice_produce @ADDR@ fixed-sbench "$FIXED_RECORDS" 100 all "$FIXED_RATE"
  record "100B p=1 acks=all @${FIXED_RATE}/s" "sluice bench" "$K" "$S"
fi

rss() { awk -v k="$2:" '$1==k {printf "%.0f", $2/1024}' "/proc/$1/status"; }
KH=$(rss "$KAFKA_PID" VmHWM); KR=$(rss "$KAFKA_PID" VmRSS)
SH=$(rss "$SLUICE_PID" VmHWM); SR=$(rss "$SLUICE_PID" VmRSS)

# --- table ------------------------------------------------------------------
num() { case "$1" in ''|*[!0-9.]*) echo "${1:--}" ;; *) printf "%.${2}f" "$1" ;; esac; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a+0 > 0) printf "%.2f", b/a; else printf "-" }'; }
echo
echo "sluice vs Apache Kafka 4.1 (single node, $(nproc) cores, $(date -u +%Y-%m-%d)); ratio = sluice/Kafka"
if [ "$MODE" = txn ]; then
  echo "transactional: ${TXN_RECORDS_100} x 100 B, ${TXN_RECORDS_1K} x 1 KiB per run, acks=all, 1 partition, compression ${COMPRESSION}; best of ${REPEAT}"
else
  echo "records: ${RECORDS_100} x 100 B, ${RECORDS_1K} x 1 KiB, compression ${COMPRESSION}; consumer figures exclude the group join (ConsumerPerformance fetch.* columns)"
fi
echo
ROWFMT='| %-28s | %-19s | %12s | %12s | %5s | %10s | %11s | %5s | %10s | %10s | %5s |\n'
# shellcheck disable=SC2059
printf "$ROWFMT" "run" "client" "Kafka rec/s" "sluice rec/s" "x" "Kafka MB/s" "sluice MB/s" "x" "Kafka p99" "sluice p99" "x"
# shellcheck disable=SC2059
printf "$ROWFMT" "---" "---" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:"
while IFS='|' read -r label client k s; do
  read -r kr km kp <<<"$k"; read -r sr sm sp <<<"$s"
  kr=$(num "$kr" 0); sr=$(num "$sr" 0); km=$(num "$km" 1); sm=$(num "$sm" 1)
  kp=${kp:--}; sp=${sp:--}; km=${km:--}; sm=${sm:--}
  pk="$kp"; ps="$sp"; [ "$kp" != - ] && pk="$kp ms"; [ "$sp" != - ] && ps="$sp ms"
  # for latency, the ratio is Kafka/sluice (above 1 means sluice is faster)
  # shellcheck disable=SC2059
  printf "$ROWFMT" "$label" "$client" "$kr" "$sr" "$(ratio "$kr" "$sr")" "$km" "$sm" "$(ratio "$km" "$sm")" "$pk" "$ps" "$(ratio "$sp" "$kp")"
done <"$RESULTS"
echo
echo "p99 ratio column is Kafka/sluice (above 1: sluice's p99 is lower)."
if [ -s "$ISO_RESULTS" ]; then
  echo
  echo "ConsumerPerformance over the transactional topic (fetch.nMsg.sec); x = read_committed/read_uncommitted"
  printf '| %-22s | %12s | %12s | %5s | %12s | %12s | %5s |\n' "data" "Kafka rc" "Kafka ru" "x" "sluice rc" "sluice ru" "x"
  printf '| %-22s | %12s | %12s | %5s | %12s | %12s | %5s |\n' "---" "---:" "---:" "---:" "---:" "---:" "---:"
  while IFS='|' read -r label kc ku sc su; do
    kc=$(num "${kc%% *}" 0); ku=$(num "${ku%% *}" 0); sc=$(num "${sc%% *}" 0); su=$(num "${su%% *}" 0)
    printf '| %-22s | %12s | %12s | %5s | %12s | %12s | %5s |\n' "$label" "$kc" "$ku" "$(ratio "$ku" "$kc")" "$sc" "$su" "$(ratio "$su" "$sc")"
  done <"$ISO_RESULTS"
  echo
fi
printf '| %-14s | %11s | %11s | %5s |\n' "broker RSS" "Kafka" "sluice" "x"
printf '| %-14s | %11s | %11s | %5s |\n' "---" "---:" "---:" "---:"
printf '| %-14s | %7s MiB | %7s MiB | %5s |\n' "peak (VmHWM)" "$KH" "$SH" "$(ratio "$KH" "$SH")"
printf '| %-14s | %7s MiB | %7s MiB | %5s |\n' "end (VmRSS)" "$KR" "$SR" "$(ratio "$KR" "$SR")"
