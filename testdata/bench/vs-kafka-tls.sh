# vs-kafka-tls.sh — MODE=tls of testdata/bench/vs-kafka.sh, sourced by it
# after the sluice build (it uses its runners and settings).
#
# One Apache Kafka 4.1 broker (KRaft) and one sluice broker, each with two
# listeners: PLAINTEXT and SASL_SSL with SCRAM-SHA-512 (TLS from PEM files
# made here with openssl: a CA and a server certificate for 127.0.0.1).
# Kafka's own ProducerPerformance (acks=1, TLS_RECORDS records of TLS_SIZE
# bytes, default 200000 x 1 KiB, 1 partition) and ConsumerPerformance run
# against each listener of each broker, REPEAT times alternating, best kept.
# The table shows records/s per listener, the SASL_SSL/PLAINTEXT ratio per
# broker and the ratio of ratios sluice/Kafka (at least 1: sluice's TLS
# cost is no higher than Kafka's).
#
# Environment (besides vs-kafka.sh's REPEAT, KAFKA_HEAP, COMPRESSION, KEEP):
# TLS_RECORDS, TLS_SIZE.

TLS_RECORDS=${TLS_RECORDS:-200000}
TLS_SIZE=${TLS_SIZE:-1024}
command -v openssl >/dev/null || die "openssl not found (Debian's openssl package)"
USER_NAME=bench
USER_PASSWORD="bench-$RANDOM$RANDOM"

# --- certificates -------------------------------------------------------------
TLS="$WORK/tls"; mkdir -p "$TLS"
openssl req -x509 -newkey rsa:2048 -nodes -keyout "$TLS/ca.key" -out "$TLS/ca.pem" -days 2 -subj "/CN=vs-kafka CA" >/dev/null 2>&1 \
  || die "openssl: making the CA failed"
openssl req -newkey rsa:2048 -nodes -keyout "$TLS/server.key.pem" -out "$TLS/server.csr" -subj "/CN=127.0.0.1" >/dev/null 2>&1 \
  || die "openssl: making the server key failed"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\n' >"$TLS/san.ext"
openssl x509 -req -in "$TLS/server.csr" -CA "$TLS/ca.pem" -CAkey "$TLS/ca.key" -CAcreateserial -days 2 \
  -extfile "$TLS/san.ext" -out "$TLS/server.crt" >/dev/null 2>&1 || die "openssl: signing the server certificate failed"
# PKCS#8, unencrypted, then the chain: one PEM file as both brokers read it
openssl pkcs8 -topk8 -nocrypt -in "$TLS/server.key.pem" -out "$TLS/server.p8" || die "openssl: pkcs8 failed"
cat "$TLS/server.p8" "$TLS/server.crt" >"$TLS/server.pem"

# The clients' properties over SASL_SSL (both brokers alike).
cat >"$TLS/client.properties" <<P
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required username="$USER_NAME" password="$USER_PASSWORD";
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
P
: >"$TLS/plain.properties"

# --- Apache Kafka -------------------------------------------------------------
KPORT=$(free_port); KSPORT=$(free_port); CPORT=$(free_port)
mkdir -p "$WORK/kafka"
cat >"$WORK/kafka/server.properties" <<PROPS
process.roles=broker,controller
node.id=1
controller.quorum.voters=1@127.0.0.1:$CPORT
listeners=PLAINTEXT://127.0.0.1:$KPORT,SASL_SSL://127.0.0.1:$KSPORT,CONTROLLER://127.0.0.1:$CPORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KPORT,SASL_SSL://127.0.0.1:$KSPORT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required;
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
log.dirs=$WORK/kafka/logs
num.partitions=1
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
PROPS
log "formatting and starting Apache Kafka: PLAINTEXT 127.0.0.1:$KPORT, SASL_SSL 127.0.0.1:$KSPORT"
# shellcheck disable=SC2086
java $TOOL_JVM -cp "$CP" kafka.tools.StorageTool format -t "$(python3 -c 'import base64,os;print(base64.urlsafe_b64encode(os.urandom(16)).decode().rstrip("="))')" \
  -c "$WORK/kafka/server.properties" --add-scram "SCRAM-SHA-512=[name=$USER_NAME,password=$USER_PASSWORD]" >"$WORK/kafka/format.log" 2>&1 \
  || { cat "$WORK/kafka/format.log"; die "kafka-storage format failed"; }
# shellcheck disable=SC2086
java $KAFKA_HEAP $KAFKA_JVM -cp "$CP" kafka.Kafka "$WORK/kafka/server.properties" >"$WORK/kafka/server.log" 2>&1 &
KAFKA_PID=$!; PIDS+=("$KAFKA_PID")

# --- sluice -------------------------------------------------------------------
SPORT=$(free_port); SSPORT=$(free_port)
mkdir -p "$WORK/sluice-data"
printf '%s\n' "$USER_PASSWORD" | "$SLUICE" users set "$USER_NAME" --mechanism SCRAM-SHA-512 --password-stdin --data-dir "$WORK/sluice-data" >/dev/null \
  || die "sluice users set failed"
cat >"$WORK/sluice.properties" <<PROPS
listeners=PLAINTEXT://127.0.0.1:$SPORT,SASL_SSL://127.0.0.1:$SSPORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,SASL_SSL:SASL_SSL
sasl.enabled.mechanisms=SCRAM-SHA-512
ssl.keystore.type=PEM
ssl.keystore.location=$TLS/server.pem
ssl.truststore.type=PEM
ssl.truststore.location=$TLS/ca.pem
group.initial.rebalance.delay.ms=0
PROPS
"$SLUICE" broker --data-dir "$WORK/sluice-data" --config "$WORK/sluice.properties" >"$WORK/sluice.log" 2>&1 &
SLUICE_PID=$!; PIDS+=("$SLUICE_PID")
wait_ready kafka "127.0.0.1:$KPORT" "$KAFKA_PID"
wait_ready sluice "127.0.0.1:$SPORT" "$SLUICE_PID"
log "kafka pid $KAFKA_PID, sluice pid $SLUICE_PID"

# --- runs ---------------------------------------------------------------------
tls_produce() { # addr topic properties
  local out
  # shellcheck disable=SC2086
  out=$(timeout 300 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ProducerPerformance --topic "$2" \
    --num-records "$TLS_RECORDS" --record-size "$TLS_SIZE" --throughput -1 --producer.config "$3" \
    --producer-props bootstrap.servers="$1" acks=1 compression.type="$COMPRESSION" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F'[ ,()]+' '/records sent/ {for(i=1;i<=NF;i++){ if($i=="records/sec") r=$(i-1); if($i=="MB/sec") m=$(i-1)}; print r, m; f=1} END{if(!f) print "n/a"}'
}
tls_consume() { # addr topic properties
  local out
  # shellcheck disable=SC2086
  out=$(timeout 120 java $TOOL_JVM -cp "$CP" org.apache.kafka.tools.ConsumerPerformance --bootstrap-server "$1" \
    --topic "$2" --messages "$TLS_RECORDS" --timeout 20000 --group "$(new_group)" --consumer.config "$3" 2>>"$WORK/tools.log" | tail -1) || { echo n/a; return; }
  echo "$out" | awk -F', *' 'NF>=10 && $5+0>0 {print $10, $9; f=1} END{if(!f) print "n/a"}'
}
best() { # current new: the higher records/s
  [ "$1" = n/a ] && { echo "$2"; return; }
  [ "$2" = n/a ] && { echo "$1"; return; }
  awk -v a="${1%% *}" -v b="${2%% *}" 'BEGIN{exit !(b+0 > a+0)}' && echo "$2" || echo "$1"
}
declare -A R
for k in kafka-plain kafka-tls sluice-plain sluice-tls; do R[produce-$k]=n/a; R[consume-$k]=n/a; done
"$SLUICE" topics create tls-bench --bootstrap "127.0.0.1:$KPORT" -p 1 >/dev/null
"$SLUICE" topics create tls-bench --bootstrap "127.0.0.1:$SPORT" -p 1 >/dev/null
for i in $(seq 1 "$REPEAT"); do
  for b in kafka sluice; do
    plain=127.0.0.1:$KPORT; tls=127.0.0.1:$KSPORT
    [ $b = sluice ] && { plain=127.0.0.1:$SPORT; tls=127.0.0.1:$SSPORT; }
    r=$(tls_produce "$plain" tls-bench "$TLS/plain.properties"); R[produce-$b-plain]=$(best "${R[produce-$b-plain]}" "$r"); log "run $i $b produce PLAINTEXT: $r"
    r=$(tls_produce "$tls" tls-bench "$TLS/client.properties"); R[produce-$b-tls]=$(best "${R[produce-$b-tls]}" "$r"); log "run $i $b produce SASL_SSL: $r"
    r=$(tls_consume "$plain" tls-bench "$TLS/plain.properties"); R[consume-$b-plain]=$(best "${R[consume-$b-plain]}" "$r"); log "run $i $b consume PLAINTEXT: $r"
    r=$(tls_consume "$tls" tls-bench "$TLS/client.properties"); R[consume-$b-tls]=$(best "${R[consume-$b-tls]}" "$r"); log "run $i $b consume SASL_SSL: $r"
  done
done
for k in "${!R[@]}"; do [ "${R[$k]}" = n/a ] && die "$k failed (see $WORK/tools.log, KEEP=1 keeps it)"; done
KRSS=$(awk '$1=="VmHWM:" {print int($2/1024)}' "/proc/$KAFKA_PID/status"); SRSS=$(awk '$1=="VmHWM:" {print int($2/1024)}' "/proc/$SLUICE_PID/status")

# --- table --------------------------------------------------------------------
div() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b+0 > 0) printf "%.2f", a/b; else printf "-" }'; }
LOADS=$(awk '{s+=$1; n++} END{if(n) printf "%.1f", s/n; else print "-"}' /proc/loadavg)
echo
echo "sluice vs Apache Kafka 4.1, one broker each, PLAINTEXT and SASL_SSL (SCRAM-SHA-512, TLS from PEM) listeners ($(nproc) cores, $(date -u +%Y-%m-%d))"
echo "Kafka's ProducerPerformance (acks=1) and ConsumerPerformance, ${TLS_RECORDS} x ${TLS_SIZE} B, 1 partition, compression ${COMPRESSION}; best of ${REPEAT}; load average at the end ${LOADS}"
echo
printf '| %-8s | %-7s | %16s | %15s | %15s |\n' "run" "broker" "PLAINTEXT rec/s" "SASL_SSL rec/s" "SASL_SSL/PLAIN"
printf '| %-8s | %-7s | %16s | %15s | %15s |\n' "---" "---" "---:" "---:" "---:"
for op in produce consume; do
  for b in kafka sluice; do
    p=${R[$op-$b-plain]%% *}; t=${R[$op-$b-tls]%% *}
    printf '| %-8s | %-7s | %16.0f | %15.0f | %15s |\n' "$op" "$b" "$p" "$t" "$(div "$t" "$p")"
  done
done
echo
for op in produce consume; do
  kr=$(div "${R[$op-kafka-tls]%% *}" "${R[$op-kafka-plain]%% *}"); sr=$(div "${R[$op-sluice-tls]%% *}" "${R[$op-sluice-plain]%% *}")
  echo "$op: ratio of ratios (sluice SASL_SSL/PLAINTEXT over Kafka's) = $(div "$sr" "$kr")"
done
echo "peak RSS: Kafka $KRSS MiB, sluice $SRSS MiB"
