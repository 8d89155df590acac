package server

import (
	"strconv"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// metrics are the server's Prometheus metrics, registered on a registry of
// their own so that several servers can run in one process (tests).
type metrics struct {
	reg           *prometheus.Registry
	bytesIn       *prometheus.CounterVec
	bytesOut      *prometheus.CounterVec
	recordsIn     *prometheus.CounterVec
	recordsOut    *prometheus.CounterVec
	requests      *prometheus.CounterVec
	latency       *prometheus.HistogramVec
	connsActive   prometheus.Gauge
	connsTotal    prometheus.Counter
	badFrames     prometheus.Counter
	connsRefused  *prometheus.CounterVec
	acceptErrors  prometheus.Counter
	queuedBytes   prometheus.Gauge
	readWaits     prometheus.Counter
	zeroCopyBytes prometheus.Counter
	// authentications counts SASL and TLS authentications by listener,
	// mechanism (PLAIN, SCRAM-SHA-512, TLS) and result (ok, failed, timeout).
	authentications *prometheus.CounterVec

	topics atomic.Pointer[registry] // for the log-end-offset collector
}

func newMetrics() *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		bytesIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_bytes_in_total",
			Help: "Record-batch bytes appended by Produce, per topic."}, []string{"topic"}),
		bytesOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_bytes_out_total",
			Help: "Record-batch bytes sent by Fetch, per topic."}, []string{"topic"}),
		recordsIn: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_records_in_total",
			Help: "Records appended by Produce, per topic."}, []string{"topic"}),
		recordsOut: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_records_out_total",
			Help: "Records sent by Fetch, per topic (from the batch headers of the served range)."}, []string{"topic"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_requests_total",
			Help: "Requests handled, per API."}, []string{"api"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "sluice_broker_request_seconds",
			Help:    "Time from a request's arrival to its answer being written, per API (Fetch includes the long poll).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2.5, 14)}, []string{"api"}),
		connsActive: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_broker_connections",
			Help: "Open client connections."}),
		connsTotal: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_connections_accepted_total",
			Help: "Client connections accepted."}),
		badFrames: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_bad_frames_total",
			Help: "Connections closed because of an oversized, malformed or unsupported request."}),
		connsRefused: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_connections_refused_total",
			Help: "Connections closed as they arrived, per limit crossed (max.connections, max.connections.per.ip)."}, []string{"limit"}),
		acceptErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_accept_errors_total",
			Help: "Failed accepts (for example out of file descriptors), each retried after a backoff."}),
		queuedBytes: prometheus.NewGauge(prometheus.GaugeOpts{Name: "sluice_broker_queued_request_bytes",
			Help: "Request bytes reserved by frames read or being read and not yet answered (bounded by queued.max.request.bytes)."}),
		readWaits: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_request_memory_waits_total",
			Help: "Times a connection stopped reading because queued.max.request.bytes was used up."}),
		authentications: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "sluice_broker_authentications_total",
			Help: "Authentications (SASL, TLS handshakes) by listener, mechanism and result (ok, failed, timeout)."}, []string{"listener", "mechanism", "result"}),
		zeroCopyBytes: prometheus.NewCounter(prometheus.CounterOpts{Name: "sluice_broker_fetch_zero_copy_bytes_total",
			Help: "Fetch record bytes handed to Region.WriteTo (sendfile from the segment file) rather than copied."}),
	}
	m.reg.MustRegister(m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut, m.requests, m.latency,
		m.connsActive, m.connsTotal, m.badFrames, m.zeroCopyBytes, m.connsRefused, m.acceptErrors, m.queuedBytes, m.readWaits, m.authentications, offsetCollector{m},
		prometheus.NewGoCollector(), prometheus.NewProcessCollector(prometheus.ProcessCollectorOpts{}))
	return m
}

func (m *metrics) forgetTopic(name string) {
	for _, v := range []*prometheus.CounterVec{m.bytesIn, m.bytesOut, m.recordsIn, m.recordsOut} {
		v.DeleteLabelValues(name)
	}
}

var (
	leoDesc = prometheus.NewDesc("sluice_broker_log_end_offset", "Log end offset per partition.", []string{"topic", "partition"}, nil)
	lsoDesc = prometheus.NewDesc("sluice_broker_log_start_offset", "Log start offset per partition.", []string{"topic", "partition"}, nil)
	sizDesc = prometheus.NewDesc("sluice_broker_log_size_bytes", "Bytes on disk per partition.", []string{"topic", "partition"}, nil)
)

// offsetCollector reports per-partition offsets at scrape time.
type offsetCollector struct{ m *metrics }

func (c offsetCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- leoDesc
	ch <- lsoDesc
	ch <- sizDesc
}

func (c offsetCollector) Collect(ch chan<- prometheus.Metric) {
	r := c.m.topics.Load()
	if r == nil {
		return
	}
	for _, t := range r.list() {
		for _, p := range t.parts {
			ps := strconv.Itoa(int(p.tp.Partition))
			ch <- prometheus.MustNewConstMetric(leoDesc, prometheus.GaugeValue, float64(p.log.LogEndOffset()), t.name, ps)
			ch <- prometheus.MustNewConstMetric(lsoDesc, prometheus.GaugeValue, float64(p.log.LogStartOffset()), t.name, ps)
			ch <- prometheus.MustNewConstMetric(sizDesc, prometheus.GaugeValue, float64(p.log.Size()), t.name, ps)
		}
	}
}
