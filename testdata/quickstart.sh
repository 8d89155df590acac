#!/usr/bin/env bash
# make quickstart: the pipeline on one machine with embedded defaults.
# Starts a sluice broker on a free loopback port over a temporary data dir, creates a topic, produces
# sample page-view records, reads them back, runs a short produce benchmark, then stops the broker
# with SIGTERM (clean shutdown). Everything lives under $QUICKSTART_DIR (default: a new temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
DIR=${QUICKSTART_DIR:-$(mktemp -d -t sluice-quickstart.XXXXXX)}
mkdir -p "$DIR"
echo "quickstart: working in $DIR"

"$SLUICE" broker --data-dir "$DIR/broker" --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:0 \
  >"$DIR/broker.out" 2>"$DIR/broker.log" &
BROKER=$!
trap 'kill -TERM $BROKER 2>/dev/null || true; wait $BROKER 2>/dev/null || true' EXIT

addr=""
for _ in $(seq 1 100); do
  addr=$(sed -n 's/^sluice broker listening on //p' "$DIR/broker.out" | head -n1)
  [ -n "$addr" ] && break
  kill -0 $BROKER 2>/dev/null || { echo "quickstart: broker exited:"; cat "$DIR/broker.log"; exit 1; }
  sleep 0.1
done
[ -n "$addr" ] || { echo "quickstart: broker did not start in 10s"; cat "$DIR/broker.log"; exit 1; }
metrics=$(sed -n 's/.*metrics_addr=\([^ ]*\).*/\1/p' "$DIR/broker.log" | head -n1)
echo "quickstart: broker at $addr (metrics http://$metrics/metrics)"

N=${QUICKSTART_RECORDS:-10000}
"$SLUICE" topics create pageviews --partitions 3 --bootstrap "$addr"
python3 - "$N" >"$DIR/pageviews.jsonl" <<'PY'
import json, sys, time
n = int(sys.argv[1]); t0 = int(time.time() * 1000) - n * 100
pages = ["/", "/search", "/item", "/cart", "/checkout"]
for i in range(n):
    print(json.dumps({"user": "u%d" % (i % 97), "page": pages[i % 5], "status": 200 if i % 11 else 404,
                      "ts": t0 + i * 100}, separators=(",", ":")))
PY
awk -F'"' '{print $4 "\t" $0}' "$DIR/pageviews.jsonl" |
  "$SLUICE" produce --bootstrap "$addr" --topic pageviews --key-separator $'\t' --compression zstd
"$SLUICE" consume --bootstrap "$addr" --topic pageviews --exit-at-end --quiet >"$DIR/consumed.jsonl"
got=$(wc -l <"$DIR/consumed.jsonl")
if [ "$got" -ne "$N" ]; then echo "quickstart: produced $N records, read back $got"; exit 1; fi
if ! diff <(sort "$DIR/pageviews.jsonl") <(sort "$DIR/consumed.jsonl") >/dev/null; then
  echo "quickstart: records read back differ from those produced"; exit 1
fi
echo "quickstart: produced and read back $N records byte-exact"
"$SLUICE" topics describe pageviews --bootstrap "$addr"
"$SLUICE" bench produce --bootstrap "$addr" --topic quickstart-bench --records 200000 --record-size 100 --report-interval 2s
curl -fsS "http://$metrics/metrics" | grep -E '^sluice_' | head -n 8 || true
echo "quickstart: done; data in $DIR"
