#!/usr/bin/env bash
# mirror.sh — `sluice mirror` between two local sluice brokers, against the
# raw fetch rate of the source (`sluice bench consume`, same run) and
# against Apache Kafka's MirrorMaker 2 (org.apache.kafka.connect.mirror.MirrorMaker,
# what connect-mirror-maker.sh runs, from the Kafka 4.1 jars, dedicated mode)
# copying the same topic from the same source broker into a third sluice
# broker. Prints records/s and records per CPU-second of the copying process.
#
# Not part of `make test`. Usage (from anywhere in the repo):
#   testdata/bench/mirror.sh                       # 1,000,000 records of 100 bytes, 3 partitions
#   RECORDS=300000 MM2=0 testdata/bench/mirror.sh  # quicker, without MirrorMaker 2
# Environment: RECORDS, RECORD_SIZE, PARTITIONS, MM2 (0 skips it), TASKS (the
# --tasks values to measure, one mirror run each into a fresh target broker,
# default "1 0": one session, and the default, 0, i.e. one per partition up
# to 2 per CPU), BASELINE_BIN (another sluice binary whose mirror is measured
# too, e.g. one built from an older commit: "before"), PROFILE=1 writes a CPU
# profile of each mirror run to $WORK/mirror-TASKS.pprof, KEEP=1 keeps the
# work directory. MirrorMaker 2 runs from the jars `make deps-kafka` puts in
# testdata/.cache/kafka/lib (testdata/kafka/pom.xml lists connect-mirror).
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
RECORDS=${RECORDS:-1000000}
RECORD_SIZE=${RECORD_SIZE:-100}
PARTITIONS=${PARTITIONS:-3}
MM2=${MM2:-1}
KAFKA_VERSION=4.1.2

log() { echo "[mirror-bench] $*" >&2; }
die() { echo "mirror-bench: $*" >&2; exit 1; }

WORK=$(mktemp -d /tmp/sluice-mirror-bench.XXXXXX)
PIDS=()
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	[ "${KEEP:-0}" = 1 ] && log "kept $WORK" || rm -rf "$WORK"
}
trap cleanup EXIT

BIN=$WORK/sluice
go build -tags duckdb_arrow,arrow_json_stdlib -o "$BIN" ./cmd/sluice || die "go build failed"

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
start_broker() { # name -> prints address
	local port dir=$WORK/$1
	port=$(free_port)
	mkdir -p "$dir"
	"$BIN" broker --data-dir "$dir" --listen "127.0.0.1:$port" >"$dir.log" 2>&1 &
	PIDS+=($!)
	for _ in $(seq 100); do grep -qs listening "$dir.log" && break; sleep 0.1; done
	grep -q listening "$dir.log" || die "broker $1 did not start: $(tail -3 "$dir.log")"
	echo "127.0.0.1:$port"
}
# cpu_seconds PID: user+system CPU of a live process.
cpu_seconds() { awk -v hz="$(getconf CLK_TCK)" '{print ($14+$15)/hz}' "/proc/$1/stat"; }
# target_records ADDR: records (offsets) in the bench topic on ADDR.
target_records() {
	"$BIN" topics describe bench --bootstrap "$1" 2>/dev/null |
		awk '$1 ~ /^[0-9]+$/ && NF >= 8 {s += $8} END {print s+0}'
}

A=$(start_broker source)
B=$(start_broker target)
log "source $A, target $B; producing $RECORDS records of $RECORD_SIZE bytes into $PARTITIONS partitions"
"$BIN" topics create bench --partitions "$PARTITIONS" --replication-factor 1 --bootstrap "$A" >/dev/null
"$BIN" bench produce --bootstrap "$A" --topic bench --records "$RECORDS" --record-size "$RECORD_SIZE" \
	--report-interval 1h >"$WORK/produce.txt" 2>&1 || die "produce: $(tail -3 "$WORK/produce.txt")"
SOURCE_END=$(target_records "$A")
[ "$SOURCE_END" = "$RECORDS" ] || die "the source holds $SOURCE_END offsets, not $RECORDS"

# 1. The raw fetch rate of the source.
/usr/bin/time -f "%e %U %S" -o "$WORK/consume.time" "$BIN" bench consume --bootstrap "$A" --topic bench \
	--records "$RECORDS" --report-interval 1h >"$WORK/consume.txt" 2>&1 || die "consume: $(tail -3 "$WORK/consume.txt")"
read -r C_WALL C_USR C_SYS <"$WORK/consume.time"

# 2. sluice mirror, until caught up, once per --tasks value (and the
# baseline binary), each into a fresh target broker.
TASKS=${TASKS:-1 0}
: >"$WORK/rows"
RUN=0
mirror_run() { # label bin [args...]
	local label=$1 bin=$2
	shift 2
	local tgt
	RUN=$((RUN + 1))
	tgt=$(start_broker "target-$RUN")
	/usr/bin/time -f "%e %U %S" -o "$WORK/mirror.time" "$bin" mirror "$@" --from "$A" --to "$tgt" --topics bench \
		--name bench --exit-when-caught-up --progress-interval 1h --log-level warn >"$WORK/mirror.txt" 2>&1 ||
		die "mirror ($label): $(tail -3 "$WORK/mirror.txt")"
	read -r M_WALL M_USR M_SYS <"$WORK/mirror.time"
	COPIED=$(target_records "$tgt")
	[ "$COPIED" -ge "$RECORDS" ] || die "mirror ($label): the target holds $COPIED offsets, fewer than $RECORDS"
	echo "$label|$M_WALL|$(echo "$M_USR + $M_SYS" | bc -l)" >>"$WORK/rows"
	log "$label: $M_WALL s wall, $M_USR+$M_SYS s CPU"
}
if [ -n "${BASELINE_BIN:-}" ]; then
	mirror_run "sluice mirror, baseline binary" "$BASELINE_BIN"
fi
for t in $TASKS; do
	PROF=()
	[ "${PROFILE:-0}" = 1 ] && PROF=(--cpuprofile "$WORK/mirror-$t.pprof")
	label="sluice mirror --tasks $t"
	[ "$t" = 0 ] && label="sluice mirror (default --tasks)"
	mirror_run "$label" "$BIN" "${PROF[@]}" --tasks "$t"
done

# 3. MirrorMaker 2 from the same source into a third broker.
MM_WALL="" MM_CPU=""
if [ "$MM2" != 0 ]; then
	make -s deps-kafka >&2 || die "make deps-kafka failed"
	KLIB=$ROOT/testdata/.cache/kafka/lib
	[ -f "$KLIB/connect-mirror-$KAFKA_VERSION.jar" ] || die "$KLIB has no connect-mirror-$KAFKA_VERSION.jar (testdata/kafka/pom.xml)"
	C=$(start_broker mm2target)
	cat >"$WORK/mm2.properties" <<EOF
clusters = src, dst
src.bootstrap.servers = $A
dst.bootstrap.servers = $C
src->dst.enabled = true
src->dst.topics = bench
dst->src.enabled = false
replication.policy.class = org.apache.kafka.connect.mirror.IdentityReplicationPolicy
replication.factor = 1
checkpoints.topic.replication.factor = 1
heartbeats.topic.replication.factor = 1
offset-syncs.topic.replication.factor = 1
offset.storage.replication.factor = 1
status.storage.replication.factor = 1
config.storage.replication.factor = 1
sync.topic.acls.enabled = false
emit.heartbeats.enabled = false
emit.checkpoints.enabled = false
refresh.topics.interval.seconds = 5
tasks.max = $PARTITIONS
EOF
	java -Xms512m -Xmx1g -cp "$KLIB/*" org.apache.kafka.connect.mirror.MirrorMaker \
		"$WORK/mm2.properties" >"$WORK/mm2.log" 2>&1 &
	MMPID=$!
	PIDS+=($MMPID)
	deadline=$((SECONDS + 600))
	while [ "$(target_records "$C")" = 0 ]; do
		kill -0 $MMPID 2>/dev/null || die "MirrorMaker 2 exited: $(tail -5 "$WORK/mm2.log")"
		[ $SECONDS -lt $deadline ] || die "MirrorMaker 2 copied nothing in 600 s: $(grep -m3 ERROR "$WORK/mm2.log")"
		sleep 0.2
	done
	# Measured from its first copied record, so the JVM's and Connect's start do not count.
	CPU0=$(cpu_seconds $MMPID)
	T0=$(date +%s.%N)
	while [ "$(target_records "$C")" -lt "$RECORDS" ]; do
		[ $SECONDS -lt $deadline ] || die "MirrorMaker 2 did not finish in 600 s"
		sleep 0.2
	done
	T1=$(date +%s.%N)
	CPU1=$(cpu_seconds $MMPID)
	kill $MMPID
	MM_WALL=$(echo "$T1 - $T0" | bc -l)
	MM_CPU=$(echo "$CPU1 - $CPU0" | bc -l)
fi

LOAD=$(cut -d' ' -f1-3 /proc/loadavg)
python3 - "$RECORDS" "$C_WALL" "$C_USR" "$C_SYS" "${MM_WALL:-0}" "${MM_CPU:-0}" "$LOAD" "$(nproc)" "$WORK/rows" <<'EOF'
import sys
n = int(sys.argv[1])
cw, cu, cs, mmw, mmc = map(float, sys.argv[2:7])
load, cores, rowfile = sys.argv[7], sys.argv[8], sys.argv[9]
mirrors = []
for line in open(rowfile):
    name, wall, cpu = line.strip().split("|")
    mirrors.append((name, float(wall), float(cpu)))
rows = [("sluice bench consume (raw fetch)", cw, cu + cs)] + mirrors
if mmw > 0:
    rows.append(("MirrorMaker 2 (from its first record)", mmw, mmc))
print(f"{n} records, load average {load} on {cores} cores")
print(f"| {'copier':40} | {'wall s':>7} | {'records/s':>10} | {'CPU s':>6} | {'records/CPU-s':>13} |")
print(f"|{'-'*42}|{'-'*9}|{'-'*12}|{'-'*8}|{'-'*15}|")
for name, wall, cpu in rows:
    print(f"| {name:40} | {wall:7.2f} | {n/wall:10.0f} | {cpu:6.2f} | {n/cpu:13.0f} |")
for name, wall, cpu in mirrors:
    line = f"{name}: / raw fetch, records/s: {cw/wall:.2f}"
    if mmw > 0:
        line += f"; / MirrorMaker 2, records per CPU-second: {(n/cpu)/(n/mmc):.2f}"
    print(line)
EOF
