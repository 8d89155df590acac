package mirror

import "github.com/prometheus/client_golang/prometheus"

// Metrics are the mirror's Prometheus metrics. A nil *Metrics records nothing.
type Metrics struct {
	records      *prometheus.CounterVec
	bytes        *prometheus.CounterVec
	transactions *prometheus.CounterVec
	skipped      *prometheus.CounterVec
	lag          *prometheus.GaugeVec
	position     *prometheus.GaugeVec
	checkpoints  prometheus.Counter
}

// NewMetrics registers the mirror's metrics on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_mirror_records_total",
			Help: "Records copied in committed transactions, by source topic."}, []string{"topic"}),
		bytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_mirror_bytes_total",
			Help: "Key plus value bytes copied in committed transactions, by source topic."}, []string{"topic"}),
		transactions: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_mirror_transactions_total",
			Help: "Transactions on the target by outcome (commit, abort)."}, []string{"outcome"}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_mirror_skipped_offsets_total",
			Help: "Source offsets skipped because retention or DeleteRecords removed them before they were copied (--on-out-of-range skip)."}, []string{"topic"}),
		lag: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_mirror_lag_offsets",
			Help: "Source high watermark minus the committed mirror position, per source partition."}, []string{"topic", "partition"}),
		position: prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_mirror_position_offset",
			Help: "The committed mirror position (next source offset to copy), per source partition."}, []string{"topic", "partition"}),
		checkpoints: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_mirror_checkpoints_total",
			Help: "Checkpoint records written (one per partition per checkpoint interval with progress)."}),
	}
	if reg != nil {
		reg.MustRegister(m.records, m.bytes, m.transactions, m.skipped, m.lag, m.position, m.checkpoints)
	}
	return m
}
