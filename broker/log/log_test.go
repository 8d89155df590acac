package log

import (
	"bytes"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// manualClock is the Clock that tests advance.
type manualClock = clock.Manual

func newManualClock() *manualClock { return clock.NewManual(time.UnixMilli(1_700_000_000_000)) }

// testFS is one FS implementation under test, with a fresh data directory.
type testFS struct {
	name string
	fs   vfs.FS
	dir  string
}

func fileSystems(t *testing.T) []testFS {
	return []testFS{
		{"mem", vfs.NewMem(), "/data"},
		{"os", vfs.OS{}, t.TempDir()},
	}
}

func openManager(t testing.TB, fsys vfs.FS, dir string, clock clock.Clock) *Manager {
	t.Helper()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: dir, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// openMemManager opens a Manager on a fresh in-memory FS at /data with a
// manual clock, and returns both (the caller closes the Manager).
func openMemManager(t testing.TB) (*Manager, *manualClock) {
	t.Helper()
	clock := newManualClock()
	return openManager(t, vfs.NewMem(), "/data", clock), clock
}

var tp0 = TopicPartition{"events", 0}

func smallConfig() Config {
	c := DefaultConfig()
	c.SegmentBytes = 4096
	c.IndexIntervalBytes = 256
	return c
}

func readAll(t testing.TB, l *Log, from int64) []byte {
	t.Helper()
	var out []byte
	for off := from; off < l.LogEndOffset(); {
		r, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("read %d: empty region below log end %d", off, l.LogEndOffset())
		}
		out = append(out, b...)
		for p := 0; p < len(b); {
			h := parseHeader(b[p:])
			off = h.lastOffset() + 1
			p += int(h.size())
		}
	}
	return out
}

func TestAppendReadBasic(t *testing.T) {
	for _, f := range fileSystems(t) {
		t.Run(f.name, func(t *testing.T) {
			m := openManager(t, f.fs, f.dir, nil)
			defer m.Close()
			l, err := m.Open(tp0, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			var want []byte
			for i := 0; i < 5; i++ {
				b := simpleBatch(3, 10, 1000, byte('a'+i))
				res, err := l.Append(b, AppendOptions{AssignOffsets: true})
				if err != nil {
					t.Fatal(err)
				}
				if res.BaseOffset != int64(3*i) || res.LastOffset != int64(3*i+2) {
					t.Fatalf("append %d: %+v", i, res)
				}
				want = append(want, b...)
			}
			if leo := l.LogEndOffset(); leo != 15 {
				t.Fatalf("LEO %d", leo)
			}
			if got := readAll(t, l, 0); !bytes.Equal(got, want) {
				t.Fatalf("read %d bytes, want %d", len(got), len(want))
			}
			// A read from the middle of a batch starts with that batch.
			r, err := l.Read(4, 1, 15)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := r.Bytes()
			r.Close()
			if h := parseHeader(b); h.BaseOffset != 3 || int64(len(b)) != h.size() {
				t.Fatalf("read at 4: base %d, %d bytes", h.BaseOffset, len(b))
			}
			if r, err := l.Read(15, 100, 15); err != nil || r.Len() != 0 {
				t.Fatalf("read at LEO: %v %v", r, err)
			}
			if _, err := l.Read(16, 100, 16); !errors.Is(err, ErrOffsetOutOfRange) {
				t.Fatalf("read past LEO: %v", err)
			}
			// maxOffset excludes batches that end at or after it.
			r, _ = l.Read(0, 1<<20, 6)
			if b, _ := r.Bytes(); len(b) != 2*len(want)/5 {
				t.Fatalf("maxOffset 6: %d bytes", len(b))
			}
			r.Close()
		})
	}
}

// TestReopenSameOffsets is the bug of jocko: reopening must return the same
// offsets and data, after a clean close and after an unclean stop.
func TestReopenSameOffsets(t *testing.T) {
	for _, f := range fileSystems(t) {
		for _, clean := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/clean=%v", f.name, clean), func(t *testing.T) {
				dir := f.dir + fmt.Sprintf("/clean-%v", clean)
				m := openManager(t, f.fs, dir, nil)
				l, err := m.Open(tp0, smallConfig())
				if err != nil {
					t.Fatal(err)
				}
				const n = 60
				for i := 0; i < n; i++ {
					if _, err := l.Append(simpleBatch(1+i%4, 50, int64(1000+i), byte(i)), AppendOptions{AssignOffsets: true, LeaderEpoch: int32(i / 20)}); err != nil {
						t.Fatal(err)
					}
				}
				leo := l.LogEndOffset()
				want := readAll(t, l, 0)
				if clean {
					if err := m.Close(); err != nil {
						t.Fatal(err)
					}
				} else {
					if err := l.Flush(); err != nil {
						t.Fatal(err)
					}
					// Abandon the manager without closing: an unclean stop.
				}
				m2 := openManager(t, f.fs, dir, nil)
				defer m2.Close()
				if got := m2.Partitions(); len(got) != 1 || got[0] != tp0 {
					t.Fatalf("partitions %v", got)
				}
				l2, err := m2.Open(tp0, smallConfig())
				if err != nil {
					t.Fatal(err)
				}
				if l2.LogEndOffset() != leo {
					t.Fatalf("LEO after reopen %d, want %d", l2.LogEndOffset(), leo)
				}
				if got := readAll(t, l2, 0); !bytes.Equal(got, want) {
					t.Fatalf("data differs after reopen")
				}
				if e := l2.LatestEpoch(); e != 2 {
					t.Fatalf("latest epoch %d", e)
				}
				res, err := l2.Append(simpleBatch(1, 10, 5000, 'z'), AppendOptions{AssignOffsets: true, LeaderEpoch: 2})
				if err != nil || res.BaseOffset != leo {
					t.Fatalf("append after reopen: %+v %v", res, err)
				}
				if clean && m2.Stats().RecoveryBytesScanned != 0 {
					t.Fatalf("clean reopen scanned %d bytes", m2.Stats().RecoveryBytesScanned)
				}
			})
		}
	}
}
