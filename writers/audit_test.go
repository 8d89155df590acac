package writers

import (
	"reflect"
	"testing"
	"time"
)

// A split's records counted per minute of record time, in and out of
// order and without a timestamp, reach its manifest: each in its window,
// once, by outcome.
func TestSplitCountsInManifest(t *testing.T) {
	store := NewStore(localFS(t), StoreOptions{})
	split := Split{Topic: "pv", Partition: 0, Start: 0, End: 7}
	w, err := NewSplitWriter(store, split, chainCfg)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 1, 13, 4, 30, 0, time.UTC)
	next := at.Add(time.Minute)
	w.Count(at, 10, Loaded)
	w.Count(at.Add(time.Second), 5, Filtered)
	w.Count(next, 7, Loaded)
	w.Count(at.Add(2*time.Second), 3, Loaded) // back to the first minute
	w.Count(time.UnixMilli(-1), 4, Malformed)
	w.Count(next, 1, DeadLettered)
	w.CountLost(1)
	if _, err := w.Commit(split.End); err != nil {
		t.Fatal(err)
	}
	ms, err := store.Commits("pv", 0)
	if err != nil || len(ms) != 1 || ms[0].Audit == nil {
		t.Fatalf("commits %v %+v", err, ms)
	}
	m0 := at.Truncate(time.Minute).UnixMilli()
	want := &AuditCounts{WindowMs: 60_000, Lost: 1, Windows: []WindowCount{
		{Start: -1, Malformed: 1},
		{Start: m0, Loaded: 2, Bytes: 13, Filtered: 1},
		{Start: m0 + 60_000, Loaded: 1, Bytes: 7, DeadLettered: 1},
	}}
	if !reflect.DeepEqual(ms[0].Audit, want) {
		t.Fatalf("audit counts %+v, want %+v", ms[0].Audit, want)
	}
}
