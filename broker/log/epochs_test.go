package log

import (
	"path"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// TestRebuiltEpochsPersist: leader epochs that recovery rebuilds from the
// batch headers (here because leader-epoch-checkpoint was damaged) are
// written back, so a later clean reopen, and a later unclean one, still know
// them.
func TestRebuiltEpochsPersist(t *testing.T) {
	mem := vfs.NewMem()
	cfg := smallConfig()
	cfg.SegmentBytes = 1 << 20 // one segment: recovery scans it all
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, cfg)
	for i := 0; i < 6; i++ {
		mustAppend(t, l, simpleBatch(2, 40, int64(i), byte(i)), int32(1+i/3)) // epoch 1 at 0, epoch 2 at 6
	}
	// A process kill before any checkpoint: the page cache keeps the data,
	// the next open scans the whole segment.
	writeFile(t, mem, path.Join("/data", tp0.dirName(), epochFile), []byte("damaged"))

	check := func(what string, l *Log, latest int32) {
		t.Helper()
		if got := l.LatestEpoch(); got != latest {
			t.Fatalf("%s: latest epoch %d, want %d", what, got, latest)
		}
		if off, ep := l.EndOffsetForEpoch(1); off != 6 || ep != 1 {
			t.Fatalf("%s: end of epoch 1 = (%d, %d), want (6, 1)", what, off, ep)
		}
	}
	// Unclean open: no marker, the scan rebuilds the epochs.
	m = openManager(t, mem, "/data", nil)
	l = mustOpen(t, m, cfg)
	check("rebuilt by recovery", l, 2)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Clean open: nothing is scanned, the epochs come from the file.
	m = openManager(t, mem, "/data", nil)
	l = mustOpen(t, m, cfg)
	if s := m.Stats(); s.CleanOpens != 1 {
		t.Fatalf("expected a clean open, stats %+v", s)
	}
	check("clean reopen", l, 2)
	mustAppend(t, l, simpleBatch(2, 40, 9, 'x'), 3)
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	mem.Crash() // unclean again
	m = openManager(t, mem, "/data", nil)
	defer m.Close()
	l = mustOpen(t, m, cfg)
	check("unclean reopen", l, 3)
}
