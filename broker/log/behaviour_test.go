package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

func mustOpen(t *testing.T, m *Manager, cfg Config) *Log {
	t.Helper()
	l, err := m.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustAppend(t *testing.T, l *Log, b []byte, epoch int32) AppendResult {
	t.Helper()
	res, err := l.Append(b, AppendOptions{AssignOffsets: true, LeaderEpoch: epoch})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func TestValidationRejects(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	cfg := DefaultConfig()
	cfg.MaxMessageBytes = 2000
	l := mustOpen(t, m, cfg)
	good := func() []byte { return simpleBatch(3, 10, 1, 'x') }
	recrc := func(b []byte) []byte {
		binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
		return b
	}
	cases := []struct {
		name  string
		batch []byte
		want  error
	}{
		{"crc", func() []byte { b := good(); b[len(b)-1] ^= 1; return b }(), ErrCorruptBatch},
		{"magic", func() []byte { b := good(); b[offMagic] = 1; return b }(), ErrCorruptBatch},
		{"length", func() []byte { b := good(); binary.BigEndian.PutUint32(b[offLength:], 1000); return b }(), ErrCorruptBatch},
		{"short", good()[:40], ErrCorruptBatch},
		{"trailing", append(good(), 1, 2, 3), ErrCorruptBatch},
		{"lastOffsetDelta", func() []byte { b := good(); binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 5); return recrc(b) }(), ErrCorruptBatch},
		{"record framing", func() []byte { b := good(); b[batchHeaderSize] = 0x7e; return recrc(b) }(), ErrCorruptBatch},
		{"codec", func() []byte { b := good(); b[offAttributes+1] |= 6; return recrc(b) }(), ErrUnsupportedCompression},
		{"control", testBatch{values: [][]byte{{1}}, producerID: -1, control: true}.encode(), ErrInvalidRecord},
		{"too large", simpleBatch(3, 1000, 1, 'y'), ErrBatchTooLarge},
		{"empty", nil, ErrCorruptBatch},
	}
	for _, c := range cases {
		_, err := l.Append(c.batch, AppendOptions{AssignOffsets: true})
		if !errors.Is(err, c.want) {
			t.Errorf("%s: got %v, want %v", c.name, err, c.want)
		}
	}
	// All-or-nothing: a good batch followed by a bad one appends nothing.
	bad := good()
	bad[len(bad)-1] ^= 1
	if _, err := l.Append(append(good(), bad...), AppendOptions{AssignOffsets: true}); !IsCorrupt(err) {
		t.Fatalf("mixed append: %v", err)
	}
	if l.LogEndOffset() != 0 || l.Size() != 0 {
		t.Fatalf("rejected appends changed the log: LEO %d size %d", l.LogEndOffset(), l.Size())
	}
	// Two good batches in one append get consecutive offsets.
	res := mustAppend(t, l, append(good(), good()...), 0)
	if res.BaseOffset != 0 || res.LastOffset != 5 {
		t.Fatalf("two batches: %+v", res)
	}
}

func TestCompressedBatchesStoredAsSent(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	l := mustOpen(t, m, DefaultConfig())
	var want []byte
	for _, codec := range []int16{codecGzip, codecLZ4, codecZstd, codecNone} {
		b := testBatch{values: [][]byte{bytes.Repeat([]byte("abc"), 100), []byte("x")}, codec: codec, producerID: -1, timestamp: 5}.encode()
		orig := append([]byte(nil), b...)
		mustAppend(t, l, b, 3)
		// Only baseOffset and partitionLeaderEpoch (outside the CRC) changed.
		if !bytes.Equal(orig[offMagic:], b[offMagic:]) {
			t.Fatalf("codec %d: bytes covered by the CRC changed", codec)
		}
		want = append(want, b...)
	}
	if got := readAll(t, l, 0); !bytes.Equal(got, want) {
		t.Fatal("stored bytes differ from the appended ones")
	}
}

func TestLogAppendTime(t *testing.T) {
	m, clock := openMemManager(t)
	defer m.Close()
	cfg := DefaultConfig()
	cfg.TimestampType = LogAppendTime
	l := mustOpen(t, m, cfg)
	res := mustAppend(t, l, testBatch{values: [][]byte{{1}, {2}}, producerID: -1, codec: codecLZ4, timestamp: 5}.encode(), 0)
	if res.LogAppendTime != clock.Now().UnixMilli() {
		t.Fatalf("LogAppendTime %d", res.LogAppendTime)
	}
	b := readAll(t, l, 0)
	h, err := validateReplicaBatch(b)
	if err != nil {
		t.Fatal(err)
	}
	if h.MaxTimestamp != res.LogAppendTime || h.Attributes&attrTimestampType == 0 {
		t.Fatalf("header %+v", h)
	}
}

func TestIdempotentProducer(t *testing.T) {
	for _, clean := range []bool{true, false} {
		t.Run(fmt.Sprintf("clean=%v", clean), func(t *testing.T) {
			mem := vfs.NewMem()
			m := openManager(t, mem, "/data", nil)
			l := mustOpen(t, m, smallConfig())
			batch := func(epoch int16, seq int32, n int) []byte {
				vals := make([][]byte, n)
				for i := range vals {
					vals[i] = []byte{byte(seq)}
				}
				return testBatch{values: vals, producerID: 42, producerEpoch: epoch, baseSequence: seq}.encode()
			}
			if _, err := l.Append(batch(0, 3, 1), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("new producer at seq 3: %v", err)
			}
			var sent [][]byte
			for i := 0; i < 8; i++ {
				b := batch(0, int32(2*i), 2)
				sent = append(sent, append([]byte(nil), b...))
				mustAppend(t, l, b, 0)
			}
			if _, err := l.Append(batch(0, 20, 1), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("gap: %v", err)
			}
			if clean {
				if err := m.Close(); err != nil {
					t.Fatal(err)
				}
			} else {
				mem.Crash() // nothing was flushed except by rolls: part of the state may be gone
			}
			m2 := openManager(t, mem, "/data", nil)
			defer m2.Close()
			l2 := mustOpen(t, m2, smallConfig())
			n := int(l2.LogEndOffset() / 2) // batches that survived
			if clean && n != 8 {
				t.Fatalf("clean restart kept %d batches", n)
			}
			if n == 0 {
				return
			}
			// The last surviving batch, retried, is a duplicate with its original offsets.
			res, err := l2.Append(append([]byte(nil), sent[n-1]...), AppendOptions{AssignOffsets: true})
			if err != nil || !res.Duplicate || res.BaseOffset != int64(2*(n-1)) || res.LastOffset != int64(2*(n-1)+1) {
				t.Fatalf("retry after restart: %+v %v", res, err)
			}
			if n > producerBatchesKept {
				// Older than the last five: no longer recognised.
				if _, err := l2.Append(append([]byte(nil), sent[n-1-producerBatchesKept]...), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrOutOfOrderSequence) {
					t.Fatalf("old retry: %v", err)
				}
			}
			if res := mustAppend(t, l2, batch(0, int32(2*n), 1), 0); res.BaseOffset != int64(2*n) {
				t.Fatalf("next sequence: %+v", res)
			}
			if _, err := l2.Append(batch(1, 5, 1), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrOutOfOrderSequence) {
				t.Fatalf("new epoch not at 0: %v", err)
			}
			mustAppend(t, l2, batch(1, 0, 1), 0)
			if _, err := l2.Append(batch(0, int32(2*n+1), 1), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidProducerEpoch) {
				t.Fatalf("stale epoch: %v", err)
			}
			if _, err := l2.Append(append(batch(1, 1, 1), batch(1, 2, 1)...), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidRecord) {
				t.Fatalf("two idempotent batches in one append: %v", err)
			}
		})
	}
}

func TestRetention(t *testing.T) {
	m, clock := openMemManager(t)
	defer m.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 1000
	cfg.RetentionMs = time.Hour
	l := mustOpen(t, m, cfg)
	for i := 0; i < 30; i++ {
		mustAppend(t, l, simpleBatch(2, 100, clock.Now().UnixMilli(), byte(i)), 0)
		clock.Advance(time.Minute)
	}
	l.SetHighWatermark(l.LogEndOffset()) // retention deletes only below it
	before := len(l.segments)
	if before < 5 {
		t.Fatalf("only %d segments", before)
	}
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if len(l.segments) != before || l.LogStartOffset() != 0 {
		t.Fatal("retention deleted segments younger than retention.ms")
	}
	clock.Advance(time.Hour - 20*time.Minute)
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	start := l.LogStartOffset()
	if start == 0 || len(l.segments) >= before {
		t.Fatalf("time retention kept everything (start %d, %d segments)", start, len(l.segments))
	}
	if l.segments[0].base != start {
		t.Fatalf("log start %d is not the first segment's base %d", start, l.segments[0].base)
	}
	if _, err := l.Read(start-1, 100, l.LogEndOffset()); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("read below log start: %v", err)
	}
	// Size retention keeps at most retention.bytes (plus the active segment).
	cfg.RetentionMs = -1
	cfg.RetentionBytes = 1500
	l.SetConfig(cfg)
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	if l.Size()-l.active().size > 1500 {
		t.Fatalf("size retention left %d bytes", l.Size())
	}
	// Whole segments only: the active segment is never deleted.
	if l.LogEndOffset() != 60 || len(l.segments) < 1 {
		t.Fatal("retention touched the active segment")
	}
}

func TestSegmentMsRoll(t *testing.T) {
	m, clock := openMemManager(t)
	defer m.Close()
	cfg := DefaultConfig()
	cfg.SegmentMs = time.Hour
	l := mustOpen(t, m, cfg)
	mustAppend(t, l, simpleBatch(1, 10, 1, 'a'), 0)
	mustAppend(t, l, simpleBatch(1, 10, 1, 'a'), 0)
	clock.Advance(time.Hour)
	mustAppend(t, l, simpleBatch(1, 10, 1, 'a'), 0)
	if len(l.segments) != 2 || l.active().base != 2 {
		t.Fatalf("segment.ms did not roll: %d segments", len(l.segments))
	}
}

func TestTruncateAndEpochs(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, smallConfig())
	for i := 0; i < 30; i++ {
		mustAppend(t, l, simpleBatch(3, 60, int64(i), byte(i)), int32(i/10)) // epochs 0,1,2 at offsets 0,30,60
	}
	if e, end := l.LatestEpoch(), l.LogEndOffset(); e != 2 || end != 90 {
		t.Fatalf("epoch %d end %d", e, end)
	}
	if off, ep := l.EndOffsetForEpoch(0); off != 30 || ep != 0 {
		t.Fatalf("end of epoch 0: %d %d", off, ep)
	}
	if off, ep := l.EndOffsetForEpoch(2); off != 90 || ep != 2 {
		t.Fatalf("end of epoch 2: %d %d", off, ep)
	}
	for off, want := range map[int64]int32{-1: -1, 0: 0, 29: 0, 30: 1, 59: 1, 60: 2, 89: 2, 1000: 2} {
		if got := l.EpochAt(off); got != want {
			t.Fatalf("EpochAt(%d) = %d, want %d", off, got, want)
		}
	}
	want := readAll(t, l, 0)
	if err := l.TruncateTo(64); err != nil { // mid-batch: the batch at 63 goes
		t.Fatal(err)
	}
	if l.LogEndOffset() != 63 {
		t.Fatalf("LEO after truncate %d", l.LogEndOffset())
	}
	if err := l.TruncateTo(45); err != nil {
		t.Fatal(err)
	}
	if l.LogEndOffset() != 45 || l.LatestEpoch() != 1 {
		t.Fatalf("LEO %d epoch %d", l.LogEndOffset(), l.LatestEpoch())
	}
	if off, ep := l.EndOffsetForEpoch(2); off != -1 || ep != -1 {
		t.Fatalf("epoch 2 after truncate: %d %d", off, ep)
	}
	got := readAll(t, l, 0)
	if !bytes.Equal(got, want[:len(got)]) || len(got) != 15*int(parseHeader(want).size()) {
		t.Fatal("data before the truncation point changed")
	}
	res := mustAppend(t, l, simpleBatch(3, 60, 100, 'n'), 3)
	if res.BaseOffset != 45 || l.LatestEpoch() != 3 {
		t.Fatalf("append after truncate %+v", res)
	}
	mem.Crash() // truncation is durable: the cut data must not come back
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, smallConfig())
	if l2.LogEndOffset() > 48 || l2.LogEndOffset() < 45 {
		t.Fatalf("LEO after crash %d", l2.LogEndOffset())
	}
	if err := l2.TruncateTo(0); err != nil || l2.LogEndOffset() != 0 {
		t.Fatalf("truncate to 0: %v %d", err, l2.LogEndOffset())
	}
}

// TestTruncateFullyAndStartAt: a follower behind its leader's log start
// restarts its log past its own end, with no epochs left, and the restart
// survives a crash.
func TestTruncateFullyAndStartAt(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, smallConfig())
	for i := 0; i < 20; i++ {
		mustAppend(t, l, simpleBatch(3, 60, int64(i), byte(i)), int32(i/10)) // epochs 0, 1; offsets 0-59
	}
	if err := l.TruncateFullyAndStartAt(500); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 500 || l.LogEndOffset() != 500 || l.HighWatermark() != 500 || l.LatestEpoch() != -1 {
		t.Fatalf("after the restart: start %d end %d hw %d epoch %d", l.LogStartOffset(), l.LogEndOffset(), l.HighWatermark(), l.LatestEpoch())
	}
	if res := mustAppend(t, l, simpleBatch(3, 60, 100, 'n'), 3); res.BaseOffset != 500 {
		t.Fatalf("append after the restart: %+v", res)
	}
	if err := l.Flush(); err != nil {
		t.Fatal(err)
	}
	mem.Crash()
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	l2 := mustOpen(t, m2, smallConfig())
	if l2.LogStartOffset() != 500 || l2.LogEndOffset() != 503 || l2.LatestEpoch() != 3 {
		t.Fatalf("after a crash: start %d end %d epoch %d", l2.LogStartOffset(), l2.LogEndOffset(), l2.LatestEpoch())
	}
}

func TestDeleteRecordsAndTimestamps(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	l := mustOpen(t, m, smallConfig())
	for i := 0; i < 40; i++ {
		mustAppend(t, l, simpleBatch(2, 80, int64(1000+10*i), byte(i)), 0) // max ts 1001+10i
	}
	for _, c := range []struct{ ts, off, max int64 }{{0, 0, 1000}, {1001, 1, 1001}, {1002, 2, 1010}, {1250, 50, 1250}, {1391, 79, 1391}} {
		off, ts, found, err := l.OffsetForTimestamp(c.ts)
		if err != nil || !found || off != c.off || ts != c.max {
			t.Fatalf("OffsetForTimestamp(%d) = %d %d %v %v, want %d %d", c.ts, off, ts, found, err, c.off, c.max)
		}
	}
	if _, _, found, _ := l.OffsetForTimestamp(5000); found {
		t.Fatal("found a timestamp past the end")
	}
	if err := l.DeleteRecordsBefore(10); !errors.Is(err, ErrOffsetOutOfRange) {
		t.Fatalf("delete beyond HW: %v", err)
	}
	l.SetHighWatermark(80)
	if err := l.DeleteRecordsBefore(51); err != nil {
		t.Fatal(err)
	}
	if l.LogStartOffset() != 51 {
		t.Fatalf("log start %d", l.LogStartOffset())
	}
	if l.segments[0].base > 51 || (len(l.segments) > 1 && l.segments[1].base <= 51) {
		t.Fatal("DeleteRecordsBefore kept or removed the wrong segments")
	}
	if off, _, _, _ := l.OffsetForTimestamp(0); off != 51 {
		t.Fatalf("OffsetForTimestamp below log start gave %d", off)
	}
	r, err := l.Read(51, 1, 80)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := r.Bytes()
	r.Close()
	if h := parseHeader(b); h.BaseOffset != 50 {
		t.Fatalf("read at log start returned batch %d", h.BaseOffset)
	}
}

// TestConcurrentReadersOneWriter runs under -race: readers check every batch
// they get while a writer appends, rolls and retention deletes segments.
func TestConcurrentReadersOneWriter(t *testing.T) {
	for _, f := range fileSystems(t) {
		t.Run(f.name, func(t *testing.T) {
			m := openManager(t, f.fs, f.dir, nil)
			defer m.Close()
			cfg := smallConfig()
			cfg.RetentionBytes = 20000
			l := mustOpen(t, m, cfg)
			const batches = 600
			var wg sync.WaitGroup
			errc := make(chan error, 8)
			done := make(chan struct{})
			for r := 0; r < 4; r++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for {
						select {
						case <-done:
							return
						default:
						}
						start := l.LogStartOffset()
						region, err := l.Read(start, 4096, l.HighWatermark())
						if errors.Is(err, ErrOffsetOutOfRange) {
							continue // retention moved the start meanwhile
						}
						if err != nil {
							errc <- err
							return
						}
						b, err := region.Bytes()
						region.Close()
						if err != nil {
							errc <- err
							return
						}
						next := int64(-1)
						for p := 0; p < len(b); {
							h, err := validateReplicaBatch(b[p : p+int(parseHeader(b[p:]).size())])
							if err != nil || (next >= 0 && h.BaseOffset != next) {
								errc <- fmt.Errorf("bad batch at %d: %v", h.BaseOffset, err)
								return
							}
							next = h.lastOffset() + 1
							p += int(h.size())
						}
					}
				}()
			}
			for i := 0; i < batches; i++ {
				mustAppend(t, l, simpleBatch(2, 50, int64(i), byte(i)), 0)
				l.SetHighWatermark(l.LogEndOffset())
				if i%50 == 0 {
					if err := m.RunRetention(); err != nil {
						t.Fatal(err)
					}
				}
			}
			close(done)
			wg.Wait()
			select {
			case err := <-errc:
				t.Fatal(err)
			default:
			}
			if l.LogStartOffset() == 0 {
				t.Fatal("retention never ran")
			}
		})
	}
}

func TestRegionWriteToSocket(t *testing.T) {
	m := openManager(t, vfs.OS{}, t.TempDir(), nil)
	defer m.Close()
	l := mustOpen(t, m, DefaultConfig())
	for i := 0; i < 50; i++ {
		mustAppend(t, l, simpleBatch(4, 500, 1, byte(i)), 0)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		b, _ := io.ReadAll(c)
		c.Close()
		got <- b
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	r, err := l.Read(7, 1<<20, l.LogEndOffset())
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	want, _ := r.Bytes()
	n, err := r.WriteTo(c)
	c.Close()
	if err != nil || n != r.Len() {
		t.Fatalf("WriteTo: %d %v", n, err)
	}
	if b := <-got; !bytes.Equal(b, want) {
		t.Fatalf("socket got %d bytes, want %d", len(b), len(want))
	}
	if parseHeader(want).BaseOffset != 4 {
		t.Fatal("region does not start at the batch holding offset 7")
	}
}

func TestChangedNotifies(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	l := mustOpen(t, m, DefaultConfig())
	ch := l.Changed()
	select {
	case <-ch:
		t.Fatal("closed before any change")
	default:
	}
	mustAppend(t, l, simpleBatch(1, 1, 1, 'a'), 0)
	<-ch // closed by the append
	ch = l.Changed()
	l.SetHighWatermark(1)
	<-ch
}

func TestBoundedOpenFiles(t *testing.T) {
	m, err := OpenManager(ManagerOptions{FS: vfs.OS{}, Dir: t.TempDir(), MaxOpenFiles: 8})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	var logs []*Log
	for p := 0; p < 40; p++ {
		l, err := m.Open(TopicPartition{"t", int32(p)}, smallConfig())
		if err != nil {
			t.Fatal(err)
		}
		logs = append(logs, l)
	}
	for round := 0; round < 3; round++ {
		for _, l := range logs {
			mustAppend(t, l, simpleBatch(1, 100, 1, 'a'), 0)
			if n := m.OpenFiles(); n > 8 {
				t.Fatalf("%d segment files open, bound is 8", n)
			}
		}
	}
	for _, l := range logs {
		if l.LogEndOffset() != 3 || len(readAll(t, l, 0)) != 3*int(parseHeader(simpleBatch(1, 100, 1, 'a')).size()) {
			t.Fatal("data wrong after handle eviction")
		}
	}
	if _, reopens := m.cache.stats(); reopens == 0 {
		t.Fatal("no file was ever closed and reopened")
	}
}

// TestOffsetForTimestampRecords: the answer is the first record at or after
// the timestamp, inside compressed batches too.
func TestOffsetForTimestampRecords(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	l := mustOpen(t, m, DefaultConfig())
	for i, codec := range []int16{codecNone, codecGzip, codecSnappy, codecLZ4, codecZstd, codecSnappyXerial} {
		vals := make([][]byte, 10)
		for j := range vals {
			vals[j] = bytes.Repeat([]byte{byte(j)}, 50)
		}
		mustAppend(t, l, testBatch{values: vals, codec: codec, producerID: -1, timestamp: int64(100 * i)}.encode(), 0)
	}
	for i := range 6 {
		off, ts, found, err := l.OffsetForTimestamp(int64(100*i + 7))
		if err != nil || !found || off != int64(10*i+7) || ts != int64(100*i+7) {
			t.Errorf("batch %d: OffsetForTimestamp = %d %d %v %v, want %d %d", i, off, ts, found, err, 10*i+7, 100*i+7)
		}
	}
}

func TestManagerPartitionsAndDelete(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	tps := []TopicPartition{{"my-topic", 0}, {"my-topic", 12}, {"a.b_c", 3}}
	for _, tp := range tps {
		l, err := m.Open(tp, DefaultConfig())
		if err != nil {
			t.Fatal(err)
		}
		mustAppend(t, l, simpleBatch(1, 10, 1, 'x'), 0)
		l.SetHighWatermark(1)
	}
	if _, err := m.Open(TopicPartition{"bad/name", 0}, DefaultConfig()); err == nil {
		t.Fatal("a topic name with a slash was accepted")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	m2 := openManager(t, mem, "/data", nil)
	defer m2.Close()
	got := m2.Partitions()
	if len(got) != 3 || got[0] != tps[2] || got[1] != tps[0] || got[2] != tps[1] {
		t.Fatalf("partitions after reopen: %v", got)
	}
	l, err := m2.Open(tps[1], DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	if l.HighWatermark() != 1 || l.LogEndOffset() != 1 {
		t.Fatalf("HW %d LEO %d after reopen", l.HighWatermark(), l.LogEndOffset())
	}
	if err := m2.Delete(tps[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(simpleBatch(1, 10, 1, 'x'), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrClosed) {
		t.Fatalf("append to a deleted log: %v", err)
	}
	if _, err := mem.Stat("/data/my-topic-12"); !vfs.IsNotExist(err) {
		t.Fatalf("partition directory still there: %v", err)
	}
	if len(m2.Partitions()) != 2 {
		t.Fatalf("partitions after delete: %v", m2.Partitions())
	}
	l2, err := m2.Open(tps[1], DefaultConfig())
	if err != nil || l2.LogEndOffset() != 0 {
		t.Fatalf("recreated partition: %v", err)
	}
	// Concurrent opens of one partition return the same log.
	var wg sync.WaitGroup
	logs := make([]*Log, 8)
	for i := range logs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			logs[i], _ = m2.Open(TopicPartition{"concurrent", 0}, DefaultConfig())
		}()
	}
	wg.Wait()
	for _, l := range logs {
		if l == nil || l != logs[0] {
			t.Fatal("concurrent Open returned different logs")
		}
	}
}

func TestPrometheusCollector(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	mustAppend(t, mustOpen(t, m, DefaultConfig()), simpleBatch(1, 1, 1, 'a'), 0)
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(m.Collector()); err != nil {
		t.Fatal(err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(mfs) != len(MetricNames()) {
		t.Fatalf("%d metric families, want %d", len(mfs), len(MetricNames()))
	}
}

// TestReadMatchesModel compares Read with a naive walk over all batches for
// random offsets, byte limits and offset limits.
func TestReadMatchesModel(t *testing.T) {
	m := openManager(t, vfs.NewMem(), "/data", nil)
	defer m.Close()
	cfg := smallConfig()
	cfg.SegmentBytes = 8000
	l := mustOpen(t, m, cfg)
	rng := rand.New(rand.NewPCG(1, 2))
	type batch struct {
		base, last int64
		b          []byte
	}
	var all []batch
	for i := 0; i < 300; i++ {
		b := simpleBatch(1+rng.IntN(4), rng.IntN(300), 1, byte(i))
		res := mustAppend(t, l, b, 0)
		all = append(all, batch{res.BaseOffset, res.LastOffset, b})
	}
	leo := l.LogEndOffset()
	segEnd := func(base int64) int64 { // first offset of the next segment
		for _, s := range l.segments {
			if s.base > base {
				return s.base
			}
		}
		return leo
	}
	for q := 0; q < 2000; q++ {
		off, maxBytes, maxOff := rng.Int64N(leo), 1+rng.IntN(3000), rng.Int64N(leo+2)
		r, err := l.Read(off, maxBytes, maxOff)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := r.Bytes()
		r.Close()
		var want []byte
		if off < maxOff {
			i := sort.Search(len(all), func(i int) bool { return all[i].last >= off })
			end := segEnd(all[i].base)
			for ; i < len(all) && all[i].base < end && all[i].last < maxOff; i++ {
				if len(want) > 0 && len(want)+len(all[i].b) > maxBytes {
					break
				}
				want = append(want, all[i].b...)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Read(%d, %d, %d): %d bytes, want %d", off, maxBytes, maxOff, len(got), len(want))
		}
	}
}

// TestRetentionKafkaValues: retention.bytes and retention.ms mean what they
// mean in Apache Kafka (UnifiedLog.deleteOldSegments): any negative value
// is no limit, 0 deletes every segment it may (the active one too, after a
// roll), and nothing at or above the high watermark is deleted.
func TestRetentionKafkaValues(t *testing.T) {
	for _, c := range []struct {
		name         string
		ms           time.Duration
		bytes        int64
		hw           bool
		wantEmptyLog bool
	}{
		{"bytes=0", -1, 0, true, true},
		{"ms=0", 0, -1, true, true},
		{"bytes=-1", -1, -1, true, false},
		{"bytes=-7", -1, -7, true, false},
		{"bytes=0 above the high watermark", -1, 0, false, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, clock := openMemManager(t)
			defer m.Close()
			cfg := smallConfig()
			cfg.SegmentBytes = 1000
			cfg.RetentionMs, cfg.RetentionBytes = c.ms, c.bytes
			l := mustOpen(t, m, cfg)
			if got := l.Config(); got.RetentionBytes != c.bytes || got.RetentionMs != c.ms {
				t.Fatalf("config normalised to ms %v bytes %d", got.RetentionMs, got.RetentionBytes)
			}
			for i := 0; i < 12; i++ {
				mustAppend(t, l, simpleBatch(2, 100, clock.Now().UnixMilli(), byte(i)), 0)
			}
			if c.hw {
				l.SetHighWatermark(l.LogEndOffset())
			}
			clock.Advance(time.Second) // every timestamp is now in the past
			if err := m.RunRetention(); err != nil {
				t.Fatal(err)
			}
			empty := l.LogStartOffset() == l.LogEndOffset() && l.Size() == 0
			if empty != c.wantEmptyLog || (!empty && l.LogStartOffset() != 0) {
				t.Fatalf("log start %d end %d size %d, want everything deleted: %v", l.LogStartOffset(), l.LogEndOffset(), l.Size(), c.wantEmptyLog)
			}
			res := mustAppend(t, l, simpleBatch(1, 10, clock.Now().UnixMilli(), 'n'), 0)
			if res.BaseOffset != 24 {
				t.Fatalf("append after retention got offset %d, want 24", res.BaseOffset)
			}
		})
	}
}
