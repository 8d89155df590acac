package log

import (
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// TestRegionOffsets checks Region.BaseOffset and LastOffset against the
// batch headers of the bytes the region holds, for reads that start inside
// a batch, stop at maxBytes or at maxOffset, skip batches through the offset
// index, and cross a segment roll.
func TestRegionOffsets(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	cfg.IndexIntervalBytes = 1024
	l := mustOpen(t, m, cfg)
	for i := 0; i < 120; i++ {
		// 1..7 records of 300 bytes: batch sizes vary, so maxBytes cuts at
		// different places.
		mustAppend(t, l, simpleBatch(1+i%7, 300, 1, byte(i)), 0)
	}
	leo := l.LogEndOffset()
	if len(l.segments) < 2 {
		t.Fatalf("want several segments, got %d", len(l.segments))
	}
	checked := 0
	for _, offset := range []int64{0, 1, 5, 17, 100, 233, leo / 2, leo - 3, leo - 1} {
		for _, maxBytes := range []int{1, 2000, 9000, 1 << 20} {
			for _, maxOffset := range []int64{leo, offset + 1, offset + 40} {
				r, err := l.Read(offset, maxBytes, maxOffset)
				if err != nil {
					t.Fatal(err)
				}
				b, err := r.Bytes()
				if err != nil {
					t.Fatal(err)
				}
				wantBase, wantLast, records := int64(-1), int64(-1), int64(0)
				for pos := 0; pos < len(b); {
					h := parseHeader(b[pos:])
					if wantBase < 0 {
						wantBase = h.BaseOffset
					}
					wantLast = h.lastOffset()
					records += int64(h.LastOffsetDelta) + 1
					pos += int(h.size())
				}
				if r.BaseOffset() != wantBase || r.LastOffset() != wantLast {
					t.Fatalf("Read(%d, %d, %d): region offsets [%d, %d], batches [%d, %d]",
						offset, maxBytes, maxOffset, r.BaseOffset(), r.LastOffset(), wantBase, wantLast)
				}
				got := int64(0)
				if r.Len() > 0 {
					got = r.LastOffset() - r.BaseOffset() + 1
				}
				if got != records {
					t.Fatalf("Read(%d, %d, %d): offsets give %d records, batches hold %d", offset, maxBytes, maxOffset, got, records)
				}
				if r.Len() > 0 && (wantBase > offset || wantLast < offset || wantLast >= maxOffset) {
					t.Fatalf("Read(%d, %d, %d): region [%d, %d] does not start at the offset or passes maxOffset",
						offset, maxBytes, maxOffset, wantBase, wantLast)
				}
				_ = r.Close()
				checked++
			}
		}
	}
	if checked == 0 {
		t.Fatal("nothing checked")
	}
}
