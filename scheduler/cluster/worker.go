package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sort"
	"sync"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/scheduler"
)

// WorkerOptions configure RunWorker.
type WorkerOptions struct {
	Connect        string
	SessionTimeout time.Duration // default 10s
	// Name identifies the worker (default host-pid).
	Name   string
	Engine scheduler.Engine
	// Tasks is how many tasks the worker runs at once (default 1).
	Tasks   int
	Logger  *slog.Logger
	Metrics *scheduler.Metrics
	// HoldIdle is how long the worker keeps a run's parsed job and loader
	// (see RunWorker) once none of the run's tasks is running on it, when
	// the run is not seen to end first (default 1m).
	HoldIdle time.Duration
	// Clock times HoldIdle and the tasks (nil: the real clock), and is
	// the engine's clock when the engine is a scheduler.ClockTaker (the
	// loader's attempt leases and commit times are then the worker's, as a
	// scheduler's are its own). ZooKeeper retries and the queue's
	// safety-net poll stay on the real clock: they are network backoffs.
	Clock clock.Clock
}

// RunWorker registers a worker and runs the tasks it claims until ctx
// ends. A session that expires is replaced by a new one (the tasks still
// running finish; their claims are gone, so others may run them too).
//
// The tasks of one run share what the engine opens for a job: the worker
// parses a run's spec once, holds the job (scheduler.RunHolder: for the
// loader, one source client and one output file system) from the run's
// first task on this worker, and releases it when the run has ended
// (its /runs node is gone) or after HoldIdle with none of its tasks here.
func RunWorker(ctx context.Context, opts WorkerOptions) error {
	if opts.SessionTimeout <= 0 {
		opts.SessionTimeout = 10 * time.Second
	}
	if opts.Tasks <= 0 {
		opts.Tasks = 1
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if opts.HoldIdle <= 0 {
		opts.HoldIdle = time.Minute
	}
	w := &worker{opts: opts, log: opts.Logger.With("worker", opts.Name), running: map[string]bool{},
		done: make(chan string, opts.Tasks), clock: clock.OrReal(opts.Clock), runs: map[string]*runHold{},
		stop: make(chan struct{})}
	if ct, ok := opts.Engine.(scheduler.ClockTaker); ok {
		ct.TakeClock(w.clock) // the loader's time is the worker's
	}
	first := true
	for ctx.Err() == nil {
		c, err := Dial(opts.Connect, opts.SessionTimeout, w.log)
		if err != nil {
			if first || errors.Is(err, ErrConfig) {
				return err
			}
			w.log.Warn("cannot reach ZooKeeper; retrying", "err", err)
			pause(ctx, nil, time.Second)
			continue
		}
		first = false
		w.setConn(c)
		w.serve(ctx, c)
		w.setConn(nil)
		c.Close()
	}
	w.drain()
	close(w.stop) // release the holds of the runs that linger
	w.lingers.Wait()
	return nil
}

// pause waits d, or less when ctx ends or stop closes (network backoff,
// in wall-clock time).
func pause(ctx context.Context, stop <-chan struct{}, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	case <-stop:
	}
}

type worker struct {
	opts    WorkerOptions
	log     *slog.Logger
	clock   clock.Clock
	running map[string]bool // attempts in flight (owned by serve's goroutine)
	done    chan string
	stop    chan struct{}  // closed when RunWorker returns: lingering holds end
	lingers sync.WaitGroup // the lingering holds' goroutines

	mu   sync.Mutex
	runs map[string]*runHold // guarded by mu: by run id
	cur  *Conn               // guarded by mu: the session being served, nil between sessions
}

func (w *worker) setConn(c *Conn) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.cur = c
}

func (w *worker) conn() *Conn {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.cur
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

func (w *worker) drain() {
	for len(w.running) > 0 {
		delete(w.running, <-w.done)
	}
}

// serve registers on c and claims work until c's session ends or ctx ends.
// ZooKeeper errors (a connection lost for a moment) are retried; only the
// end of the session ends serve.
func (w *worker) serve(ctx context.Context, c *Conn) {
	for {
		_, err := c.zk.Create(c.p("/workers/"+w.opts.Name), nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			break
		}
		// ErrNodeExists: our previous session's node lingers until it
		// expires (or another worker uses this name).
		w.log.Warn("cannot register the worker yet; retrying", "err", err)
		pause(ctx, c.Expired(), time.Second)
		if ctx.Err() != nil || isClosed(c.Expired()) {
			return
		}
	}
	w.log.Info("worker registered", "tasks", w.opts.Tasks)
	for {
		queued, _, qch, err := c.zk.ChildrenW(c.p("/queue"))
		var cch <-chan zk.Event
		if err == nil {
			_, _, cch, err = c.zk.ChildrenW(c.p("/claims"))
		}
		if err != nil {
			w.log.Warn("cannot watch the queue; retrying", "err", err)
			pause(ctx, c.Expired(), 500*time.Millisecond)
			if ctx.Err() != nil || isClosed(c.Expired()) {
				return
			}
			continue
		}
		sort.Strings(queued)
		for _, name := range queued {
			if len(w.running) >= w.opts.Tasks {
				break
			}
			if !w.running[name] {
				w.claim(ctx, c, name)
			}
		}
		poll := time.NewTimer(5 * time.Second) // a safety net under the watches
		select {
		case <-qch:
		case <-cch:
		case name := <-w.done:
			delete(w.running, name)
		case <-poll.C:
		case <-ctx.Done():
			poll.Stop()
			return
		case <-c.Expired():
			poll.Stop()
			return
		}
		poll.Stop()
	}
}

// claim tries to own one queued attempt and starts it.
func (w *worker) claim(ctx context.Context, c *Conn, name string) {
	if ok, _, _ := c.zk.Exists(c.p("/results/" + name)); ok {
		return // done; the leader removes it
	}
	_, err := c.zk.Create(c.p("/claims/"+name), []byte(w.opts.Name), zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
	if err != nil {
		return // owned by another worker, or gone
	}
	if ok, _, _ := c.zk.Exists(c.p("/results/" + name)); ok { // finished meanwhile
		c.deleteOwned("/claims/" + name)
		return
	}
	b, _, err := c.zk.Get(c.p("/queue/" + name))
	var p payload
	if err == nil {
		err = json.Unmarshal(b, &p)
	}
	if err != nil {
		c.deleteOwned("/claims/" + name)
		return
	}
	w.running[name] = true
	go func() {
		defer func() { w.done <- name }()
		w.run(ctx, c, name, p)
	}()
}

func (w *worker) run(ctx context.Context, c *Conn, name string, p payload) {
	log := w.log.With("job", p.Job, "run", p.Run, "task", p.Task.ID(), "attempt", p.Attempt)
	log.Info("task claimed")
	start := w.clock.Now()
	res := result{Worker: w.opts.Name}
	job, done, err := w.acquire(ctx, p)
	defer done()
	if err == nil {
		res.Report, err = runTask(ctx, w.opts.Engine, job, p.Task)
	}
	if ctx.Err() != nil {
		return // stopping: leave the claim to vanish with the session
	}
	res.OK = err == nil
	took := w.clock.Now().Sub(start)
	w.opts.Metrics.WorkerTask(p.Job, res.Report, took, err)
	if err != nil {
		res.Error = err.Error()
		log.Warn("task failed", "err", err)
	} else {
		log.Info("task done", "records", res.Report.Records, "committed", res.Report.Committed, "duration", took)
	}
	b, _ := json.Marshal(res)
	if _, err := c.zk.Create(c.p("/results/"+name), b, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		log.Error("cannot record the task's result; the claim will lapse and another worker re-runs it", "err", err)
		return
	}
	c.zk.Delete(c.p("/queue/"+name), -1)
	c.deleteOwned("/claims/" + name)
}

// runTask runs a task, turning a panic of the engine into an error.
func runTask(ctx context.Context, e scheduler.Engine, job scheduler.Job, task scheduler.Task) (rep scheduler.TaskReport, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("task %s panicked: %v", task, r)
		}
	}()
	return e.RunTask(ctx, job, task)
}
