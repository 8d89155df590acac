package format_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/internal/avrocodec"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/writers/format"
)

func eventSchema(t testing.TB) avro.Schema {
	t.Helper()
	root, err := hdfs.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	s, err := avro.ParseFiles(filepath.Join(root, "testdata", "writers", "event.avsc"))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var base = time.Date(2023, 11, 14, 22, 13, 20, 0, time.UTC)

// event returns record i as hamba/avro decodes records generically.
func event(i int) map[string]any {
	var score any = float64(i) / 2
	switch i % 3 {
	case 0:
		score = nil
	case 2:
		score = map[string]any{"double": float64(i) / 2} // hamba's union wrapper
	}
	var opt any
	if i%2 == 1 {
		opt = map[string]any{"sluice.test.Opt": map[string]any{"x": i}}
	}
	kind := "VIEW"
	if i%4 == 3 {
		kind = "CLICK"
	}
	return map[string]any{
		"id":    int64(i),
		"name":  fmt.Sprintf("user-%d", i),
		"score": score,
		"ok":    i%2 == 0,
		"n32":   int32(i),
		"ts":    base.Add(time.Duration(i) * time.Second),
		"ts_us": base.Add(time.Duration(i) * time.Microsecond),
		"day":   time.Date(2024, 1, 1+i, 0, 0, 0, 0, time.UTC),
		"price": big.NewRat(int64(i*100+5), 100),
		"uid":   fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
		"tags":  []any{"a", fmt.Sprint(i)},
		"attrs": map[string]any{"k": int64(i)},
		"loc":   map[string]any{"lat": 1.5, "lon": -2.25},
		"opt":   opt,
		"kind":  kind,
		"raw":   []byte{byte(i)},
		"items": []any{
			map[string]any{"sku": fmt.Sprintf("sku-%d", i), "qty": map[string]any{"int": i}, "props": map[string]any{"color": []any{"red", "blue"}}},
			map[string]any{"sku": "extra", "qty": nil, "props": map[string]any{}},
		},
	}
}

func meta(i int) format.Meta {
	return format.Meta{Topic: "events", Partition: 3, Offset: int64(1000 + i), Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
}

const nEvents = 500

func writeFile(t *testing.T, opts format.Options, n int) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "f."+opts.Extension())
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	w, err := format.NewWriter(f, eventSchema(t), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if err := w.Write(event(i), meta(i)); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	if w.Records() != int64(n) {
		t.Fatalf("Records = %d", w.Records())
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestParquetReadByDuckDBAndPyarrow(t *testing.T) {
	db := duck(t)
	for _, c := range []string{"zstd", "snappy", "gzip", "none"} {
		t.Run(c, func(t *testing.T) {
			p := writeFile(t, format.Options{Kind: format.Parquet, Compression: c, RowGroupRows: 128, MetadataColumns: true}, nEvents)
			from := fmt.Sprintf("read_parquet('%s')", p)
			var n, sum int64
			if err := db.QueryRow("SELECT count(*), sum(id) FROM "+from).Scan(&n, &sum); err != nil {
				t.Fatal(err)
			}
			if n != nEvents || sum != nEvents*(nEvents-1)/2 {
				t.Fatalf("duckdb count %d sum %d", n, sum)
			}
			types := duckTypes(t, db, from)
			want := map[string]string{
				"ts": "TIMESTAMP WITH TIME ZONE", "ts_us": "TIMESTAMP WITH TIME ZONE", "day": "DATE",
				"price": "DECIMAL(10,2)", "uid": "UUID", "tags": "VARCHAR[]", "attrs": "MAP(VARCHAR, BIGINT)",
				"loc": "STRUCT(lat DOUBLE, lon DOUBLE)", "opt": "STRUCT(x INTEGER)", "score": "DOUBLE",
				"_timestamp": "TIMESTAMP WITH TIME ZONE", "_offset": "BIGINT", "_partition": "INTEGER", "_topic": "VARCHAR",
				"n32": "INTEGER", "kind": "VARCHAR", "raw": "BLOB",
			}
			for col, typ := range want {
				if types[col] != typ {
					t.Errorf("duckdb type of %s = %q, want %q", col, types[col], typ)
				}
			}
			var ts, price, uid, day, tag string
			var score *float64
			var optx *int64
			var off int64
			q := "SELECT strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d %H:%M:%S'), price::VARCHAR, uid::VARCHAR, day::VARCHAR, tags[2], score, opt.x, _offset FROM " + from + " WHERE id = 7"
			if err := db.QueryRow(q).Scan(&ts, &price, &uid, &day, &tag, &score, &optx, &off); err != nil {
				t.Fatal(err)
			}
			if ts != "2023-11-14 22:13:27" || price != "7.05" || uid != "00000000-0000-4000-8000-000000000007" ||
				day != "2024-01-08" || tag != "7" || score == nil || *score != 3.5 || optx == nil || *optx != 7 || off != 1007 {
				t.Fatalf("row 7 = %s %s %s %s %s %v %v %d", ts, price, uid, day, tag, score, optx, off)
			}
			var sku string
			var nitems, qty int64
			var color string
			if err := db.QueryRow("SELECT len(items), items[1].sku, items[1].qty, items[1].props['color'][2] FROM "+from+" WHERE id = 7").Scan(&nitems, &sku, &qty, &color); err != nil {
				t.Fatal(err)
			}
			if nitems != 2 || sku != "sku-7" || qty != 7 || color != "blue" {
				t.Fatalf("nested row 7: %d %s %d %s", nitems, sku, qty, color)
			}
			var nulls int64
			if err := db.QueryRow("SELECT count(*) FROM " + from + " WHERE score IS NULL").Scan(&nulls); err != nil {
				t.Fatal(err)
			}
			if nulls != (nEvents+2)/3 {
				t.Fatalf("null scores %d", nulls)
			}

			py := readPython(t, "parquet", p)
			if py.Rows != nEvents {
				t.Fatalf("pyarrow rows %d", py.Rows)
			}
			for col, typ := range map[string]string{
				"ts": "timestamp[ms, tz=UTC]", "ts_us": "timestamp[us, tz=UTC]", "day": "date32[day]",
				"price": "decimal128(10, 2)", "_timestamp": "timestamp[ms, tz=UTC]", "n32": "int32",
			} {
				if py.Types[col] != typ {
					t.Errorf("pyarrow type of %s = %q, want %q", col, py.Types[col], typ)
				}
			}
			if !strings.Contains(py.Logical["ts"], "Timestamp(isAdjustedToUTC=true, timeUnit=milliseconds") ||
				!strings.Contains(py.Logical["ts_us"], "timeUnit=microseconds") {
				t.Errorf("parquet logical types: ts %q ts_us %q", py.Logical["ts"], py.Logical["ts_us"])
			}
			r := py.Records[7]
			if r["ts"] != "2023-11-14T22:13:27+00:00" || r["price"] != "7.05" || r["name"] != "user-7" {
				t.Errorf("pyarrow row 7: %v", r)
			}
		})
	}
}

func TestAvroReadByFastavro(t *testing.T) {
	for c, want := range map[string]string{"zstd": "zstandard", "snappy": "snappy", "deflate": "deflate", "none": "null"} {
		t.Run(c, func(t *testing.T) {
			p := writeFile(t, format.Options{Kind: format.Avro, Compression: c, MetadataColumns: true}, nEvents)
			py := readPython(t, "avro", p)
			if py.Rows != nEvents || py.Codec != want {
				t.Fatalf("fastavro rows %d codec %q", py.Rows, py.Codec)
			}
			r := py.Records[7]
			if r["ts"] != "2023-11-14T22:13:27+00:00" || r["price"] != "7.05" || r["uid"] != "00000000-0000-4000-8000-000000000007" ||
				r["day"] != "2024-01-08" || r["score"] != 3.5 || r["_offset"] != float64(1007) || r["_topic"] != "events" {
				t.Fatalf("fastavro row 7: %v", r)
			}
			if items, _ := r["items"].([]any); len(items) != 2 || fmt.Sprint(items[0]) != "map[props:map[color:[red blue]] qty:7 sku:sku-7]" {
				t.Fatalf("fastavro nested items: %v", r["items"])
			}
			if r := py.Records[6]; r["score"] != nil || r["opt"] != nil {
				t.Fatalf("fastavro row 6 nulls: %v", r)
			}
			if !strings.Contains(py.Types["_timestamp"], `"logicalType": "timestamp-millis"`) {
				t.Fatalf("_timestamp type %s", py.Types["_timestamp"])
			}
		})
	}
}

func TestJSONLinesReadByDuckDB(t *testing.T) {
	db := duck(t)
	for _, c := range []string{"none", "gzip", "zstd"} {
		t.Run(c, func(t *testing.T) {
			p := writeFile(t, format.Options{Kind: format.JSONLines, Compression: c, MetadataColumns: true}, nEvents)
			from := fmt.Sprintf("read_json_auto('%s')", p)
			var n, sum int64
			if err := db.QueryRow("SELECT count(*), sum(id) FROM "+from).Scan(&n, &sum); err != nil {
				t.Fatal(err)
			}
			if n != nEvents || sum != nEvents*(nEvents-1)/2 {
				t.Fatalf("duckdb count %d sum %d", n, sum)
			}
			types := duckTypes(t, db, from)
			for _, col := range []string{"ts", "_timestamp"} {
				if !strings.HasPrefix(types[col], "TIMESTAMP") {
					t.Errorf("duckdb type of %s = %q, want a timestamp", col, types[col])
				}
			}
			var price float64
			var day, name string
			if err := db.QueryRow("SELECT price, day::VARCHAR, name FROM "+from+" WHERE id = 7").Scan(&price, &day, &name); err != nil {
				t.Fatal(err)
			}
			if price != 7.05 || day != "2024-01-08" || name != "user-7" {
				t.Fatalf("row 7: %v %s %s", price, day, name)
			}
		})
	}
}

func TestBadValueKeepsWriterUsable(t *testing.T) {
	for _, k := range []format.Kind{format.Parquet, format.Avro} {
		t.Run(string(k), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			f, _ := os.Create(p)
			w, err := format.NewWriter(f, eventSchema(t), format.Options{Kind: k})
			if err != nil {
				t.Fatal(err)
			}
			for i := range 10 {
				e := event(i)
				if i == 4 {
					e["loc"] = "not a record"
				}
				err := w.Write(e, meta(i))
				if (i == 4) != (err != nil) {
					t.Fatalf("record %d: %v", i, err)
				}
				if err != nil && !errors.Is(err, avrocodec.ErrBadValue) {
					t.Fatalf("record %d: %v, want ErrBadValue", i, err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			py := readPython(t, string(k), p)
			if py.Rows != 9 {
				t.Fatalf("rows %d, want 9", py.Rows)
			}
		})
	}
}

func TestOptionsValidate(t *testing.T) {
	if err := (format.Options{Kind: format.JSONLines, Compression: "snappy"}).Validate(); err == nil {
		t.Fatal("jsonl snappy accepted")
	}
	if err := (format.Options{Kind: "csv"}).Validate(); err == nil {
		t.Fatal("csv accepted")
	}
	for o, ext := range map[format.Options]string{
		{Kind: format.Parquet}: "parquet", {Kind: format.Avro}: "avro",
		{Kind: format.JSONLines, Compression: "zstd"}: "jsonl.zst", {Kind: format.JSONLines, Compression: "gzip"}: "jsonl.gz",
	} {
		if o.Extension() != ext {
			t.Errorf("%v ext %s", o, o.Extension())
		}
	}
}

func TestTimestampMicrosMetadata(t *testing.T) {
	p := writeFile(t, format.Options{Kind: format.Parquet, MetadataColumns: true, TimestampMicros: true}, 10)
	py := readPython(t, "parquet", p)
	if py.Types["_timestamp"] != "timestamp[us, tz=UTC]" {
		t.Fatalf("_timestamp %s", py.Types["_timestamp"])
	}
	if !strings.Contains(py.Logical["_timestamp"], "isAdjustedToUTC=true, timeUnit=microseconds") {
		t.Fatalf("_timestamp logical %s", py.Logical["_timestamp"])
	}
}

// TestJSONDecodedValues: records decoded from JSON (float64 numbers, text
// timestamps and decimals) are written by every format.
func TestJSONDecodedValues(t *testing.T) {
	for _, k := range []format.Kind{format.Parquet, format.Avro} {
		t.Run(string(k), func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "f")
			f, _ := os.Create(p)
			w, err := format.NewWriter(f, eventSchema(t), format.Options{Kind: k})
			if err != nil {
				t.Fatal(err)
			}
			var rec map[string]any
			raw := `{"id": 7, "name": "n", "score": 3.5, "ok": true, "n32": 7, "ts": "2023-11-14T22:13:27Z",
				"ts_us": 1700000000000000, "day": "2024-01-08", "price": "7.05",
				"uid": "00000000-0000-4000-8000-000000000007", "tags": ["a"], "attrs": {"k": 7},
				"loc": {"lat": 1.5, "lon": 2}, "opt": {"x": 7}, "kind": "VIEW", "raw": "AQ==",
				"items": [{"sku": "s", "qty": 2, "props": {}}]}`
			if err := json.Unmarshal([]byte(raw), &rec); err != nil {
				t.Fatal(err)
			}
			if err := w.Write(rec, format.Meta{}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			f.Close()
			py := readPython(t, string(k), p)
			r := py.Records[0]
			if py.Rows != 1 || r["ts"] != "2023-11-14T22:13:27+00:00" || r["price"] != "7.05" || r["day"] != "2024-01-08" || r["id"] != float64(7) {
				t.Fatalf("%v", r)
			}
		})
	}
}
