package log

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// counters are a Manager's counters, shared by its logs and owned by the
// Manager: others read them through Manager.Stats or Manager.Collector.
// Recovery keeps the three kinds of cut tail apart: torn (a partial last
// write), zeroed (zero-filled space) and corrupt (a complete but invalid batch).
type counters struct {
	RecoveryOpens           atomic.Int64
	CleanOpens              atomic.Int64
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
	IndexLoads              atomic.Int64
	IndexUnloads            atomic.Int64
}

// Stats is a snapshot of a Manager's counters and gauges.
type Stats struct {
	RecoveryOpens           int64 // logs opened with a recovery scan
	CleanOpens              int64 // logs opened from a clean shutdown without a scan
	RecoveryBytesScanned    int64
	RecoveryBatchesScanned  int64
	RecoveryBytesCut        int64
	RecoveredTorn           int64
	RecoveredZeroed         int64
	RecoveredCorrupt        int64
	ProducerBatchesReplayed int64
	SegmentsRolled          int64
	SegmentsDeleted         int64
	Flushes                 int64
	OpenSegmentFiles        int64 // segment file handles open in the file cache
	SegmentFileReopens      int64 // segment files reopened after the cache closed them
	LoadedIndexes           int64 // closed segments whose indexes are in memory
	IndexLoads              int64 // indexes of closed segments read from disk
	IndexUnloads            int64 // indexes of closed segments dropped by the index LRU
}

// Stats returns a snapshot of the manager's counters.
func (m *Manager) Stats() Stats {
	c := m.metrics
	open, reopens := m.cache.stats()
	return Stats{
		RecoveryOpens: c.RecoveryOpens.Load(), CleanOpens: c.CleanOpens.Load(),
		RecoveryBytesScanned: c.RecoveryBytesScanned.Load(), RecoveryBatchesScanned: c.RecoveryBatchesScanned.Load(),
		RecoveryBytesCut: c.RecoveryBytesCut.Load(), RecoveredTorn: c.RecoveredTorn.Load(),
		RecoveredZeroed: c.RecoveredZeroed.Load(), RecoveredCorrupt: c.RecoveredCorrupt.Load(),
		ProducerBatchesReplayed: c.ProducerBatchesReplayed.Load(), SegmentsRolled: c.SegmentsRolled.Load(),
		SegmentsDeleted: c.SegmentsDeleted.Load(), Flushes: c.Flushes.Load(),
		OpenSegmentFiles: int64(open), SegmentFileReopens: reopens,
		LoadedIndexes: int64(m.indexes.len()), IndexLoads: c.IndexLoads.Load(), IndexUnloads: c.IndexUnloads.Load(),
	}
}

// MetricNames lists the Prometheus metrics Collector exports (the README
// documents each).
func MetricNames() []string {
	out := make([]string, 0, len(metricDefs))
	for _, d := range metricDefs {
		out = append(out, d.name)
	}
	return out
}

type metricDef struct {
	name, help string
	gauge      bool
	value      func(Stats) int64
}

var metricDefs = []metricDef{
	{"sluice_log_recovery_opens_total", "Partition logs opened with a recovery scan.", false, func(s Stats) int64 { return s.RecoveryOpens }},
	{"sluice_log_clean_opens_total", "Partition logs opened after a clean shutdown without a scan.", false, func(s Stats) int64 { return s.CleanOpens }},
	{"sluice_log_recovery_scanned_bytes_total", "Bytes validated by recovery scans.", false, func(s Stats) int64 { return s.RecoveryBytesScanned }},
	{"sluice_log_recovery_cut_bytes_total", "Bytes cut from segment tails by recovery.", false, func(s Stats) int64 { return s.RecoveryBytesCut }},
	{"sluice_log_recovery_torn_tails_total", "Segment tails cut because the last batch was incomplete.", false, func(s Stats) int64 { return s.RecoveredTorn }},
	{"sluice_log_recovery_zeroed_tails_total", "Segment tails cut because they were zero-filled.", false, func(s Stats) int64 { return s.RecoveredZeroed }},
	{"sluice_log_recovery_corrupt_tails_total", "Segment tails cut because a complete batch was invalid.", false, func(s Stats) int64 { return s.RecoveredCorrupt }},
	{"sluice_log_segments_rolled_total", "Segments rolled.", false, func(s Stats) int64 { return s.SegmentsRolled }},
	{"sluice_log_segments_deleted_total", "Segments deleted by retention, DeleteRecords or truncation.", false, func(s Stats) int64 { return s.SegmentsDeleted }},
	{"sluice_log_flushes_total", "Log flushes (fsync of the unflushed tail).", false, func(s Stats) int64 { return s.Flushes }},
	{"sluice_log_open_segment_files", "Segment file handles open in the file cache.", true, func(s Stats) int64 { return s.OpenSegmentFiles }},
	{"sluice_log_segment_file_reopens_total", "Segment files reopened after the file cache closed them.", false, func(s Stats) int64 { return s.SegmentFileReopens }},
	{"sluice_log_producer_batches_replayed_total", "Batch headers replayed to rebuild idempotent-producer state.", false, func(s Stats) int64 { return s.ProducerBatchesReplayed }},
	{"sluice_log_loaded_indexes", "Closed segments whose offset and time indexes are held in memory (bounded by the index LRU).", true, func(s Stats) int64 { return s.LoadedIndexes }},
	{"sluice_log_index_unloads_total", "Indexes of closed segments dropped from memory by the index LRU.", false, func(s Stats) int64 { return s.IndexUnloads }},
}

// collector exposes a Manager's Stats to Prometheus.
type collector struct {
	m     *Manager
	descs []*prometheus.Desc
}

// Collector returns a Prometheus collector for the manager's metrics
// (MetricNames). The owner registers it on its registry.
func (m *Manager) Collector() prometheus.Collector {
	c := &collector{m: m}
	for _, d := range metricDefs {
		c.descs = append(c.descs, prometheus.NewDesc(d.name, d.help, nil, nil))
	}
	return c
}

func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *collector) Collect(ch chan<- prometheus.Metric) {
	s := c.m.Stats()
	for i, d := range metricDefs {
		kind := prometheus.CounterValue
		if d.gauge {
			kind = prometheus.GaugeValue
		}
		ch <- prometheus.MustNewConstMetric(c.descs[i], kind, float64(d.value(s)))
	}
}
