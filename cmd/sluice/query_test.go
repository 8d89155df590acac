package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// queryWarehouse writes one split whose hours 10, 11 and 12 of 2024-05-01
// hold 10, 20 and 30 records, committed through writers.Store as the
// loader does.
func queryWarehouse(t *testing.T) string {
	schema, err := avro.Parse(fixtures.WritersPageView())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	fs, err := filesystem.NewLocalNoSync(filepath.Join(dir, "pageviews"))
	if err != nil {
		t.Fatal(err)
	}
	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	split := writers.Split{Topic: "pageviews", Partition: 0, Start: 0, End: 60}
	w, err := writers.NewSplitWriter(writers.NewStore(fs, writers.StoreOptions{}), split, writers.Config{
		Format: format.Options{Kind: format.Parquet, MetadataColumns: true}, Partitioner: part})
	if err != nil {
		t.Fatal(err)
	}
	off := int64(0)
	for h := 10; h <= 12; h++ {
		for i := 0; i < 10*(h-9); i++ {
			ts := time.Date(2024, 5, 1, h, i, 0, 0, time.UTC)
			v := map[string]any{"ts": ts, "user_id": off, "session_id": "s", "url": "/", "referrer": nil, "status": int32(200),
				"latency_ms": 1.5, "country": "DE", "device": "mobile", "user_agent": "ua", "bytes_sent": int64(10), "is_bot": false}
			if err := w.Write(schema, v, format.Meta{Offset: off, Timestamp: ts}); err != nil {
				t.Fatal(err)
			}
			off++
		}
	}
	if res, err := w.Commit(split.End); err != nil || !res.Won {
		t.Fatalf("commit: %v %v", res.Won, err)
	}
	return "file://" + dir
}

func runSluice(args ...string) (string, error) {
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

func TestQueryCommand(t *testing.T) {
	wh := queryWarehouse(t)
	out, err := runSluice("query", "--warehouse", wh, "--format", "csv", "SELECT hr, count(*) AS n FROM pageviews GROUP BY hr ORDER BY hr")
	if err != nil || out != "hr,n\n10,10\n11,20\n12,30\n" {
		t.Errorf("csv: %v\n%s", err, out)
	}
	out, err = runSluice("query", "--warehouse", wh, "--limit", "1", "SELECT hr, count(*) AS n FROM pageviews GROUP BY hr ORDER BY hr")
	if err != nil || out != "hr  n\n--  --\n10  10\n" {
		t.Errorf("table with --limit 1: %v\n%q", err, out)
	}
	out, err = runSluice("query", "--warehouse", wh, "--format", "json", "SELECT count(*) AS n FROM pageviews WHERE hr = 11")
	if err != nil || strings.Join(strings.Fields(out), "") != `[{"n":20}]` {
		t.Errorf("json: %v\n%s", err, out)
	}
	out, err = runSluice("query", "--warehouse", wh, "--explain", "SELECT count(*) FROM pageviews WHERE hr = 11")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], "-- pageviews: 1 of 3 files (pruned by dt/hr), 20 rows") ||
		lines[1] != wh+"/pageviews/dt=2024-05-01/hr=11/pageviews+0+10+30.parquet" {
		t.Errorf("explain: %v\n%s", err, out)
	}
	out, err = runSluice("query", "--warehouse", wh, "--tables")
	if err != nil || !strings.Contains(out, "rows        60 in 3 files") || !strings.Contains(out, "dt DATE, hr INTEGER") {
		t.Errorf("tables: %v\n%s", err, out)
	}
}

func TestQueryCommandErrors(t *testing.T) {
	wh := queryWarehouse(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"query", "--warehouse", wh, "SELECT * FORM pageviews"}, "syntax error"},
		{[]string{"query", "--warehouse", wh, "SELECT * FROM clicks"}, "unknown table clicks"},
		{[]string{"query", "--warehouse", wh, "SELECT missing_column FROM pageviews"}, "missing_column"},
		{[]string{"query", "--warehouse", "hdfs://127.0.0.1:1/warehouse", "SELECT 1"}, "cannot reach HDFS"},
		{[]string{"query", "--warehouse", wh + "/nope", "SELECT 1"}, "not a directory"},
		{[]string{"query", "SELECT 1"}, "--warehouse"},
		{[]string{"query", "--warehouse", wh}, "one SQL query"},
		{[]string{"query", "--warehouse", wh, "--format", "xml", "SELECT 1"}, "table, csv or json"},
		{[]string{"query", "--warehouse", wh, "--cache-size", "lots", "SELECT 1"}, "--cache-size"},
	} {
		_, err := runSluice(c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: got %v, want one line mentioning %q", strings.Join(c.args[1:], " "), err, c.want)
		}
	}
}
