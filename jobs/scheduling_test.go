package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The scheduler's keys parse, and bad values name the field.
func TestSpecSchedulingKeys(t *testing.T) {
	s, err := ParseSpec([]byte(goodSpec+"retry:\n  max_attempts: 5\n  backoff: 2s\n  max_backoff: 30s\nallowed_lateness: 10m\n"), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	b, mb := s.Retry.Durations()
	if s.Retry.MaxAttempts != 5 || b != 2*time.Second || mb != 30*time.Second || s.Lateness() != 10*time.Minute {
		t.Fatalf("retry %+v, lateness %v", s.Retry, s.Lateness())
	}
	for extra, field := range map[string]string{
		"retry:\n  max_attempts: -1\n": "retry.max_attempts",
		"retry:\n  backoff: soon\n":    "retry.backoff",
		"retry:\n  tries: 3\n":         "retry.tries",
		"allowed_lateness: -5m\n":      "allowed_lateness",
	} {
		_, err := ParseSpec([]byte(goodSpec+extra), t.TempDir())
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: %v, want an error naming %s", extra, err, field)
		}
	}
}
