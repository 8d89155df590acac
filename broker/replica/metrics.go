package replica

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// MetricNames lists the Prometheus metrics a Manager exports.
var MetricNames = []string{
	"sluice_replica_leader_partitions",
	"sluice_replica_under_replicated_partitions",
	"sluice_replica_under_min_isr_partitions",
	"sluice_replica_max_lag_records",
	"sluice_replica_isr_shrinks_total",
	"sluice_replica_isr_expands_total",
	"sluice_replica_truncations_total",
	"sluice_replica_fetcher_bytes_total",
	"sluice_replica_epoch_requests_total",
	"sluice_replica_diverging_epochs_total",
	"sluice_replica_throttled_bytes_total",
}

// metrics are a Manager's counters, and gauges computed at each scrape.
type metrics struct {
	m            *Manager
	isrShrinks   prometheus.Counter
	isrExpands   prometheus.Counter
	truncations  prometheus.Counter
	fetchedBytes prometheus.Counter
	// epochRequests counts OffsetForLeaderEpoch requests sent,
	// divergingEpochs the Fetch answers that named a diverging epoch.
	epochRequests, divergingEpochs prometheus.Counter
	// throttledBytes counts the record bytes charged to the replication
	// throttles, by side (leader, follower).
	throttledBytes *prometheus.CounterVec

	leaders, underReplicated, underMinISR, maxLag *prometheus.Desc
}

func newMetrics(m *Manager) *metrics {
	return &metrics{m: m,
		isrShrinks: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_isr_shrinks_total",
			Help: "ISR changes written by this broker's leaderships that removed replicas."}),
		isrExpands: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_isr_expands_total",
			Help: "ISR changes written by this broker's leaderships that added a replica."}),
		truncations: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_truncations_total",
			Help: "Follower logs cut back to their leader's by leader epoch."}),
		fetchedBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_fetcher_bytes_total",
			Help: "Record-batch bytes the fetchers appended from leaders."}),
		epochRequests: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_epoch_requests_total",
			Help: "OffsetForLeaderEpoch requests the fetchers sent (after OFFSET_OUT_OF_RANGE or a refused append)."}),
		divergingEpochs: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_replica_diverging_epochs_total",
			Help: "Fetch answers naming a diverging epoch (KIP-320), each followed by a cut of the follower's log."}),
		throttledBytes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_replica_throttled_bytes_total",
			Help: "Record bytes of throttled replicas charged to this broker's replication throttles (leader.replication.throttled.rate, follower.replication.throttled.rate)."}, []string{"side"}),
		leaders: prometheus.NewDesc("sluice_replica_leader_partitions",
			"Partitions this broker leads.", nil, nil),
		underReplicated: prometheus.NewDesc("sluice_replica_under_replicated_partitions",
			"Partitions this broker leads whose ISR is smaller than their replica set.", nil, nil),
		underMinISR: prometheus.NewDesc("sluice_replica_under_min_isr_partitions",
			"Partitions this broker leads whose ISR is smaller than min.insync.replicas.", nil, nil),
		maxLag: prometheus.NewDesc("sluice_replica_max_lag_records",
			"Largest lag in records of a follower behind this broker's leader logs (log end minus the follower's).", nil, nil),
	}
}

// Describe implements prometheus.Collector.
func (x *metrics) Describe(ch chan<- *prometheus.Desc) {
	x.isrShrinks.Describe(ch)
	x.isrExpands.Describe(ch)
	x.truncations.Describe(ch)
	x.fetchedBytes.Describe(ch)
	x.epochRequests.Describe(ch)
	x.divergingEpochs.Describe(ch)
	x.throttledBytes.Describe(ch)
	ch <- x.leaders
	ch <- x.underReplicated
	ch <- x.underMinISR
	ch <- x.maxLag
}

// Collect implements prometheus.Collector.
func (x *metrics) Collect(ch chan<- prometheus.Metric) {
	x.isrShrinks.Collect(ch)
	x.isrExpands.Collect(ch)
	x.truncations.Collect(ch)
	x.fetchedBytes.Collect(ch)
	x.epochRequests.Collect(ch)
	x.divergingEpochs.Collect(ch)
	x.throttledBytes.Collect(ch)
	s := x.m.Stats()
	ch <- prometheus.MustNewConstMetric(x.leaders, prometheus.GaugeValue, float64(s.Leaders))
	ch <- prometheus.MustNewConstMetric(x.underReplicated, prometheus.GaugeValue, float64(s.UnderReplicated))
	ch <- prometheus.MustNewConstMetric(x.underMinISR, prometheus.GaugeValue, float64(s.UnderMinISR))
	ch <- prometheus.MustNewConstMetric(x.maxLag, prometheus.GaugeValue, float64(s.MaxLag))
}

// Stats is a snapshot of a Manager's leaderships.
type Stats struct {
	Leaders         int   // partitions led here
	UnderReplicated int   // led here with ISR < replicas
	UnderMinISR     int   // led here with ISR < min.insync.replicas
	MaxLag          int64 // largest log end - follower log end over them (unknown followers count from 0)
	ISRShrinks      int64
	ISRExpands      int64
}

// Stats returns a snapshot of the leaderships' replication state.
func (m *Manager) Stats() Stats {
	var s Stats
	for _, p := range m.partitions() {
		p.mu.Lock()
		if p.applied && p.leader {
			s.Leaders++
			if len(p.isr) < len(p.state.Replicas) {
				s.UnderReplicated++
			}
			if len(p.isr) < m.opts.MinInSync(p.key.topic) {
				s.UnderMinISR++
			}
			leo := p.log.LogEndOffset()
			for _, f := range p.followers {
				s.MaxLag = max(s.MaxLag, leo-max(f.leo, 0))
			}
		}
		p.mu.Unlock()
	}
	s.ISRShrinks = int64(counterValue(m.metrics.isrShrinks))
	s.ISRExpands = int64(counterValue(m.metrics.isrExpands))
	return s
}

func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return 0
	}
	return m.GetCounter().GetValue()
}
