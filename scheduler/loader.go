package scheduler

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// LoaderEngine is the Engine of sluice's loader (package jobs): the job
// specs are the loader's, tasks are its splits, and each task commits
// through its exclusive manifests. It is a RunHolder: the scheduler holds
// a job's loader (its source client and output file system) open for the
// length of a run, and the run's Plan, LockJob and RunTask calls share it
// (a `sluice worker` holds it the same way for the run's tasks it runs,
// scheduler/cluster); a call outside a hold opens and closes its own.
type LoaderEngine struct {
	// Options are handed to jobs.Open for each plan and task (Workers and
	// Progress do not apply). With Options.MemoryBudget nil, the engine
	// makes one budget of writers.DefaultMemoryBudget that all its loaders
	// share: the open files of every task the engine runs at once (a
	// process's) buffer that much together, not that much each.
	Options jobs.Options

	budgetOnce sync.Once
	budget     *writers.MemoryBudget // set once by options

	mu    sync.Mutex
	held  map[*jobs.Spec]*heldLoader // guarded by mu: by the job's parsed spec
	clock clock.Clock                // guarded by mu: the scheduler's or worker's (TakeClock), for Options.Clock nil
	// audits: guarded by mu: per source cluster and client settings, the
	// _audit topic read so far (ProducerCounts reads only what is new).
	audits map[string]*audit.Reader
	// locks: guarded by mu: the job lock each job's run holds (LockJob),
	// for the compaction after the run (compact.go).
	locks map[*jobs.Spec]*jobs.JobLock
}

// TakeClock makes c the clock of the loaders the engine opens from now on,
// unless Options.Clock names one (the scheduler calls it from New, a
// cluster worker from RunWorker).
func (e *LoaderEngine) TakeClock(c clock.Clock) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.clock = c
}

// options returns the Options a loader of the engine opens with: the
// engine's, with the one memory budget its loaders share and, when they
// name no clock, the scheduler's.
func (e *LoaderEngine) options() jobs.Options {
	e.budgetOnce.Do(func() {
		if e.budget = e.Options.MemoryBudget; e.budget == nil {
			e.budget = writers.NewMemoryBudget(writers.DefaultMemoryBudget)
		}
	})
	opts := e.Options
	opts.MemoryBudget = e.budget
	if opts.Clock == nil {
		e.mu.Lock()
		opts.Clock = e.clock
		e.mu.Unlock()
	}
	return opts
}

// heldLoader is one job's loader, opened once for the holds that share it.
// Its opening runs outside LoaderEngine.mu (it dials the output's NameNode),
// so that one job's unreachable output stalls only that job's holds.
type heldLoader struct {
	ready chan struct{} // closed once the open returned
	l     *jobs.Loader  // set before ready is closed; nil when the open failed
	err   error         // the open's error, set before ready is closed
	refs  int           // guarded by LoaderEngine.mu: holds and calls using l
}

// HoldJob opens the job's loader until release: until then the job's
// Plan, LockJob and RunTask use it instead of opening one each. Holds
// nest (a second hold while the first is opening waits for that open, or
// for its ctx); the last release closes the loader.
func (e *LoaderEngine) HoldJob(ctx context.Context, job Job) (release func(), err error) {
	spec, err := loaderSpec(job)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	h := e.held[spec]
	opener := h == nil
	if opener {
		h = &heldLoader{ready: make(chan struct{})}
		if e.held == nil {
			e.held = map[*jobs.Spec]*heldLoader{}
		}
		e.held[spec] = h
	}
	h.refs++
	e.mu.Unlock()
	if opener {
		h.l, h.err = jobs.Open(ctx, spec, e.options())
		if h.err != nil { // the next hold tries again
			e.mu.Lock()
			if e.held[spec] == h {
				delete(e.held, spec)
			}
			e.mu.Unlock()
		}
		close(h.ready)
	}
	select {
	case <-h.ready:
	case <-ctx.Done():
		e.unref(spec, h)
		return nil, ctx.Err()
	}
	if h.err != nil {
		e.unref(spec, h)
		return nil, h.err
	}
	var once sync.Once
	return func() { once.Do(func() { e.unref(spec, h) }) }, nil
}

// unref drops one reference to h; the last one forgets h and closes its
// loader. (While h is opening its opener holds a reference, so the last
// one is dropped after ready.)
func (e *LoaderEngine) unref(spec *jobs.Spec, h *heldLoader) {
	e.mu.Lock()
	h.refs--
	last := h.refs == 0
	if last && e.held[spec] == h {
		delete(e.held, spec)
	}
	e.mu.Unlock()
	if last && h.l != nil {
		h.l.Close()
	}
}

// loader returns the job's held loader, or opens one; done closes what
// was opened here (a held loader stays open until done even if the hold
// is released meanwhile).
func (e *LoaderEngine) loader(ctx context.Context, job Job) (l *jobs.Loader, done func(), err error) {
	spec, err := loaderSpec(job)
	if err != nil {
		return nil, nil, err
	}
	e.mu.Lock()
	h := e.held[spec]
	if h != nil {
		h.refs++
	}
	e.mu.Unlock()
	if h != nil {
		select {
		case <-h.ready:
		case <-ctx.Done():
			e.unref(spec, h)
			return nil, nil, ctx.Err()
		}
		if h.l != nil {
			return h.l, func() { e.unref(spec, h) }, nil
		}
		e.unref(spec, h) // the hold's open failed: try one of our own
	}
	if l, err = jobs.Open(ctx, spec, e.options()); err != nil {
		return nil, nil, err
	}
	return l, func() { l.Close() }, nil
}

// ParseJob parses and validates a loader job spec. The schedule is checked
// down to the cron resolution only: the floor is the scheduler's
// (Options.MinInterval), so a worker takes what its scheduler took.
func (e *LoaderEngine) ParseJob(path string, data []byte) (Job, error) {
	dir := ""
	if path != "" {
		dir = filepath.Dir(path)
	}
	spec, err := jobs.ParseSpecWith(data, dir, jobs.SpecOptions{MinScheduleInterval: jobs.MinScheduleResolution})
	if err != nil {
		if path != "" {
			return Job{}, fmt.Errorf("%s: %w", path, err)
		}
		return Job{}, err
	}
	job := Job{Name: spec.Name, Path: path, Spec: data, Schedule: spec.Schedule, Output: spec.OutputURI(),
		AllowedLateness: spec.Lateness(), CompleteWhen: spec.CompleteRule(), Engine: spec,
		OpenOutput: func() (vfs.FS, error) { return filesystem.OpenWith(spec.OutputURI(), spec.HDFSOptions()) }}
	job.Retry.MaxAttempts = spec.Retry.MaxAttempts
	job.Retry.Backoff, job.Retry.MaxBackoff = spec.Retry.Durations()
	job.Partition.By = spec.Partition.By
	if job.Partition.Location, err = time.LoadLocation(spec.Partition.Timezone); err != nil {
		return Job{}, fmt.Errorf("%s: partition.timezone: %w", path, err)
	}
	return job, nil
}

func loaderSpec(job Job) (*jobs.Spec, error) {
	spec, ok := job.Engine.(*jobs.Spec)
	if !ok {
		return nil, fmt.Errorf("%w: %s was not parsed by the loader engine", ErrJob, job.Name)
	}
	return spec, nil
}

// Plan plans one run of the job from its checkpoints.
func (e *LoaderEngine) Plan(ctx context.Context, job Job) (Plan, error) {
	l, done, err := e.loader(ctx, job)
	if err != nil {
		return Plan{}, err
	}
	defer done()
	p, err := l.Plan(ctx)
	if err != nil {
		return Plan{}, err
	}
	plan := Plan{Tasks: p.Splits}
	for _, tp := range p.Topics {
		if tp.Restart {
			plan.Notes = append(plan.Notes, fmt.Sprintf("topic %s was recreated (%s): started over from its first offsets (on_topic_recreated: restart)", tp.Topic, tp.Recreated))
		}
		if len(tp.NewPartitions) > 0 {
			plan.Notes = append(plan.Notes, fmt.Sprintf("topic %s: partitions %v were added since the job's first run: they load from their log start", tp.Topic, tp.NewPartitions))
		}
	}
	for _, pp := range p.Partitions {
		plan.Partitions = append(plan.Partitions, PartitionPosition{Topic: pp.Topic, Partition: pp.Partition,
			Loaded: pp.Start, HighWatermark: pp.End})
		if pp.Skipped != nil {
			plan.Notes = append(plan.Notes, fmt.Sprintf("%s/%d: offsets [%d, %d) were deleted by retention before they were loaded (on_offset_out_of_range: skip)",
				pp.Topic, pp.Partition, pp.Skipped.Start, pp.Skipped.End))
		}
	}
	return plan, nil
}

// LockJob takes the job's lock in its output for the length of a run (the
// workers' tasks commit under it) and renews it until release.
func (e *LoaderEngine) LockJob(ctx context.Context, job Job) (func(), error) {
	l, done, err := e.loader(ctx, job)
	if err != nil {
		return nil, err
	}
	lk, err := l.AcquireLock(jobs.LockScheduler)
	if err != nil {
		done()
		return nil, err
	}
	spec, _ := loaderSpec(job)
	e.mu.Lock()
	if e.locks == nil {
		e.locks = map[*jobs.Spec]*jobs.JobLock{}
	}
	e.locks[spec] = lk
	e.mu.Unlock()
	return func() {
		e.mu.Lock()
		if e.locks[spec] == lk {
			delete(e.locks, spec)
		}
		e.mu.Unlock()
		lk.Release()
		done()
	}, nil
}

// RunTask loads one split.
func (e *LoaderEngine) RunTask(ctx context.Context, job Job, task Task) (TaskReport, error) {
	l, done, err := e.loader(ctx, job)
	if err != nil {
		return TaskReport{}, err
	}
	defer done()
	rep, err := l.RunTask(ctx, task)
	if err != nil {
		return TaskReport{}, err
	}
	out := TaskReport{Committed: rep.Won}
	if rep.Won {
		out.Records, out.Bytes = rep.RowsOut, rep.BytesOut
	}
	return out, nil
}

// ProducerCounts reads the producer tier's counts of the job's topics from
// the _audit topic of its source cluster, with the job's client settings
// (jobs.Spec.SourceClientOptions: bootstrap and source.security, then
// Options.KafkaOptions, as the job's loader). The engine keeps what it
// read per cluster and client settings, so each check reads only the
// counts published since the last one.
func (e *LoaderEngine) ProducerCounts(ctx context.Context, job Job) ([]audit.Count, error) {
	spec, err := loaderSpec(job)
	if err != nil {
		return nil, err
	}
	client, err := spec.SourceClientOptions()
	if err != nil {
		return nil, err
	}
	key := fmt.Sprint(spec.Source.Bootstrap, spec.Source.Security)
	e.mu.Lock()
	r := e.audits[key]
	if r == nil {
		r = new(audit.Reader)
		if e.audits == nil {
			e.audits = map[string]*audit.Reader{}
		}
		e.audits[key] = r
	}
	e.mu.Unlock()
	counts, err := r.Read(ctx, append(client, e.Options.KafkaOptions...))
	if err != nil {
		return nil, err
	}
	topics := map[string]bool{}
	for _, t := range spec.Source.Topics {
		topics[t] = true
	}
	var out []audit.Count
	for _, c := range counts.Counts {
		if c.Tier == audit.TierProducer && topics[c.Topic] {
			out = append(out, c)
		}
	}
	return out, nil
}
