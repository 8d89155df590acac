package jobs_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// JSON without a schema: the schema is inferred from the first records and
// held, so a later field does not change the files' columns; string values
// load into JSON lines.
func TestInferredJSONAndStrings(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	var recs []*kgo.Record
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: "js", Value: []byte(fmt.Sprintf(`{"n": %d, "s": "v%d", "o": {"x": 1.5}}`, i, i))})
	}
	produceAll(t, ctx, b.Addr, "js", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(`
name: js
source: {bootstrap: [%s], topics: [js], max_records_per_task: 20}
decode: {format: json, infer_sample: 10}
partition: {by: none}
output: {uri: %s, format: parquet, metadata_columns: true}
`, b.Addr, out))
	if _, err := jobs.Run(ctx, spec, jobs.Options{Workers: 3}); err != nil {
		t.Fatal(err)
	}
	held, err := os.ReadFile(filepath.Join(out, jobs.HeldSchemaPath("js")))
	if err != nil || !strings.Contains(string(held), `"name":"o"`) {
		t.Fatalf("held schema %s %v", held, err)
	}
	more := []*kgo.Record{{Topic: "js", Value: []byte(`{"n": 50, "s": "late", "extra": true}`)}}
	produceAll(t, ctx, b.Addr, "js", 0, more)
	if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	db := duck(t)
	var rows, sum int
	var cols string
	glob := filepath.Join(out, "*.parquet")
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*), sum(n) FROM read_parquet('%s')`, glob)).Scan(&rows, &sum); err != nil {
		t.Fatal(err)
	}
	if err := db.QueryRow(fmt.Sprintf(`SELECT string_agg(name, ',' ORDER BY name) FROM parquet_schema('%s') WHERE name IN ('n','s','o','x','extra')`,
		filepath.Join(out, "js+0+50+51.parquet"))).Scan(&cols); err != nil {
		t.Fatal(err)
	}
	if rows != 51 || sum != 50*49/2+50 || cols != "n,o,s,x" {
		t.Fatalf("rows %d, sum %d, columns of the late file %q", rows, sum, cols)
	}

	// string → JSON lines
	out2 := filepath.Join(dir, "out2")
	spec2, _ := writeJob(t, t.TempDir(), fmt.Sprintf(`
name: js-text
source: {bootstrap: [%s], topics: [js]}
decode: {format: string}
partition: {by: none}
output: {uri: %s, format: jsonl}
`, b.Addr, out2))
	rep, err := jobs.Run(ctx, spec2, jobs.Options{})
	if err != nil || rep.Totals.RowsOut != 51 {
		t.Fatalf("%+v %v", rep, err)
	}
	var lines int
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FROM read_json_auto('%s') WHERE value LIKE '{"n": %%'`, filepath.Join(out2, "*.jsonl"))).Scan(&lines); err != nil || lines != 51 {
		t.Fatalf("jsonl lines %d %v", lines, err)
	}
}
