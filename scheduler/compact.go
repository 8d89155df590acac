package scheduler

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/jobs"
)

// A Compactor is an Engine that compacts a job's small files after its
// runs (jobs.Loader.Compact, per the spec's compact: block). The scheduler
// calls it after a run's completeness check, still under the run's job
// lock; a compaction that fails is a note of the run, retried after the
// next one. LoaderEngine is one.
type Compactor interface {
	// Compact compacts the job's complete directories; a nil report and
	// error when the job asks for no compaction.
	Compact(ctx context.Context, job Job) (*jobs.CompactReport, error)
}

// Compact runs the job's compaction (spec compact:) with the run's job
// lock, the one LockJob took.
func (e *LoaderEngine) Compact(ctx context.Context, job Job) (*jobs.CompactReport, error) {
	spec, err := loaderSpec(job)
	if err != nil {
		return nil, err
	}
	if !spec.Compact.Enabled() {
		return nil, nil
	}
	l, done, err := e.loader(ctx, job)
	if err != nil {
		return nil, err
	}
	defer done()
	e.mu.Lock()
	lk := e.locks[spec]
	e.mu.Unlock()
	if lk != nil {
		l.HoldLock(lk)
		defer l.HoldLock(nil)
	}
	return l.Compact(ctx, jobs.CompactOptions{})
}

// compactAfterRun compacts the job when its engine can; the outcome goes
// into the run's notes and the metrics.
func (s *Scheduler) compactAfterRun(ctx context.Context, job Job, rec *RunRecord, log *slog.Logger) {
	c, ok := s.opts.Engine.(Compactor)
	if !ok || ctx.Err() != nil {
		return
	}
	rep, err := c.Compact(ctx, job)
	if rep == nil && err == nil {
		return
	}
	s.opts.Metrics.compacted(job.Name, rep, err)
	if err != nil {
		log.Warn("compaction failed; it is retried after the next run", "err", err)
		rec.Notes = append(rec.Notes, "compaction: "+err.Error())
		return
	}
	if len(rep.Dirs) > 0 {
		log.Info("compacted", "dirs", len(rep.Dirs), "files_before", rep.FilesBefore, "files_after", rep.FilesAfter, "rows", rep.Rows)
		rec.Notes = append(rec.Notes, fmt.Sprintf("compaction: %d directories, %d files into %d", len(rep.Dirs), rep.FilesBefore, rep.FilesAfter))
	}
}

// compactionMetrics are the scheduler's compaction counters.
type compactionMetrics struct {
	runs     *prometheus.CounterVec // job, state
	filesIn  *prometheus.CounterVec // job
	filesOut *prometheus.CounterVec // job
	bytesIn  *prometheus.CounterVec // job
	rows     *prometheus.CounterVec // job
}

func newCompactionMetrics(reg prometheus.Registerer) *compactionMetrics {
	c := &compactionMetrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_compactions_total",
			Help: "Compactions run after a job's runs, by job and state (succeeded, failed)."}, []string{"job", "state"}),
		filesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_compaction_files_replaced_total",
			Help: "Files replaced by compaction."}, []string{"job"}),
		filesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_compaction_files_written_total",
			Help: "Files the compaction of a directory left (rewritten or kept)."}, []string{"job"}),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_compaction_bytes_rewritten_total",
			Help: "Bytes of the files compaction rewrote."}, []string{"job"}),
		rows: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_compaction_rows_total",
			Help: "Rows compaction rewrote."}, []string{"job"}),
	}
	if reg != nil {
		reg.MustRegister(c.runs, c.filesIn, c.filesOut, c.bytesIn, c.rows)
	}
	return c
}

func (m *Metrics) compacted(job string, rep *jobs.CompactReport, err error) {
	if m == nil || m.compaction == nil {
		return
	}
	c := m.compaction
	if err != nil {
		c.runs.WithLabelValues(job, StateFailed).Inc()
	} else {
		c.runs.WithLabelValues(job, StateSucceeded).Inc()
	}
	if rep != nil {
		c.filesIn.WithLabelValues(job).Add(float64(rep.FilesBefore))
		c.filesOut.WithLabelValues(job).Add(float64(rep.FilesAfter))
		c.bytesIn.WithLabelValues(job).Add(float64(rep.BytesIn))
		c.rows.WithLabelValues(job).Add(float64(rep.Rows))
	}
}
