package scheduler_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// TestLoaderEngine: the scheduler drives sluice's loader (package jobs):
// JSON page views into Parquet, with retry and allowed_lateness read from
// the loader's spec, and _SUCCESS counts taken from its manifests.
func TestLoaderEngine(t *testing.T) {
	h := newHarness(t)
	h.engine.Engine = &scheduler.LoaderEngine{}
	t0 := h.clock.Now()
	sluice.Produce(t, h.addr, "pv", 2, 0, 40, t0.Add(-2*time.Hour), time.Minute)
	spec := fmt.Sprintf(`name: pv-loader
source:
  bootstrap: [%s]
  topics: [pv]
  max_records_per_task: 30
decode:
  format: json
partition:
  by: hour
  time_field: "@timestamp"
output:
  uri: file://%s
  format: parquet
  metadata_columns: true
schedule: "@every 1m"
retry:
  max_attempts: 2
  backoff: 1s
allowed_lateness: 30s
`, h.addr, h.out)
	if err := os.WriteFile(filepath.Join(h.jobs, "pv.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	h.engine.set(func(f *faultEngine) { f.failFirst = 1 })
	h.start()
	h.clock.Advance(time.Minute)
	var runs []scheduler.RunRecord
	waitFor(t, "a run of the loader", func() bool {
		h.nudge(t0.Add(90 * time.Second))
		runs = h.runs("pv-loader")
		return len(runs) == 1 && runs[0].State != scheduler.StateRunning
	})
	h.stop()
	r := runs[0]
	if r.State != scheduler.StateSucceeded || r.Records != 80 || len(r.Tasks) != 4 || r.Tasks[0].Attempts != 2 {
		t.Fatalf("run: %+v", r)
	}
	// 08:00-08:39 in hour 08; planned at 10:01, lateness 30s: 08 and 09
	// (empty) are complete, 10 is not.
	if s, ok := h.success("dt=2026-12-01/hr=08"); !ok || s.Records != 80 {
		t.Fatalf("hour 08: %v %+v", ok, s)
	}
	if s, ok := h.success("dt=2026-12-01/hr=09"); !ok || s.Records != 0 {
		t.Fatalf("hour 09 (no records): %v %+v", ok, s)
	}
	if _, ok := h.success("dt=2026-12-01/hr=10"); ok {
		t.Fatal("hour 10 marked complete at 10:01")
	}
	files, _ := filepath.Glob(filepath.Join(h.out, "dt=2026-12-01", "hr=08", "*.parquet"))
	if len(files) == 0 {
		t.Fatal("no parquet files in hour 08")
	}
}
