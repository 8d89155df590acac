package log

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the counters of a Manager, shared by its logs. Recovery keeps
// the three kinds of cut tail apart: torn (a partial last write), zeroed
// (zero-filled space) and corrupt (a complete but invalid batch).
type Metrics struct {
	RecoveryOpens           atomic.Int64 // logs opened with a recovery scan
	CleanOpens              atomic.Int64 // logs opened from a clean shutdown without a scan
	RecoveryBytesScanned    atomic.Int64
	RecoveryBatchesScanned  atomic.Int64
	RecoveryBytesCut        atomic.Int64
	RecoveredTorn           atomic.Int64
	RecoveredZeroed         atomic.Int64
	RecoveredCorrupt        atomic.Int64
	ProducerBatchesReplayed atomic.Int64
	SegmentsRolled          atomic.Int64
	SegmentsDeleted         atomic.Int64
	Flushes                 atomic.Int64
}

// collector exposes Metrics and the file cache to Prometheus.
type collector struct {
	m     *Metrics
	cache *fileCache
	descs map[string]*prometheus.Desc
}

var metricHelp = map[string]string{
	"sluice_log_recovery_opens_total":            "Partition logs opened with a recovery scan.",
	"sluice_log_clean_opens_total":               "Partition logs opened after a clean shutdown without a scan.",
	"sluice_log_recovery_scanned_bytes_total":    "Bytes validated by recovery scans.",
	"sluice_log_recovery_cut_bytes_total":        "Bytes cut from segment tails by recovery.",
	"sluice_log_recovery_torn_tails_total":       "Segment tails cut because the last batch was incomplete.",
	"sluice_log_recovery_zeroed_tails_total":     "Segment tails cut because they were zero-filled.",
	"sluice_log_recovery_corrupt_tails_total":    "Segment tails cut because a complete batch was invalid.",
	"sluice_log_segments_rolled_total":           "Segments rolled.",
	"sluice_log_segments_deleted_total":          "Segments deleted by retention, DeleteRecords or truncation.",
	"sluice_log_flushes_total":                   "Log flushes (fsync of the unflushed tail).",
	"sluice_log_open_segment_files":              "Segment file handles open in the file cache.",
	"sluice_log_segment_file_reopens_total":      "Segment files reopened after the file cache closed them.",
	"sluice_log_producer_batches_replayed_total": "Batch headers replayed to rebuild idempotent-producer state.",
}

// Collector returns a Prometheus collector for the manager's metrics.
func (m *Manager) Collector() prometheus.Collector {
	c := &collector{m: m.metrics, cache: m.cache, descs: map[string]*prometheus.Desc{}}
	for name, help := range metricHelp {
		c.descs[name] = prometheus.NewDesc(name, help, nil, nil)
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	open, reopens := c.cache.stats()
	counter := func(name string, v int64) {
		ch <- prometheus.MustNewConstMetric(c.descs[name], prometheus.CounterValue, float64(v))
	}
	m := c.m
	counter("sluice_log_recovery_opens_total", m.RecoveryOpens.Load())
	counter("sluice_log_clean_opens_total", m.CleanOpens.Load())
	counter("sluice_log_recovery_scanned_bytes_total", m.RecoveryBytesScanned.Load())
	counter("sluice_log_recovery_cut_bytes_total", m.RecoveryBytesCut.Load())
	counter("sluice_log_recovery_torn_tails_total", m.RecoveredTorn.Load())
	counter("sluice_log_recovery_zeroed_tails_total", m.RecoveredZeroed.Load())
	counter("sluice_log_recovery_corrupt_tails_total", m.RecoveredCorrupt.Load())
	counter("sluice_log_segments_rolled_total", m.SegmentsRolled.Load())
	counter("sluice_log_segments_deleted_total", m.SegmentsDeleted.Load())
	counter("sluice_log_flushes_total", m.Flushes.Load())
	counter("sluice_log_segment_file_reopens_total", reopens)
	counter("sluice_log_producer_batches_replayed_total", m.ProducerBatchesReplayed.Load())
	ch <- prometheus.MustNewConstMetric(c.descs["sluice_log_open_segment_files"], prometheus.GaugeValue, float64(open))
}
