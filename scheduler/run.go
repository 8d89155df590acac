package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
)

// execute runs one run of job: plan (unless adopted), dispatch the tasks
// with retries, mark complete directories, record the history.
func (s *Scheduler) execute(ctx context.Context, job Job, rec RunRecord, adopted *InFlightRun) {
	log := s.log.With("job", job.Name, "run", rec.ID)
	fs, err := s.output(job)
	if err != nil {
		log.Error("cannot open the job's output; run not started", "output", job.Output, "err", err)
		s.opts.Metrics.runEnded(job.Name, StateFailed, 0, false)
		return
	}
	hist := NewHistory(fs, job.Name)
	if h, ok := s.opts.Engine.(RunHolder); ok {
		if release, err := h.HoldJob(ctx, job); err == nil {
			defer release()
		} else {
			log.Debug("the job's loader is opened per call", "err", err)
		}
	}
	if lk, ok := s.opts.Engine.(Locker); ok {
		release, ok := s.lockRun(ctx, lk, hist, job, rec, adopted, log)
		if !ok {
			return
		}
		defer release()
	}
	plan, plannedAt, ok := s.planRun(ctx, hist, job, &rec, adopted, log)
	if !ok {
		return
	}
	rec.Partitions, rec.Notes = plan.Partitions, append(rec.Notes, plan.Notes...)
	for _, p := range plan.Partitions {
		rec.Lag += max(p.HighWatermark-p.Loaded, 0)
	}
	log.Info("run planned", "tasks", len(plan.Tasks), "lag", rec.Lag)
	rec.Tasks = s.runTasks(ctx, RunRef{ID: rec.ID, Job: job.Name}, job, plan.Tasks, log)
	if ctx.Err() != nil {
		return // left running: adopted by a standby or abandoned at the next start
	}
	s.settle(ctx, fs, job, &rec, plan, plannedAt, log)
	s.compactAfterRun(ctx, job, &rec, log)
	s.finish(ctx, hist, job, rec, log)
}

// lockRun takes the job's lock for the run. When it cannot (ok false), the
// run is over: recorded as failed with the holder named, or left alone
// when ctx ended.
func (s *Scheduler) lockRun(ctx context.Context, lk Locker, hist *History, job Job, rec RunRecord, adopted *InFlightRun, log *slog.Logger) (release func(), ok bool) {
	release, err := lk.LockJob(ctx, job)
	if err == nil {
		return release, true
	}
	if ctx.Err() != nil {
		return nil, false
	}
	if adopted == nil {
		if err := hist.Start(rec); err != nil {
			log.Warn("cannot record the run's start", "err", err)
		}
	}
	log.Warn("run not started: the job's lock is held", "err", err)
	rec.State, rec.Error = StateFailed, "job lock: "+err.Error()
	s.finish(ctx, hist, job, rec, log)
	return nil, false
}

// planRun returns the run's plan and when it was made: the adopted run's,
// or a new one recorded as started and published to the Tracker. When
// planning or publishing fails (ok false) the run is over: recorded as
// failed, or left alone when ctx ended or the leadership was lost.
func (s *Scheduler) planRun(ctx context.Context, hist *History, job Job, rec *RunRecord, adopted *InFlightRun, log *slog.Logger) (plan Plan, plannedAt time.Time, ok bool) {
	if adopted != nil {
		rec.Notes = append(rec.Notes, "adopted by "+s.opts.Name+" after a scheduler failover")
		return Plan{Tasks: adopted.Tasks, Partitions: adopted.Partitions, Notes: adopted.Notes}, adopted.PlannedAt, true
	}
	if err := hist.Start(*rec); err != nil {
		log.Warn("cannot record the run's start", "err", err)
	}
	log.Info("run started", "scheduled", rec.Scheduled)
	plannedAt = s.clock.Now()
	plan, err := s.opts.Engine.Plan(ctx, job)
	if err != nil {
		if ctx.Err() == nil {
			rec.State, rec.Error = StateFailed, "planning: "+err.Error()
			s.finish(ctx, hist, job, *rec, log)
		}
		return Plan{}, time.Time{}, false
	}
	if s.opts.Tracker != nil {
		if err := s.opts.Tracker.Begin(ctx, *rec, job, plan); err != nil {
			if ctx.Err() == nil && !errors.Is(err, ErrNotLeader) {
				rec.State, rec.Error = StateFailed, "publishing the run: "+err.Error()
				s.finish(ctx, hist, job, *rec, log)
			}
			return Plan{}, time.Time{}, false
		}
	}
	return plan, plannedAt, true
}

// settle totals the run's tasks into rec, decides its state, marks the
// complete directories and reports the partitions' lag.
func (s *Scheduler) settle(ctx context.Context, fs vfs.FS, job Job, rec *RunRecord, plan Plan, plannedAt time.Time, log *slog.Logger) {
	var failed []string
	done := map[string]bool{} // partitions whose every task committed
	for _, p := range plan.Partitions {
		done[p.Topic+"/"+strconv.Itoa(int(p.Partition))] = true
	}
	for _, t := range rec.Tasks {
		rec.Records += t.Records
		rec.Bytes += t.Bytes
		if t.State != StateSucceeded {
			done[t.Topic+"/"+strconv.Itoa(int(t.Partition))] = false
			if t.State == StateFailed {
				failed = append(failed, t.Task.String()+": "+t.Error)
			}
		}
	}
	rec.State = StateSucceeded
	if len(failed) > 0 {
		rec.State = StateFailed
		rec.Error = fmt.Sprintf("%d of %d tasks failed after their retries; the next run resumes from the checkpoint. %s",
			len(failed), len(rec.Tasks), strings.Join(failed, "; "))
	}
	c := &completeness{fs: fs, store: writers.NewStore(fs, writers.StoreOptions{Clock: s.clock}), job: job, log: log}
	c.audit, _ = s.opts.Engine.(AuditSource)
	if job.CompleteWhen == jobs.CompleteAudit {
		c.loads = s.loadReader(job)
	}
	marked, err := c.check(ctx, plan.Partitions, plannedAt, done, rec.ID, s.clock.Now())
	rec.Complete = marked
	if err != nil {
		log.Warn("completeness check failed; it is retried after the next run", "err", err)
		rec.Notes = append(rec.Notes, "completeness: "+err.Error())
	}
	s.opts.Metrics.completed(job.Name, len(marked))
	if c.report != nil {
		s.opts.Metrics.auditBooks(job.Name, c.report)
	}
	for _, p := range plan.Partitions {
		lag := p.HighWatermark - p.Loaded
		if done[p.Topic+"/"+strconv.Itoa(int(p.Partition))] {
			lag = 0
		}
		s.opts.Metrics.partitionLag(job.Name, p.Topic, p.Partition, lag)
	}
}

func (s *Scheduler) finish(ctx context.Context, hist *History, job Job, rec RunRecord, log *slog.Logger) {
	rec.Ended = s.clock.Now()
	s.mu.Lock()
	rec.SkippedTicks += s.skipped[job.Name]
	s.mu.Unlock()
	if err := hist.Finish(rec); err != nil {
		log.Error("cannot record the run's end", "err", err)
	}
	if s.opts.Tracker != nil {
		if err := s.opts.Tracker.End(ctx, rec.ID); err != nil {
			log.Warn("cannot remove the run from the tracker", "err", err)
		}
	}
	s.opts.Metrics.runEnded(job.Name, rec.State, rec.Ended.Sub(rec.Started), rec.State == StateSucceeded)
	s.opts.Metrics.loaded(job.Name, rec.Records, rec.Bytes)
	args := []any{"state", rec.State, "records", rec.Records, "bytes", rec.Bytes, "tasks", len(rec.Tasks),
		"skipped_ticks", rec.SkippedTicks, "complete", len(rec.Complete), "duration", rec.Ended.Sub(rec.Started)}
	if s.opts.OnRunEnd != nil {
		s.opts.OnRunEnd(rec)
	}
	if rec.State == StateSucceeded {
		log.Info("run ended", args...)
	} else {
		log.Error("run ended", append(args, "err", rec.Error)...)
	}
}

// runTasks runs the tasks on the loader's runner (jobs.RunTasks), each
// attempt through the Dispatcher: the partitions in parallel, the ranges
// of one partition in order (a manifest may only continue the partition's
// chain, and a worker elsewhere cannot wait for its turn here), each task
// retried with exponential backoff on the scheduler's clock up to the
// job's MaxAttempts. After a range fails for good, the later ranges of its
// partition are not run; the other partitions go on.
func (s *Scheduler) runTasks(ctx context.Context, run RunRef, job Job, tasks []Task, log *slog.Logger) []TaskRecord {
	results := jobs.RunTasks(ctx, tasks, func(ctx context.Context, task Task, attempt int, _ jobs.TurnFunc) (TaskReport, error) {
		return s.opts.Dispatcher.Dispatch(ctx, run, job, task, attempt)
	}, jobs.RunnerOptions[TaskReport]{Retry: job.Retry, Clock: s.clock, Ordered: true, Logger: log,
		OnAttempt: func(_ Task, _ int, d time.Duration, err error) { s.opts.Metrics.taskAttempt(job.Name, err == nil, d) },
		OnTaskEnd: func(r jobs.TaskResult[TaskReport]) {
			if s.opts.OnTaskEnd != nil {
				s.opts.OnTaskEnd(run, taskRecord(r))
			}
		}})
	out := make([]TaskRecord, len(results))
	for i, r := range results {
		out[i] = taskRecord(r)
	}
	return out
}

// taskRecord is the run history's record of a task's outcome.
func taskRecord(r jobs.TaskResult[TaskReport]) TaskRecord {
	rec := TaskRecord{Task: r.Task, State: r.State, Attempts: r.Attempts, Millis: r.Duration.Milliseconds()}
	if r.Err != nil {
		rec.Error = r.Err.Error()
	}
	if r.State == StateSucceeded {
		rec.TaskReport = r.Report
	}
	return rec
}

// loadReader returns the job's load tier reader, kept across runs so that
// each completeness check reads only the manifests committed since the
// last one.
func (s *Scheduler) loadReader(job Job) *audit.LoadReader {
	key := job.Name + "\x00" + job.Output
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.loads[key]
	if r == nil {
		r = new(audit.LoadReader)
		if s.loads == nil {
			s.loads = map[string]*audit.LoadReader{}
		}
		s.loads[key] = r
	}
	return r
}
