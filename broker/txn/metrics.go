package txn

import "github.com/prometheus/client_golang/prometheus"

// The coordinator's Prometheus metrics, computed from Stats at each scrape.
var (
	openDesc = prometheus.NewDesc("sluice_txn_open_transactions",
		"Transactions ongoing or being ended (PrepareCommit, PrepareAbort).", nil, nil)
	oldestDesc = prometheus.NewDesc("sluice_txn_oldest_open_transaction_seconds",
		"Age, on the coordinator's clock, of the oldest open transaction (0: none open).", nil, nil)
	timedOutDesc = prometheus.NewDesc("sluice_txn_timed_out_aborts_total",
		"Transactions the coordinator aborted for passing their transaction.timeout.ms, since start.", nil, nil)
	idsDesc = prometheus.NewDesc("sluice_txn_transactional_ids",
		"Transactional ids the coordinator holds (bounded by transaction.max.ids).", nil, nil)
)

// Collector returns a Prometheus collector of the coordinator's open
// transactions, the age of the oldest, the aborts by timeout and the
// transactional ids held; register it on the broker's registry.
func (c *Coordinator) Collector() prometheus.Collector { return collector{c} }

type collector struct{ c *Coordinator }

func (collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- openDesc
	ch <- oldestDesc
	ch <- timedOutDesc
	ch <- idsDesc
}

func (col collector) Collect(ch chan<- prometheus.Metric) {
	st := col.c.Stats()
	ch <- prometheus.MustNewConstMetric(openDesc, prometheus.GaugeValue, float64(st.Open))
	ch <- prometheus.MustNewConstMetric(oldestDesc, prometheus.GaugeValue, st.OldestOpen.Seconds())
	ch <- prometheus.MustNewConstMetric(timedOutDesc, prometheus.CounterValue, float64(st.TimedOut))
	ch <- prometheus.MustNewConstMetric(idsDesc, prometheus.GaugeValue, float64(st.TransactionalIDs))
}
