package schemaregistry

import "github.com/prometheus/client_golang/prometheus"

// metrics are the registry's Prometheus series, on its own registry (no
// package-level state): served at /metrics of the registry's listener.
type metrics struct {
	reg       *prometheus.Registry
	requests  *prometheus.CounterVec   // by route pattern and HTTP status
	latency   *prometheus.HistogramVec // by route pattern
	records   *prometheus.CounterVec   // _schemas records read, by result
	writes    prometheus.Counter
	raceLost  prometheus.Counter
	schemas   prometheus.Gauge
	reqTooBig prometheus.Counter
	// bodyTimeouts counts requests refused because their body did not
	// arrive within the body timeout.
	bodyTimeouts prometheus.Counter
	// authFailures counts requests refused by Options.Auth, by reason
	// (unauthenticated: 401, forbidden: 403).
	authFailures *prometheus.CounterVec
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_requests_total", Help: "Schema registry HTTP requests by route and status.",
		}, []string{"route", "status"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sluice_registry_request_seconds", Help: "Schema registry request latency by route.",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 9),
		}, []string{"route"}),
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_log_records_total", Help: "Records read from the _schemas topic, by result (applied, rejected: lost a race, skipped: not understood).",
		}, []string{"result"}),
		writes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_registry_log_writes_total", Help: "Batches written to the _schemas topic.",
		}),
		raceLost: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_registry_races_lost_total", Help: "Registrations retried because another instance wrote first.",
		}),
		schemas: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sluice_registry_schemas", Help: "Distinct schemas (ids) known.",
		}),
		reqTooBig: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_registry_requests_too_large_total", Help: "Requests refused because their body exceeded the limit.",
		}),
		bodyTimeouts: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sluice_registry_request_body_timeouts_total", Help: "Requests refused because their body did not arrive within the body timeout.",
		}),
		authFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sluice_registry_auth_failures_total", Help: "Requests refused by authentication (unauthenticated) or permissions (forbidden).",
		}, []string{"reason"}),
	}
	m.reg.MustRegister(m.requests, m.latency, m.records, m.writes, m.raceLost, m.schemas, m.reqTooBig, m.bodyTimeouts, m.authFailures)
	return m
}
