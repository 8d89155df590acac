package scheduler

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"path"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// commit writes records at the given times as one committed split.
func commit(t *testing.T, store *writers.Store, part *writers.Partitioner, p int32, start int64, times ...time.Time) {
	t.Helper()
	w, err := writers.NewSplitWriter(store, writers.Split{Topic: "t", Partition: p, Start: start, End: start + int64(len(times))},
		writers.Config{Format: format.Options{Kind: format.JSONLines}, Partitioner: part})
	if err != nil {
		t.Fatal(err)
	}
	for i, at := range times {
		if err := w.Write(nil, map[string]any{"i": i}, format.Meta{Topic: "t", Partition: p, Offset: start + int64(i), Timestamp: at}); err != nil {
			t.Fatal(err)
		}
	}
	if res, err := w.Commit(start + int64(len(times))); err != nil || !res.Won {
		t.Fatalf("commit: %v %+v", err, res)
	}
}

func marker(t *testing.T, fs vfs.FS, dir string) (SuccessRecord, bool) {
	t.Helper()
	var r SuccessRecord
	b, err := vfs.ReadFile(fs, path.Join(dir, SuccessInfo))
	if err != nil {
		return r, false
	}
	if st, err := fs.Stat(path.Join(dir, SuccessMarker)); err != nil || st.Size != 0 {
		t.Fatalf("%s has %s but no empty %s: %+v %v", dir, SuccessInfo, SuccessMarker, st, err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	return r, true
}

// TestCompletenessDaysInZone: day directories in a non-UTC zone; the
// slowest partition holds them back; empty days are marked; records for a
// day already marked are counted late, never re-marked.
func TestCompletenessDaysInZone(t *testing.T) {
	fs, err := filesystem.NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	part, _ := writers.NewPartitioner(writers.ByDay, "@timestamp", "Asia/Tokyo")
	store := writers.NewStore(fs, writers.StoreOptions{})
	c := &completeness{fs: fs, store: store, job: Job{Name: "j", Partition: TimePartition{By: "day", Location: tokyo}, AllowedLateness: time.Hour},
		log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	day := func(d, h int) time.Time { return time.Date(2026, 12, d, h, 0, 0, 0, tokyo) }

	// Partition 0 reaches Dec 4; partition 1 only Dec 2 and lags behind.
	commit(t, store, part, 0, 0, day(1, 10), day(1, 23), day(3, 1), day(4, 2))
	commit(t, store, part, 1, 0, day(1, 5), day(2, 6))
	pos := []PartitionPosition{{Topic: "t", Partition: 0, Loaded: 0, HighWatermark: 4}, {Topic: "t", Partition: 1, Loaded: 0, HighWatermark: 10}}
	marked, err := c.check(context.Background(), pos, day(4, 3), map[string]bool{"t/0": true}, "r1", day(4, 3))
	if err != nil {
		t.Fatal(err)
	}
	// Partition 1 is at Dec 2 00:00 (the start of its newest directory):
	// Dec 1 ends then, and an hour of lateness is still to come.
	if len(marked) != 0 {
		t.Fatalf("marked %v while partition 1 is at Dec 2 00:00", marked)
	}
	// Partition 1 catches up to its high watermark: everything up to the
	// planning time minus the lateness is complete, the empty Dec 3 included
	// for partition 1, and Dec 3 has partition 0's record.
	commit(t, store, part, 1, 2, day(2, 7), day(2, 8), day(2, 9), day(2, 10), day(2, 11), day(2, 12), day(2, 13), day(2, 14))
	marked, err = c.check(context.Background(), pos, day(5, 0).Add(30*time.Minute), map[string]bool{"t/0": true, "t/1": true}, "r2", day(5, 0))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"dt=2026-12-01", "dt=2026-12-02", "dt=2026-12-03"}; len(marked) != 3 || marked[0] != want[0] || marked[2] != want[2] {
		t.Fatalf("marked %v, want %v", marked, want)
	}
	for dir, n := range map[string]int64{"dt=2026-12-01": 3, "dt=2026-12-02": 9, "dt=2026-12-03": 1} {
		r, ok := marker(t, fs, dir)
		if !ok || r.Records != n || !r.Start.Equal(time.Date(2026, 12, r.Start.In(tokyo).Day(), 0, 0, 0, 0, tokyo)) {
			t.Errorf("%s: %v %+v, want %d records", dir, ok, r, n)
		}
	}
	if _, ok := marker(t, fs, "dt=2026-12-04"); ok {
		t.Fatal("Dec 4 marked at Dec 5 00:30 with an hour of lateness (it may be marked from 01:00)")
	}
	// A late record for Dec 2 (already marked): counted late, not re-marked.
	commit(t, store, part, 0, 4, day(2, 20))
	if _, err := c.check(context.Background(), pos, day(5, 3), map[string]bool{"t/0": true, "t/1": true}, "r3", day(5, 3)); err != nil {
		t.Fatal(err)
	}
	st, err := c.load()
	if err != nil {
		t.Fatal(err)
	}
	if st.Late != 1 {
		t.Fatalf("late = %d, want 1", st.Late)
	}
	if r, _ := marker(t, fs, "dt=2026-12-02"); r.Records != 9 {
		t.Fatalf("Dec 2 re-marked: %+v", r)
	}
	if r, ok := marker(t, fs, "dt=2026-12-04"); !ok || r.Records != 1 || r.Run != "r3" {
		t.Fatalf("Dec 4 at Dec 5 03:00: %v %+v", ok, r)
	}
}

// The audit's hour rule: every topic's load tier (loaded + filtered) must
// equal its producer tier over the windows starting in the hour; topics
// do not make up for each other, untimestamped and outside windows do not
// count, and a window crossing the hour's edge is compared whole: the hour
// balances once that window's part outside it is loaded too (before, such
// an hour was never decided, whatever was loaded).
func TestAuditBooksBalanced(t *testing.T) {
	h0 := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	h1 := h0.Add(time.Hour)
	ms := func(tm time.Time) int64 { return tm.UnixMilli() }
	prod := func(topic string, at time.Time, width time.Duration, n int64) audit.Count {
		return audit.Count{Tier: audit.TierProducer, Topic: topic, WindowStart: ms(at), WindowMs: width.Milliseconds(), Messages: n}
	}
	load := func(topic string, at time.Time, loaded, filtered int64) audit.Count {
		return audit.Count{Tier: audit.TierLoad, Topic: topic, WindowStart: ms(at), WindowMs: time.Minute.Milliseconds(), Messages: loaded, Filtered: filtered}
	}
	outside := []audit.Count{prod("a", h1, 10*time.Minute, 7), {Tier: audit.TierProducer, Topic: "a", WindowStart: -1, WindowMs: 600000, Messages: 9}}
	for _, c := range []struct {
		name     string
		producer []audit.Count
		load     []audit.Count
		want     bool
	}{
		{"balanced, filtered records included", append([]audit.Count{prod("a", h0, 10*time.Minute, 5), prod("b", h0.Add(50*time.Minute), 10*time.Minute, 2)}, outside...),
			[]audit.Count{load("a", h0, 3, 1), load("a", h0.Add(9*time.Minute), 1, 0), load("b", h0.Add(59*time.Minute), 2, 0)}, true},
		{"one short", []audit.Count{prod("a", h0, 10*time.Minute, 5)}, []audit.Count{load("a", h0, 4, 0)}, false},
		{"topics do not make up for each other", []audit.Count{prod("a", h0, 10*time.Minute, 5), prod("b", h0, 10*time.Minute, 5)},
			[]audit.Count{load("a", h0, 6, 0), load("b", h0, 4, 0)}, false},
		{"a window across the hour's end, loaded whole", []audit.Count{prod("a", h0.Add(56*time.Minute), 7*time.Minute, 3)},
			[]audit.Count{load("a", h0.Add(56*time.Minute), 2, 0), load("a", h1.Add(2*time.Minute), 1, 0)}, true},
		{"a window across the hour's end, its part after not loaded", []audit.Count{prod("a", h0.Add(56*time.Minute), 7*time.Minute, 3)},
			[]audit.Count{load("a", h0.Add(56*time.Minute), 2, 0)}, false},
		{"hourly windows in a zone of +05:30", []audit.Count{prod("a", h0.Add(-30*time.Minute), time.Hour, 4), prod("a", h0.Add(30*time.Minute), time.Hour, 6)},
			[]audit.Count{load("a", h0.Add(-20*time.Minute), 4, 0), load("a", h0.Add(40*time.Minute), 5, 1)}, true},
		{"a window across the hour's start", []audit.Count{prod("a", h0.Add(-4*time.Minute), 7*time.Minute, 3)},
			[]audit.Count{load("a", h0.Add(2*time.Minute), 0, 0)}, false},
		{"empty hour", outside, nil, true},
	} {
		b := &auditBooks{topics: []string{"a", "b"}, producer: c.producer, load: audit.Load{Counts: c.load}}
		if _, _, ok := b.balanced(h0, h1); ok != c.want {
			t.Errorf("%s: balanced %v, want %v", c.name, ok, c.want)
		}
	}
}
