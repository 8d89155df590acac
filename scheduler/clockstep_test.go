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
// stepped runs a scheduler over one job of schedule on a manual clock.
type stepped struct {
	clk     *clock.Manual
	dir     string
	engine  *emptyPlans
	s       *scheduler.Scheduler
	ended   chan scheduler.RunRecord
	waiting func()
}

func startStepped(t *testing.T, scan time.Duration, schedule string) *stepped {
	t.Helper()
	st := &stepped{clk: clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)), dir: t.TempDir(),
		engine: &emptyPlans{LoaderEngine: &scheduler.LoaderEngine{}}, ended: make(chan scheduler.RunRecord, 16)}
	writeSpec(t, st.dir, "job", "127.0.0.1:9", "t", t.TempDir(), schedule, "")
	s, err := scheduler.New(scheduler.Options{Engine: st.engine, JobsDir: st.dir, Clock: st.clk, ScanInterval: scan, MinInterval: time.Second,
		Logger: slog.New(slog.NewTextHandler(testLog(), nil)), OnRunEnd: func(r scheduler.RunRecord) { st.ended <- r }})
	if err != nil {
		t.Fatal(err)
	}
	st.s = s
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	st.waiting = func() { waitFor(t, "the scheduler to wait on its clock", func() bool { return st.clk.Waiters() > 0 }) }
	return st
}

// runWithin advances the clock a second at a time (each time once the loop
// waits again) until a run ends, for at most limit of clock time.
func (st *stepped) runWithin(t *testing.T, what string, limit time.Duration) scheduler.RunRecord {
	t.Helper()
	for passed := time.Duration(0); passed <= limit; passed += time.Second {
		st.waiting()
		// a run started ends without the clock; its end is sent before it
		// stops counting as running
		waitFor(t, "the run in flight to end", func() bool {
			for _, js := range st.s.Status() {
				if js.Running != "" {
					return false
				}
			}
			return true
		})
		select {
		case r := <-st.ended:
			return r
		default:
		}
		st.clk.Advance(time.Second)
	}
	t.Fatalf("%s: no run within %v of clock time (now %v, status %+v)", what, limit, st.clk.Now(), st.s.Status())
	return scheduler.RunRecord{}
}

func TestSchedulerSurvivesClockSteps(t *testing.T) {
	const scan = 10 * time.Second
	st := startStepped(t, scan, "@every 1m")
	clk, dir, engine, s := st.clk, st.dir, st.engine, st.s
	waiting := st.waiting
	runWithin := func(what string, limit time.Duration) scheduler.RunRecord {
		t.Helper()
		return st.runWithin(t, what, limit)
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

// TestWallClockJobAfterStepForwardAndBack: a cron job's clock is stepped
// forward an hour (the tick due on the new reading runs at once) and put
// right. Its next tick, taken on the reading that was an hour ahead, would
// be an hour away; it is taken afresh, so the job runs again within its
// five minutes, not after the hour (the stall the chaos clock scenario
// found).
func TestWallClockJobAfterStepForwardAndBack(t *testing.T) {
	const scan = 10 * time.Second
	st := startStepped(t, scan, "*/5 * * * *")
	first := st.runWithin(t, "first tick", 6*time.Minute)
	st.waiting()
	st.clk.Step(time.Hour)
	ahead := st.runWithin(t, "the tick due after the step forward", scan)
	if !ahead.Scheduled.After(first.Scheduled) {
		t.Fatalf("the run after the step forward was scheduled at %v (first %v)", ahead.Scheduled, first.Scheduled)
	}
	st.waiting()
	st.clk.Step(-time.Hour)
	back := st.runWithin(t, "within five minutes of the clock being put right", 5*time.Minute+scan)
	// the tick run late while ahead (10:10, due at once on the reading
	// 11:05) runs again at 10:10 on the reading put right
	if back.Scheduled.Sub(first.Scheduled) > 10*time.Minute {
		t.Fatalf("the run after the step back was scheduled at %v (first %v, while ahead %v)", back.Scheduled, first.Scheduled, ahead.Scheduled)
	}
	if n := st.engine.plans.Load(); n != 3 {
		t.Fatalf("%d runs, want 3", n)
	}
}
