package log

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

func idemBatch(pid int64, seq int32, n int, clock *manualClock) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = []byte("v")
	}
	return testBatch{values: vals, timestamp: clock.Now().UnixMilli(), producerID: pid, baseSequence: seq}.encode()
}

// TestIdleProducersExpire: producers idle for producer.id.expiration.ms are
// forgotten at a retention pass (also across a restart); active ones stay.
func TestIdleProducersExpire(t *testing.T) {
	fsys, clock := vfs.NewMem(), newManualClock()
	open := func() (*Manager, *Log) {
		m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", Clock: clock, Logger: quietLogger()})
		if err != nil {
			t.Fatal(err)
		}
		cfg := DefaultConfig()
		cfg.ProducerIDExpiration = 24 * time.Hour
		l, err := m.Open(tp0, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return m, l
	}
	m, l := open()
	// Many short-lived producers, and one that keeps producing.
	for pid := int64(100); pid < 1100; pid++ {
		if _, err := l.Append(idemBatch(pid, 0, 1, clock), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	seq := int32(0)
	appendActive := func() error {
		_, err := l.Append(idemBatch(7, seq, 2, clock), AppendOptions{AssignOffsets: true})
		if err == nil {
			seq += 2
		}
		return err
	}
	for h := 0; h < 23; h++ {
		clock.Advance(time.Hour)
		if err := appendActive(); err != nil {
			t.Fatal(err)
		}
		if err := m.RunRetention(); err != nil {
			t.Fatal(err)
		}
	}
	if n := l.Producers(); n != 1001 {
		t.Fatalf("after 23 h: %d producers, want 1001 (none idle for a day yet)", n)
	}
	clock.Advance(time.Hour)
	if err := appendActive(); err != nil {
		t.Fatal(err)
	}
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if n := l.Producers(); n != 1 {
		t.Fatalf("after 24 h: %d producers, want 1 (the active one)", n)
	}
	// An expired producer is unknown: only sequence 0 is accepted.
	if _, err := l.Append(idemBatch(100, 1, 1, clock), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrOutOfOrderSequence) {
		t.Fatalf("expired producer continuing at sequence 1: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// The snapshot written after the expiry leaves them out.
	m, l = open()
	defer m.Close()
	if n := l.Producers(); n != 1 {
		t.Fatalf("after reopen: %d producers, want 1", n)
	}
	// Idle time of a reopened table counts from the first pass.
	for _, step := range []struct {
		advance time.Duration
		want    int
	}{{0, 1}, {23 * time.Hour, 1}, {time.Hour, 0}} {
		clock.Advance(step.advance)
		if err := m.RunRetention(); err != nil {
			t.Fatal(err)
		}
		if n := l.Producers(); n != step.want {
			t.Fatalf("reopened, +%v: %d producers, want %d", step.advance, n, step.want)
		}
	}
}
