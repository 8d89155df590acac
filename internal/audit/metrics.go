package audit

import (
	"github.com/prometheus/client_golang/prometheus"
)

// Register adds the report's books to reg, per tier and topic (the
// balanced tiers; the producer tier is what they balance against):
// sluice_audit_tier_latest_balanced_window_seconds, the Unix time of the
// end of the newest window the tier balances, and
// sluice_audit_tier_unbalanced_windows, the windows past the lateness it
// does not (missing or extra).
func (r *Report) Register(reg prometheus.Registerer) error {
	latest := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_audit_tier_latest_balanced_window_seconds",
		Help: "Unix time of the end of the newest window whose tier count balances the producer tier."}, []string{"tier", "topic"})
	behind := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "sluice_audit_tier_unbalanced_windows",
		Help: "Windows past the lateness whose tier count does not balance the producer tier."}, []string{"tier", "topic"})
	for _, w := range r.Windows {
		for t := range w.Tiers {
			if t == TierProducer || informational(t) || w.State == StateClock {
				continue
			}
			behind.WithLabelValues(string(t), w.Topic).Add(0) // present, 0 unless below
		}
	}
	for t, topics := range r.Latest {
		for topic, start := range topics {
			latest.WithLabelValues(string(t), topic).Set(float64(start.Add(r.Window).Unix()))
		}
	}
	for t, topics := range r.Behind {
		for topic, n := range topics {
			behind.WithLabelValues(string(t), topic).Set(float64(n))
		}
	}
	if err := reg.Register(latest); err != nil {
		return err
	}
	return reg.Register(behind)
}
