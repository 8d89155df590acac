package audit

import (
	"testing"
	"time"
)

// A Counter's counts are cumulative per key: the second publish of a
// window carries the whole count, so the latest record per key (what
// compaction keeps) is the count; untimestamped records are counted apart,
// in window -1.
func TestCounterCumulativeAndUntimestamped(t *testing.T) {
	c, err := NewCounter(TierProducer, "o", 10*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 13, 4, 0, 0, time.UTC)
	c.Add("pv", at, 10)
	first := c.changed()
	c.Add("pv", at.Add(time.Minute), 5)
	c.Add("pv", time.UnixMilli(-1), 3)
	second := c.changed()
	if len(first) != 1 || first[0].Messages != 1 || first[0].WindowStart != at.Truncate(10*time.Minute).UnixMilli() {
		t.Fatalf("first publish %+v", first)
	}
	latest := map[string]Count{}
	for _, n := range append(first, second...) {
		latest[n.Key()] = n // compaction: the latest per key
	}
	var msgs, untimestamped int64
	for _, n := range latest {
		if n.WindowStart == -1 {
			untimestamped += n.Messages
		} else {
			msgs += n.Messages
		}
	}
	if msgs != 2 || untimestamped != 1 || len(c.changed()) != 0 {
		t.Fatalf("after compaction: %d timestamped, %d untimestamped records; want 2 and 1 (and nothing left to publish)", msgs, untimestamped)
	}
}

// Balance re-buckets the load tier's one-minute windows into the audit
// window, treats filtered records as accounted for, names dead letters,
// and refuses a window that does not divide the audit window.
func TestBalanceStates(t *testing.T) {
	w := DefaultWindow.Milliseconds()
	start := time.Date(2026, 12, 1, 13, 0, 0, 0, time.UTC).UnixMilli()
	now := time.UnixMilli(start).Add(time.Hour)
	prod := []Count{
		{Tier: TierProducer, Topic: "pv", WindowStart: start, WindowMs: w, Origin: "a", Messages: 10},
		{Tier: TierProducer, Topic: "pv", WindowStart: start, WindowMs: w, Origin: "b", Messages: 5},
		{Tier: TierProducer, Topic: "pv", WindowStart: start + w, WindowMs: w, Origin: "a", Messages: 4},
	}
	load := &Load{Topics: []string{"pv"}, Counts: []Count{
		{Tier: TierLoad, Topic: "pv", WindowStart: start, WindowMs: 60_000, Messages: 9, Filtered: 1},
		{Tier: TierLoad, Topic: "pv", WindowStart: start + 120_000, WindowMs: 60_000, Messages: 5},
		{Tier: TierLoad, Topic: "pv", WindowStart: start + w, WindowMs: 60_000, Messages: 3, DeadLettered: 1},
	}}
	rep, err := Balance(prod, load, Options{Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Windows) != 2 || rep.Windows[0].State != StateBalanced || rep.Windows[1].State != StateMissing ||
		rep.Windows[1].Diff[TierLoad] != -1 || len(rep.Windows[1].Reasons) != 1 || rep.Unbalanced != 1 {
		t.Fatalf("%+v", rep.Windows)
	}
	if rep, err = Balance(prod, load, Options{Now: now, Lateness: 2 * time.Hour}); err != nil || rep.Windows[1].State != StatePending || rep.Unbalanced != 0 {
		t.Fatalf("within the lateness: %v %+v", err, rep)
	}
	if _, err := Balance(prod, load, Options{Now: now, Window: 90 * time.Second}); err == nil {
		t.Fatal("a 90 s audit window over 10 min producer windows: want an error")
	}
}
