package scheduler_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/scheduler"
)

// writeSpec writes a job spec into dir.
func writeSpec(t *testing.T, dir, name, addr, topic, out, schedule, extra string) string {
	t.Helper()
	spec := fmt.Sprintf(`name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 50
decode:
  format: json
partition:
  by: hour
  time_field: "@timestamp"
  timezone: UTC
output:
  uri: %s
  format: jsonl
schedule: %q
allowed_lateness: 10m
%s`, name, addr, topic, outputURI(out), schedule, extra)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// outputURI is out as an output URI (a local directory, or an hdfs:// URI as is).
func outputURI(out string) string {
	if strings.Contains(out, "://") {
		return out
	}
	return "file://" + out
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling, not waiting for time to pass
	}
}

// faultEngine wraps a real engine to fail or hold task attempts.
type faultEngine struct {
	scheduler.Engine
	mu        sync.Mutex
	failFirst int                 // fail the first n attempts of every task
	failAll   bool                // fail every attempt
	gate      chan struct{}       // when set, RunTask waits for it to close
	calls     map[string]int      // attempts per task
	entered   chan scheduler.Task // receives each task entering RunTask, when set
}

func (f *faultEngine) RunTask(ctx context.Context, job scheduler.Job, task scheduler.Task) (scheduler.TaskReport, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[task.ID()]++
	n, gate, entered, failAll, failFirst := f.calls[task.ID()], f.gate, f.entered, f.failAll, f.failFirst
	f.mu.Unlock()
	if entered != nil {
		entered <- task
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return scheduler.TaskReport{}, ctx.Err()
		}
	}
	if failAll || n <= failFirst {
		return scheduler.TaskReport{}, fmt.Errorf("injected failure of attempt %d of %s", n, task)
	}
	return f.Engine.RunTask(ctx, job, task)
}

// ProducerCounts passes the audit's producer tier through (the wrapped
// engine's, when it is an AuditSource).
func (f *faultEngine) ProducerCounts(ctx context.Context, job scheduler.Job) ([]audit.Count, error) {
	a, ok := f.Engine.(scheduler.AuditSource)
	if !ok {
		return nil, fmt.Errorf("%T is not an AuditSource", f.Engine)
	}
	return a.ProducerCounts(ctx, job)
}

func (f *faultEngine) set(fn func(f *faultEngine)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}

// testLog is where the scheduler under test logs: stderr with
// SLUICE_TEST_LOG=1, else nowhere.
func testLog() io.Writer {
	if os.Getenv("SLUICE_TEST_LOG") != "" {
		return os.Stderr
	}
	return io.Discard
}
