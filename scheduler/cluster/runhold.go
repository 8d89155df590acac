package cluster

import (
	"context"

	"github.com/sluicehq/sluice/scheduler"
)

// runHold is what a worker keeps for one run id while it runs the run's
// tasks: the job parsed once from the run's spec and, when the engine is a
// scheduler.RunHolder, its hold (for the loader: one source client and one
// output file system), so that the run's tasks on this worker share them
// instead of opening their own.
//
// The hold lasts from the run's first task on the worker to its last: once
// no task of the run is running here, the worker keeps it until the run's
// node /runs/<id> is gone (the leader ended the run) or for
// WorkerOptions.HoldIdle of the worker's clock, whichever comes first, and
// a task of the run claimed meanwhile takes it up again.
type runHold struct {
	ready   chan struct{} // closed once job, err and release are set
	job     scheduler.Job // the parsed job (Path and Spec the payload's)
	err     error         // the parse error, if any
	release func()        // the engine's hold; nil when none was taken
	tasks   int           // guarded by worker.mu: tasks of the run running here
	wake    chan struct{} // guarded by worker.mu: closed to end the linger in progress
}

// acquire returns the run's parsed job, parsing the spec and taking the
// engine's hold for the first task of the run; done must be called when
// the task ends.
func (w *worker) acquire(ctx context.Context, p payload) (job scheduler.Job, done func(), err error) {
	w.mu.Lock()
	r := w.runs[p.Run]
	opener := r == nil
	if opener {
		r = &runHold{ready: make(chan struct{})}
		w.runs[p.Run] = r
	}
	r.tasks++
	if r.wake != nil {
		close(r.wake)
		r.wake = nil
	}
	w.mu.Unlock()
	if opener {
		w.open(ctx, p, r)
	}
	<-r.ready
	return r.job, func() { w.finished(p.Run, r) }, r.err
}

// open parses the run's job and takes the engine's hold. A hold that fails
// is not the task's failure: each task then opens its own.
func (w *worker) open(ctx context.Context, p payload, r *runHold) {
	defer close(r.ready)
	r.job, r.err = w.opts.Engine.ParseJob(p.Path, p.Spec)
	if r.err != nil {
		return
	}
	r.job.Path, r.job.Spec = p.Path, p.Spec
	if h, ok := w.opts.Engine.(scheduler.RunHolder); ok {
		release, err := h.HoldJob(ctx, r.job)
		if err != nil {
			w.log.Debug("the run's loader is opened per task", "run", p.Run, "err", err)
			return
		}
		r.release = release
	}
}

// finished ends one task's use of r; the last one starts r's linger.
func (w *worker) finished(run string, r *runHold) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r.tasks--; r.tasks > 0 || w.runs[run] != r {
		return
	}
	if r.err != nil || r.release == nil { // nothing worth keeping
		delete(w.runs, run)
		return
	}
	r.wake = make(chan struct{})
	w.lingers.Add(1)
	go w.linger(run, r, r.wake)
}

// linger keeps r until the run's node is gone, HoldIdle passes or the
// worker stops (w.stop), then releases it; it leaves r alone when a new
// task of the run takes it up (wake closes).
func (w *worker) linger(run string, r *runHold, wake <-chan struct{}) {
	defer w.lingers.Done()
	idle := w.clock.NewTimer(w.opts.HoldIdle)
	defer idle.Stop()
	gone := w.runGone(run)
	for {
		select {
		case ended := <-gone:
			if !ended {
				gone = nil // no watch: the idle timeout decides
				continue
			}
		case <-idle.C():
		case <-wake:
			return
		case <-w.stop:
		}
		w.drop(run, r)
		return
	}
}

// runGone reports on the returned channel whether /runs/<run> is gone: at
// once when it is, when its watch fires otherwise. It sends false when it
// cannot tell (no session, a watch that ends with the session).
func (w *worker) runGone(run string) <-chan bool {
	out := make(chan bool, 1)
	c := w.conn()
	if c == nil {
		out <- false
		return out
	}
	ok, _, ch, err := c.zk.ExistsW(c.p("/runs/" + run))
	switch {
	case err != nil:
		out <- false
	case !ok:
		out <- true
	default:
		go func() {
			<-ch // fires on the node's deletion, or when the session ends
			ok, _, err := c.zk.Exists(c.p("/runs/" + run))
			out <- err == nil && !ok
		}()
	}
	return out
}

// drop forgets r and releases its hold, unless a task took it up again.
func (w *worker) drop(run string, r *runHold) {
	w.mu.Lock()
	if r.tasks > 0 || w.runs[run] != r {
		w.mu.Unlock()
		return
	}
	delete(w.runs, run)
	r.wake = nil
	w.mu.Unlock()
	w.log.Debug("the run's loader is released", "run", run)
	r.release()
}
