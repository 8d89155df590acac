package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	"github.com/sluicehq/sluice/writers/filesystem"
)

type harness struct {
	t      *testing.T
	clock  *clock.Manual
	engine *faultEngine
	jobs   string
	out    string
	addr   string
	cancel context.CancelFunc
	done   chan error
	sched  *scheduler.Scheduler
	reg    *prometheus.Registry
}

// metric returns the value of a metric with the given labels (0 if absent).
func (h *harness) metric(name string, labels map[string]string) float64 {
	mfs, err := h.reg.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	next:
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v, ok := labels[l.GetName()]; ok && v != l.GetValue() {
					continue next
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return 0
}

func (h *harness) start() {
	h.t.Helper()
	h.reg = prometheus.NewRegistry()
	s, err := scheduler.New(scheduler.Options{Engine: h.engine, JobsDir: h.jobs, Workers: 3, Clock: h.clock,
		ScanInterval: time.Second, MinInterval: time.Second, Logger: slog.New(slog.NewTextHandler(testLog(), nil)),
		Metrics: scheduler.NewMetrics(h.reg, h.clock)})
	if err != nil {
		h.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h.sched, h.cancel, h.done = s, cancel, make(chan error, 1)
	go func() { h.done <- s.Run(ctx) }()
	waitFor(h.t, "the scheduler to wait for its first tick", func() bool { return h.clock.Waiters() > 0 })
}

func (h *harness) stop() {
	h.cancel()
	if err := <-h.done; err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) runs(job string) []scheduler.RunRecord {
	fs, err := filesystem.Open(outputURI(h.out))
	if err != nil {
		h.t.Fatal(err)
	}
	defer fs.Close()
	runs, err := scheduler.NewHistory(fs, job).List()
	if err != nil {
		h.t.Fatal(err)
	}
	return runs
}

// ended waits until job has n ended runs and returns them.
func (h *harness) ended(job string, n int) []scheduler.RunRecord {
	h.t.Helper()
	var got []scheduler.RunRecord
	waitFor(h.t, fmt.Sprintf("%d ended runs of %s", n, job), func() bool {
		got = got[:0]
		for _, r := range h.runs(job) {
			if r.State != scheduler.StateRunning {
				got = append(got, r)
			}
		}
		return len(got) >= n
	})
	h.idle()
	if len(got) != n {
		h.t.Fatalf("want %d ended runs, have %d: %+v", n, len(got), got)
	}
	return got
}

// idle waits until no run is in flight (a run's end record is written
// just before the scheduler forgets the run).
func (h *harness) idle() {
	h.t.Helper()
	waitFor(h.t, "no run in flight", func() bool {
		for _, st := range h.sched.Status() {
			if st.Running != "" {
				return false
			}
		}
		return true
	})
}

func (h *harness) success(dir string) (scheduler.SuccessRecord, bool) {
	var r scheduler.SuccessRecord
	st, err := os.Stat(filepath.Join(h.out, dir, scheduler.SuccessMarker))
	if err != nil {
		return r, false
	}
	if st.Size() != 0 {
		h.t.Fatalf("%s/%s has %d bytes, want an empty marker", dir, scheduler.SuccessMarker, st.Size())
	}
	b, err := os.ReadFile(filepath.Join(h.out, dir, scheduler.SuccessInfo))
	if err != nil {
		h.t.Fatalf("%s has _SUCCESS but no %s: %v", dir, scheduler.SuccessInfo, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		h.t.Fatal(err)
	}
	return r, true
}

// nudge moves the clock on by a second (for backoffs), never past limit.
func (h *harness) nudge(limit time.Time) {
	if h.clock.Now().Add(time.Second).Before(limit) {
		h.clock.Advance(time.Second)
	}
}

func newHarness(t *testing.T) *harness {
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	sluice.CreateTopic(t, addr, "pv", 2)
	t0 := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	h := &harness{t: t, clock: clock.NewManual(t0), engine: &faultEngine{Engine: &scheduler.LoaderEngine{}},
		jobs: t.TempDir(), out: t.TempDir(), addr: addr}
	t.Cleanup(func() {
		if h.cancel != nil {
			h.cancel()
		}
	})
	return h
}

// TestEmbeddedTicks: a job on @every 2s loads what is new on each tick,
// marks complete hours only (allowed lateness 10m), skips a tick that
// finds the previous run going, and collapses ticks missed while down.
func TestEmbeddedTicks(t *testing.T) {
	h := newHarness(t)
	t0 := h.clock.Now()
	// 2 partitions × 60 records in hour 08 and 60 in hour 09.
	sluice.Produce(t, h.addr, "pv", 2, 0, 60, t0.Add(-2*time.Hour), time.Second)
	sluice.Produce(t, h.addr, "pv", 2, 60, 60, t0.Add(-time.Hour), time.Second)
	writeSpec(t, h.jobs, "pv-hourly", h.addr, "pv", h.out, "@every 2s", "")
	h.start()

	h.clock.Advance(2 * time.Second)
	r := h.ended("pv-hourly", 1)[0]
	if r.State != scheduler.StateSucceeded || r.Records != 240 || r.Lag != 240 {
		t.Fatalf("first run: %+v", r)
	}
	if len(r.Tasks) != 6 { // 120 records per partition, 50 per task
		t.Fatalf("first run has %d tasks, want 6", len(r.Tasks))
	}
	// Planned at 10:00:02, lateness 10m: hour 08 is complete, hour 09 is not.
	if s, ok := h.success("dt=2026-12-01/hr=08"); !ok || s.Records != 120 {
		t.Fatalf("hour 08: marked %v, %+v; want 120 records", ok, s)
	}
	if _, ok := h.success("dt=2026-12-01/hr=09"); ok {
		t.Fatal("hour 09 marked complete before its end plus the allowed lateness")
	}

	// New records (late ones for 09, and 10): the next tick loads only them.
	sluice.Produce(t, h.addr, "pv", 2, 120, 10, t0.Add(-30*time.Minute), time.Second)
	sluice.Produce(t, h.addr, "pv", 2, 130, 10, t0, time.Second)
	h.clock.Advance(2 * time.Second)
	r = h.ended("pv-hourly", 2)[1]
	if r.State != scheduler.StateSucceeded || r.Records != 40 {
		t.Fatalf("second run: %+v", r)
	}
	// Past 10:10: hour 09 becomes complete with its late records.
	h.clock.Set(t0.Add(10*time.Minute + 3*time.Second))
	r = h.ended("pv-hourly", 3)[2]
	if s, ok := h.success("dt=2026-12-01/hr=09"); !ok || s.Records != 140 {
		t.Fatalf("hour 09 after 10:10: marked %v, %+v; want 140 records (run %+v)", ok, s, r)
	}
	if _, ok := h.success("dt=2026-12-01/hr=10"); ok {
		t.Fatal("hour 10 marked complete while it is still 10:10")
	}

	// Overlap: hold the next run's tasks; two ticks pass while it runs.
	gate, entered := make(chan struct{}), make(chan scheduler.Task, 16)
	h.engine.set(func(f *faultEngine) { f.gate, f.entered = gate, entered })
	sluice.Produce(t, h.addr, "pv", 2, 140, 5, t0.Add(10*time.Minute), time.Second)
	h.clock.Advance(2 * time.Second)
	<-entered
	h.clock.Advance(2 * time.Second)
	waitFor(t, "a skipped tick", func() bool { return h.sched.Status()[0].Skipped == 1 })
	h.clock.Advance(2 * time.Second)
	waitFor(t, "two skipped ticks", func() bool { return h.sched.Status()[0].Skipped == 2 })
	h.engine.set(func(f *faultEngine) { f.gate, f.entered = nil, nil })
	close(gate)
	r = h.ended("pv-hourly", 4)[3]
	if r.State != scheduler.StateSucceeded || r.SkippedTicks != 2 || r.Records != 10 {
		t.Fatalf("overlapped run: %+v", r)
	}
	job := map[string]string{"job": "pv-hourly"}
	for name, want := range map[string]float64{
		"sluice_scheduler_ticks_skipped_total":        2,
		"sluice_loaded_records_total":                 290,
		"sluice_scheduler_run_duration_seconds":       4,
		"sluice_complete_directories_total":           2,
		"sluice_scheduler_seconds_since_last_success": 0,
		"sluice_partition_lag_records":                0,
	} {
		if got := h.metric(name, job); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	if got := h.metric("sluice_scheduler_runs_total", map[string]string{"job": "pv-hourly", "state": "succeeded"}); got != 4 {
		t.Errorf("runs succeeded = %v, want 4", got)
	}

	// Downtime: stop, let 5 minutes (150 ticks) pass, start again: one
	// catch-up run, not a burst.
	h.stop()
	h.clock.Advance(5 * time.Minute)
	h.start()
	runs := h.ended("pv-hourly", 5)
	if len(runs) != 5 || runs[4].Scheduled != h.clock.Now() {
		t.Fatalf("after downtime: %d runs, last scheduled %v (now %v)", len(runs), runs[4].Scheduled, h.clock.Now())
	}
	h.stop()
	for id, n := range sluice.LoadedIDs(h.out) {
		if n != 1 {
			t.Errorf("record %s loaded %d times", id, n)
		}
	}
	if got := len(sluice.LoadedIDs(h.out)); got != 290 {
		t.Fatalf("%d distinct records loaded, want 290", got)
	}
}

// TestEmbeddedRetries: attempts fail, are retried with backoff, a run
// whose task fails every attempt is marked failed with the reason, and the
// next tick resumes from the checkpoint.
func TestEmbeddedRetries(t *testing.T) {
	h := newHarness(t)
	sluice.Produce(t, h.addr, "pv", 2, 0, 30, h.clock.Now().Add(-2*time.Hour), time.Second)
	writeSpec(t, h.jobs, "pv", h.addr, "pv", h.out, "@hourly", "retry:\n  max_attempts: 3\n  backoff: 1s\n")
	h.engine.set(func(f *faultEngine) { f.failFirst = 2 })
	h.start()
	// Fire the 11:00 tick, then move time on (1s at a time) for the backoffs.
	h.clock.Set(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC))
	var runs []scheduler.RunRecord
	waitFor(t, "a run with retries", func() bool {
		h.nudge(time.Date(2026, 12, 1, 11, 30, 0, 0, time.UTC))
		runs = h.runs("pv")
		return len(runs) == 1 && runs[0].State != scheduler.StateRunning
	})
	h.idle()
	r := runs[0]
	if r.State != scheduler.StateSucceeded || r.Records != 60 {
		t.Fatalf("run: %+v", r)
	}
	for _, tr := range r.Tasks {
		if tr.Attempts != 3 {
			t.Fatalf("task %s took %d attempts, want 3", tr.Task, tr.Attempts)
		}
	}
	// Every attempt fails: the run fails with the reason per task.
	sluice.Produce(t, h.addr, "pv", 2, 30, 10, h.clock.Now().Add(-time.Hour), time.Second)
	h.engine.set(func(f *faultEngine) { f.failAll = true })
	h.clock.Set(time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC))
	waitFor(t, "a failed run", func() bool {
		h.nudge(time.Date(2026, 12, 1, 12, 30, 0, 0, time.UTC))
		runs = h.runs("pv")
		return len(runs) == 2 && runs[1].State != scheduler.StateRunning
	})
	h.idle()
	r = runs[1]
	if r.State != scheduler.StateFailed || !strings.Contains(r.Error, "injected failure") || len(r.Tasks) != 2 {
		t.Fatalf("run: %+v", r)
	}
	for _, tr := range r.Tasks {
		if tr.State != scheduler.StateFailed || tr.Attempts != 3 || !strings.Contains(tr.Error, "injected failure of attempt 3") {
			t.Fatalf("task: %+v", tr)
		}
	}
	// The next tick resumes from the checkpoint.
	h.engine.set(func(f *faultEngine) { f.failAll, f.failFirst = false, 0 })
	h.clock.Set(time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC))
	waitFor(t, "the resumed run", func() bool {
		h.nudge(time.Date(2026, 12, 1, 13, 30, 0, 0, time.UTC))
		runs = h.runs("pv")
		return len(runs) == 3 && runs[2].State != scheduler.StateRunning
	})
	r = runs[2]
	for _, tr := range r.Tasks {
		if tr.Attempts > 1 {
			t.Logf("resumed run: task %s took %d attempts (%s)", tr.Task, tr.Attempts, tr.Error)
		}
	}
	if r.State != scheduler.StateSucceeded || r.Records != 20 {
		t.Fatalf("resumed run: %+v", r)
	}
	h.stop()
	if got := len(sluice.LoadedIDs(h.out)); got != 80 {
		t.Fatalf("%d records loaded, want 80", got)
	}
}

// TestEmbeddedSpecChanges: specs added, changed and removed while the
// scheduler runs take effect at the next scan; a bad spec is refused.
func TestEmbeddedSpecChanges(t *testing.T) {
	h := newHarness(t)
	h.start()
	defer h.stop()
	if n := len(h.sched.Status()); n != 0 {
		t.Fatalf("%d jobs at start", n)
	}
	p := writeSpec(t, h.jobs, "a", h.addr, "pv", h.out, "@hourly", "")
	os.WriteFile(filepath.Join(h.jobs, "bad.yaml"), []byte("name: bad\nsource: {bootstrap: [x], topics: [t]}\noutput: {uri: /tmp/x}\nschedule: \"every now and then\"\n"), 0o644)
	h.clock.Advance(time.Second)
	waitFor(t, "job a", func() bool { st := h.sched.Status(); return len(st) == 1 && st[0].Name == "a" })
	if next := h.sched.Status()[0].Next; !next.Equal(time.Date(2026, 12, 1, 11, 0, 0, 0, time.UTC)) {
		t.Fatalf("next tick %v", next)
	}
	writeSpec(t, h.jobs, "a", h.addr, "pv", h.out, "*/5 * * * *", "")
	h.clock.Advance(time.Second)
	waitFor(t, "the changed schedule", func() bool {
		st := h.sched.Status()
		return len(st) == 1 && st[0].Next.Equal(time.Date(2026, 12, 1, 10, 5, 0, 0, time.UTC))
	})
	// A second spec with the same name is refused while the first exists,
	// and taken once the first is gone.
	dup := writeSpec(t, t.TempDir(), "a", h.addr, "pv", h.out, "@daily", "")
	if err := os.Rename(dup, filepath.Join(h.jobs, "a-copy.yaml")); err != nil {
		t.Fatal(err)
	}
	h.clock.Advance(time.Second)
	os.Remove(p)
	h.clock.Advance(time.Second)
	waitFor(t, "the copy of job a to take over", func() bool {
		st := h.sched.Status()
		return len(st) == 1 && st[0].Next.Equal(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	})
	os.Remove(filepath.Join(h.jobs, "a-copy.yaml"))
	h.clock.Advance(time.Second)
	waitFor(t, "job a removed", func() bool { return len(h.sched.Status()) == 0 })
}
