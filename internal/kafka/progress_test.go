package kafka

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"
)

// syncBuffer is a bytes.Buffer safe for the reporter goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestProgressReportsRecordsBytesAndRates(t *testing.T) {
	var out syncBuffer
	p := StartProgress(&out, "produced", time.Millisecond)
	p.Add(3, 3000)
	p.Add(2, 2000)
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "produced 5 records (0.0 MB)") {
		if time.Now().After(deadline) {
			p.Stop()
			t.Fatalf("no progress line with 5 records in 10s; got %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	p.Stop()
	line := strings.SplitN(out.String(), "\n", 2)[0]
	for _, want := range []string{"records/s", "MB/s"} {
		if !strings.Contains(line, want) {
			t.Fatalf("progress line %q lacks %q", line, want)
		}
	}
	after := out.String()
	p.Stop() // idempotent
	if out.String() != after {
		t.Fatal("a line was written after Stop")
	}
}

func TestProgressDisabled(t *testing.T) {
	var out syncBuffer
	p := StartProgress(&out, "consumed", 0)
	p.Add(1, 1)
	p.Stop()
	if out.String() != "" {
		t.Fatalf("a zero interval must print nothing, got %q", out.String())
	}
	StartProgress(nil, "consumed", time.Millisecond).Stop()
}
