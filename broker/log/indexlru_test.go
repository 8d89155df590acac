package log

import (
	"bytes"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// TestIndexMemoryBounded: retention passes and reads load the indexes of
// closed segments; the index LRU keeps at most MaxLoadedIndexes of them in
// memory, and reads stay exact after an unload.
func TestIndexMemoryBounded(t *testing.T) {
	const partitions, bound = 30, 8
	mem := vfs.NewMem()
	clock := newManualClock()
	cfg := smallConfig() // 4 KiB segments
	cfg.RetentionMs = 365 * 24 * time.Hour
	m, err := OpenManager(ManagerOptions{FS: mem, Dir: "/data", Clock: clock, MaxLoadedIndexes: bound})
	if err != nil {
		t.Fatal(err)
	}
	want := map[int32][]byte{}
	for p := int32(0); p < partitions; p++ {
		l, err := m.Open(TopicPartition{"t", p}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ { // ~4 segments
			mustAppend(t, l, simpleBatch(2, 60, clock.Now().UnixMilli(), byte(i)), 0)
		}
		l.SetHighWatermark(l.LogEndOffset())
		want[p] = readAll(t, l, 0)
		if n := m.Stats().LoadedIndexes; n > bound {
			t.Fatalf("after appends to %d partitions: %d loaded indexes, bound %d", p+1, n, bound)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// A clean reopen loads no closed segment's index; retention loads them all.
	m, err = OpenManager(ManagerOptions{FS: mem, Dir: "/data", Clock: clock, MaxLoadedIndexes: bound})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs []*Log
	for p := int32(0); p < partitions; p++ {
		l, err := m.Open(TopicPartition{"t", p}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	s := m.Stats()
	if s.LoadedIndexes > bound || s.IndexLoads < partitions || s.IndexUnloads == 0 {
		t.Fatalf("after a retention pass over %d partitions: %+v (bound %d)", partitions, s, bound)
	}
	for p, l := range logs {
		if got := readAll(t, l, 0); !bytes.Equal(got, want[int32(p)]) {
			t.Fatalf("partition %d reads differently after index unloads", p)
		}
		if n := m.Stats().LoadedIndexes; n > bound {
			t.Fatalf("reading: %d loaded indexes, bound %d", n, bound)
		}
	}
}
