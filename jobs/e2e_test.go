package jobs_test

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/hdfs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers/filesystem"
)

const pageViewJob = `
name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: %d
decode:
  format: avro
  %s
on_bad_record: fail
partition:
  by: hour
  time_field: ts
  timezone: UTC
output:
  uri: %s
  format: parquet
  compression: zstd
  metadata_columns: true
`

// End to end: 100,000 Avro page views over 5 hours in a 4-partition topic
// on a sluice broker process, loaded into a local warehouse and into HDFS;
// DuckDB's counts per hour match what was produced and every
// (_partition, _offset) appears exactly once.
func TestEndToEndPageViews(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, hours := pageViews(t, "pageviews", 100_000, 4, 5*time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, "pageviews", 4, recs)
	decode := "schema_file: pageview.avsc"

	t.Run("local", func(t *testing.T) {
		dir := t.TempDir()
		out := filepath.Join(dir, "warehouse")
		spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "pv-local", b.Addr, "pageviews", 10_000, decode, "file://"+out))
		rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.RecordsIn != 100_000 || rep.Totals.RowsOut != 100_000 || rep.Totals.Tasks != tasksFor(counts, 10_000) {
			t.Fatalf("report totals %+v", rep.Totals)
		}
		checkExactlyOnce(t, out, "pageviews", counts, true)
		if got := hourCounts(t, duck(t), dataGlob(out, "parquet")); !maps.Equal(got, hours) {
			t.Fatalf("rows per hour %v, produced %v", got, hours)
		}
		// A second run finds nothing new and changes nothing.
		rep, err = jobs.Run(ctx, spec, jobs.Options{})
		if err != nil || rep.Totals.Tasks != 0 {
			t.Fatalf("second run: %+v %v", rep.Totals, err)
		}
		checkExactlyOnce(t, out, "pageviews", counts, true)
	})

	t.Run("hdfs", func(t *testing.T) {
		nn := hdfs.Start(t)
		dir := t.TempDir()
		uri := fmt.Sprintf("hdfs://%s/warehouse/e2e-%d", nn, time.Now().UnixNano())
		spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "pv-hdfs", b.Addr, "pageviews", 50_000, decode, uri))
		rep, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2})
		if err != nil {
			t.Fatal(err)
		}
		if rep.Totals.RowsOut != 100_000 {
			t.Fatalf("report totals %+v", rep.Totals)
		}
		fs, err := filesystem.Open(uri)
		if err != nil {
			t.Fatal(err)
		}
		defer fs.Close()
		local := filepath.Join(dir, "copy")
		copyOut(t, fs, "", local)
		copyCommits(t, fs, local, "pageviews", counts)
		checkExactlyOnce(t, local, "pageviews", counts, true)
		if got := hourCounts(t, duck(t), dataGlob(local, "parquet")); !maps.Equal(got, hours) {
			t.Fatalf("rows per hour %v, produced %v", got, hours)
		}
	})
}
