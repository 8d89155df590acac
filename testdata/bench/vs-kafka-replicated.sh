# vs-kafka-replicated.sh — MODE=replicated of testdata/bench/vs-kafka.sh,
# sourced by it after the sluice build (it uses its runners and settings).
#
# Three sluice brokers in cluster mode on one ZooKeeper (Debian's package, as
# `make deps-zk` installs it and testdata/harness/zk runs it) against three
# Apache Kafka 4.1 brokers in KRaft mode (each broker and controller, a
# three-voter quorum), all on this machine; every topic has replication
# factor 3 and min.insync.replicas 2, every producer acks=all.
#
#   - produce: 100 B and 1 KiB records with ProducerPerformance and with
#     `sluice bench produce`, REPL_PARTITIONS partitions (default 6, as
#     Kafka's 2014 benchmark), best of REPEAT runs alternating the clusters;
#   - p99 at a fixed rate: 100 B records at REPL_FIXED_RATE/s (default
#     20000) for REPL_FIXED_RECORDS records (default 600000, 30 s);
#   - broker RSS: the sum over the three processes of each cluster of their
#     peak RSS (VmHWM), read after the produce runs and before the catch-up
#     (the restarted follower's peak starts again at zero);
#   - catch-up: one follower of a one-partition topic stopped (SIGTERM),
#     CATCHUP_MB MiB of 1 KiB records produced (default 1024), the follower
#     started again and timed until the ISR holds it again, twice: from its
#     process start (start-up and log recovery count) and from its listener
#     first answering (start-up done; its first fetch follows within
#     milliseconds); against the leader's raw read rate of the same records
#     (`sluice bench consume` right after). The ratios compare records/s:
#     catch-up records / catch-up seconds over the consumer's records/s.
#
# Environment (besides vs-kafka.sh's REPEAT, KAFKA_HEAP, COMPRESSION, KEEP):
# REPL_RECORDS_100, REPL_RECORDS_1K (records per produce run, default
# 1000000 and 200000), REPL_PARTITIONS, REPL_FIXED_RATE, REPL_FIXED_RECORDS,
# FIXED=0 (skip the fixed-rate rows), CATCHUP_MB (0 skips the catch-up),
# ONLY=catchup (only the catch-up: no produce, fixed-rate or RSS rows),
# CATCHUP_CLUSTERS (default "kafka sluice"; "sluice" skips Kafka's catch-up),
# SLUICE_PROFILE=1 (a CPU profile of sluice broker 1, a leader of about a
# third of the partitions, until it first stops, printed with `go tool pprof
# -top` at the end), SLUICE_PROFILE=catchup (a CPU profile of the restarted
# sluice follower from its start until it is back in the ISR, printed the
# same way; the follower is stopped after the catch-up to write it).

REPL_RECORDS_100=${REPL_RECORDS_100:-1000000}
REPL_RECORDS_1K=${REPL_RECORDS_1K:-200000}
REPL_PARTITIONS=${REPL_PARTITIONS:-6}
REPL_FIXED_RATE=${REPL_FIXED_RATE:-20000}
REPL_FIXED_RECORDS=${REPL_FIXED_RECORDS:-600000}
CATCHUP_MB=${CATCHUP_MB:-1024}
CATCHUP_CLUSTERS=${CATCHUP_CLUSTERS:-kafka sluice}
ONLY=${ONLY:-}
case "$ONLY" in ''|catchup) ;; *) die "ONLY=$ONLY: only ONLY=catchup is known" ;; esac
[ "$ONLY" = catchup ] && [ "$CATCHUP_MB" = 0 ] && die "ONLY=catchup with CATCHUP_MB=0 runs nothing"
SLUICE_PROFILE=${SLUICE_PROFILE:-0}

ZK_JARS="/usr/share/java/zookeeper.jar:/usr/share/java/slf4j-simple.jar"
for j in ${ZK_JARS//:/ }; do
  [ -f "$j" ] || die "$j is missing: run make deps-zk (it apt-installs Debian's zookeeper package)"
done

# load average, sampled every 10 s for the report
( while :; do cut -d' ' -f1 /proc/loadavg; sleep 10; done ) >"$WORK/loadavg.txt" 2>/dev/null &
PIDS+=("$!")

# --- ZooKeeper ----------------------------------------------------------------
ZPORT=$(free_port)
mkdir -p "$WORK/zk/data"
cat >"$WORK/zk/zoo.cfg" <<ZOO
tickTime=500
dataDir=$WORK/zk/data
clientPort=$ZPORT
clientPortAddress=127.0.0.1
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxClientCnxns=200
ZOO
java -Xmx256m -XX:+UseSerialGC -Dorg.slf4j.simpleLogger.defaultLogLevel=warn -Dzookeeper.jmx.log4j.disable=true \
  -cp "$ZK_JARS" org.apache.zookeeper.server.ZooKeeperServerMain "$WORK/zk/zoo.cfg" >"$WORK/zk/zk.log" 2>&1 &
ZK_PID=$!; PIDS+=("$ZK_PID")
zk_ok() { # ZooKeeper answers "ruok" with "imok" (in a subshell: exec's redirections stay there)
  [ "$( (exec 3<>"/dev/tcp/127.0.0.1/$ZPORT" && echo ruok >&3 && { read -r -t 2 r <&3; echo "$r"; }) 2>/dev/null)" = imok ]
}
for i in $(seq 1 150); do zk_ok && break; kill -0 "$ZK_PID" 2>/dev/null || { cat "$WORK/zk/zk.log"; die "ZooKeeper exited"; }; sleep 0.2; done
zk_ok || die "ZooKeeper not answering ruok on 127.0.0.1:$ZPORT"
log "ZooKeeper on 127.0.0.1:$ZPORT"

# --- three sluice brokers -------------------------------------------------------
declare -A SPORT SPID KPORT KCPORT KPID
cat >"$WORK/sluice-cluster.properties" <<PROPS
group.initial.rebalance.delay.ms=0
default.replication.factor=3
min.insync.replicas=2
PROPS
start_sluice() { # node
  local n=$1 prof=()
  [ "$SLUICE_PROFILE" = 1 ] && [ "$n" = 1 ] && prof=(--cpuprofile "$WORK/sluice-1-$(date +%s%N).pprof")
  [ "$SLUICE_PROFILE" = catchup ] && [ -n "${CATCHUP_FOLLOWER:-}" ] && prof=(--cpuprofile "$WORK/sluice-catchup-$n.pprof")
  mkdir -p "$WORK/sluice-$n"
  "$SLUICE" broker "${prof[@]}" --zookeeper "127.0.0.1:$ZPORT/sluice-bench" --node-id "$n" --data-dir "$WORK/sluice-$n" \
    --listen "127.0.0.1:${SPORT[$n]}" --config "$WORK/sluice-cluster.properties" --log-level warn >>"$WORK/sluice-$n.log" 2>&1 &
  SPID[$n]=$!; PIDS+=("$!")
}

# --- three Kafka brokers (KRaft) -----------------------------------------------
for n in 1 2 3; do SPORT[$n]=$(free_port); KPORT[$n]=$(free_port); KCPORT[$n]=$(free_port); done
VOTERS="1@127.0.0.1:${KCPORT[1]},2@127.0.0.1:${KCPORT[2]},3@127.0.0.1:${KCPORT[3]}"
CLUSTER_ID=$(python3 -c 'import base64,os;print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')
for n in 1 2 3; do
  mkdir -p "$WORK/kafka-$n"
  cat >"$WORK/kafka-$n/server.properties" <<PROPS
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$VOTERS
listeners=PLAINTEXT://127.0.0.1:${KPORT[$n]},CONTROLLER://127.0.0.1:${KCPORT[$n]}
advertised.listeners=PLAINTEXT://127.0.0.1:${KPORT[$n]}
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT
log.dirs=$WORK/kafka-$n/logs
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
PROPS
  # shellcheck disable=SC2086
  java $TOOL_JVM -cp "$CP" kafka.tools.StorageTool format -t "$CLUSTER_ID" -c "$WORK/kafka-$n/server.properties" \
    >"$WORK/kafka-$n/format.log" 2>&1 || { cat "$WORK/kafka-$n/format.log"; die "kafka-storage format of node $n failed"; }
done
start_kafka() { # node
  local n=$1
  # shellcheck disable=SC2086
  java $KAFKA_HEAP $KAFKA_JVM -cp "$CP" kafka.Kafka "$WORK/kafka-$n/server.properties" >>"$WORK/kafka-$n/server.log" 2>&1 &
  KPID[$n]=$!; PIDS+=("$!")
}
start_node() { # cluster node
  if [ "$1" = kafka ]; then start_kafka "$2"; else start_sluice "$2"; fi
}
stop_node() { # cluster node: SIGTERM (controlled shutdown) and wait
  local pid
  if [ "$1" = kafka ]; then pid=${KPID[$2]}; else pid=${SPID[$2]}; fi
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
}
for n in 1 2 3; do start_kafka "$n"; start_sluice "$n"; done
KBOOT="127.0.0.1:${KPORT[1]},127.0.0.1:${KPORT[2]},127.0.0.1:${KPORT[3]}"
SBOOT="127.0.0.1:${SPORT[1]},127.0.0.1:${SPORT[2]},127.0.0.1:${SPORT[3]}"
for n in 1 2 3; do
  wait_ready "kafka broker $n" "127.0.0.1:${KPORT[$n]}" "${KPID[$n]}"
  wait_ready "sluice broker $n" "127.0.0.1:${SPORT[$n]}" "${SPID[$n]}"
done
# pair() and the runners take these two
KAFKA=$KBOOT; SLUICE_ADDR=$SBOOT
log "kafka $KBOOT, sluice $SBOOT (ZooKeeper 127.0.0.1:$ZPORT)"

create_replicated() { # bootstrap topic partitions: retried until three brokers are registered
  local i
  for i in $(seq 1 120); do
    "$SLUICE" topics create "$2" --bootstrap "$1" -p "$3" -r 3 -c min.insync.replicas=2 >>"$WORK/topics.log" 2>&1 && return 0
    "$SLUICE" topics describe "$2" --bootstrap "$1" >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  die "could not create $2 (replication factor 3) on $1: see $WORK/topics.log (KEEP=1 keeps it)"
}
# partition_line prints "leader isr..." of partition 0 of a topic.
partition_line() { # bootstrap topic
  "$SLUICE" topics describe "$2" --bootstrap "$1" --timeout 5s 2>/dev/null |
    sed -nE 's/^ +0 +(-?[0-9]+) +-?[0-9]+ +\[[0-9 ]*\] +\[([0-9 ]*)\].*/\1 \2/p' | head -1 || true
}

RESULTS="$WORK/results.txt"; : >"$RESULTS"
record() { echo "$1|$2|$3|$4" >>"$RESULTS"; log "$1 $2: kafka [$3] sluice [$4]"; }

SIZES="100 1024"; [ "$ONLY" = catchup ] && SIZES="" && FIXED=0
for size in $SIZES; do
  n=$REPL_RECORDS_100; [ "$size" -ge 1024 ] && n=$REPL_RECORDS_1K
  for b in "$KBOOT" "$SBOOT"; do
    create_replicated "$b" "rperf-$size" "$REPL_PARTITIONS"
    create_replicated "$b" "rsbench-$size" "$REPL_PARTITIONS"
  done
  pair throughput perf_produce @ADDR@ "rperf-$size" "$n" "$size" all -1
  record "${size}B p=${REPL_PARTITIONS} rf=3 acks=all" "ProducerPerformance" "$K" "$S"
  pair throughput sluice_produce @ADDR@ "rsbench-$size" "$n" "$size" all -1
  record "${size}B p=${REPL_PARTITIONS} rf=3 acks=all" "sluice bench" "$K" "$S"
done
if [ "$FIXED" != 0 ]; then
  for b in "$KBOOT" "$SBOOT"; do
    create_replicated "$b" rfixed-perf 1
    create_replicated "$b" rfixed-sbench 1
  done
  pair latency perf_produce @ADDR@ rfixed-perf "$REPL_FIXED_RECORDS" 100 all "$REPL_FIXED_RATE"
  record "100B p=1 rf=3 @${REPL_FIXED_RATE}/s" "ProducerPerformance" "$K" "$S"
  pair latency sluice_produce @ADDR@ rfixed-sbench "$REPL_FIXED_RECORDS" 100 all "$REPL_FIXED_RATE"
  record "100B p=1 rf=3 @${REPL_FIXED_RATE}/s" "sluice bench" "$K" "$S"
fi

rss_sum() { # kind pid...: sum of VmHWM or VmRSS in MiB
  local k=$1 t=0 p v; shift
  for p in "$@"; do v=$(awk -v k="$k:" '$1==k {print $2}' "/proc/$p/status" 2>/dev/null); t=$((t + ${v:-0})); done
  echo $((t / 1024))
}
KH=$(rss_sum VmHWM "${KPID[@]}"); SH=$(rss_sum VmHWM "${SPID[@]}")

# --- catch-up --------------------------------------------------------------------
CATCH="$WORK/catchup.txt"; : >"$CATCH"
catchup() { # cluster bootstrap
  local c=$1 boot=$2 line leader f n t0 tr t1 secs rsecs rate rrate cons i isr port
  create_replicated "$boot" catchup 1
  for i in $(seq 1 150); do line=$(partition_line "$boot" catchup); [ "${line%% *}" -ge 1 ] 2>/dev/null && break; sleep 0.2; done
  leader=${line%% *}
  [ -n "$leader" ] && [ "$leader" -ge 1 ] || die "$c: no leader for catchup-0 ($line)"
  f=$(( leader % 3 + 1 ))
  log "$c catch-up: leader $leader, stopping follower $f"
  stop_node "$c" "$f"
  n=$((CATCHUP_MB * 1024))
  "$SLUICE" bench produce --bootstrap "$boot" --topic catchup --records "$n" --record-size 1024 --acks all \
    --report-interval 30s >>"$WORK/tools.log" 2>&1 || die "$c: producing $CATCHUP_MB MiB for the catch-up failed (see $WORK/tools.log)"
  log "$c catch-up: $n records written with broker $f down; starting it"
  if [ "$c" = kafka ]; then port=${KPORT[$f]}; else port=${SPORT[$f]}; fi
  t0=$(date +%s.%N); tr=
  CATCHUP_FOLLOWER=$f start_node "$c" "$f"
  for i in $(seq 1 6000); do
    if [ -z "$tr" ] && (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then tr=$(date +%s.%N); fi
    if [ -n "$tr" ]; then
      isr=$(partition_line "$boot" catchup); isr=" ${isr#* } "
      case "$isr" in *" $f "*) break ;; esac
    fi
    sleep 0.1
  done
  t1=$(date +%s.%N)
  case "$isr" in *" $f "*) ;; *) die "$c: broker $f not back in the ISR of catchup-0 after 10 minutes" ;; esac
  secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  rsecs=$(awk -v a="$tr" -v b="$t1" 'BEGIN{printf "%.2f", b-a}')
  rate=$(awk -v n="$n" -v s="$secs" 'BEGIN{printf "%.0f", n/s}')
  rrate=$(awk -v n="$n" -v s="$rsecs" 'BEGIN{printf "%.0f", n/s}')
  cons=$(sluice_consume "$boot" catchup "$n")
  log "$c catch-up: $secs s from start ($rate records/s), $rsecs s from its listener answering ($rrate records/s); leader read [$cons]"
  echo "$c|$n|$secs|$rate|$rsecs|$rrate|${cons%% *}" >>"$CATCH"
  if [ "$c" = sluice ] && [ "$SLUICE_PROFILE" = catchup ]; then
    stop_node sluice "$f"
    go tool pprof -top -nodecount=40 "$SLUICE" "$WORK/sluice-catchup-$f.pprof" 2>/dev/null | head -50 >"$WORK/profile.txt" || true
  fi
}
if [ "$CATCHUP_MB" != 0 ]; then
  for c in $CATCHUP_CLUSTERS; do
    case "$c" in kafka) catchup kafka "$KBOOT" ;; sluice) catchup sluice "$SBOOT" ;; *) die "CATCHUP_CLUSTERS: unknown cluster $c" ;; esac
  done
fi
KR=$(rss_sum VmRSS "${KPID[@]}"); SR=$(rss_sum VmRSS "${SPID[@]}")

if [ "$SLUICE_PROFILE" = 1 ]; then
  stop_node sluice 1
  # the first process's profile: broker 1 before any restart (the produce runs)
  prof=$(find "$WORK" -maxdepth 1 -name 'sluice-1-*.pprof' | sort | head -1)
  go tool pprof -top -nodecount=30 "$SLUICE" "$prof" 2>/dev/null | head -40 >"$WORK/profile.txt" || true
fi

# --- table -------------------------------------------------------------------------
num() { case "$1" in ''|*[!0-9.]*) echo "${1:--}" ;; *) printf "%.${2}f" "$1" ;; esac; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && a+0 > 0) printf "%.2f", b/a; else printf "-" }'; }
LOADS=$(awk '{s+=$1; if($1>m)m=$1; n++} END{if(n) printf "mean %.1f, max %.1f over %d samples", s/n, m, n; else print "-"}' "$WORK/loadavg.txt")
echo
echo "sluice vs Apache Kafka 4.1, three brokers each on one machine ($(nproc) cores, $(date -u +%Y-%m-%d)); ratio = sluice/Kafka"
echo "replication factor 3, min.insync.replicas 2, acks=all, compression ${COMPRESSION}; ${REPL_RECORDS_100} x 100 B, ${REPL_RECORDS_1K} x 1 KiB per run, best of ${REPEAT}"
echo "1-minute load average during the run: $LOADS"
echo
ROWFMT='| %-26s | %-19s | %12s | %12s | %5s | %10s | %11s | %5s | %10s | %10s | %5s |\n'
# shellcheck disable=SC2059
printf "$ROWFMT" "run" "client" "Kafka rec/s" "sluice rec/s" "x" "Kafka MB/s" "sluice MB/s" "x" "Kafka p99" "sluice p99" "x"
# shellcheck disable=SC2059
printf "$ROWFMT" "---" "---" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:" "---:"
while IFS='|' read -r label client k s; do
  read -r kr km kp <<<"$k"; read -r sr sm sp <<<"$s"
  kr=$(num "$kr" 0); sr=$(num "$sr" 0); km=$(num "$km" 1); sm=$(num "$sm" 1)
  kp=${kp:--}; sp=${sp:--}; km=${km:--}; sm=${sm:--}
  pk="$kp"; ps="$sp"; [ "$kp" != - ] && pk="$kp ms"; [ "$sp" != - ] && ps="$sp ms"
  # shellcheck disable=SC2059
  printf "$ROWFMT" "$label" "$client" "$kr" "$sr" "$(ratio "$kr" "$sr")" "$km" "$sm" "$(ratio "$km" "$sm")" "$pk" "$ps" "$(ratio "$sp" "$kp")"
done <"$RESULTS"
echo
echo "p99 ratio column is Kafka/sluice (above 1: sluice's p99 is lower)."
echo
printf '| %-34s | %11s | %11s | %5s |\n' "three brokers' RSS" "Kafka" "sluice" "x"
printf '| %-34s | %11s | %11s | %5s |\n' "---" "---:" "---:" "---:"
printf '| %-34s | %7s MiB | %7s MiB | %5s |\n' "sum of peaks (VmHWM), before catch-up" "$KH" "$SH" "$(ratio "$KH" "$SH")"
printf '| %-34s | %7s MiB | %7s MiB | %5s |\n' "sum at the end (VmRSS)" "$KR" "$SR" "$(ratio "$KR" "$SR")"
if [ -s "$CATCH" ]; then
  echo
  echo "follower catch-up: ${CATCHUP_MB} MiB of 1 KiB records written while it was down, timed until the ISR holds it again,"
  echo "from its process start and from its listener first answering (start-up and log recovery done, first fetch next);"
  echo "x = catch-up records/s over the leader's raw read rate (sluice bench consume of the same records)"
  printf '| %-8s | %9s | %10s | %7s | %10s | %7s | %10s |\n' "cluster" "records" "from start" "x" "from ready" "x" "read rec/s"
  printf '| %-8s | %9s | %10s | %7s | %10s | %7s | %10s |\n' "---" "---:" "---:" "---:" "---:" "---:" "---:"
  while IFS='|' read -r c n secs rate rsecs rrate cons; do
    printf '| %-8s | %9s | %8s s | %7s | %8s s | %7s | %10s |\n' "$c" "$n" "$secs" "$(ratio "$cons" "$rate")" "$rsecs" "$(ratio "$cons" "$rrate")" "$(num "$cons" 0)"
  done <"$CATCH"
fi
if [ -s "$WORK/profile.txt" ]; then
  echo
  if [ "$SLUICE_PROFILE" = catchup ]; then
    echo "CPU profile of the restarted sluice follower over its catch-up and the read after it (go tool pprof -top):"
  else
    echo "CPU profile of sluice broker 1 over the run (go tool pprof -top):"
  fi
  cat "$WORK/profile.txt"
fi
