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
	if s.CompleteRule() != CompleteLoaded {
		t.Fatalf("complete_when unset is %q, want %q", s.CompleteRule(), CompleteLoaded)
	}
	for _, v := range []string{CompleteLoaded, CompleteAudit} {
		if s, err := ParseSpec([]byte(goodSpec+"complete_when: "+v+"\n"), t.TempDir()); err != nil || s.CompleteRule() != v {
			t.Fatalf("complete_when: %s: %v", v, err)
		}
	}
	for extra, field := range map[string]string{
		"retry:\n  max_attempts: -1\n": "retry.max_attempts",
		"retry:\n  backoff: soon\n":    "retry.backoff",
		"retry:\n  tries: 3\n":         "retry.tries",
		"allowed_lateness: -5m\n":      "allowed_lateness",
		"complete_when: balanced\n":    "complete_when",
	} {
		_, err := ParseSpec([]byte(goodSpec+extra), t.TempDir())
		if !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: %v, want an error naming %s", extra, err, field)
		}
	}
	noDirs := strings.Replace(goodSpec, "by: hour", "by: none", 1) + "complete_when: audit\n"
	if _, err := ParseSpec([]byte(noDirs), t.TempDir()); !errors.Is(err, ErrSpec) || !strings.Contains(err.Error(), "complete_when: audit marks time directories") {
		t.Errorf("complete_when: audit with partition.by none: %v, want refused", err)
	}
}
