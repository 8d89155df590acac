package log

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// segmentBytes returns n valid batches as a segment file starting at offset base.
func segmentBytes(base int64, n int) []byte {
	var out []byte
	for i := 0; i < n; i++ {
		b := simpleBatch(2, 30, int64(i), byte(i))
		setBaseOffset(b, base+int64(2*i))
		out = append(out, b...)
	}
	return out
}

func writeFile(t testing.TB, fsys vfs.FS, name string, b []byte) {
	t.Helper()
	f, err := fsys.Create(name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, 0); err != nil {
		t.Fatal(err)
	}
	f.Sync()
	f.Close()
}

// TestRecoveryTails: recovery cuts a torn, a zeroed and a corrupt tail at the
// last valid batch, and counts the three apart.
func TestRecoveryTails(t *testing.T) {
	valid := segmentBytes(0, 10)
	corrupt := simpleBatch(2, 30, 1, 'c')
	setBaseOffset(corrupt, 20)
	corrupt[len(corrupt)-5] ^= 0xff
	cases := []struct {
		name string
		tail []byte
		kind func(Stats) int64
	}{
		{"torn", simpleBatch(2, 30, 1, 't')[:50], func(s Stats) int64 { return s.RecoveredTorn }},
		{"torn-body", func() []byte { b := simpleBatch(2, 30, 1, 't'); setBaseOffset(b, 20); return b[:len(b)-7] }(), func(s Stats) int64 { return s.RecoveredTorn }},
		{"zeroed", make([]byte, 4096), func(s Stats) int64 { return s.RecoveredZeroed }},
		{"corrupt", corrupt, func(s Stats) int64 { return s.RecoveredCorrupt }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			mem := vfs.NewMem()
			mem.MkdirAll("/data/events-0")
			writeFile(t, mem, "/data/events-0/00000000000000000000.log", append(append([]byte(nil), valid...), c.tail...))
			m := openManager(t, mem, "/data", nil)
			l := mustOpen(t, m, DefaultConfig())
			if l.LogEndOffset() != 20 || l.Size() != int64(len(valid)) {
				t.Fatalf("LEO %d size %d", l.LogEndOffset(), l.Size())
			}
			if c.kind(m.Stats()) != 1 || m.Stats().RecoveryBytesCut != int64(len(c.tail)) {
				t.Fatalf("metrics %+v", m.Stats())
			}
			if !bytes.Equal(readAll(t, l, 0), valid) {
				t.Fatal("valid prefix changed")
			}
			mustAppend(t, l, simpleBatch(1, 5, 1, 'n'), 0)
			if err := m.Close(); err != nil {
				t.Fatal(err)
			}
			// Recovery is idempotent and the clean restart scans nothing.
			m2 := openManager(t, mem, "/data", nil)
			defer m2.Close()
			l2 := mustOpen(t, m2, DefaultConfig())
			if l2.LogEndOffset() != 21 || m2.Stats().RecoveryBytesScanned != 0 {
				t.Fatalf("second open: LEO %d scanned %d", l2.LogEndOffset(), m2.Stats().RecoveryBytesScanned)
			}
		})
	}
}

// TestRecoveryScansOnlyTheTail: after an unclean stop, recovery validates only
// what was appended after the last checkpoint.
func TestRecoveryScansOnlyTheTail(t *testing.T) {
	dir := t.TempDir()
	m := openManager(t, vfs.OS{}, dir, nil)
	cfg := DefaultConfig()
	cfg.SegmentBytes = 64 << 10
	l := mustOpen(t, m, cfg)
	for i := 0; i < 500; i++ {
		mustAppend(t, l, simpleBatch(4, 100, int64(i), byte(i)), 0)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	var tail int64
	for i := 0; i < 3; i++ {
		b := simpleBatch(4, 100, 1, 'x')
		tail += int64(len(b))
		mustAppend(t, l, b, 0)
	}
	want := readAll(t, l, 0)
	// Unclean stop: the manager is abandoned.
	m2 := openManager(t, vfs.OS{}, dir, nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, cfg)
	if got := m2.Stats().RecoveryBytesScanned; got != tail {
		t.Fatalf("recovery scanned %d bytes, the unflushed tail is %d (log %d bytes)", got, tail, l2.Size())
	}
	if !bytes.Equal(readAll(t, l2, 0), want) {
		t.Fatal("data differs after recovery")
	}
	if len(l2.segments) < 3 {
		t.Fatalf("expected several segments, got %d", len(l2.segments))
	}
}

// TestRecoveryCorruptIndex: a garbage index file is not trusted.
func TestRecoveryCorruptIndex(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	cfg := smallConfig()
	l := mustOpen(t, m, cfg)
	for i := 0; i < 100; i++ {
		mustAppend(t, l, simpleBatch(1, 100, int64(i), byte(i)), 0)
	}
	want := readAll(t, l, 0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	// Point every entry of the first segment's index at a wrong position.
	b, _ := readWhole(mem, "/data/events-0/00000000000000000000.index")
	for i := 4; i+4 <= len(b); i += 8 {
		b[i+3] ^= 0x10
	}
	writeFile(t, mem, "/data/events-0/00000000000000000000.index", b)
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, cfg)
	if !bytes.Equal(readAll(t, l2, 0), want) {
		t.Fatal("a corrupt index changed what is read")
	}
	for off := int64(0); off < 100; off += 7 {
		r, err := l2.Read(off, 1, 100)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := r.Bytes()
		r.Close()
		if parseHeader(b).BaseOffset != off {
			t.Fatalf("read %d returned batch %d", off, parseHeader(b).BaseOffset)
		}
	}
}

func FuzzValidateBatch(f *testing.F) {
	for _, codec := range []int16{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd, codecSnappyXerial} {
		f.Add(testBatch{values: [][]byte{[]byte("k"), []byte("value")}, codec: codec, producerID: -1}.encode())
	}
	f.Add(testBatch{values: [][]byte{{1}}, producerID: 9, baseSequence: 3}.encode())
	f.Add(testBatch{values: [][]byte{{1}}, producerID: -1, control: true}.encode())
	f.Add(append(simpleBatch(2, 3, 1, 'a'), simpleBatch(1, 3, 1, 'b')...))
	f.Add(simpleBatch(2, 3, 1, 'a')[:70])
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		in := append([]byte(nil), b...)
		hdrs, records, err := splitBatches(in, 1<<20, true, nil)
		if err != nil {
			if !IsCorrupt(err) && !isValidationError(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		if records <= 0 || len(hdrs) == 0 {
			t.Fatalf("accepted %d batches with %d records", len(hdrs), records)
		}
		// Rewriting the fields outside the CRC (and LogAppendTime) keeps a batch valid.
		pos := 0
		for _, h := range hdrs {
			one := in[pos : pos+int(h.size())]
			firstRecordAtOrAfter(one, &h, 0, 0, nil) // walks (and decompresses) records: no panic
			setBaseOffset(one, 1234)
			setLeaderEpoch(one, 7)
			setLogAppendTime(one, 99)
			if _, err := validateClientBatch(one, 1<<20); err != nil {
				t.Fatalf("rewritten batch invalid: %v", err)
			}
			pos += int(h.size())
		}
	})
}

func isValidationError(err error) bool {
	for _, e := range []error{ErrBatchTooLarge, ErrInvalidRecord, ErrUnsupportedCompression} {
		if errorsIs(err, e) {
			return true
		}
	}
	return false
}

func FuzzRecoverSegment(f *testing.F) {
	valid := segmentBytes(0, 5)
	f.Add(valid)
	f.Add(append(append([]byte(nil), valid...), valid[:40]...))
	f.Add(append(append([]byte(nil), valid...), make([]byte, 100)...))
	bad := append([]byte(nil), valid...)
	bad[len(bad)-3] ^= 1
	f.Add(bad)
	f.Add(segmentBytes(7, 2)) // wrong base offset for segment 0
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff})
	f.Fuzz(fuzzRecoverBody)
}

func fuzzRecoverBody(t *testing.T, b []byte) {
	{
		if len(b) > 1<<20 {
			return
		}
		mem := vfs.NewMem()
		mem.MkdirAll("/data/events-0")
		writeFile(t, mem, "/data/events-0/00000000000000000000.log", b)
		for _, d := range []string{"/", "/data", "/data/events-0"} {
			mem.SyncDir(d) // the directory existed before the crash being recovered from
		}
		f, _ := mem.Open("/data/events-0/00000000000000000000.log")
		res, err := recoverSegment(f, int64(len(b)), 0, 0, nil)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		if res.end > int64(len(b)) || (res.tail == tailNone) != (res.end == int64(len(b))) {
			t.Fatalf("result %+v for %d bytes", res, len(b))
		}
		// Through the log: open recovers to res, and a second open changes nothing.
		for round := 0; round < 2; round++ {
			m, err := OpenManager(ManagerOptions{FS: mem, Dir: "/data"})
			if err != nil {
				t.Fatal(err)
			}
			l, err := m.Open(tp0, DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			if l.LogEndOffset() != res.next || l.Size() != res.end {
				t.Fatalf("round %d: LEO %d size %d, scan said %d/%d", round, l.LogEndOffset(), l.Size(), res.next, res.end)
			}
			if round == 1 && m.Stats().RecoveryBytesCut != 0 {
				t.Fatal("second recovery cut again")
			}
			if round == 0 {
				mem.Crash() // unclean: the second open must recover to the same state
			}
		}
	}
}

var _ = fmt.Sprint

// TestMissingIndexesRebuilt: lost index files are rebuilt from the segment,
// so reads and time-based lookups stay right.
func TestMissingIndexesRebuilt(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, smallConfig())
	for i := 0; i < 100; i++ {
		mustAppend(t, l, simpleBatch(1, 100, int64(1000+i), byte(i)), 0)
	}
	want := readAll(t, l, 0)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	names, _ := vfs.ListNames(mem, "/data/events-0")
	for _, n := range names {
		if strings.HasSuffix(n, indexSuffix) || strings.HasSuffix(n, timeIndexSuffix) {
			mem.Remove("/data/events-0/" + n)
		}
	}
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, smallConfig())
	if !bytes.Equal(readAll(t, l2, 0), want) {
		t.Fatal("data differs")
	}
	if off, ts, found, err := l2.OffsetForTimestamp(1050); err != nil || !found || off != 50 || ts != 1050 {
		t.Fatalf("OffsetForTimestamp after index loss: %d %d %v %v", off, ts, found, err)
	}
	if ts := l2.segments[0].maxTimestamp(); ts < 1000 {
		t.Fatalf("first segment max timestamp %d", ts)
	}
}

// FuzzRecordsWalk feeds arbitrary (possibly compressed) record bytes to the
// read path's record walker: no panic, bounded output.
func FuzzRecordsWalk(f *testing.F) {
	for _, codec := range []int16{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd, codecSnappyXerial} {
		b := testBatch{values: [][]byte{[]byte("a"), []byte("bb")}, codec: codec, producerID: -1, timestamp: 10}.encode()
		f.Add(uint8(codec&attrCompressionMask), b[batchHeaderSize:], int64(11))
	}
	f.Fuzz(func(t *testing.T, codec uint8, records []byte, ts int64) {
		h := batchHeader{BaseOffset: 100, RecordCount: 3, LastOffsetDelta: 2, FirstTimestamp: 10, MaxTimestamp: 20, Attributes: int16(codec % 5)}
		b := append(make([]byte, batchHeaderSize), records...)
		off, rts := firstRecordAtOrAfter(b, &h, ts, 0, nil)
		if off < 100 || (rts != h.MaxTimestamp && rts < ts) {
			t.Fatalf("answer %d %d for ts %d", off, rts, ts)
		}
	})
}

// TestCleanMarkerNotBlindlyTrusted: after a clean shutdown, bytes that
// appeared after the checkpoint are still validated (and cut if bad).
func TestCleanMarkerNotBlindlyTrusted(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, DefaultConfig())
	for i := 0; i < 5; i++ {
		mustAppend(t, l, simpleBatch(2, 20, 1, byte(i)), 0)
	}
	size := l.Size()
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	f, _ := mem.OpenReadWrite("/data/events-0/00000000000000000000.log")
	f.WriteAt([]byte("garbage after the clean checkpoint"), size)
	f.Sync()
	f.Close()
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, DefaultConfig())
	if l2.LogEndOffset() != 10 || l2.Size() != size || m2.Stats().RecoveryBytesCut != 34 {
		t.Fatalf("LEO %d size %d (want %d), cut %d", l2.LogEndOffset(), l2.Size(), size, m2.Stats().RecoveryBytesCut)
	}
}
