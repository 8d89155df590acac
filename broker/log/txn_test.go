package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// transactional sets a batch's transactional bit (and its CRC).
func transactional(b []byte) []byte {
	a := binary.BigEndian.Uint16(b[offAttributes:]) | attrTransactional
	binary.BigEndian.PutUint16(b[offAttributes:], a)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

func txnBatch(pid int64, epoch int16, seq int32, n int, ts int64) []byte {
	tb := testBatch{producerID: pid, producerEpoch: epoch, baseSequence: seq, timestamp: ts}
	for i := 0; i < n; i++ {
		tb.values = append(tb.values, []byte(fmt.Sprintf("v%d", i)))
	}
	return transactional(tb.encode())
}

func appendTxn(t *testing.T, l *Log, b []byte) AppendResult {
	t.Helper()
	res, err := l.Append(b, AppendOptions{AssignOffsets: true, Transactional: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	return res
}

func appendMarker(t *testing.T, l *Log, pid int64, epoch int16, commit bool) int64 {
	t.Helper()
	off, err := l.AppendMarker(pid, epoch, commit, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
		t.Fatal(err)
	}
	return off
}

// txnReplay is the transaction state of a log computed by the test from
// its batches, from offset 0, independently of the log's own tables.
type txnReplay struct {
	open    map[int64]int64
	aborted []AbortedTxn
}

func replayTxns(t *testing.T, l *Log) txnReplay {
	t.Helper()
	rp := txnReplay{open: map[int64]int64{}}
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		r, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("read %d: %v", off, err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil || len(b) == 0 {
			t.Fatalf("read %d: %d bytes, %v", off, len(b), err)
		}
		for len(b) > 0 {
			h := parseHeader(b)
			one := b[:h.size()]
			b = b[h.size():]
			off = h.lastOffset() + 1
			if h.ProducerID < 0 {
				continue
			}
			if h.Attributes&attrControl != 0 {
				mk, ok := parseMarker(one, &h)
				if !ok {
					continue
				}
				first, was := rp.open[h.ProducerID]
				if !was {
					first = h.BaseOffset
				}
				delete(rp.open, h.ProducerID)
				if !mk.commit {
					lso := h.BaseOffset + 1
					for _, f := range rp.open {
						lso = min(lso, f)
					}
					rp.aborted = append(rp.aborted, AbortedTxn{h.ProducerID, first, h.BaseOffset, lso})
				}
				continue
			}
			if _, was := rp.open[h.ProducerID]; h.Attributes&attrTransactional != 0 && !was {
				rp.open[h.ProducerID] = h.BaseOffset
			}
		}
	}
	return rp
}

// checkTxnState checks the log's open transactions, last stable offset and
// aborted index against a replay of its batches.
func checkTxnState(t *testing.T, l *Log, rng *rand.Rand, what string) {
	t.Helper()
	rp := replayTxns(t, l)
	var open []OpenTxn
	for _, o := range l.OpenTransactions() {
		open = append(open, OpenTxn{ProducerID: o.ProducerID, FirstOffset: o.FirstOffset})
	}
	var want []OpenTxn
	for id, f := range rp.open {
		want = append(want, OpenTxn{ProducerID: id, FirstOffset: f})
	}
	sort.Slice(want, func(i, j int) bool { return want[i].FirstOffset < want[j].FirstOffset })
	if !reflect.DeepEqual(open, want) {
		t.Fatalf("%s: open transactions %v, replay says %v", what, open, want)
	}
	lso := l.HighWatermark()
	for _, f := range rp.open {
		lso = min(lso, max(f, l.LogStartOffset()))
	}
	if got := l.LastStableOffset(); got != lso {
		t.Fatalf("%s: last stable offset %d, replay says %d", what, got, lso)
	}
	leo := l.LogEndOffset()
	got, err := l.AbortedTransactions(0, leo+1)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 0 || len(rp.aborted) != 0 {
		if !reflect.DeepEqual(got, rp.aborted) {
			t.Fatalf("%s: aborted index %v, replay says %v", what, got, rp.aborted)
		}
	}
	for range 5 { // the range query and its early stop
		from := rng.Int64N(leo + 1)
		to := from + 1 + rng.Int64N(leo-from+1)
		var w []AbortedTxn
		for _, e := range rp.aborted {
			if e.LastOffset >= from && e.FirstOffset < to {
				w = append(w, e)
			}
		}
		g, err := l.AbortedTransactions(from, to)
		if err != nil {
			t.Fatal(err)
		}
		if len(g) != 0 || len(w) != 0 {
			if !reflect.DeepEqual(g, w) {
				t.Fatalf("%s: AbortedTransactions(%d, %d) = %v, want %v", what, from, to, g, w)
			}
		}
	}
}

func TestTxnStateMachine(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	l := mustOpen(t, m, smallConfig())
	rng := rand.New(rand.NewPCG(1, 2))
	mustAppend(t, l, simpleBatch(2, 10, 1, 'a'), 0) // 0-1
	l.SetHighWatermark(l.LogEndOffset())
	if l.LastStableOffset() != 2 {
		t.Fatalf("LSO %d without transactions, want the high watermark 2", l.LastStableOffset())
	}
	appendTxn(t, l, txnBatch(1, 0, 0, 2, 1)) // 2-3
	appendTxn(t, l, txnBatch(2, 0, 0, 1, 1)) // 4
	appendTxn(t, l, txnBatch(1, 0, 2, 1, 1)) // 5: same transaction
	if got := l.LastStableOffset(); got != 2 {
		t.Fatalf("LSO %d, want 2 (producer 1's transaction)", got)
	}
	if c := appendMarker(t, l, 1, 0, true); c != 6 || l.LastStableOffset() != 4 {
		t.Fatalf("commit at %d, LSO %d; want 6, 4", c, l.LastStableOffset())
	}
	if a := appendMarker(t, l, 2, 0, false); a != 7 || l.LastStableOffset() != 8 {
		t.Fatalf("abort at %d, LSO %d; want 7, 8", a, l.LastStableOffset())
	}
	want := []AbortedTxn{{2, 4, 7, 8}}
	if got, _ := l.AbortedTransactions(0, 8); !reflect.DeepEqual(got, want) {
		t.Fatalf("aborted %v, want %v", got, want)
	}
	if got, _ := l.AbortedTransactions(8, 9); len(got) != 0 {
		t.Fatalf("aborted after the marker: %v", got)
	}
	// An LSO below the high watermark holds while a transaction is open.
	appendTxn(t, l, txnBatch(3, 2, 0, 1, 1)) // 8
	mustAppend(t, l, simpleBatch(1, 10, 1, 'b'), 0)
	l.SetHighWatermark(l.LogEndOffset())
	if l.LastStableOffset() != 8 || l.HighWatermark() != 10 {
		t.Fatalf("LSO %d HW %d, want 8 and 10", l.LastStableOffset(), l.HighWatermark())
	}
	// Fencing: an older producer epoch, an older coordinator epoch.
	if _, err := l.AppendMarker(3, 1, true, 0, 0); !errors.Is(err, ErrInvalidProducerEpoch) {
		t.Fatalf("marker with an old producer epoch: %v", err)
	}
	if _, err := l.AppendMarker(3, 2, true, 5, 0); err != nil {
		t.Fatal(err)
	}
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.AppendMarker(3, 2, false, 4, 0); !errors.Is(err, ErrCoordinatorFenced) {
		t.Fatalf("marker from an old coordinator epoch: %v", err)
	}
	// A marker for a producer with no open transaction is written, harmless.
	lso := l.LastStableOffset()
	off := appendMarker(t, l, 9, 0, false)
	if l.LastStableOffset() != off+1 || lso != off {
		t.Fatalf("LSO %d -> %d around a stray abort at %d", lso, l.LastStableOffset(), off)
	}
	// Clients may not append markers, nor transactional batches on the plain path.
	if _, err := l.Append(testBatch{values: [][]byte{{1}}, producerID: 4, control: true}.encode(), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("control batch from a client: %v", err)
	}
	if _, err := l.Append(txnBatch(4, 0, 0, 1, 1), AppendOptions{AssignOffsets: true}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without Transactional: %v", err)
	}
	if _, err := l.Append(transactional(simpleBatch(1, 1, 1, 'x')), AppendOptions{AssignOffsets: true, Transactional: true}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("transactional batch without a producer id: %v", err)
	}
	appendTxn(t, l, txnBatch(5, 0, 0, 3, 1)) // left open
	checkTxnState(t, l, rng, "live")
	before, _ := l.AbortedTransactions(0, l.LogEndOffset()+1)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	for _, crash := range []bool{false, true} {
		if crash {
			mem.Crash()
		}
		m = openManager(t, mem, "/data", nil)
		l = mustOpen(t, m, smallConfig())
		checkTxnState(t, l, rng, fmt.Sprintf("reopened (crash %v)", crash))
		if after, _ := l.AbortedTransactions(0, l.LogEndOffset()+1); !reflect.DeepEqual(after, before) {
			t.Fatalf("aborted index %v after reopen, was %v", after, before)
		}
		if len(l.OpenTransactions()) != 1 {
			t.Fatalf("open transactions after reopen: %v", l.OpenTransactions())
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestTxnSnapshotVersions(t *testing.T) {
	ps := newProducerState()
	ps.update(&batchHeader{ProducerID: 7, ProducerEpoch: 3, BaseOffset: 10, LastOffsetDelta: 1, BaseSequence: 0, Attributes: attrTransactional}, false)
	ps.update(&batchHeader{ProducerID: 8, ProducerEpoch: 1, BaseOffset: 12, BaseSequence: 4}, false)
	ps.m[8].CoordinatorEpoch = 6
	got, err := decodeProducerState(ps.encode())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got.m, ps.m) || !reflect.DeepEqual(got.open, map[int64]int64{7: 10}) {
		t.Fatalf("round trip: %+v / %v", got.m, got.open)
	}
	// Version 1 (before transactions): no open transactions, no coordinator epoch.
	v1 := binary.BigEndian.AppendUint32(nil, 1)
	v1 = binary.BigEndian.AppendUint64(v1, 8)
	v1 = binary.BigEndian.AppendUint16(v1, 1)
	v1 = append(v1, 1)
	for _, v := range []uint32{4, 4} {
		v1 = binary.BigEndian.AppendUint32(v1, v)
	}
	v1 = binary.BigEndian.AppendUint64(v1, 12)
	v1 = binary.BigEndian.AppendUint64(v1, 12)
	old, err := decodeProducerState(frameVersioned(magicProducers, 1, v1))
	if err != nil {
		t.Fatal(err)
	}
	if e := old.m[8]; e == nil || e.Epoch != 1 || e.TxnFirst != -1 || e.CoordinatorEpoch != -1 || len(e.Batches) != 1 || len(old.open) != 0 {
		t.Fatalf("version 1 snapshot read as %+v", old.m[8])
	}
	if _, err := decodeProducerState(frameVersioned(magicProducers, 3, v1)); err == nil {
		t.Fatal("an unknown snapshot version was accepted")
	}
}

func TestTxnExpiryKeepsOpenTransactions(t *testing.T) {
	m, clock := openMemManager(t)
	defer m.Close()
	cfg := smallConfig()
	cfg.ProducerIDExpiration = time.Minute
	l := mustOpen(t, m, cfg)
	appendTxn(t, l, txnBatch(1, 0, 0, 1, 1))
	mustAppend(t, l, testBatch{values: [][]byte{{1}}, producerID: 2, timestamp: 1}.encode(), 0)
	for range 3 {
		clock.Advance(time.Hour)
		if err := m.RunRetention(); err != nil {
			t.Fatal(err)
		}
	}
	if l.Producers() != 1 || len(l.OpenTransactions()) != 1 {
		t.Fatalf("%d producers, open %v: the idle idempotent one goes, the open transaction stays", l.Producers(), l.OpenTransactions())
	}
}

// txnCrashWorkload appends plain and transactional batches and markers,
// flushes, rolls and truncates; it keeps going after errors. checkLive
// checks the state against a replay after each step (the run without a
// failure).
func txnCrashWorkload(t *testing.T, fsys vfs.FS, clock *manualClock, seed uint64, checkLive bool) (flushedEnd int64) {
	rng := rand.New(rand.NewPCG(seed, 1))
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", Clock: clock})
	if err != nil {
		return 0
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 900
	cfg.IndexIntervalBytes = 200
	l, err := m.Open(tp0, cfg)
	if err != nil {
		return 0
	}
	pids := []int64{11, 12, 13}
	seq := map[int64]int32{}
	epoch := map[int64]int16{}
	for step := 0; step < 60; step++ {
		switch op := rng.IntN(20); {
		case op < 5:
			if _, err := l.Append(simpleBatch(1+rng.IntN(3), rng.IntN(60), clock.Now().UnixMilli(), byte(step)), AppendOptions{AssignOffsets: true}); err == nil {
				l.SetHighWatermark(l.LogEndOffset())
			}
		case op < 11:
			pid := pids[rng.IntN(len(pids))]
			n := 1 + rng.IntN(3)
			if _, err := l.Append(txnBatch(pid, epoch[pid], seq[pid], n, clock.Now().UnixMilli()), AppendOptions{AssignOffsets: true, Transactional: true}); err == nil {
				seq[pid] += int32(n)
				l.SetHighWatermark(l.LogEndOffset())
			}
		case op < 16:
			pid := pids[rng.IntN(len(pids))]
			if _, err := l.AppendMarker(pid, epoch[pid], rng.IntN(2) == 0, 0, 0); err == nil {
				l.SetHighWatermark(l.LogEndOffset())
			}
		case op < 18:
			if err := l.Flush(); err == nil {
				flushedEnd = l.LogEndOffset()
			}
		default:
			to := max(l.LogEndOffset()-int64(rng.IntN(8)), 0)
			cut := to // a truncation inside a batch cuts from the batch's base
			if r, err := l.Read(to, 1, l.LogEndOffset()); err == nil {
				if b := r.BaseOffset(); b >= 0 {
					cut = min(cut, b)
				}
				r.Close()
			}
			// Failed or not, the truncation may have cut the tail.
			_ = l.TruncateTo(to)
			{
				flushedEnd = min(flushedEnd, cut)
				for _, pid := range pids { // later sequences are gone: new epochs
					epoch[pid]++
					seq[pid] = 0
				}
			}
		}
		clock.Advance(time.Second)
		if checkLive {
			checkTxnState(t, l, rng, fmt.Sprintf("seed %d step %d", seed, step))
		}
	}
	if rng.IntN(2) == 0 {
		m.Close()
	}
	return flushedEnd
}

// TestTxnCrashLoop fails the i-th file-system operation of a transactional
// workload for i = 0, 1, 2, ... and after each failure restarts (keeping
// unsynced data) and crashes the machine (dropping it): each reopened log's
// open transactions, last stable offset and aborted index must equal a
// replay of its batches from scratch, and nothing flushed may be lost.
// Re-run a failure with SLUICE_CRASH_SEED=<seed>.
func TestTxnCrashLoop(t *testing.T) {
	seed, limit := crashLoopStart(t, 200)
	rng := rand.New(rand.NewPCG(seed, 2))
	check := func(mem vfs.FS, clock *manualClock, flushedEnd int64, what string) {
		m, err := OpenManager(ManagerOptions{FS: mem, Dir: "/data", Clock: clock})
		if err != nil {
			t.Fatalf("%s: reopen: %v", what, err)
		}
		defer m.Close()
		if len(m.Partitions()) == 0 {
			if flushedEnd > 0 {
				t.Fatalf("%s: partition lost, %d offsets flushed", what, flushedEnd)
			}
			return
		}
		l, err := m.Open(tp0, DefaultConfig())
		if err != nil {
			t.Fatalf("%s: reopen log: %v", what, err)
		}
		if l.LogEndOffset() < flushedEnd {
			t.Fatalf("%s: log end %d below the flushed %d", what, l.LogEndOffset(), flushedEnd)
		}
		checkTxnState(t, l, rng, what)
		// The reopened log goes on computing the same: end every open transaction.
		for _, o := range l.OpenTransactions() {
			if _, err := l.AppendMarker(o.ProducerID, o.ProducerEpoch, rng.IntN(2) == 0, 0, 0); err != nil {
				t.Fatalf("%s: marker after reopen: %v", what, err)
			}
		}
		l.SetHighWatermark(l.LogEndOffset())
		checkTxnState(t, l, rng, what+", markers after reopen")
	}
	for i := int64(0); i < limit; i++ {
		for _, sticky := range []bool{false, true} {
			mem := vfs.NewMem()
			clock := newManualClock()
			inj := &faults.Counter{Fail: i, Sticky: sticky}
			flushed := txnCrashWorkload(t, vfs.NewFaulty(mem, inj), clock, seed, false)
			fired, op := inj.Fired()
			what := fmt.Sprintf("seed %d, fail op %d sticky=%v (%s)", seed, i, sticky, op)
			if !fired {
				if sticky {
					mem2 := vfs.NewMem()
					txnCrashWorkload(t, mem2, newManualClock(), seed, true)
					check(mem, clock, flushed, fmt.Sprintf("seed %d, no failure, restart", seed))
					mem.Crash()
					check(mem, clock, flushed, fmt.Sprintf("seed %d, no failure, power loss", seed))
					t.Logf("workload completed after %d operations", i)
					return
				}
				continue
			}
			check(mem, clock, flushed, what+", restart")
			mem.Crash()
			check(mem, clock, flushed, what+", power loss")
		}
	}
}
