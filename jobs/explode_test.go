package jobs_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// orderViewSchema is a page view with a nested array of records: the
// items of the cart shown.
const orderViewSchema = `{"type":"record","name":"OrderView","namespace":"sluice.test","fields":[
 {"name":"ts","type":{"type":"long","logicalType":"timestamp-millis"}},
 {"name":"user_id","type":"long"},
 {"name":"url","type":"string"},
 {"name":"items","type":{"type":"array","items":{"type":"record","name":"Item","fields":[
   {"name":"sku","type":"string"},{"name":"qty","type":"int"},{"name":"price","type":["null","double"],"default":null}]}}},
 {"name":"tags","type":["null",{"type":"array","items":"string"}],"default":null}]}`

const explodeJob = `
name: explode-%s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 120
decode:
  format: avro
  schema_file: orderview.avsc
map:
  mapper: explode
  field: items
  derive:
    total: {expr: 'items.qty * (items.price ?? 0)', type: double}
    sku_len: {expr: 'len(items.sku)', type: int}
    first: {expr: 'url + "#" + items.sku', type: string}
on_bad_record: fail
partition:
  by: hour
  time_field: ts
  timezone: UTC
output:
  uri: %s
  format: parquet
  metadata_columns: true
  max_file_records: 50
`

// orderViews makes n seeded order views over partitions; item i of record k
// has sku "s<k>-<i>" and qty i+1, and records have 0 to 4 items (0 for
// every fifth). items counts the items of each record.
func orderViews(t testing.TB, topic string, n, partitions, seed int) (recs []*kgo.Record, items []int64) {
	t.Helper()
	s, err := avro.Parse(orderViewSchema)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(int64(seed)))
	for k := 0; k < n; k++ {
		ts := pageViewBase.Add(time.Duration(k) * 3 * time.Second)
		user := rng.Int63n(1000)
		m := 1 + rng.Intn(4)
		if k%5 == 0 {
			m = 0
		}
		var its []any
		for i := 0; i < m; i++ {
			var price any
			if i%2 == 0 {
				price = float64(i) + 0.5
			}
			its = append(its, map[string]any{"sku": fmt.Sprintf("s%d-%d", user, i), "qty": i + 1, "price": price})
		}
		v := map[string]any{"ts": ts, "user_id": user, "url": "/cart", "items": its, "tags": []any{"a", "b"}}
		b, err := avro.Marshal(s, v)
		if err != nil {
			t.Fatal(err)
		}
		p := int32(user % int64(partitions))
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Timestamp: ts, Value: b})
		items = append(items, int64(m))
	}
	return recs, items
}

// explode over nested order views, loaded twice over (a first run, then a
// run of what arrived since): one row per item, each (partition, offset,
// row) once, the element's fields as a nested column (items.qty), the other
// fields kept, and a record with no items has no row. The columnar path
// (explode on the records' bytes, with map.derive columns over the items)
// and the map path give the same rows.
func TestExplodeNestedExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "orderview.avsc"), []byte(orderViewSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(explodeJob, "nested", b.Addr, "orders", out))
	recs, items := orderViews(t, "orders", 900, 3, 1)
	produceAll(t, ctx, b.Addr, "orders", 3, recs[:600])
	rep, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	produceAll(t, ctx, b.Addr, "orders", 0, recs[600:])
	rep2, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var want int64
	for _, n := range items {
		want += n
	}

	mapOut := filepath.Join(dir, "map")
	mapSpec, _ := writeJob(t, dir, fmt.Sprintf(explodeJob, "nested-map", b.Addr, "orders", mapOut))
	mapRep, err := jobs.Run(ctx, mapSpec, jobs.Options{MapPath: true})
	if err != nil {
		t.Fatal(err)
	}
	if mapRep.Totals.RowsOut != want {
		t.Fatalf("the map path wrote %d rows, want %d", mapRep.Totals.RowsOut, want)
	}
	if got := rep.Totals.RowsOut + rep2.Totals.RowsOut; got != want || rep.Totals.RecordsIn+rep2.Totals.RecordsIn != 900 {
		t.Fatalf("runs read %d records and wrote %d rows; produced 900 records with %d items", rep.Totals.RecordsIn+rep2.Totals.RecordsIn, got, want)
	}
	db := duck(t)
	glob := dataGlob(out, "parquet")
	var rows, keys, offsets, badQty, badSku, noTags int64
	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (_partition, _offset, _row)), count(DISTINCT (_partition, _offset)),
		count(*) FILTER (WHERE items.qty <> _row + 1),
		count(*) FILTER (WHERE items.sku <> 's' || user_id || '-' || _row OR (items.price IS NULL) <> (_row %% 2 = 1)),
		count(*) FILTER (WHERE tags <> ['a', 'b'] OR url <> '/cart')
		FROM read_parquet('%s')`, glob)
	if err := db.QueryRow(q).Scan(&rows, &keys, &offsets, &badQty, &badSku, &noTags); err != nil {
		t.Fatal(err)
	}
	withItems := int64(900 - 180)
	if rows != want || keys != want || offsets != withItems || badQty != 0 || badSku != 0 || noTags != 0 {
		t.Fatalf("%d rows, %d distinct (partition, offset, row), %d offsets (want %d rows, %d offsets); wrong qty %d, sku/price %d, other fields %d",
			rows, keys, offsets, want, withItems, badQty, badSku, noTags)
	}
	// Per partition: the rows of each offset are 0 … n-1, with n its items.
	var gaps int64
	q = fmt.Sprintf(`SELECT count(*) FROM (SELECT _partition, _offset, max(_row) AS m, count(*) AS n FROM read_parquet('%s')
		GROUP BY ALL) WHERE m <> n - 1`, glob)
	if err := db.QueryRow(q).Scan(&gaps); err != nil || gaps != 0 {
		t.Fatalf("%d offsets whose rows are not 0 … n-1 (%v)", gaps, err)
	}
	for _, q := range []string{
		`SELECT count(*) FROM (SELECT * FROM read_parquet('%[1]s') EXCEPT ALL SELECT * FROM read_parquet('%[2]s'))`,
		`SELECT count(*) FROM (SELECT * FROM read_parquet('%[2]s') EXCEPT ALL SELECT * FROM read_parquet('%[1]s'))`,
	} {
		var n int
		if err := db.QueryRow(fmt.Sprintf(q, glob, dataGlob(mapOut, "parquet"))).Scan(&n); err != nil || n != 0 {
			t.Fatalf("%d rows of one path's output are not in the other's (%v)", n, err)
		}
	}
	var wrongTotal int64
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FILTER (WHERE total <> items.qty * coalesce(items.price, 0) OR sku_len <> length(items.sku)
		OR first <> url || '#' || items.sku) FROM read_parquet('%s')`, glob)).Scan(&wrongTotal); err != nil || wrongTotal != 0 {
		t.Fatalf("%d rows with wrong derived columns (%v)", wrongTotal, err)
	}
	var typ string
	if err := db.QueryRow(fmt.Sprintf(`SELECT typeof(items) FROM read_parquet('%s') LIMIT 1`, glob)).Scan(&typ); err != nil ||
		!strings.HasPrefix(typ, "STRUCT(sku VARCHAR, qty INTEGER, price DOUBLE)") {
		t.Fatalf("items is %q (%v), want the element's struct", typ, err)
	}
}

// explode over schemaless JSON: a record without the field, or whose field
// is not an array, follows on_bad_record (here skip) with the field named.
func TestExplodeBadRecords(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	job := fmt.Sprintf(`
name: explode-json
source: {bootstrap: [%s], topics: [jsonorders], start: earliest}
decode: {format: json}
map: {mapper: explode, field: items}
on_bad_record: dead-letter
partition: {by: none}
output: {uri: %s, format: jsonl, metadata_columns: true}
`, b.Addr, out)
	spec, _ := writeJob(t, dir, job)
	values := []string{`{"id":1,"items":[10,20,30]}`, `{"id":2}`, `{"id":3,"items":"x"}`, `{"id":4,"items":null}`, `{"id":5,"items":[]}`, `{"id":6,"items":[{"q":1}]}`}
	var recs []*kgo.Record
	for _, v := range values {
		recs = append(recs, &kgo.Record{Topic: "jsonorders", Value: []byte(v)})
	}
	produceAll(t, ctx, b.Addr, "jsonorders", 1, recs)
	rep, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.RowsOut != 4 || rep.Totals.DeadLettered != 3 {
		t.Fatalf("rows %d, dead letters %d; want 4 rows (3 of id 1, 1 of id 6) and 3 dead letters", rep.Totals.RowsOut, rep.Totals.DeadLettered)
	}
	dls, _ := filepath.Glob(filepath.Join(out, "_sluice", "dead-letter", "jsonorders", "0", "*.jsonl"))
	if len(dls) != 1 {
		t.Fatalf("dead-letter files %v", dls)
	}
	text, _ := os.ReadFile(dls[0])
	var msgs []string
	for _, line := range strings.Split(strings.TrimSpace(string(text)), "\n") {
		var d jobs.DeadLetter
		if err := json.Unmarshal([]byte(line), &d); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, fmt.Sprintf("%d: %s", d.Offset, d.Error))
	}
	for i, want := range []string{`1: jobs: bad record: explode: the record has no field "items"`, `2: jobs: bad record: explode: the field "items" is a string, not an array`, `3: jobs: bad record: explode: the field "items" is null, not an array`} {
		if i >= len(msgs) || !strings.Contains(msgs[i], want) {
			t.Errorf("dead letter %d: %q, want %q", i, msgs, want)
		}
	}
	files, _ := filepath.Glob(filepath.Join(out, "*.jsonl"))
	var got []string
	for _, f := range files {
		b, _ := os.ReadFile(f)
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if err := json.Unmarshal([]byte(line), &m); err != nil {
				t.Fatal(err)
			}
			got = append(got, fmt.Sprintf("%v/%v/%v", m["_offset"], m["_row"], m["items"]))
		}
	}
	if fmt.Sprint(got) != "[0/0/10 0/1/20 0/2/30 5/0/map[q:1]]" {
		t.Fatalf("rows (offset/row/items) %v", got)
	}
}
