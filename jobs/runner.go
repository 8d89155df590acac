package jobs

import (
	"cmp"
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// Task states, as the runner records them.
const (
	TaskSucceeded = "succeeded"
	TaskFailed    = "failed"
	// TaskNotRun marks a task never attempted: an earlier task of its
	// partition failed (ordered runs), the run stopped at a failure
	// (RunnerOptions.StopOnFailure) or its context ended first.
	TaskNotRun = "not-run"
)

// RetryPolicy bounds the attempts of one task.
type RetryPolicy struct {
	// MaxAttempts is the number of attempts of a task, the first included
	// (<= 0: one).
	MaxAttempts int
	// Backoff is the wait before the second attempt; it doubles for each
	// further attempt, up to MaxBackoff (<= 0: no cap).
	Backoff    time.Duration
	MaxBackoff time.Duration
}

// Wait is the backoff before attempt (2, 3, ...).
func (p RetryPolicy) Wait(attempt int) time.Duration {
	d := p.Backoff
	for i := 2; i < attempt && (p.MaxBackoff <= 0 || d < p.MaxBackoff); i++ {
		d *= 2
	}
	if p.MaxBackoff > 0 {
		d = min(d, p.MaxBackoff)
	}
	return d
}

// RunnerOptions say how RunTasks runs the tasks of one run; R is the
// report of an attempt.
type RunnerOptions[R any] struct {
	// Workers bounds the tasks in flight at once (<= 0: one per partition).
	Workers int
	// Retry says how often a failed task is tried again. A task is not
	// tried again once the run's context ended or its predecessor failed
	// (ErrPredecessorFailed).
	Retry RetryPolicy
	// Clock times the attempts and the backoffs (nil: clock.Real).
	Clock clock.Clock
	// Ordered starts a partition's next task only once the previous one
	// succeeded, for attempts that cannot wait for their turn in this
	// process (the scheduler dispatches to other processes). Unordered, the
	// tasks of a partition run at once and each attempt waits for its turn
	// (the TurnFunc it is given) before committing.
	Ordered bool
	// StopOnFailure cancels the run at the first task that fails for good
	// (`sluice load run`); otherwise the other partitions go on (the
	// scheduler, which reports each task).
	StopOnFailure bool
	// OnAttempt, when set, is called as each attempt ends (metrics).
	OnAttempt func(task Task, attempt int, d time.Duration, err error)
	// OnTaskEnd, when set, is called as each task ends, from the goroutine
	// that ran it (progress displays); it must not block.
	OnTaskEnd func(TaskResult[R])
	// Logger receives the retries and failures (default: discard).
	Logger *slog.Logger
}

// TurnFunc waits until a task may commit: its partition's previous task
// committed. It fails with ErrPredecessorFailed when that task failed.
type TurnFunc func(ctx context.Context, task Task) error

// AttemptFunc runs attempt (1, 2, ...) of task and returns its report;
// turn waits for the task's turn to commit (see RunnerOptions.Ordered).
type AttemptFunc[R any] func(ctx context.Context, task Task, attempt int, turn TurnFunc) (R, error)

// TaskOutcome is what the runner records of one task: the per-task record
// of `sluice load run`'s report and of the scheduler's run history.
type TaskOutcome struct {
	Task     Task
	State    string // TaskSucceeded, TaskFailed or TaskNotRun
	Attempts int
	// Err is the last attempt's error (nil when it succeeded or never ran).
	Err error
	// Started is when the first attempt started; Duration runs from there
	// to the end of the last one, backoffs included.
	Started  time.Time
	Duration time.Duration
}

// TaskResult is a task's outcome with its last attempt's report.
type TaskResult[R any] struct {
	TaskOutcome
	Report R
}

// RunTasks runs the tasks of one run with attempt and returns each task's
// result, in the order of tasks. It is the loader's one runner: `sluice
// load run` (Loader.Run) and the scheduler both run their tasks here, so
// that concurrency, retries, ordering within a partition, the per-task
// record and cancellation are decided in one place.
//
// The tasks of a partition are handed out in offset order, partitions
// round-robin; at most Workers attempts run at once. A task that fails is
// tried again after the policy's backoff (on the clock) until it
// succeeds or its attempts are spent; it then ends failed and the later
// tasks of its partition do not commit (ordered: they are not run;
// unordered: their turn fails with ErrPredecessorFailed). When ctx ends,
// no further task starts and the tasks not begun are TaskNotRun.
func RunTasks[R any](ctx context.Context, tasks []Task, attempt AttemptFunc[R], opts RunnerOptions[R]) []TaskResult[R] {
	r := &runner[R]{opts: opts, attempt: attempt, clock: clock.OrReal(opts.Clock), log: opts.Logger,
		out: make([]TaskResult[R], len(tasks)), turns: turnsOf(tasks)}
	if r.log == nil {
		r.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	for i, t := range tasks {
		r.out[i] = TaskResult[R]{TaskOutcome: TaskOutcome{Task: t, State: TaskNotRun}}
	}
	r.run(ctx)
	return r.out
}

type runner[R any] struct {
	opts    RunnerOptions[R]
	attempt AttemptFunc[R]
	clock   clock.Clock
	log     *slog.Logger
	turns   *turns
	out     []TaskResult[R] // each element written by the one worker running that task
}

// run hands the tasks to the workers. Its goroutine owns the queues: the
// tasks of each partition not yet handed out, and the tasks ready to go.
func (r *runner[R]) run(ctx context.Context) {
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	queues, order := r.partitionQueues()
	var ready []int // task indexes ready to hand out, in order
	if r.opts.Ordered {
		for _, k := range order {
			ready = append(ready, queues[k][0])
			queues[k] = queues[k][1:]
		}
	} else {
		ready = interleaveIndexes(queues, order)
		clear(queues)
	}
	workers := r.opts.Workers
	if workers <= 0 {
		workers = len(order)
	}
	workers = min(workers, max(len(r.out), 1))
	work, done := make(chan int), make(chan int, len(r.out))
	for range workers {
		go func() {
			for i := range work {
				r.runTask(runCtx, i)
				done <- i
			}
		}()
	}
	inFlight := 0
	ended := func(i int) {
		inFlight--
		res := r.out[i]
		k := tpKey(res.Task.Topic, res.Task.Partition)
		switch {
		case res.State == TaskSucceeded && r.opts.Ordered && len(queues[k]) > 0:
			ready = append(ready, queues[k][0])
			queues[k] = queues[k][1:]
		case res.State != TaskSucceeded:
			delete(queues, k) // ordered: the later tasks of the partition are not run
			if r.opts.StopOnFailure && !errors.Is(res.Err, ErrPredecessorFailed) {
				cancel()
			}
		}
	}
	for len(ready) > 0 || inFlight > 0 {
		select { // the tasks that ended first: a failure stops the run before more go out
		case i := <-done:
			ended(i)
			continue
		default:
		}
		var send chan int
		if len(ready) > 0 && runCtx.Err() == nil {
			send = work
		}
		if send == nil && inFlight == 0 {
			break // stopped: what is left is not run
		}
		var next int
		if send != nil {
			next = ready[0]
		}
		select {
		case send <- next:
			ready = ready[1:]
			inFlight++
		case i := <-done:
			ended(i)
		case <-runCtx.Done():
			// Stop handing out; wait for the tasks in flight.
			for ; inFlight > 0; inFlight-- {
				<-done
			}
		}
	}
	close(work)
}

// partitionQueues groups the task indexes by partition, each in offset
// order, and returns the partitions in the order they first appear.
func (r *runner[R]) partitionQueues() (map[string][]int, []string) {
	idx := make([]int, len(r.out))
	for i := range idx {
		idx[i] = i
	}
	slices.SortStableFunc(idx, func(a, b int) int { return compareTasks(r.out[a].Task, r.out[b].Task) })
	queues := map[string][]int{}
	var order []string
	for _, i := range idx {
		t := r.out[i].Task
		k := tpKey(t.Topic, t.Partition)
		if _, ok := queues[k]; !ok {
			order = append(order, k)
		}
		queues[k] = append(queues[k], i)
	}
	return queues, order
}

// compareTasks orders tasks by topic, partition and start.
func compareTasks(a, b Task) int {
	return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Start, b.Start))
}

// interleaveIndexes orders the queues' tasks round-robin over partitions,
// each partition's in offset order (so a worker waiting for its turn
// always waits on a task that was handed out earlier).
func interleaveIndexes(queues map[string][]int, order []string) []int {
	var out []int
	for more := true; more; {
		more = false
		for _, k := range order {
			if q := queues[k]; len(q) > 0 {
				out = append(out, q[0])
				queues[k] = q[1:]
				more = true
			}
		}
	}
	return out
}

// runTask runs task i's attempts and records its outcome.
func (r *runner[R]) runTask(ctx context.Context, i int) {
	res := &r.out[i]
	task := res.Task
	log := r.log.With("task", task.ID())
	res.Started = r.clock.Now()
	for n := 1; ; n++ {
		res.Attempts = n
		t0 := r.clock.Now()
		rep, err := r.attempt(ctx, task, n, r.turns.wait)
		if r.opts.OnAttempt != nil {
			r.opts.OnAttempt(task, n, r.clock.Now().Sub(t0), err)
		}
		res.Report, res.Err = rep, err
		if err == nil {
			res.State = TaskSucceeded
			log.Debug("task committed", "attempt", n)
			break
		}
		res.State = TaskFailed
		if ctx.Err() != nil || errors.Is(err, ErrPredecessorFailed) {
			break
		}
		if n >= max(r.opts.Retry.MaxAttempts, 1) {
			if r.opts.Retry.MaxAttempts > 1 {
				log.Error("task failed for good", "attempts", n, "err", err)
			}
			break
		}
		wait := r.opts.Retry.Wait(n + 1)
		log.Warn("task attempt failed; retrying", "attempt", n, "backoff", wait, "err", err)
		if !r.sleep(ctx, wait) {
			break
		}
	}
	res.Duration = r.clock.Now().Sub(res.Started)
	r.turns.finish(task, res.Err)
	if r.opts.OnTaskEnd != nil {
		r.opts.OnTaskEnd(*res)
	}
}

// sleep waits d on the clock; false when ctx ended first.
func (r *runner[R]) sleep(ctx context.Context, d time.Duration) bool {
	t := r.clock.NewTimer(d)
	select {
	case <-t.C():
		return true
	case <-ctx.Done():
		t.Stop()
		return false
	}
}
