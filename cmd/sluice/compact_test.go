package main

import (
	"os"
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

// sluice compact over a warehouse of three splits, each with files in
// hours 10, 11 and 12: --dry-run reports and changes nothing, the run
// rewrites 9 files into 3, sluice query answers as before; bad flags are
// refused in one line.
func TestCompactCommand(t *testing.T) {
	schema, err := avro.Parse(fixtures.WritersPageView())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "pageviews")
	fs, err := filesystem.NewLocalNoSync(out)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	store := writers.NewStore(fs, writers.StoreOptions{})
	for s := int64(0); s < 3; s++ {
		split := writers.Split{Topic: "pageviews", Partition: 0, Start: s * 30, End: s*30 + 30}
		w, err := writers.NewSplitWriter(store, split, writers.Config{Format: format.Options{Kind: format.Parquet, MetadataColumns: true}, Partitioner: part})
		if err != nil {
			t.Fatal(err)
		}
		for off := split.Start; off < split.End; off++ {
			ts := time.Date(2024, 5, 1, 10+int(off%3), int(off%60), 0, 0, time.UTC)
			v := map[string]any{"ts": ts, "user_id": off, "session_id": "s", "url": "/", "referrer": nil, "status": int32(200),
				"latency_ms": 1.5, "country": "DE", "device": "mobile", "user_agent": "ua", "bytes_sent": off, "is_bot": false}
			if err := w.Write(schema, v, format.Meta{Offset: off, Timestamp: ts}); err != nil {
				t.Fatal(err)
			}
		}
		if res, err := w.Commit(split.End); err != nil || !res.Won {
			t.Fatalf("commit: %v %v", res.Won, err)
		}
	}
	fs.Close()
	job := filepath.Join(dir, "job.yaml")
	os.WriteFile(job, []byte("name: pageviews\nsource: {topics: [pageviews]}\ndecode: {format: string}\n"+
		"partition: {by: hour, time_field: ts}\noutput: {uri: "+out+", format: parquet, metadata_columns: true}\n"), 0o644)
	q := "SELECT hr, count(*), sum(_offset), sum(bytes_sent) FROM pageviews GROUP BY hr ORDER BY hr"
	before, err := runSluice("query", "--warehouse", "file://"+dir, "--format", "csv", q)
	if err != nil {
		t.Fatal(err)
	}
	files := func() int {
		m, _ := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", "*.parquet"))
		return len(m)
	}
	got, err := runSluice("compact", job, "--dry-run", "--quiet")
	if err != nil || !strings.Contains(got, "would compact pageviews: 3 directories, 9 files into 3, 90 rows") || files() != 9 {
		t.Fatalf("--dry-run: %v\n%s (files %d)", err, got, files())
	}
	got, err = runSluice("compact", job, "--quiet")
	if err != nil || !strings.Contains(got, "compacted pageviews: 3 directories, 9 files into 3, 90 rows") || files() != 3 {
		t.Fatalf("compact: %v\n%s (files %d)", err, got, files())
	}
	after, err := runSluice("query", "--warehouse", "file://"+dir, "--format", "csv", q)
	if err != nil || after != before {
		t.Fatalf("query after compaction: %v\n%s\nwant\n%s", err, after, before)
	}
	for args, want := range map[string]string{
		"compact " + job + " --older-than -1h":          "--older-than -1h0m0s: must not be negative",
		"compact " + job + " --target-file-bytes lots":  `--target-file-bytes "lots"`,
		"compact " + filepath.Join(dir, "missing.yaml"): "missing.yaml",
		"compact": "accepts 1 arg",
	} {
		_, err := runSluice(strings.Fields(args)...)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("sluice %s: %v, want one line naming %q", args, err, want)
		}
	}
}
