package jobs

import "time"

// Retry is the spec's `retry:` block, read by the scheduler: a failed task
// is tried again after Backoff, doubling up to MaxBackoff, until
// MaxAttempts attempts (the first included) have failed.
type Retry struct {
	MaxAttempts int    `yaml:"max_attempts"` // default 3
	Backoff     string `yaml:"backoff"`      // default 1s
	MaxBackoff  string `yaml:"max_backoff"`  // default 1m
}

// Durations returns the parsed backoffs (zero when unset).
func (r Retry) Durations() (backoff, maxBackoff time.Duration) {
	backoff, _ = time.ParseDuration(r.Backoff)
	maxBackoff, _ = time.ParseDuration(r.MaxBackoff)
	return backoff, maxBackoff
}

// Lateness returns allowed_lateness parsed (zero when unset).
func (s *Spec) Lateness() time.Duration {
	d, _ := time.ParseDuration(s.AllowedLateness)
	return d
}

// validateScheduling checks the keys only the scheduler reads (the schedule
// expression itself is checked by the scheduler, which owns the cron parser).
func (s *Spec) validateScheduling(bad badFunc) error {
	if s.Retry.MaxAttempts < 0 {
		return bad("retry.max_attempts", "%d: must be 1 or more (0 means the default, 3)", s.Retry.MaxAttempts)
	}
	for _, f := range []struct{ field, v string }{
		{"retry.backoff", s.Retry.Backoff}, {"retry.max_backoff", s.Retry.MaxBackoff}, {"allowed_lateness", s.AllowedLateness},
	} {
		if f.v == "" {
			continue
		}
		if d, err := time.ParseDuration(f.v); err != nil || d < 0 {
			return bad(f.field, "%q is not a duration such as 30s, 10m or 1h", f.v)
		}
	}
	return nil
}
