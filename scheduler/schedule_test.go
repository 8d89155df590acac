package scheduler

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/jobs"
)

// syncLog is a log the scheduler's goroutines write to.
type syncLog struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *syncLog) Write(p []byte) (int, error) { l.mu.Lock(); defer l.mu.Unlock(); return l.b.Write(p) }
func (l *syncLog) String() string              { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

func scheduleSpec(name, out, schedule string) string {
	return fmt.Sprintf("name: %s\nsource: {bootstrap: [127.0.0.1:9], topics: [t]}\ndecode: {format: json}\n"+
		"output: {uri: \"file://%s\", format: jsonl}\nschedule: %q\n", name, out, schedule)
}

// TestScanRefusesSchedules: a schedule that never fires, fires faster than
// the floor or names an unknown zone is refused at the scheduler's scan,
// with the field named, and by the spec's validation (`sluice load run`)
// with the same words: one validator, jobs.ParseSchedule.
func TestScanRefusesSchedules(t *testing.T) {
	for i, c := range []struct{ expr, want string }{
		{"0 0 30 2 *", `schedule: "0 0 30 2 *" never fires (February 30 does not exist)`},
		{"0 0 0 31 4,6,9,11 *", `never fires (no day 31 exists in April, June, September, November)`},
		{"@every 0s", `schedule: "@every 0s" never fires: @every needs a positive interval`},
		{"@every -1s", `schedule: "@every -1s" never fires`},
		{"@every 30s", `schedule: "@every 30s" fires 30s after its previous firing, sooner than the floor of 1m0s`},
		{"* * * * * *", `fires 1s after its previous firing, sooner than the floor of 1m0s`},
		{"*/10 * * * * *", `fires 10s after its previous firing`},
		{"CRON_TZ=Mars/Olympus 0 * * * *", `names the time zone "Mars/Olympus", which is not known`},
		{"CRON_TZ=UTC", `names a time zone and no schedule`},
		{"", `schedule: missing`},
	} {
		dir, out := t.TempDir(), t.TempDir()
		spec := scheduleSpec(fmt.Sprintf("j%d", i), out, c.expr)
		if err := os.WriteFile(filepath.Join(dir, "j.yaml"), []byte(spec), 0o644); err != nil {
			t.Fatal(err)
		}
		var log syncLog
		s, err := New(Options{Engine: &LoaderEngine{}, JobsDir: dir, Clock: clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)),
			Logger: slog.New(slog.NewTextHandler(&log, nil))})
		if err != nil {
			t.Fatal(err)
		}
		s.scan(nil)
		if st := s.Status(); len(st) != 0 || !strings.Contains(log.String(), "job spec refused") || !strings.Contains(log.String(), strings.ReplaceAll(c.want, `"`, `\"`)) {
			t.Errorf("scan of schedule %q: jobs %v, log:\n%s\nwant %q", c.expr, st, log.String(), c.want)
		}
		if c.expr == "" {
			continue // a spec for `sluice load run` needs no schedule
		}
		if _, err := jobs.ParseSpec([]byte(spec), dir); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("spec validation of schedule %q: %v, want %q", c.expr, err, c.want)
		}
	}
}

// TestScanFloorOption: Options.MinInterval lowers the floor (tests, demos),
// the spec's own validation keeps the default.
func TestScanFloorOption(t *testing.T) {
	dir, out := t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "j.yaml"), []byte(scheduleSpec("j", out, "@every 2s")), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		floor time.Duration
		jobs  int
	}{{0, 0}, {3 * time.Second, 0}, {2 * time.Second, 1}, {time.Second, 1}} {
		s, err := New(Options{Engine: &LoaderEngine{}, JobsDir: dir, MinInterval: c.floor, Clock: clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))})
		if err != nil {
			t.Fatal(err)
		}
		s.scan(nil)
		if got := len(s.Status()); got != c.jobs {
			t.Errorf("floor %v: %d jobs, want %d", c.floor, got, c.jobs)
		}
	}
}

// planCounter is an Engine whose runs plan nothing: it counts the runs.
type planCounter struct{ plans atomic.Int64 }

func (e *planCounter) ParseJob(string, []byte) (Job, error) { return Job{}, fmt.Errorf("unused") }
func (e *planCounter) Plan(context.Context, Job) (Plan, error) {
	e.plans.Add(1)
	return Plan{}, nil
}
func (e *planCounter) RunTask(context.Context, Job, Task) (TaskReport, error) {
	return TaskReport{}, fmt.Errorf("unused")
}

// misbehaving is a cron.Schedule whose Next is wrong in one way.
type misbehaving func(t time.Time) time.Time

func (f misbehaving) Next(t time.Time) time.Time { return f(t) }

// TestLoopNeverRunsBackToBack: defence in depth behind the validator. A
// schedule whose Next returns the zero time (robfig's answer for a date
// that never comes), a past time, or a time a nanosecond away must not
// make the loop start runs back to back: over ten minutes of ticks at one
// a second, a job with a one-minute floor runs at most once a minute.
func TestLoopNeverRunsBackToBack(t *testing.T) {
	for name, c := range map[string]struct {
		sched cron.Schedule
		max   int64
	}{
		"zero":       {misbehaving(func(time.Time) time.Time { return time.Time{} }), 1},
		"past":       {misbehaving(func(t time.Time) time.Time { return t.Add(-time.Hour) }), 11},
		"now":        {misbehaving(func(t time.Time) time.Time { return t }), 11},
		"nanosecond": {misbehaving(func(t time.Time) time.Time { return t.Add(time.Nanosecond) }), 11},
	} {
		t.Run(name, func(t *testing.T) {
			engine, clock := &planCounter{}, clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
			s, err := New(Options{Engine: engine, JobsDir: t.TempDir(), Clock: clock})
			if err != nil {
				t.Fatal(err)
			}
			defer s.closeOutputs()
			s.jobs["j"] = &jobState{job: Job{Name: "j", Output: "file://" + t.TempDir(), Retry: withRetryDefaults(RetryPolicy{})},
				schedule: c.sched, next: clock.Now()}
			ctx := context.Background()
			for i := 0; i < 600; i++ {
				s.fireDue(ctx, clock.Now())
				s.runs.Wait() // the run started (if any) has ended
				clock.Advance(time.Second)
			}
			if n := engine.plans.Load(); n < 1 || n > c.max {
				t.Fatalf("%d runs in ten minutes, want 1 to %d", n, c.max)
			}
		})
	}
}
