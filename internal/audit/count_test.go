package audit

import (
	"testing"
	"time"
)

// A long-lived producer's counter publishing every minute for longer than
// its cell cap in windows: the published cells of old windows are let go,
// so it never stops counting (before, every cell was kept and, past the
// cap, every record of a new window was dropped); a record late for a
// window let go is counted under a key of its own, so the latest record
// per key (what compaction keeps) still sums to every record.
func TestCounterLetsGoOfPublishedWindows(t *testing.T) {
	c, err := NewCounter(TierProducer, "o", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	c.max = 100
	now := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	c.now = func() time.Time { return now }
	latest := map[string]Count{} // the compacted _audit topic
	publish := func() {
		for _, n := range c.changed() {
			latest[n.Key()] = n
		}
		c.evict() // Reporter.Flush, after the publish succeeded
	}
	first := now
	const minutes = 300 // three times the cap
	for range minutes {
		c.Add("pv", now, 1)
		now = now.Add(time.Minute)
		publish()
	}
	if n := c.Dropped(); n != 0 {
		t.Fatalf("%d records dropped over %d one-minute windows (cap %d)", n, minutes, c.max)
	}
	if n := len(c.cells); n > int(Retain/time.Minute)+2 {
		t.Errorf("%d cells in memory, want about Retain's %d", n, int(Retain/time.Minute))
	}
	// Two records late for the first window (let go long ago), published
	// apart: the second replaces the first's key, not the original count.
	c.Add("pv", first, 1)
	publish()
	c.Add("pv", first.Add(time.Second), 1)
	publish()
	var sum, inFirst int64
	for _, n := range latest {
		sum += n.Messages
		if n.WindowStart == first.UnixMilli() {
			inFirst += n.Messages
		}
	}
	if sum != minutes+2 || inFirst != 3 {
		t.Fatalf("compacted counts sum to %d (first window %d), want %d (3)", sum, inFirst, minutes+2)
	}
}
