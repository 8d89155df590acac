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

// The values of complete_when.
const (
	CompleteLoaded = "loaded" // every partition loaded past the directory's end (the default)
	CompleteAudit  = "audit"  // that, and the loaded count balances the producer tier's
)

// CompleteRule returns complete_when, CompleteLoaded when unset.
func (s *Spec) CompleteRule() string {
	if s.CompleteWhen == "" {
		return CompleteLoaded
	}
	return s.CompleteWhen
}

// Bounds of the scheduler's keys: beyond them a value is a mistake.
const (
	maxRetryAttempts   = 100
	maxRetryBackoff    = 24 * time.Hour
	maxAllowedLateness = 30 * 24 * time.Hour
)

// validateScheduling checks the keys only the scheduler reads; the schedule
// goes through ParseSchedule, the one validator the scheduler's scan also
// uses.
func (s *Spec) validateScheduling(bad badFunc) error {
	if s.Schedule != "" {
		if _, err := ParseSchedule(s.Schedule, s.minInterval); err != nil {
			return err
		}
	}
	switch s.CompleteWhen {
	case "", CompleteLoaded:
	case CompleteAudit:
		if s.Partition.By == "none" {
			return bad("complete_when", "audit marks time directories complete: it needs partition.by hour or day, not none")
		}
	default:
		return bad("complete_when", "%q: want %s (the default) or %s", s.CompleteWhen, CompleteLoaded, CompleteAudit)
	}
	if s.Retry.MaxAttempts < 0 || s.Retry.MaxAttempts > maxRetryAttempts {
		return bad("retry.max_attempts", "%d: must be 1 to %d (0 means the default, 3)", s.Retry.MaxAttempts, maxRetryAttempts)
	}
	var ds [3]time.Duration
	for i, f := range []struct {
		field, v string
		limit    time.Duration
	}{
		{"retry.backoff", s.Retry.Backoff, maxRetryBackoff}, {"retry.max_backoff", s.Retry.MaxBackoff, maxRetryBackoff},
		{"allowed_lateness", s.AllowedLateness, maxAllowedLateness},
	} {
		if f.v == "" {
			continue
		}
		d, err := time.ParseDuration(f.v)
		if err != nil || d < 0 {
			return bad(f.field, "%q is not a duration such as 30s, 10m or 1h", f.v)
		}
		if d > f.limit {
			return bad(f.field, "%q is longer than %v", f.v, f.limit)
		}
		ds[i] = d
	}
	if ds[0] > 0 && ds[1] > 0 && ds[0] > ds[1] {
		return bad("retry.max_backoff", "%q is shorter than retry.backoff %q", s.Retry.MaxBackoff, s.Retry.Backoff)
	}
	return nil
}
