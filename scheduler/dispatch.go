package scheduler

import (
	"context"
	"fmt"
	"runtime/debug"
)

// Dispatcher runs one attempt of a task somewhere: in this process
// (LocalPool) or on a worker that claimed it through ZooKeeper.
type Dispatcher interface {
	// Dispatch runs attempt (1, 2, ...) of task of run and returns its
	// report. It must be idempotent for the same (run, task, attempt): a
	// scheduler that adopts a run after a failover dispatches again and
	// gets the outcome of the attempt already made.
	Dispatch(ctx context.Context, run RunRef, job Job, task Task, attempt int) (TaskReport, error)
}

// RunRef names a run for dispatchers and logs.
type RunRef struct {
	ID  string
	Job string
}

// LocalPool runs tasks in this process with at most Workers at once.
type LocalPool struct {
	engine Engine
	slots  chan struct{}
}

// NewLocalPool returns a pool of n in-process workers (n < 1 means 1).
func NewLocalPool(engine Engine, n int) *LocalPool {
	return &LocalPool{engine: engine, slots: make(chan struct{}, max(n, 1))}
}

// Dispatch waits for a free worker and runs the task there.
func (p *LocalPool) Dispatch(ctx context.Context, run RunRef, job Job, task Task, attempt int) (TaskReport, error) {
	select {
	case p.slots <- struct{}{}:
	case <-ctx.Done():
		return TaskReport{}, ctx.Err()
	}
	defer func() { <-p.slots }()
	return runTaskSafely(ctx, p.engine, job, task)
}

// runTaskSafely runs a task and turns a panic of the engine (a user
// mapper, say) into the task's error instead of the process's end.
func runTaskSafely(ctx context.Context, engine Engine, job Job, task Task) (rep TaskReport, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("scheduler: task %s panicked: %v\n%s", task, r, debug.Stack())
		}
	}()
	return engine.RunTask(ctx, job, task)
}
