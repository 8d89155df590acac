package scheduler

import (
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/clock"
)

// Metrics are the scheduler's and workers' Prometheus metrics. A nil
// *Metrics records nothing.
type Metrics struct {
	runs         *prometheus.CounterVec   // job, state
	runsActive   *prometheus.GaugeVec     // job
	runDuration  *prometheus.HistogramVec // job
	ticksSkipped *prometheus.CounterVec   // job
	tasks        *prometheus.CounterVec   // job, state (attempts)
	taskDuration *prometheus.HistogramVec // job
	records      *prometheus.CounterVec   // job
	bytes        *prometheus.CounterVec   // job
	lag          *prometheus.GaugeVec     // job, topic, partition
	complete     *prometheus.CounterVec   // job
	auditLatest  *prometheus.GaugeVec     // job, topic
	auditBehind  *prometheus.GaugeVec     // job, topic
	jobs         prometheus.Gauge
	refused      prometheus.Counter
	compaction   *compactionMetrics // compact.go

	clock       clock.Clock
	mu          sync.Mutex
	lastSuccess map[string]time.Time // job -> end of its last successful run
}

// NewMetrics registers the metrics on reg; clk measures the time since
// each job's last success (nil: clock.Real).
func NewMetrics(reg prometheus.Registerer, clk clock.Clock) *Metrics {
	buckets := prometheus.ExponentialBuckets(0.05, 2, 16)
	m := &Metrics{
		runs: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_scheduler_runs_total",
			Help: "Runs ended, by job and state (succeeded, failed)."}, []string{"job", "state"}),
		runsActive: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_scheduler_runs_running",
			Help: "Runs in flight, by job."}, []string{"job"}),
		runDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_scheduler_run_duration_seconds",
			Help: "Duration of ended runs.", Buckets: buckets}, []string{"job"}),
		ticksSkipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_scheduler_ticks_skipped_total",
			Help: "Ticks skipped because the job's previous run was still going."}, []string{"job"}),
		tasks: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_tasks_total",
			Help: "Task attempts ended, by job and state (succeeded, failed)."}, []string{"job", "state"}),
		taskDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_task_duration_seconds",
			Help: "Duration of task attempts.", Buckets: buckets}, []string{"job"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_loaded_records_total",
			Help: "Records committed to the output."}, []string{"job"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_loaded_bytes_total",
			Help: "Bytes of committed output files."}, []string{"job"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_partition_lag_records",
			Help: "Records between the job's checkpoint and the high watermark read at its last planning."},
			[]string{"job", "topic", "partition"}),
		complete: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_complete_directories_total",
			Help: "Time directories marked _SUCCESS."}, []string{"job"}),
		auditLatest: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_audit_latest_balanced_window_seconds",
			Help: "Unix time of the end of the newest window whose load tier balances the producer tier (jobs with complete_when: audit)."},
			[]string{"job", "topic"}),
		auditBehind: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_audit_unbalanced_windows",
			Help: "Windows past the allowed lateness whose load tier does not balance the producer tier (jobs with complete_when: audit)."},
			[]string{"job", "topic"}),
		jobs: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_scheduler_jobs", Help: "Jobs scheduled."}),
		refused: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_scheduler_specs_refused_total",
			Help: "Job specs refused (unparseable, bad schedule, duplicate name)."}),
		clock: clock.OrReal(clk), lastSuccess: map[string]time.Time{},
	}
	if reg != nil {
		reg.MustRegister(m.runs, m.runsActive, m.runDuration, m.ticksSkipped, m.tasks, m.taskDuration,
			m.records, m.bytes, m.lag, m.complete, m.auditLatest, m.auditBehind, m.jobs, m.refused, (*sinceCollector)(m))
	}
	m.compaction = newCompactionMetrics(reg)
	return m
}

var sinceDesc = prometheus.NewDesc("sluice_scheduler_seconds_since_last_success",
	"Seconds since the job's last successful run ended (jobs that succeeded since this process started).",
	[]string{"job"}, nil)

type sinceCollector Metrics

func (c *sinceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- sinceDesc }

func (c *sinceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	for job, t := range c.lastSuccess {
		ch <- prometheus.MustNewConstMetric(sinceDesc, prometheus.GaugeValue, now.Sub(t).Seconds(), job)
	}
}

func (m *Metrics) runStarted(job string) {
	if m != nil {
		m.runsActive.WithLabelValues(job).Inc()
	}
}

func (m *Metrics) runStopped(job string) {
	if m != nil {
		m.runsActive.WithLabelValues(job).Dec()
	}
}

func (m *Metrics) runEnded(job, state string, d time.Duration, ok bool) {
	if m == nil {
		return
	}
	m.runs.WithLabelValues(job, state).Inc()
	m.runDuration.WithLabelValues(job).Observe(d.Seconds())
	if ok {
		m.mu.Lock()
		m.lastSuccess[job] = m.clock.Now()
		m.mu.Unlock()
	}
}

func (m *Metrics) tickSkipped(job string) {
	if m != nil {
		m.ticksSkipped.WithLabelValues(job).Inc()
	}
}

func (m *Metrics) taskAttempt(job string, ok bool, d time.Duration) {
	if m == nil {
		return
	}
	state := StateSucceeded
	if !ok {
		state = StateFailed
	}
	m.tasks.WithLabelValues(job, state).Inc()
	m.taskDuration.WithLabelValues(job).Observe(d.Seconds())
}

func (m *Metrics) loaded(job string, records, bytes int64) {
	if m != nil {
		m.records.WithLabelValues(job).Add(float64(records))
		m.bytes.WithLabelValues(job).Add(float64(bytes))
	}
}

func (m *Metrics) partitionLag(job, topic string, partition int32, lag int64) {
	if m != nil {
		m.lag.WithLabelValues(job, topic, strconv.Itoa(int(partition))).Set(float64(lag))
	}
}

func (m *Metrics) completed(job string, n int) {
	if m != nil && n > 0 {
		m.complete.WithLabelValues(job).Add(float64(n))
	}
}

// auditBooks exports the load tier's balance of a job's last
// completeness check, per topic with producer counts.
func (m *Metrics) auditBooks(job string, rep *audit.Report) {
	if m == nil {
		return
	}
	topics := map[string]bool{}
	for _, w := range rep.Windows {
		topics[w.Topic] = true
	}
	for topic := range topics {
		if t, ok := rep.Latest[audit.TierLoad][topic]; ok {
			m.auditLatest.WithLabelValues(job, topic).Set(float64(t.Add(rep.Window).Unix()))
		}
		m.auditBehind.WithLabelValues(job, topic).Set(float64(rep.Behind[audit.TierLoad][topic]))
	}
}

func (m *Metrics) jobsChanged(n int) {
	if m != nil {
		m.jobs.Set(float64(n))
	}
}

func (m *Metrics) specRefused() {
	if m != nil {
		m.refused.Inc()
	}
}

// WorkerTask records a task attempt a worker ran (err nil: it committed
// or found the range committed).
func (m *Metrics) WorkerTask(job string, rep TaskReport, d time.Duration, err error) {
	if m == nil {
		return
	}
	m.taskAttempt(job, err == nil, d)
	if err == nil {
		m.loaded(job, rep.Records, rep.Bytes)
	}
}
