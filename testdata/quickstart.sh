#!/usr/bin/env bash
# make quickstart: the whole pipeline on one machine (`sluice quickstart`): a broker and the schema
# registry in one process over a temporary directory, a few hours of Avro page views, hourly loads
# into Parquet through the scheduler, and SQL over the result. This script runs it and checks what
# it printed: every page view loaded once, complete hours marked, the queries answered, and nothing
# left running. Everything lives under $QUICKSTART_DIR (default: a new temp dir).
set -euo pipefail
cd "$(dirname "$0")/.."
SLUICE=${SLUICE:-bin/sluice}
DIR=${QUICKSTART_DIR:-$(mktemp -d -t sluice-quickstart.XXXXXX)}
EVENTS=${QUICKSTART_EVENTS:-30000}
mkdir -p "$DIR"
start=$(date +%s)
"$SLUICE" quickstart --dir "$DIR" --events "$EVENTS" | tee "$DIR/quickstart.out"
took=$(( $(date +%s) - start ))
out="$DIR/quickstart.out"
fail() { echo "quickstart check: $*" >&2; exit 1; }

# Page views per hour: the rows between the header rule and the next "==>" line; column 3 is the count.
loaded=$(awk '/^==> sluice query: page views per hour/{q=1; next} q && /^----/{r=1; next} r && /^==>/{exit} r {s+=$3} END{print s+0}' "$out")
want=$((EVENTS + 500))
[ "$loaded" -eq "$want" ] || fail "the query counts $loaded page views, $want were produced"
grep -q '^==> sluice query: top pages' "$out" || fail "no top-pages query"
grep -q 'complete hours (_SUCCESS written): ' "$out" || fail "no hour was marked complete"
n=$(find "$DIR/warehouse" -name _SUCCESS | wc -l)
[ "$n" -ge 2 ] || fail "$n _SUCCESS markers in the warehouse, want at least 2"
broker=$(sed -n 's/^    broker \([^,]*\),.*/\1/p' "$out")
if (exec 3<>"/dev/tcp/${broker%:*}/${broker#*:}") 2>/dev/null; then fail "the broker at $broker still answers"; fi
[ "$took" -lt 120 ] || fail "took ${took}s, more than two minutes"
echo "quickstart check: $loaded page views loaded exactly as produced, $n complete hours, nothing left running, ${took}s"
