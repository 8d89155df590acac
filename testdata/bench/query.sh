#!/usr/bin/env bash
# sluice query beside DuckDB's own Python package over the same files.
#
# Writes RECORDS page views (default 10,000,000) through writers.Store as the
# loader does (testdata/bench/querygen: 24 hourly partitions, 4 topic
# partitions, 1M-record splits, Parquet zstd), then times, REPEAT times each:
#   Q1  SELECT hr, count(*) FROM pageviews GROUP BY hr ORDER BY hr
#   Q2  the same with WHERE dt = '2024-05-01' AND hr = 13
# as `sluice query` processes and as Python processes running the duckdb package
# (pip: duckdb) over read_parquet(<dataset>/dt=*/hr=*/*.parquet, hive_partitioning).
# Both use every core. Prints medians and the sluice/duckdb ratios. Not asserted.
#
#   testdata/bench/query.sh                      # ~1-2 minutes on 2 cores, most of it writing
#   RECORDS=1000000 REPEAT=3 testdata/bench/query.sh
#   WAREHOUSE=/tmp/wh testdata/bench/query.sh    # keep (and reuse) the warehouse
#   FORMAT=avro RECORDS=1000000 testdata/bench/query.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
RECORDS=${RECORDS:-10000000}
REPEAT=${REPEAT:-5}
FORMAT=${FORMAT:-parquet}
if ! python3 -c 'import duckdb' 2>/dev/null; then
  echo "query.sh: the duckdb Python package is missing: python3 -m pip install duckdb" >&2
  exit 1
fi
BIN=$(mktemp -d)/sluice
go build -tags duckdb_arrow -o "$BIN" ./cmd/sluice
if [ -z "${WAREHOUSE:-}" ]; then
  WAREHOUSE=$(mktemp -d)
  trap 'rm -rf "$WAREHOUSE" "$(dirname "$BIN")"' EXIT
fi
if [ ! -d "$WAREHOUSE/pageviews/_sluice" ]; then
  echo "writing $RECORDS records ($FORMAT) to $WAREHOUSE"
  go run ./testdata/bench/querygen -dir "$WAREHOUSE" -records "$RECORDS" -format "$FORMAT"
fi
python3 - "$BIN" "$WAREHOUSE" "$REPEAT" "$FORMAT" <<'PY'
import statistics, subprocess, sys, time
import duckdb
sluice, wh, repeat, fmt = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
ext = {"parquet": "parquet", "avro": "avro", "jsonl": "jsonl.zst"}[fmt]
reader = {"parquet": "read_parquet", "avro": "read_avro", "jsonl": "read_json"}[fmt]
src = f"{reader}('{wh}/pageviews/dt=*/hr=*/*.{ext}', hive_partitioning = true)"
queries = [
    ("Q1 all hours", "SELECT hr, count(*) AS n FROM {t} GROUP BY hr ORDER BY hr"),
    ("Q2 one hour ", "SELECT hr, count(*) AS n FROM {t} WHERE dt = '2024-05-01' AND hr = 13 GROUP BY hr ORDER BY hr"),
    # count(*) comes from the Parquet footers; these read column data too.
    ("Q3 all hours", "SELECT hr, count(DISTINCT user_id) AS n FROM {t} GROUP BY hr ORDER BY hr"),
    ("Q4 one hour ", "SELECT hr, count(DISTINCT user_id) AS n FROM {t} WHERE dt = '2024-05-01' AND hr = 13 GROUP BY hr ORDER BY hr"),
]
peer = "import duckdb, sys; duckdb.execute('SET enable_progress_bar = false'); print(duckdb.sql(sys.argv[1]).fetchall())"
print(f"duckdb (Python package) {duckdb.__version__}; {repeat} runs each, medians")
def median_run(args):
    ts = []
    for _ in range(repeat):
        t = time.perf_counter()
        subprocess.run(args, check=True, capture_output=True)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)
base_s = median_run([sluice, "query", "--warehouse", "file://" + wh, "SELECT 1"])
base_d = median_run([sys.executable, "-c", peer, "SELECT 1"])
print(f"process start-up (SELECT 1): sluice query {base_s:.3f}s, python + duckdb {base_d:.3f}s")
print(f"{'query':13} {'sluice query':>13} {'duckdb proc':>12} {'ratio':>6} {'duckdb in-proc':>15}")
print("(sluice query and duckdb proc: whole processes; duckdb in-proc: the query alone in a warm Python process)")
for name, q in queries:
    s_times, d_times, i_times = [], [], []
    s_out = d_out = None
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    for _ in range(repeat):
        t = time.perf_counter()
        s_out = subprocess.run([sluice, "query", "--warehouse", "file://" + wh, "--format", "csv", q.format(t="pageviews")],
                               check=True, capture_output=True, text=True).stdout
        s_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        d_out = subprocess.run([sys.executable, "-c", peer, q.format(t=src)], check=True, capture_output=True, text=True).stdout
        d_times.append(time.perf_counter() - t)
        t = time.perf_counter()
        con.sql(q.format(t=src)).fetchall()
        i_times.append(time.perf_counter() - t)
    s_rows = sum(int(l.split(",")[1]) for l in s_out.strip().splitlines()[1:])
    d_rows = sum(n for _, n in eval(d_out))
    s, d, i = statistics.median(s_times), statistics.median(d_times), statistics.median(i_times)
    print(f"{name:13} {s:12.3f}s {d:11.3f}s {s/d:6.2f} {i:14.3f}s   rows counted: sluice {s_rows}, duckdb {d_rows}")
PY
