package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/hamba/avro/v2/ocf"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// The columnar path (Avro bytes straight into the files) and the map path
// (every record a map[string]any, as custom mappers see records) load the
// same topic into the same rows, for every output format and for the
// built-in mappers: identity, select with a rename, and a where filter.
// Damaged records in the topic are dead-lettered the same way by both.
// DuckDB compares the Parquet and JSON-lines outputs row for row.
func TestColumnarLoadMatchesMapPath(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b, registry := startSluiceWithRegistry(t)
	id := registerSchema(t, ctx, registry, "cols-value")
	recs, _ := pageViews(t, "cols", 6000, 2, 3*time.Hour, id)
	// Damage every 97th record: cut it short, or break its framing.
	damaged, failing := 0, 0 // failing: records on which the derive's expression fails
	s, _ := pageViewSchema(t)
	for i, r := range recs {
		var v map[string]any
		if err := avro.Unmarshal(s, r.Value[5:], &v); err != nil {
			t.Fatal(err)
		}
		if i%97 != 5 && v["status"].(int) == 404 && v["user_id"].(int64)%13 == 0 {
			failing++
		}
		if i%97 == 5 {
			damaged++
			if i%2 == 0 {
				r.Value = r.Value[:len(r.Value)-3]
			} else {
				r.Value = append([]byte{1}, r.Value[1:]...)
			}
		}
	}
	produceAll(t, ctx, b.Addr, "cols", 2, recs)

	maps := map[string]string{
		"identity": "",
		"select":   "map: {mapper: select, select: {keep: [ts, url, status, user_id], rename: {url: page}}}",
		"where":    `map: {mapper: identity, where: 'status >= 300 && user_id % 3 == 0'}`,
		// computed columns of every kind of type, declared and inferred,
		// one failing on some records (int("x")), a date
		"derive": `map:
  mapper: select
  select: {keep: [ts, url, status, user_id, referrer], rename: {url: page}}
  derive:
    section: 'split(page, "/")[1]'
    hour: 'ts.Hour()'
    slow: {expr: 'status >= 500', type: boolean}
    ref_len: {expr: 'referrer == nil ? nil : len(referrer)', type: int}
    score: {expr: 'status == 404 && user_id % 13 == 0 ? int("x") : user_id / 7', type: double}
    at: {expr: 'ts', type: timestamp-millis}
    tag: {expr: 'status < 300 ? "ok" : nil', type: string}
    day: 'date(ts)'`,
		"derive-identity": `map: {mapper: identity, derive: {big: 'user_id * 1000', next: {expr: 'status + 1', type: long}}}`,
	}
	for _, format := range []string{"parquet", "jsonl", "avro"} {
		for name, mapping := range maps {
			t.Run(format+"/"+name, func(t *testing.T) {
				dir := t.TempDir()
				var outs [2]string
				var rows [2]int64
				for k, mapPath := range []bool{false, true} {
					outs[k] = filepath.Join(dir, fmt.Sprintf("out%d", k))
					spec, _ := writeJob(t, dir, fmt.Sprintf(`
name: cols-%d
source: {bootstrap: [%s], topics: [cols], max_records_per_task: 2500}
decode: {format: avro, registry: %s}
on_bad_record: dead-letter
%s
partition: {by: hour, time_field: ts}
output: {uri: %s, format: %s, metadata_columns: true}
`, k, b.Addr, registry, mapping, outs[k], format))
					rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2, MapPath: mapPath})
					if err != nil {
						t.Fatal(err)
					}
					bad := damaged
					if name == "derive" {
						bad += failing
					}
					if rep.Totals.RecordsIn != 6000 || rep.Totals.DeadLettered != int64(bad) {
						t.Fatalf("map path %v: %+v, want 6000 records in and %d dead-lettered", mapPath, rep.Totals, bad)
					}
					rows[k] = rep.Totals.RowsOut
				}
				want := int64(6000 - damaged)
				if name == "derive" {
					want -= int64(failing)
				}
				if rows[0] != rows[1] || rows[0] == 0 || (name != "where" && rows[0] != want) {
					t.Fatalf("rows out: columnar %d, map path %d", rows[0], rows[1])
				}
				switch format {
				case "avro":
					a, b := avroRows(t, outs[0]), avroRows(t, outs[1])
					if len(a) != int(rows[0]) || fmt.Sprint(a) != fmt.Sprint(b) {
						t.Fatalf("Avro rows differ (%d, %d)", len(a), len(b))
					}
				default:
					read := "read_parquet"
					if format == "jsonl" {
						read = "read_json_auto"
					}
					db := duck(t)
					for _, q := range []string{
						`SELECT count(*) FROM (SELECT * FROM %[1]s('%[2]s') EXCEPT ALL SELECT * FROM %[1]s('%[3]s'))`,
						`SELECT count(*) FROM (SELECT * FROM %[1]s('%[3]s') EXCEPT ALL SELECT * FROM %[1]s('%[2]s'))`,
					} {
						var n int
						if err := db.QueryRow(fmt.Sprintf(q, read, dataGlob(outs[0], format), dataGlob(outs[1], format))).Scan(&n); err != nil {
							t.Fatal(err)
						}
						if n != 0 {
							t.Fatalf("%d rows of one output are not in the other", n)
						}
					}
					if format == "parquet" && name == "derive" { // and the columns hold what their expressions say
						var n, wrong int
						q := fmt.Sprintf(`SELECT count(*), count(*) FILTER (WHERE section IS DISTINCT FROM split_part(page, '/', 2)
							OR hour <> hour(ts AT TIME ZONE 'UTC') OR slow <> (status >= 500) OR ref_len IS DISTINCT FROM length(referrer)
							OR score <> user_id / 7 OR "at" <> ts OR (tag IS NULL) <> (status >= 300)
							OR day <> CAST(ts AT TIME ZONE 'UTC' AS DATE))
							FROM read_parquet('%s')`, dataGlob(outs[0], format))
						if err := db.QueryRow(q).Scan(&n, &wrong); err != nil || n != int(want) || wrong != 0 {
							t.Fatalf("derived columns: %d rows, %d wrong (%v)", n, wrong, err)
						}
					}
				}
			})
		}
	}
}

// avroRows reads every row of the Avro files under dir, in file order.
func avroRows(t *testing.T, dir string) []map[string]any {
	t.Helper()
	files, err := filepath.Glob(dataGlob(dir, "avro"))
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		dec, err := ocf.NewDecoder(fh)
		if err != nil {
			t.Fatal(err)
		}
		for dec.HasNext() {
			var v map[string]any
			if err := dec.Decode(&v); err != nil {
				t.Fatal(err)
			}
			out = append(out, v)
		}
		fh.Close()
	}
	return out
}

// A schema whose record contains itself (a linked list) cannot take the
// columnar path: its records go the map path and load all the same to
// Avro; Parquet and JSON lines refuse it with an error that says why
// (before, the loader hung or crashed on it).
func TestSelfContainingSchemaLoads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	const schema = `{"type":"record","name":"Node","fields":[{"name":"v","type":"long"},{"name":"next","type":["null","Node"]}]}`
	s := avro.MustParse(schema)
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		var next any
		for k := 0; k < i%4; k++ { // a list of i%4+1 nodes
			next = map[string]any{"Node": map[string]any{"v": int64(k), "next": next}}
		}
		v, err := avro.Marshal(s, map[string]any{"v": int64(i), "next": next})
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, &kgo.Record{Topic: "list", Value: v})
	}
	produceAll(t, ctx, b.Addr, "list", 1, recs)
	for _, format := range []string{"avro", "jsonl", "parquet"} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.WriteFile(filepath.Join(dir, "node.avsc"), []byte(schema), 0o644); err != nil {
				t.Fatal(err)
			}
			spec, _ := writeJob(t, dir, fmt.Sprintf(`
name: list-%s
source: {bootstrap: [%s], topics: [list]}
decode: {format: avro, schema_file: node.avsc}
partition: {by: none}
output: {uri: %s, format: %s}
`, format, b.Addr, filepath.Join(dir, "out"), format))
			rep, err := jobs.Run(ctx, spec, jobs.Options{})
			if format != "avro" {
				if err == nil || !strings.Contains(err.Error(), "contains itself") {
					t.Fatalf("parquet: %v", err)
				}
				return
			}
			if err != nil || rep.Totals.RowsOut != 30 {
				t.Fatalf("%+v %v", rep.Totals, err)
			}
		})
	}
}
