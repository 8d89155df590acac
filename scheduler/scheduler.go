package scheduler

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/robfig/cron/v3"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// RunTracker keeps the runs in flight somewhere other schedulers can see
// (ZooKeeper), so that a standby adopts them after a failover. The
// embedded scheduler has none.
type RunTracker interface {
	// Begin records a planned run before its tasks are dispatched.
	Begin(ctx context.Context, rec RunRecord, job Job, plan Plan) error
	// End forgets a run that ended.
	End(ctx context.Context, runID string) error
	// InFlight returns the runs begun and not ended (by any scheduler).
	InFlight(ctx context.Context) ([]InFlightRun, error)
}

// InFlightRun is a run another scheduler began: enough to finish it.
type InFlightRun struct {
	Record RunRecord `json:"record"`
	Path   string    `json:"path"`
	Spec   []byte    `json:"spec"`
	Tasks  []Task    `json:"tasks"`
	// Partitions and Notes are the plan's.
	Partitions []PartitionPosition `json:"partitions"`
	Notes      []string            `json:"notes,omitempty"`
	PlannedAt  time.Time           `json:"planned_at"`
}

// Options configure a Scheduler. Engine and JobsDir are required.
type Options struct {
	Engine Engine
	// JobsDir holds the job specs (*.yaml, *.yml), rescanned every
	// ScanInterval: added, changed and removed specs take effect without
	// a restart.
	JobsDir string
	// Dispatcher runs task attempts (default: a LocalPool of Workers).
	Dispatcher Dispatcher
	// Workers is the size of the default LocalPool (default 2).
	Workers int
	// Tracker shares runs in flight with standby schedulers (optional).
	Tracker RunTracker
	// Clock is the time source (nil = clock.Real; tests pass a clock.Manual).
	// An Engine that is a ClockTaker (LoaderEngine) is given it too.
	Clock clock.Clock
	// ScanInterval is how often JobsDir is rescanned (default 5s).
	ScanInterval time.Duration
	// MinInterval is the floor under the time between two ticks of a job
	// (default jobs.DefaultMinScheduleInterval, one minute; at least a
	// second): a spec whose schedule can fire sooner, or never, is refused
	// at the scan (jobs.ParseSchedule), and the loop never ticks a job
	// sooner than this after its previous tick, whatever its schedule says.
	MinInterval time.Duration
	// OpenFS opens a job's output (default: the job's Job.OpenOutput, else
	// filesystem.Open).
	OpenFS func(uri string) (vfs.FS, error)
	Logger *slog.Logger
	// Metrics receives the scheduler's metrics (optional).
	Metrics *Metrics
	// Name identifies this scheduler in run records (default host/pid).
	Name string
	// OnTaskEnd and OnRunEnd, when set, are called as each task and each
	// run ends (progress displays); they must not block.
	OnTaskEnd func(run RunRef, task TaskRecord)
	OnRunEnd  func(run RunRecord)
}

// Scheduler runs jobs on their schedules. Run owns its state machine; the
// mutex guards what run goroutines and Status share with it.
type Scheduler struct {
	opts Options
	// ownOpenFS: Options.OpenFS was given, and wins over Job.OpenOutput.
	ownOpenFS bool
	log       *slog.Logger
	clock     clock.Clock
	wake      chan struct{}

	mu      sync.Mutex
	jobs    map[string]*jobState // by job name
	files   map[string]string    // spec path -> job name
	running map[string]string    // job name -> run id in flight
	skipped map[string]int       // job name -> ticks skipped during the run in flight
	refused map[string]string    // spec path -> hash of the content refused (reported once)
	outputs map[string]vfs.FS
	// loads: job name and output -> the load tier read so far
	// (complete_when: audit).
	loads map[string]*audit.LoadReader
	runs  sync.WaitGroup
}

type jobState struct {
	job      Job
	hash     string
	schedule cron.Schedule
	next     time.Time
}

// JobStatus is a job as the scheduler sees it now.
type JobStatus struct {
	Name    string
	Next    time.Time
	Running string // run id, "" when idle
	Skipped int
}

// New returns a Scheduler; Run starts it.
func New(opts Options) (*Scheduler, error) {
	if opts.Engine == nil || opts.JobsDir == "" {
		return nil, fmt.Errorf("%w: a scheduler needs an engine and a jobs directory", ErrJob)
	}
	if st, err := os.Stat(opts.JobsDir); err != nil || !st.IsDir() {
		return nil, fmt.Errorf("%w: --jobs %s is not a readable directory of job specs", ErrJob, opts.JobsDir)
	}
	opts.Clock = clock.OrReal(opts.Clock)
	if ct, ok := opts.Engine.(ClockTaker); ok {
		ct.TakeClock(opts.Clock) // the loader's time is the scheduler's
	}
	if opts.ScanInterval <= 0 {
		opts.ScanInterval = 5 * time.Second
	}
	if opts.MinInterval <= 0 {
		opts.MinInterval = jobs.DefaultMinScheduleInterval
	}
	opts.MinInterval = max(opts.MinInterval, jobs.MinScheduleResolution)
	ownOpen := opts.OpenFS != nil
	if opts.OpenFS == nil {
		opts.OpenFS = filesystem.Open
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Dispatcher == nil {
		opts.Dispatcher = NewLocalPool(opts.Engine, opts.Workers)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Name == "" {
		host, _ := os.Hostname()
		opts.Name = fmt.Sprintf("%s/%d", host, os.Getpid())
	}
	return &Scheduler{opts: opts, ownOpenFS: ownOpen, log: opts.Logger, clock: opts.Clock, wake: make(chan struct{}, 1),
		jobs: map[string]*jobState{}, files: map[string]string{}, running: map[string]string{},
		skipped: map[string]int{}, refused: map[string]string{}, outputs: map[string]vfs.FS{}}, nil
}

// Status lists the scheduled jobs by name.
func (s *Scheduler) Status() []JobStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []JobStatus
	for name, js := range s.jobs {
		out = append(out, JobStatus{Name: name, Next: js.next, Running: s.running[name], Skipped: s.skipped[name]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

func (s *Scheduler) poke() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run schedules until ctx ends, then waits for the runs in flight to stop.
// Runs cut short stay "running" in their history (and in the tracker) so
// that a standby adopts them or the next start marks them abandoned.
func (s *Scheduler) Run(ctx context.Context) error {
	defer s.closeOutputs()
	defer s.runs.Wait()
	var adopt []InFlightRun
	if s.opts.Tracker != nil {
		var err error
		if adopt, err = s.opts.Tracker.InFlight(ctx); err != nil {
			return fmt.Errorf("scheduler: reading the runs in flight: %w", err)
		}
	}
	keep := map[string]bool{}
	for _, r := range adopt {
		keep[r.Record.ID] = true
	}
	s.scan(keep)
	for _, r := range adopt {
		s.adopt(ctx, r)
	}
	s.log.Info("scheduler started", "jobs_dir", s.opts.JobsDir, "jobs", len(s.jobs), "adopted_runs", len(adopt))
	last := s.clock.Now()
	nextScan := last.Add(s.opts.ScanInterval)
	for {
		now := s.clock.Now()
		if back := last.Sub(now); back > 0 {
			// The clock was stepped back: deadlines taken on the old
			// reading lie too far ahead. Rescan now, and move the
			// @every jobs' next runs back with it.
			s.steppedBack(now, back)
			nextScan = now
		}
		last = now
		if !now.Before(nextScan) {
			s.scan(keep)
			nextScan = now.Add(s.opts.ScanInterval)
		}
		wakeAt := s.fireDue(ctx, now)
		if wakeAt.IsZero() || nextScan.Before(wakeAt) {
			wakeAt = nextScan
		}
		// A wait never outlasts ScanInterval, whatever the deadline: a
		// clock stepped while the loop sleeps is seen within one.
		t := s.clock.NewTimer(min(wakeAt.Sub(now), s.opts.ScanInterval))
		select {
		case <-ctx.Done():
			t.Stop()
			s.log.Info("scheduler stopping", "runs_in_flight", len(s.Status()))
			return nil
		case <-t.C():
		case <-s.wake:
			t.Stop()
		}
	}
}

// steppedBack moves the next run of every @every job back by d, the step
// the clock was set back by, so that it keeps its distance in elapsed time.
// A wall-clock schedule takes its next tick afresh from the reading now
// when d is at least MinInterval: its tick was taken on the old reading,
// which may lie far ahead (a clock stepped forward an hour and put right
// would otherwise run no load for that hour). The tick that ran just before
// the step may then run again, which a load takes in its stride (it
// commits offset ranges, exactly once); a step smaller than MinInterval
// (an NTP correction) keeps the tick, so it is not run twice.
func (s *Scheduler) steppedBack(now time.Time, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log.Warn("the clock stepped back: rescanning, @every jobs keep their interval, wall-clock jobs take their next tick from the new reading", "by", d)
	for name, js := range s.jobs {
		if js.next.IsZero() {
			continue
		}
		if _, every := js.schedule.(cron.ConstantDelaySchedule); every {
			js.next = js.next.Add(-d)
		} else if d >= s.opts.MinInterval {
			if next := s.tickAfter(name, js.schedule, time.Time{}, now); !next.IsZero() && next.Before(js.next) {
				js.next = next
			}
		}
	}
}

// fireDue starts the runs of the jobs whose tick came and returns the
// earliest next tick. A tick that finds the job's previous run going is
// skipped and reported; ticks missed while the scheduler was down or busy
// collapse into one run, because the next tick is computed from now. A job
// whose next tick is the zero time never ticks again.
func (s *Scheduler) fireDue(ctx context.Context, now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	var earliest time.Time
	for name, js := range s.jobs {
		if js.next.IsZero() {
			continue
		}
		if !js.next.After(now) {
			scheduled := js.next
			if id := s.running[name]; id != "" {
				s.skipped[name]++
				s.log.Warn("tick skipped: the previous run is still going", "job", name, "run", id, "tick", scheduled)
				s.opts.Metrics.tickSkipped(name)
			} else {
				s.startLocked(ctx, js.job, scheduled, nil)
			}
			js.next = s.tickAfter(name, js.schedule, scheduled, now)
		}
		if js.next.IsZero() {
			continue
		}
		if earliest.IsZero() || js.next.Before(earliest) {
			earliest = js.next
		}
	}
	return earliest
}

// tickAfter is a job's next tick at now, prev being its previous tick (zero
// for none): the schedule's next firing, but never at or before now and
// never sooner than MinInterval after prev, so that a schedule whose Next
// misbehaves (returns a past time or one too soon) cannot run a job back
// to back. The zero time, a schedule with no next firing, means never.
func (s *Scheduler) tickAfter(job string, sched cron.Schedule, prev, now time.Time) time.Time {
	next := sched.Next(now)
	switch {
	case next.IsZero():
		s.log.Error("the schedule has no next firing: the job will not run until its spec changes", "job", job)
		return time.Time{}
	case !next.After(now):
		next = now.Add(s.opts.MinInterval)
	}
	if floor := prev.Add(s.opts.MinInterval); !prev.IsZero() && next.Before(floor) {
		next = floor
	}
	return next
}

func newRunID(scheduled time.Time) string {
	var b [3]byte
	rand.Read(b[:])
	return scheduled.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// startLocked starts a run (or resumes an adopted one) in a goroutine.
func (s *Scheduler) startLocked(ctx context.Context, job Job, scheduled time.Time, adopted *InFlightRun) {
	var rec RunRecord
	if adopted != nil {
		rec = adopted.Record
	} else {
		rec = RunRecord{ID: newRunID(scheduled), Job: job.Name, Scheduled: scheduled, Started: s.clock.Now(),
			State: StateRunning, Scheduler: s.opts.Name}
	}
	s.running[job.Name] = rec.ID
	s.skipped[job.Name] = 0
	s.opts.Metrics.runStarted(job.Name)
	s.runs.Add(1)
	go func() {
		defer s.runs.Done()
		s.execute(ctx, job, rec, adopted)
		s.mu.Lock()
		delete(s.running, job.Name)
		s.mu.Unlock()
		s.opts.Metrics.runStopped(job.Name)
		s.poke()
	}()
}

// adopt resumes a run another scheduler began.
func (s *Scheduler) adopt(ctx context.Context, r InFlightRun) {
	job, err := s.opts.Engine.ParseJob(r.Path, r.Spec)
	if err != nil {
		s.log.Error("cannot adopt a run: its spec no longer parses", "job", r.Record.Job, "run", r.Record.ID, "err", err)
		return
	}
	job.Spec, job.Path = r.Spec, r.Path
	s.log.Info("adopting a run in flight", "job", job.Name, "run", r.Record.ID, "tasks", len(r.Tasks))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running[job.Name] != "" {
		return
	}
	s.startLocked(ctx, job, r.Record.Scheduled, &r)
}

func (s *Scheduler) output(job Job) (vfs.FS, error) {
	uri := job.Output
	s.mu.Lock()
	defer s.mu.Unlock()
	if fs := s.outputs[uri]; fs != nil {
		return fs, nil
	}
	open := func() (vfs.FS, error) { return s.opts.OpenFS(uri) }
	if !s.ownOpenFS && job.OpenOutput != nil {
		open = job.OpenOutput
	}
	fs, err := open()
	if err != nil {
		return nil, err
	}
	s.outputs[uri] = fs
	return fs, nil
}

func (s *Scheduler) closeOutputs() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for uri, fs := range s.outputs {
		fs.Close()
		delete(s.outputs, uri)
	}
}

// scan reads the jobs directory and applies added, changed and removed
// specs. keep names runs in flight that must not be marked abandoned.
func (s *Scheduler) scan(keep map[string]bool) {
	paths, err := specFiles(s.opts.JobsDir)
	if err != nil {
		s.log.Error("cannot read the jobs directory", "dir", s.opts.JobsDir, "err", err)
		return
	}
	seen := map[string]bool{}
	for _, p := range paths {
		seen[p] = true
	}
	// Removals first, so that a spec taking over a removed one's name is
	// accepted in the same scan.
	s.mu.Lock()
	for p := range s.refused {
		if !seen[p] {
			delete(s.refused, p)
		}
	}
	for p, name := range s.files {
		if !seen[p] {
			delete(s.files, p)
			if js := s.jobs[name]; js != nil && js.job.Path == p {
				delete(s.jobs, name)
			}
			clear(s.refused) // a spec refused for a duplicate name may fit now
			s.log.Info("job removed", "job", name, "path", p)
			s.opts.Metrics.jobsChanged(len(s.jobs))
		}
	}
	s.mu.Unlock()
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			s.log.Error("cannot read a job spec", "path", p, "err", err)
			continue
		}
		sum := sha256.Sum256(data)
		s.apply(p, data, hex.EncodeToString(sum[:]), keep)
	}
}

func specFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || strings.HasPrefix(n, ".") || !(strings.HasSuffix(n, ".yaml") || strings.HasSuffix(n, ".yml")) {
			continue
		}
		out = append(out, filepath.Join(dir, n))
	}
	return out, nil
}

// apply adds or updates the job of one spec file.
func (s *Scheduler) apply(path string, data []byte, hash string, keep map[string]bool) {
	s.mu.Lock()
	name, known := s.files[path]
	var cur *jobState
	if known {
		cur = s.jobs[name]
	}
	refused := s.refused[path] == hash
	s.mu.Unlock()
	if refused || (cur != nil && cur.hash == hash) {
		return
	}
	job, sched, err := s.parse(path, data)
	if err != nil {
		// Reported once per content; a previous version keeps its schedule.
		s.log.Error("job spec refused", "path", path, "err", err)
		s.opts.Metrics.specRefused()
		s.mu.Lock()
		s.refused[path] = hash
		s.mu.Unlock()
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if other, ok := s.jobs[job.Name]; ok && other.job.Path != path {
		s.log.Error("job spec refused: another spec has the same name", "path", path, "job", job.Name, "other", other.job.Path)
		s.opts.Metrics.specRefused()
		s.refused[path] = hash // tried again when it changes or the other spec goes
		return
	}
	delete(s.refused, path)
	if known && name != job.Name { // renamed
		delete(s.jobs, name)
	}
	now := s.clock.Now()
	js := &jobState{job: job, hash: hash, schedule: sched, next: s.tickAfter(job.Name, sched, time.Time{}, now)}
	if cur != nil {
		s.log.Info("job changed", "job", job.Name, "path", path, "next", js.next)
	} else {
		s.mu.Unlock()
		js.next = s.firstTick(job, sched, now, keep)
		s.mu.Lock()
		s.log.Info("job added", "job", job.Name, "path", path, "schedule", job.Schedule, "next", js.next)
	}
	s.files[path] = job.Name
	s.jobs[job.Name] = js
	s.opts.Metrics.jobsChanged(len(s.jobs))
	s.poke()
}

func (s *Scheduler) parse(path string, data []byte) (Job, cron.Schedule, error) {
	job, err := s.opts.Engine.ParseJob(path, data)
	if err != nil {
		return Job{}, nil, err
	}
	job.Path, job.Spec = path, data
	if job.Name == "" || strings.ContainsAny(job.Name, "/\\") || job.Name == "." || job.Name == ".." {
		return Job{}, nil, fmt.Errorf("%w: %s: name %q must be non-empty without / or \\", ErrJob, path, job.Name)
	}
	if job.Output == "" {
		return Job{}, nil, fmt.Errorf("%w: %s: no output uri", ErrJob, path)
	}
	sched, err := jobs.ParseSchedule(job.Schedule, s.opts.MinInterval)
	if err != nil {
		return Job{}, nil, fmt.Errorf("%w: %s: %w", ErrJob, path, err)
	}
	job.Retry = withRetryDefaults(job.Retry)
	return job, sched, nil
}

// firstTick is the first tick of a job just added: now, when a tick was
// missed since its last recorded run (one catch-up run for the whole
// downtime), else the schedule's next. Runs left "running" by a dead
// scheduler and not adopted are marked abandoned.
func (s *Scheduler) firstTick(job Job, sched cron.Schedule, now time.Time, keep map[string]bool) time.Time {
	fs, err := s.output(job)
	if err != nil {
		s.log.Error("cannot open the job's output", "job", job.Name, "output", job.Output, "err", err)
		return s.tickAfter(job.Name, sched, time.Time{}, now)
	}
	h := NewHistory(fs, job.Name)
	if err := h.Abandon(keep, now); err != nil {
		s.log.Warn("cannot mark abandoned runs", "job", job.Name, "err", err)
	}
	last, ok, err := h.Last()
	if err != nil {
		s.log.Warn("cannot read the run history", "job", job.Name, "err", err)
	}
	if missed := sched.Next(last.Scheduled); ok && !missed.IsZero() && !missed.After(now) {
		s.log.Info("ticks were missed while no scheduler ran: one catch-up run", "job", job.Name, "last_run", last.ID)
		return now
	}
	return s.tickAfter(job.Name, sched, time.Time{}, now)
}
