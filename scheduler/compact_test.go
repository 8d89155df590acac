package scheduler_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// hourFiles lists the data files of one hour directory.
func hourFiles(t *testing.T, out, dir string) []string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(out, dir, "*.jsonl"))
	return m
}

// noOpenFiles checks that nothing of a run is left open or unfinished
// between runs: no .inprogress file anywhere, no attempt directory.
func noOpenFiles(t *testing.T, out string) {
	t.Helper()
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err == nil && strings.HasSuffix(p, ".inprogress") {
			t.Errorf("a file left open between runs: %s", p)
		}
		return nil
	})
	// _sluice/tmp/<topic>/<partition>/<start>/<attempt>/
	attempts, _ := filepath.Glob(filepath.Join(out, "_sluice", "tmp", "*", "*", "*", "*"))
	if len(attempts) > 0 {
		t.Errorf("attempt directories left between runs: %v", attempts)
	}
}

// TestScheduledCompactionAndQuietRollover: a job with compact: {after: 30m}
// on @every 2s. The first run loads hours 08 and 09 (two files per
// partition each, 50 records per task), marks 08 complete and compacts it
// to one file per partition; 09 is left (not complete, not old enough).
// The topic then goes quiet: the run after 10:10 finds nothing new, yet
// closes hour 09 (its _SUCCESS: time-triggered rollover) and no file is
// left open between runs; the run after 10:40 compacts 09. Each record is
// in the output once throughout, and the compaction metrics count it.
func TestScheduledCompactionAndQuietRollover(t *testing.T) {
	h := newHarness(t)
	t0 := h.clock.Now()
	sluice.Produce(t, h.addr, "pv", 2, 0, 60, t0.Add(-2*time.Hour), time.Second)
	sluice.Produce(t, h.addr, "pv", 2, 60, 60, t0.Add(-time.Hour), time.Second)
	writeSpec(t, h.jobs, "pv", h.addr, "pv", h.out, "@every 2s", "compact: {after: 30m, target_file_bytes: 64MiB}\n")
	ended := make(chan scheduler.RunRecord, 8)
	reg := prometheus.NewRegistry()
	s, err := scheduler.New(scheduler.Options{Engine: &scheduler.LoaderEngine{}, JobsDir: h.jobs, Clock: h.clock,
		ScanInterval: time.Hour, MinInterval: time.Second, Logger: slog.New(slog.NewTextHandler(testLog(), nil)),
		Metrics: scheduler.NewMetrics(reg, h.clock), OnRunEnd: func(r scheduler.RunRecord) { ended <- r }})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "the scheduler to wait for its first tick", func() bool { return h.clock.Waiters() > 0 })
	once := func(want int) {
		t.Helper()
		ids := sluice.LoadedIDs(h.out)
		for id, n := range ids {
			if n != 1 {
				t.Fatalf("record %s is in the output %d times", id, n)
			}
		}
		if len(ids) != want {
			t.Fatalf("%d distinct records in the output, want %d", len(ids), want)
		}
	}

	h.clock.Advance(2 * time.Second)
	r := <-ended
	if r.State != scheduler.StateSucceeded || r.Records != 240 {
		t.Fatalf("first run: %+v", r)
	}
	if _, ok := h.success("dt=2026-12-01/hr=08"); !ok {
		t.Fatal("hour 08 not marked complete")
	}
	if f := hourFiles(t, h.out, "dt=2026-12-01/hr=08"); len(f) != 2 || !strings.Contains(strings.Join(r.Notes, ";"), "compaction: 2 directories, 4 files into 2") {
		t.Fatalf("hour 08 after the first run: files %v, notes %v; want one compacted file per partition", f, r.Notes)
	}
	if f := hourFiles(t, h.out, "dt=2026-12-01/hr=09"); len(f) != 4 {
		t.Fatalf("hour 09 (not complete) has %v; want its 4 files as loaded", f)
	}
	once(240)
	noOpenFiles(t, h.out)

	// Quiet topic: nothing new; past 10:10 the run closes hour 09 anyway.
	if _, ok := h.success("dt=2026-12-01/hr=09"); ok {
		t.Fatal("hour 09 marked before its end plus the lateness")
	}
	idle(t, s, h)
	h.clock.Set(t0.Add(10*time.Minute + 3*time.Second))
	r = <-ended
	if r.State != scheduler.StateSucceeded || r.Records != 0 {
		t.Fatalf("quiet run: %+v", r)
	}
	if s, ok := h.success("dt=2026-12-01/hr=09"); !ok || s.Records != 120 {
		t.Fatalf("hour 09 after a quiet run past 10:10: marked %v %+v; want 120 records (run %+v)", ok, s, r)
	}
	noOpenFiles(t, h.out)
	once(240)

	// Past 10:40 hour 09 is old enough: compacted.
	idle(t, s, h)
	h.clock.Set(t0.Add(40*time.Minute + 5*time.Second))
	r = <-ended
	if r.State != scheduler.StateSucceeded {
		t.Fatalf("run after 10:40: %+v", r)
	}
	if f := hourFiles(t, h.out, "dt=2026-12-01/hr=09"); len(f) != 2 {
		t.Fatalf("hour 09 after 10:40: %v (notes %v); want one file per partition", f, r.Notes)
	}
	once(240)
	noOpenFiles(t, h.out)
	job := "pv"
	if got := counterValue(t, reg, "sluice_compaction_files_replaced_total", job); got != 8 {
		t.Errorf("sluice_compaction_files_replaced_total = %v, want 8", got)
	}
	if got := counterValue(t, reg, "sluice_compaction_rows_total", job); got != 240 {
		t.Errorf("sluice_compaction_rows_total = %v, want 240", got)
	}
}

// counterValue returns the value of the counter name{job}.
func counterValue(t *testing.T, reg *prometheus.Registry, name, job string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "job" && l.GetValue() == job {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no metric %s{job=%q}", name, job)
	return 0
}

// idle waits until the scheduler has no run in flight and waits for its
// next tick, so that a clock jump fires that tick.
func idle(t *testing.T, s *scheduler.Scheduler, h *harness) {
	t.Helper()
	waitFor(t, "the scheduler idle and waiting for a tick", func() bool {
		for _, st := range s.Status() {
			if st.Running != "" {
				return false
			}
		}
		return h.clock.Waiters() > 0
	})
}
