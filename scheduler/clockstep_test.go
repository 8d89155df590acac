package scheduler_test

import (
	"context"
	"fmt"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/scheduler"
)

// emptyPlans parses specs as the loader does and plans no task: a run of
// it ends at once, counted.
type emptyPlans struct {
	*scheduler.LoaderEngine
	plans atomic.Int64
}

func (e *emptyPlans) Plan(context.Context, scheduler.Job) (scheduler.Plan, error) {
	e.plans.Add(1)
	return scheduler.Plan{}, nil
}

func (e *emptyPlans) RunTask(context.Context, scheduler.Job, scheduler.Task) (scheduler.TaskReport, error) {
	return scheduler.TaskReport{}, fmt.Errorf("emptyPlans plans no task")
}

// TestSchedulerSurvivesClockSteps: the scheduler's clock is stepped back an
// hour and forward an hour while its loop sleeps (clock.Manual.Step: the
// reading moves, no time passes, timers keep the time they have left). An
// @every 1m job still runs a minute after its last run, and a spec added
// after the step back is scanned within a ScanInterval, instead of the loop
// sleeping the hour until a deadline taken on the old reading.
func TestSchedulerSurvivesClockSteps(t *testing.T) {
	const scan = 10 * time.Second
	clk := clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	dir, out := t.TempDir(), t.TempDir()
	writeSpec(t, dir, "every", "127.0.0.1:9", "t", out, "@every 1m", "")
	engine := &emptyPlans{LoaderEngine: &scheduler.LoaderEngine{}}
	ended := make(chan scheduler.RunRecord, 16)
	s, err := scheduler.New(scheduler.Options{Engine: engine, JobsDir: dir, Clock: clk, ScanInterval: scan, MinInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(testLog(), nil)), OnRunEnd: func(r scheduler.RunRecord) { ended <- r }})
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
	waiting := func() { waitFor(t, "the scheduler to wait on its clock", func() bool { return clk.Waiters() > 0 }) }
	// runWithin advances the clock a second at a time (each time once the
	// loop waits again) until a run ends, for at most limit of clock time.
	runWithin := func(what string, limit time.Duration) scheduler.RunRecord {
		t.Helper()
		for passed := time.Duration(0); passed <= limit; passed += time.Second {
			waiting()
			// a run started ends without the clock; its end is sent
			// before it stops counting as running
			waitFor(t, "the run in flight to end", func() bool {
				for _, st := range s.Status() {
					if st.Running != "" {
						return false
					}
				}
				return true
			})
			select {
			case r := <-ended:
				return r
			default:
			}
			clk.Advance(time.Second)
		}
		t.Fatalf("%s: no run within %v of clock time (now %v, status %+v)", what, limit, clk.Now(), s.Status())
		return scheduler.RunRecord{}
	}
	first := runWithin("first tick", time.Minute)
	if first.State != scheduler.StateSucceeded {
		t.Fatalf("first run: %+v", first)
	}

	waiting()
	clk.Step(-time.Hour)
	writeSpec(t, dir, "added", "127.0.0.1:9", "t", t.TempDir(), "@yearly", "") // scanned, never due here
	back := runWithin("a minute after the step back", time.Minute+scan)
	if !back.Scheduled.Before(first.Scheduled) {
		t.Errorf("the run after the step back was scheduled at %v, not on the stepped-back reading (first %v)", back.Scheduled, first.Scheduled)
	}
	found := false
	for _, st := range s.Status() {
		found = found || st.Name == "added"
	}
	if !found {
		t.Fatalf("a spec added after the step back was not scanned a minute later: %+v", s.Status())
	}

	waiting()
	clk.Step(time.Hour)
	// the @every tick lies an hour behind the reading now: due at the
	// loop's next wake, at most a ScanInterval away
	runWithin("after the step forward", scan)
	if n := engine.plans.Load(); n != 3 {
		t.Fatalf("%d runs, want 3", n)
	}
}
