package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// keyedRecord is one record of the compaction model; value nil = tombstone.
type keyedRecord struct {
	key   string
	value []byte
}

func keyedBatch(recs []keyedRecord, codec int16, ts, pid int64, seq int32) []byte {
	var raw []byte
	for i, r := range recs {
		var body []byte
		body = append(body, 0)
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(i))
		body = binary.AppendVarint(body, int64(len(r.key)))
		body = append(body, r.key...)
		if r.value == nil {
			body = binary.AppendVarint(body, -1)
		} else {
			body = binary.AppendVarint(body, int64(len(r.value)))
			body = append(body, r.value...)
		}
		body = binary.AppendVarint(body, 0)
		raw = binary.AppendVarint(raw, int64(len(body)))
		raw = append(raw, body...)
	}
	if pid < 0 {
		seq = -1
	}
	rb := kmsg.RecordBatch{PartitionLeaderEpoch: -1, Magic: 2, Attributes: codec, LastOffsetDelta: int32(len(recs) - 1),
		FirstTimestamp: ts, MaxTimestamp: ts + int64(len(recs)-1), ProducerID: pid, FirstSequence: seq,
		NumRecords: int32(len(recs)), Records: compress(codec, raw)}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

func compactConfig() Config {
	cfg := DefaultConfig()
	cfg.SegmentBytes = 700
	cfg.IndexIntervalBytes = 100
	cfg.Compact = true
	cfg.DeleteRetention = time.Hour
	return cfg
}

// compactWorkload appends keyed records (updates of 10 keys, tombstones,
// several codecs, an idempotent producer) and returns offset -> record.
func compactWorkload(t *testing.T, fsys vfs.FS, clock *manualClock, seed uint64, codecs []int16) map[int64]keyedRecord {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 1))
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	l, err := m.Open(tp0, compactConfig())
	if err != nil {
		t.Fatal(err)
	}
	model := map[int64]keyedRecord{}
	seq := int32(0)
	for step := 0; step < 70; step++ {
		n := 1 + rng.IntN(4)
		recs := make([]keyedRecord, n)
		for i := range recs {
			recs[i].key = fmt.Sprintf("k%d", rng.IntN(10))
			if rng.IntN(8) != 0 {
				recs[i].value = []byte(fmt.Sprintf("v%d-%d", step, i))
			}
		}
		codec := codecs[rng.IntN(len(codecs))]
		pid := int64(-1)
		if rng.IntN(4) == 0 {
			pid = 7
		}
		res, err := l.Append(keyedBatch(recs, codec, clock.Now().UnixMilli(), pid, seq), AppendOptions{AssignOffsets: true})
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		if pid >= 0 {
			seq += int32(n)
		}
		for i, r := range recs {
			model[res.BaseOffset+int64(i)] = r
		}
		clock.Advance(time.Second)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	return model
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// readBack is a record read from the log, with its batch's facts.
type readBack struct {
	keyedRecord
	compressedBatch int64 // base offset of its batch if compressed, else -1
}

// readAllRecords reads every record from the log start to the log end.
func readAllRecords(t *testing.T, l *Log) (map[int64]readBack, []int64) {
	t.Helper()
	out := map[int64]readBack{}
	var order []int64
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		r, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil {
			t.Fatal(err)
		}
		if len(b) == 0 {
			t.Fatalf("read at %d below the log end %d returned nothing", off, l.LogEndOffset())
		}
		for len(b) > 0 {
			h := parseHeader(b)
			area, err := decompressRecords(h.Attributes&attrCompressionMask, b[batchHeaderSize:h.size()], maxDecompressed)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := parseRecords(area, &h)
			if err != nil {
				t.Fatal(err)
			}
			for _, rec := range recs {
				if rec.offset < off {
					continue
				}
				if n := len(order); n > 0 && rec.offset <= order[n-1] {
					t.Fatalf("offset %d after %d: offsets must grow", rec.offset, order[n-1])
				}
				rb := readBack{keyedRecord{string(rec.key), bytes.Clone(rec.value)}, -1}
				if h.Attributes&attrCompressionMask != 0 {
					rb.compressedBatch = h.BaseOffset
				}
				out[rec.offset] = rb
				order = append(order, rec.offset)
			}
			off = max(off, h.lastOffset()+1)
			b = b[h.size():]
		}
	}
	return out, order
}

// checkCompacted checks a reopened log against the model: nothing invented
// or moved, the newest record of every key present, every record of the
// active segment present. With strict (after a completed pass), no
// superseded record is left in a closed segment and expired tombstones are
// gone.
func checkCompacted(t *testing.T, l *Log, model map[int64]keyedRecord, strict bool, horizon int64, what string) {
	t.Helper()
	got, order := readAllRecords(t, l)
	newest := map[string]int64{}
	var offsets []int64
	for off, r := range model {
		if off > newest[r.key] || newest[r.key] == 0 {
			newest[r.key] = max(newest[r.key], off)
		}
		offsets = append(offsets, off)
	}
	sort.Slice(offsets, func(i, j int) bool { return offsets[i] < offsets[j] })
	for off, r := range got {
		want, ok := model[off]
		if !ok || want.key != r.key || !bytes.Equal(want.value, r.value) {
			t.Fatalf("%s: offset %d reads %q=%q, the model has %q=%q (present %v)", what, off, r.key, r.value, want.key, want.value, ok)
		}
	}
	l.mu.RLock()
	activeBase := l.active().base
	l.mu.RUnlock()
	expired := func(off int64) bool { return strict && model[off].value == nil && off < activeBase && horizon > 0 }
	for key, off := range newest {
		if _, ok := got[off]; !ok && !expired(off) {
			t.Fatalf("%s: the newest record of %s (offset %d) is missing", what, key, off)
		}
	}
	for _, off := range offsets {
		if _, ok := got[off]; !ok && off >= activeBase {
			t.Fatalf("%s: offset %d of the active segment is missing", what, off)
		}
	}
	// Reads return the same offsets: reading at any offset starts at the
	// first surviving record at or after it.
	for _, off := range offsets {
		i := sort.Search(len(order), func(i int) bool { return order[i] >= off })
		if i == len(order) {
			continue
		}
		if got := firstRecordFrom(t, l, off); got != order[i] {
			t.Fatalf("%s: a consumer reading from %d first gets offset %d, want %d", what, off, got, order[i])
		}
	}
	if !strict {
		return
	}
	latestClosedOf := map[string]int64{}
	for o, mr := range model {
		if o < activeBase {
			if cur, ok := latestClosedOf[mr.key]; !ok || o > cur {
				latestClosedOf[mr.key] = o
			}
		}
	}
	for off, r := range got {
		if off >= activeBase {
			continue
		}
		latestClosed := latestClosedOf[r.key]
		if off != latestClosed {
			t.Fatalf("%s: superseded record %q at %d survived compaction (newest in closed segments: %d)", what, r.key, off, latestClosed)
		}
		if r.value == nil && horizon > 0 && off == latestClosed && model[off].value == nil && expired(off) {
			t.Fatalf("%s: tombstone of %s at %d survived past delete.retention.ms", what, r.key, off)
		}
	}
}

func openCompactLog(t *testing.T, fsys vfs.FS, clock *manualClock) (*Manager, *Log) {
	t.Helper()
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", Clock: clock, Logger: quietLogger()})
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	l, err := m.Open(tp0, compactConfig())
	if err != nil {
		t.Fatalf("reopen log: %v", err)
	}
	return m, l
}

func TestCompactKeepsNewestPerKey(t *testing.T) {
	fsys, clock := vfs.NewMem(), newManualClock()
	model := compactWorkload(t, fsys, clock, 1, []int16{0, 0, 1, 2, 3, 4})
	m, l := openCompactLog(t, fsys, clock)
	before := l.Size()
	res, err := l.Compact()
	if err != nil {
		t.Fatal(err)
	}
	if res.SegmentsCleaned == 0 || res.RecordsRemoved == 0 || l.Size() >= before {
		t.Fatalf("nothing compacted: %+v, size %d -> %d", res, before, l.Size())
	}
	checkCompacted(t, l, model, true, 0, "after a pass")
	// Tombstones go once delete.retention.ms has passed.
	clock.Advance(2 * time.Hour)
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	checkCompacted(t, l, model, true, clock.Now().Add(-time.Hour).UnixMilli(), "after the tombstones expired")
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Reopen: clean, then without a checkpoint (full scan over the holes).
	m, l = openCompactLog(t, fsys, clock)
	checkCompacted(t, l, model, true, clock.Now().Add(-time.Hour).UnixMilli(), "reopened")
	leo := l.LogEndOffset()
	m.Close()
	if err := fsys.Remove("/data/" + tp0.String() + "/" + checkpointFile); err != nil {
		t.Fatal(err)
	}
	m, l = openCompactLog(t, fsys, clock)
	defer m.Close()
	if l.LogEndOffset() != leo {
		t.Fatalf("full recovery of a compacted log: log end %d, want %d", l.LogEndOffset(), leo)
	}
	checkCompacted(t, l, model, true, clock.Now().Add(-time.Hour).UnixMilli(), "recovered without a checkpoint")
	// Appends continue after the holes.
	if _, err := l.Append(keyedBatch([]keyedRecord{{"k1", []byte("x")}}, 0, clock.Now().UnixMilli(), -1, 0), AppendOptions{AssignOffsets: true}); err != nil {
		t.Fatal(err)
	}
}

// TestCompactCrashLoop fails the i-th file-system operation of a cleaner
// pass for every i, as a one-off error and as a crash (what was not synced
// is lost), reopens, and checks that the newest value of every key is there
// and reads return the same offsets; then a clean pass must finish the job.
func TestCompactCrashLoop(t *testing.T) {
	for _, crash := range []bool{false, true} {
		for i := int64(0); ; i++ {
			mem, clock := vfs.NewMem(), newManualClock()
			// Uncompressed and zstd batches: the other codecs are covered
			// above, and their encoders are slow under the race detector.
			model := compactWorkload(t, mem, clock, 2, []int16{0, 0, 4})
			counter := faults.OnIndex(i)
			what := fmt.Sprintf("crash=%v op %d", crash, i)
			efs := vfs.NewFaulty(mem, counter)
			if m, err := OpenManager(ManagerOptions{FS: efs, Dir: "/data", Clock: clock, Logger: quietLogger()}); err == nil {
				if l, err := m.Open(tp0, compactConfig()); err == nil {
					_, _ = l.Compact()
				}
				if !crash {
					_ = m.Close()
				}
			}
			fired, op := counter.Fired()
			if crash {
				mem.Crash()
			}
			m, l := openCompactLog(t, mem, clock)
			checkCompacted(t, l, model, false, 0, what+" ("+op+")")
			if _, err := l.Compact(); err != nil {
				t.Fatalf("%s: a clean pass after the failure: %v", what, err)
			}
			checkCompacted(t, l, model, true, 0, what+": clean pass")
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			if !fired {
				t.Logf("crash=%v: %d operations failed in turn", crash, i)
				break
			}
		}
	}
}

// firstRecordFrom reads as a consumer does from offset off (skipping
// records below it, continuing after each batch) and returns the offset of
// the first record it gets.
func firstRecordFrom(t *testing.T, l *Log, off int64) int64 {
	t.Helper()
	for off < l.LogEndOffset() {
		r, err := l.Read(off, 1, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read at %d: %v", off, err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil || len(b) == 0 {
			t.Fatalf("read at %d: %v, %d bytes", off, err, len(b))
		}
		h := parseHeader(b)
		area, err := decompressRecords(h.Attributes&attrCompressionMask, b[batchHeaderSize:h.size()], maxDecompressed)
		if err != nil {
			t.Fatal(err)
		}
		recs, err := parseRecords(area, &h)
		if err != nil {
			t.Fatal(err)
		}
		for _, rec := range recs {
			if rec.offset >= off {
				return rec.offset
			}
		}
		off = h.lastOffset() + 1
	}
	return -1
}
