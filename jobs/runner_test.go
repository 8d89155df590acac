package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/jobs"
)

func task(topic string, p int32, start, end int64) jobs.Task {
	return jobs.Task{Topic: topic, Partition: p, Start: start, End: end}
}

// advanceWhileWaiting moves c by step whenever a timer waits on it, until
// done is closed (the runner's backoffs then pass at once).
func advanceWhileWaiting(c *clock.Manual, step time.Duration, done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		default:
		}
		if c.Waiters() > 0 {
			c.Advance(step)
		}
		time.Sleep(time.Millisecond) // polling for a waiter, not waiting for time to pass
	}
}

// TestRunTasksOrderedRetries: ordered (the scheduler's way), the tasks of
// a partition run one after the other, a failed attempt is retried after
// the policy's backoff on the clock, a task that fails every attempt
// leaves the later tasks of its partition not run, and the other
// partitions go on.
func TestRunTasksOrderedRetries(t *testing.T) {
	tasks := []jobs.Task{
		task("a", 0, 20, 30), task("a", 0, 0, 10), task("a", 0, 10, 20), // given out of order
		task("b", 0, 0, 10), task("b", 0, 10, 20), task("b", 0, 20, 30),
	}
	c := clock.NewManual(time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC))
	var mu sync.Mutex
	var order []string           // attempts of partition a, in the order they ran
	attempts := map[string]int{} // by task
	var waits []time.Duration    // clock time between a task's attempts
	last := map[string]time.Time{}
	done := make(chan struct{})
	go advanceWhileWaiting(c, 100*time.Millisecond, done)
	res := jobs.RunTasks(context.Background(), tasks, func(ctx context.Context, tk jobs.Task, n int, _ jobs.TurnFunc) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		attempts[tk.ID()]++
		if attempts[tk.ID()] != n {
			t.Errorf("%s: attempt %d numbered %d", tk, attempts[tk.ID()], n)
		}
		if n > 1 {
			waits = append(waits, c.Now().Sub(last[tk.ID()]))
		}
		last[tk.ID()] = c.Now()
		if tk.Topic == "a" {
			order = append(order, fmt.Sprintf("%d#%d", tk.Start, n))
			if n < 3 { // every task of a: the first two attempts fail
				return 0, fmt.Errorf("injected failure of attempt %d", n)
			}
			return int(tk.End - tk.Start), nil
		}
		if tk.Start == 10 { // b's second task fails every attempt
			return 0, errors.New("b broken")
		}
		return int(tk.End - tk.Start), nil
	}, jobs.RunnerOptions[int]{Retry: jobs.RetryPolicy{MaxAttempts: 3, Backoff: time.Second, MaxBackoff: time.Minute},
		Clock: c, Ordered: true})
	close(done)
	want := []string{"0#1", "0#2", "0#3", "10#1", "10#2", "10#3", "20#1", "20#2", "20#3"}
	if fmt.Sprint(order) != fmt.Sprint(want) {
		t.Fatalf("attempts of partition a ran %v, want %v", order, want)
	}
	for _, w := range waits {
		if w < time.Second || w > 3*time.Second {
			t.Fatalf("waits between attempts %v: want the backoffs 1s then 2s (clock time)", waits)
		}
	}
	states := map[string]string{}
	for i, r := range res {
		if r.Task != tasks[i] {
			t.Fatalf("result %d is of %s, want %s (the order of the tasks given)", i, r.Task, tasks[i])
		}
		states[r.Task.ID()] = fmt.Sprintf("%s/%d", r.State, r.Attempts)
		if r.State == jobs.TaskSucceeded && (r.Err != nil || r.Report != int(r.Task.End-r.Task.Start)) {
			t.Fatalf("%s: %+v", r.Task, r)
		}
	}
	for id, st := range map[string]string{
		"a-0-0": "succeeded/3", "a-0-10": "succeeded/3", "a-0-20": "succeeded/3",
		"b-0-0": "succeeded/1", "b-0-10": "failed/3", "b-0-20": "not-run/0",
	} {
		if states[id] != st {
			t.Errorf("%s: %s, want %s", id, states[id], st)
		}
	}
}

// TestRunTasksStopOnFailure: unordered with StopOnFailure (`sluice load
// run`'s way), the tasks of a partition run at once and commit in turn; a
// task whose predecessor failed fails with ErrPredecessorFailed without
// another attempt, the first failure cancels the run, and at most Workers
// attempts run at once.
func TestRunTasksStopOnFailure(t *testing.T) {
	var tasks []jobs.Task
	for p := int32(0); p < 2; p++ {
		for s := int64(0); s < 40; s += 10 {
			tasks = append(tasks, task("t", p, s, s+10))
		}
	}
	var inFlight, most atomic.Int32
	var calls atomic.Int32
	res := jobs.RunTasks(context.Background(), tasks, func(ctx context.Context, tk jobs.Task, n int, turn jobs.TurnFunc) (struct{}, error) {
		calls.Add(1)
		cur := inFlight.Add(1)
		defer inFlight.Add(-1)
		for m := most.Load(); cur > m && !most.CompareAndSwap(m, cur); m = most.Load() {
		}
		if tk.Partition == 0 && tk.Start == 10 {
			return struct{}{}, errors.New("boom")
		}
		if tk.Partition != 0 {
			<-ctx.Done() // the other partition holds until the run is cancelled
			return struct{}{}, ctx.Err()
		}
		return struct{}{}, turn(ctx, tk)
	}, jobs.RunnerOptions[struct{}]{Workers: 3, StopOnFailure: true})
	if m := most.Load(); m > 3 {
		t.Fatalf("%d attempts at once, Workers is 3", m)
	}
	var ok, boom, predecessor, cancelled, notRun int
	for _, r := range res {
		switch {
		case r.State == jobs.TaskNotRun:
			notRun++
		case r.State == jobs.TaskSucceeded:
			ok++
		case r.Err != nil && r.Err.Error() == "boom":
			boom++
		case errors.Is(r.Err, jobs.ErrPredecessorFailed):
			// Its partition had a failed task when it took its turn (t/0@0
			// too, when it asks after t/0@10 failed).
			predecessor++
			if r.Attempts != 1 {
				t.Errorf("%s retried after its predecessor failed", r.Task)
			}
		case errors.Is(r.Err, context.Canceled):
			cancelled++
		}
	}
	if boom != 1 || cancelled == 0 || notRun == 0 || ok > 1 || ok+boom+predecessor+cancelled+notRun != len(tasks) {
		t.Fatalf("ok %d, boom %d, predecessor failed %d, cancelled %d, not run %d of %d tasks (%d calls)",
			ok, boom, predecessor, cancelled, notRun, len(tasks), calls.Load())
	}
}
