package scheduler_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// TestSchedulerClockDrivesTheLoader: a scheduler on a clock.Manual hands
// that clock to its LoaderEngine, so the loader's time is the scheduler's:
// the commits of a run are stamped with the manual clock's time (a day
// before the wall clock here), not the wall clock's. And the run's plan
// and tasks share one loader (one source client, one output file system):
// its connections are fewer than its tasks.
func TestSchedulerClockDrivesTheLoader(t *testing.T) {
	h := newHarness(t)
	t0 := h.clock.Now()
	sluice.Produce(t, h.addr, "pv", 2, 0, 120, t0.Add(-2*time.Hour), time.Second)
	writeSpec(t, h.jobs, "pv", h.addr, "pv", h.out, "@every 2s", "")
	ended := make(chan scheduler.RunRecord, 1)
	engine := &scheduler.LoaderEngine{}
	dials := countDials(engine)
	s, err := scheduler.New(scheduler.Options{Engine: engine, JobsDir: h.jobs, Clock: h.clock,
		ScanInterval: time.Minute, MinInterval: time.Second, Logger: slog.New(slog.NewTextHandler(testLog(), nil)),
		OnRunEnd: func(r scheduler.RunRecord) { ended <- r }})
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
	h.clock.Advance(2 * time.Second)
	r := <-ended
	if r.State != scheduler.StateSucceeded || r.Records != 240 || len(r.Tasks) != 6 {
		t.Fatalf("run: %+v", r)
	}
	if n := dials.Load(); n >= int64(len(r.Tasks)) {
		t.Errorf("%d source connections for a plan and %d tasks: the run did not share one loader", n, len(r.Tasks))
	}
	fs, err := filesystem.Open(outputURI(h.out))
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	store := writers.NewStore(fs, writers.StoreOptions{})
	n := 0
	for p := int32(0); p < 2; p++ {
		ms, err := store.Commits("pv", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			n++
			if !m.Committed.Equal(h.clock.Now()) {
				t.Errorf("commit %s/%d@%d stamped %v, want the scheduler's clock's %v (wall clock %v)",
					m.Topic, m.Partition, m.Start, m.Committed, h.clock.Now(), time.Now())
			}
		}
	}
	if n == 0 {
		t.Fatal("no commits")
	}
}
