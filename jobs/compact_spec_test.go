package jobs

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The compact: block: its values parse with their defaults, and each
// mistake is refused naming its field.
func TestCompactSpec(t *testing.T) {
	base := "name: j\nsource: {topics: t}\ndecode: {format: string}\noutput: {uri: /tmp/x}\n"
	s, err := ParseSpec([]byte(base+"compact: {after: 90m, target_file_bytes: 128MiB}\n"), "")
	if err != nil {
		t.Fatal(err)
	}
	if !s.Compact.Enabled() || s.Compact.AfterDuration() != 90*time.Minute || s.Compact.TargetBytes() != 128<<20 {
		t.Fatalf("compact %+v: after %v, target %d", s.Compact, s.Compact.AfterDuration(), s.Compact.TargetBytes())
	}
	s, err = ParseSpec([]byte(base+"compact: {after: 1h}\n"), "")
	if err != nil || s.Compact.TargetBytes() != DefaultCompactTargetBytes {
		t.Fatalf("default target: %+v %v", s.Compact, err)
	}
	s, err = ParseSpec([]byte(base), "")
	if err != nil || s.Compact.Enabled() {
		t.Fatalf("no compact: block: %+v %v", s.Compact, err)
	}
	for yaml, field := range map[string]string{
		"compact: {after: soon}\n":                      "compact.after",
		"compact: {after: -1h}\n":                       "compact.after",
		"compact: {target_file_bytes: big}\n":           "compact.target_file_bytes",
		"compact: {target_file_bytes: 10B}\n":           "compact.target_file_bytes",
		"compact: {target_file_bytes: 100GiB}\n":        "compact.target_file_bytes",
		"compact: {after: 1h, every: 2h}\n":             "every",
		"partition: {by: none}\ncompact: {after: 1h}\n": "compact",
	} {
		_, err := ParseSpec([]byte(base+yaml), "")
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%q: %v, want an error naming %s", yaml, err, field)
		}
		if err != nil && field != "every" && !errors.Is(err, ErrSpec) {
			t.Errorf("%q: %v is not ErrSpec", yaml, err)
		}
	}
	for in, want := range map[string]int64{"256MiB": 256 << 20, "1GB": 1e9, "4096": 4096, "1.5KiB": 1536} {
		if n, err := ParseByteSize(in); err != nil || n != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, n, err, want)
		}
	}
}
