package log

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// crashModel is what the workload knows about the log it drove.
type crashModel struct {
	attempted map[int64][]byte // base offset -> bytes of the latest append attempt there
	durable   map[int64][]byte // appended, then flushed (and not truncated since)
	logStart  int64            // log start offset known to be durable
	lastIdem  int64            // base offset of the last durable idempotent batch, -1 if none
	idemBytes []byte
}

// crashWorkload appends, flushes, rolls, retains and truncates; it keeps
// going after errors (the log refuses writes once it has failed).
var crashTrace = os.Getenv("SLUICE_CRASH_TRACE") != ""

func crashWorkload(fsys vfs.FS, clock *manualClock, seed uint64, model *crashModel) {
	rng := rand.New(rand.NewPCG(seed, 0))
	trace := func(format string, args ...any) {
		if crashTrace {
			fmt.Fprintf(os.Stderr, format+"\n", args...)
		}
	}
	m, err := OpenManager(ManagerOptions{FS: fsys, Dir: "/data", Clock: clock})
	if err != nil {
		return
	}
	cfg := DefaultConfig()
	cfg.SegmentBytes = 1500
	cfg.IndexIntervalBytes = 200
	cfg.RetentionBytes = 5000
	l, err := m.Open(tp0, cfg)
	if err != nil {
		return
	}
	var pending [][2]int64 // acked since the last flush: base offsets (and 1 if idempotent)
	seq, pepoch := int32(0), int16(0)
	for step := 0; step < 60; step++ {
		switch op := rng.IntN(20); {
		case op < 13:
			n := 1 + rng.IntN(5)
			tb := testBatch{timestamp: clock.Now().UnixMilli(), producerID: -1, codec: int16([]int{0, 0, 1, 3, 4}[rng.IntN(5)])}
			for i := 0; i < n; i++ {
				tb.values = append(tb.values, bytes.Repeat([]byte{byte(rng.Uint32())}, rng.IntN(120)))
			}
			idem := rng.IntN(3) == 0
			if idem {
				tb.producerID, tb.producerEpoch, tb.baseSequence = 7, pepoch, seq
			}
			b := tb.encode()
			base := l.LogEndOffset()
			setBaseOffset(b, base)
			setLeaderEpoch(b, int32(step/20))
			model.attempted[base] = append([]byte(nil), b...)
			res, err := l.Append(b, AppendOptions{AssignOffsets: true, LeaderEpoch: int32(step / 20)})
			trace("step %d append at %d idem=%v: %+v %v", step, base, idem, res, err)
			if err == nil && !res.Duplicate {
				if res.BaseOffset != base {
					panic(fmt.Sprintf("append at %d returned base %d", base, res.BaseOffset))
				}
				if idem {
					seq += int32(n)
					pending = append(pending, [2]int64{base, 1})
				} else {
					pending = append(pending, [2]int64{base, 0})
				}
				l.SetHighWatermark(l.LogEndOffset())
			}
		case op < 16:
			err := l.Flush()
			trace("step %d flush: %v", step, err)
			if err == nil {
				for _, p := range pending {
					model.durable[p[0]] = model.attempted[p[0]]
					if p[1] == 1 {
						model.lastIdem, model.idemBytes = p[0], model.attempted[p[0]]
					}
				}
				pending = nil
			}
		case op < 18:
			clock.Advance(time.Minute)
			err := m.RunRetention()
			trace("step %d retention: %v start %d", step, err, l.LogStartOffset())
			if err == nil {
				model.logStart = max(model.logStart, l.LogStartOffset())
			}
		case op < 19:
			to := l.LogEndOffset() - int64(rng.IntN(6))
			err := l.TruncateTo(to)
			trace("step %d truncate to %d: %v leo %d", step, to, err, l.LogEndOffset())
			if err != nil {
				// A failed truncation may or may not have cut the tail.
				for off, b := range model.durable {
					if h := parseHeader(b); h.lastOffset() >= to {
						delete(model.durable, off)
						if off == model.lastIdem {
							model.lastIdem = -1
						}
					}
				}
				var kept [][2]int64
				for _, p := range pending {
					if h := parseHeader(model.attempted[p[0]]); h.lastOffset() < to {
						kept = append(kept, p)
					}
				}
				pending = kept
			}
			if err != nil {
				model.logStart = min(model.logStart, to)
			}
			if err == nil {
				model.logStart = l.LogStartOffset()
				leo := l.LogEndOffset()
				for off, b := range model.attempted {
					if off >= leo {
						delete(model.attempted, off)
					}
					if parseHeader(b).lastOffset() >= leo {
						delete(model.durable, off) // below a restarted log start too
					}
				}
				var kept [][2]int64
				for _, p := range pending {
					if b, ok := model.attempted[p[0]]; ok && parseHeader(b).lastOffset() < leo {
						kept = append(kept, p)
					}
				}
				pending = kept
				if model.lastIdem >= leo {
					model.lastIdem = -1
				}
				// The producer's later sequences are gone: it restarts with a new epoch.
				seq, pepoch = 0, pepoch+1
				model.lastIdem = -1
			}
		default:
			hw := l.HighWatermark()
			to := l.LogStartOffset() + int64(rng.IntN(int(hw-l.LogStartOffset()+1)))
			err := l.DeleteRecordsBefore(to)
			trace("step %d delete before %d: %v", step, to, err)
			if err == nil {
				model.logStart = max(model.logStart, to)
			}
		}
	}
	if rng.IntN(2) == 0 {
		// A clean shutdown: if Close succeeds, everything acknowledged is
		// durable and the next open trusts the checkpoints (clean marker).
		err := m.Close()
		trace("close: %v", err)
		if err == nil {
			for _, p := range pending {
				model.durable[p[0]] = model.attempted[p[0]]
				if p[1] == 1 {
					model.lastIdem, model.idemBytes = p[0], model.attempted[p[0]]
				}
			}
		}
	} // else abandoned without Close: an unclean stop
}

// checkCrashModel reopens the log and checks the invariants.
func checkCrashModel(t *testing.T, fsys vfs.FS, clock *manualClock, model *crashModel, what string) {
	t.Helper()
	opts := ManagerOptions{FS: fsys, Dir: "/data", Clock: clock}
	if crashTrace {
		opts.Logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	m, err := OpenManager(opts)
	if err != nil {
		t.Fatalf("%s: reopen manager: %v", what, err)
	}
	if len(m.Partitions()) == 0 {
		if len(model.durable) > 0 {
			t.Fatalf("%s: partition lost with %d durable batches", what, len(model.durable))
		}
		return
	}
	l, err := m.Open(tp0, DefaultConfig())
	if err != nil {
		t.Fatalf("%s: reopen log: %v", what, err)
	}
	if l.LogStartOffset() < model.logStart {
		t.Fatalf("%s: log start %d went back below %d", what, l.LogStartOffset(), model.logStart)
	}
	seen := map[int64]bool{}
	next := int64(-1)
	idemAfter := 0
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		r, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatalf("%s: read %d: %v", what, off, err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil || len(b) == 0 {
			t.Fatalf("%s: read %d: %d bytes, %v", what, off, len(b), err)
		}
		for p := 0; p < len(b); {
			h := parseHeader(b[p:])
			one := b[p : p+int(h.size())]
			if _, err := validateReplicaBatch(one); err != nil {
				t.Fatalf("%s: corrupt batch served at %d: %v", what, h.BaseOffset, err)
			}
			if next >= 0 && h.BaseOffset != next {
				t.Fatalf("%s: offsets not contiguous: batch at %d after end %d", what, h.BaseOffset, next)
			}
			if want, ok := model.attempted[h.BaseOffset]; !ok || !bytes.Equal(want, one) {
				t.Fatalf("%s: batch at %d is not the last one appended there (known %v)", what, h.BaseOffset, ok)
			}
			if h.ProducerID >= 0 && h.BaseOffset > model.lastIdem && model.lastIdem >= 0 {
				idemAfter++
				if h.ProducerEpoch != parseHeader(model.idemBytes).ProducerEpoch {
					idemAfter += producerBatchesKept // a newer epoch fences the old batch
				}
			}
			seen[h.BaseOffset] = true
			next = h.lastOffset() + 1
			p += int(h.size())
			off = next
		}
	}
	for off := range model.durable {
		h := parseHeader(model.durable[off])
		if h.lastOffset() >= l.LogStartOffset() && !seen[off] {
			t.Fatalf("%s: durable batch at %d lost (log [%d, %d))", what, off, l.LogStartOffset(), l.LogEndOffset())
		}
	}
	// A retry of the last durable idempotent batch is recognised as a duplicate.
	if model.lastIdem >= l.LogStartOffset() && idemAfter < producerBatchesKept && model.lastIdem >= 0 {
		retry := append([]byte(nil), model.idemBytes...)
		res, err := l.Append(retry, AppendOptions{AssignOffsets: true, LeaderEpoch: l.LatestEpoch()})
		if err != nil || !res.Duplicate || res.BaseOffset != model.lastIdem {
			t.Fatalf("%s: retry of idempotent batch at %d: %+v %v", what, model.lastIdem, res, err)
		}
	}
	if err := m.Close(); err != nil {
		t.Fatalf("%s: close: %v", what, err)
	}
}

func crashSeed(t *testing.T) uint64 {
	if s := os.Getenv("SLUICE_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	return uint64(time.Now().UnixNano())
}

// crashLoopStart returns a crash loop's seed (logged, with how to re-run
// it) and its bound on the operations failed: unbounded, or short under
// -short.
func crashLoopStart(t *testing.T, short int64) (seed uint64, limit int64) {
	seed = crashSeed(t)
	t.Logf("seed %d (SLUICE_CRASH_SEED=%d reproduces)", seed, seed)
	limit = int64(1 << 30)
	if testing.Short() {
		limit = short
	}
	return seed, limit
}

// TestCrashLoop fails the i-th file-system operation of a workload for i =
// 0, 1, 2, ... until the workload runs through, then restarts the process
// (keeping unsynced data) and, separately, crashes the machine (dropping
// it), and checks after each reopen that every acknowledged and flushed
// batch is there, offsets are contiguous, and no corrupt or foreign batch is
// served. Re-run a failure with SLUICE_CRASH_SEED=<seed>.
func TestCrashLoop(t *testing.T) {
	seed, limit := crashLoopStart(t, 300)
	iterations := 0
	first := int64(0)
	if s := os.Getenv("SLUICE_CRASH_OP"); s != "" {
		first, _ = strconv.ParseInt(s, 10, 64)
		limit = first + 1
	}
	for i := first; i < limit; i++ {
		for _, sticky := range []bool{false, true} {
			mem := vfs.NewMem()
			clock := newManualClock()
			inj := &faults.Counter{Fail: i, Sticky: sticky}
			model := &crashModel{attempted: map[int64][]byte{}, durable: map[int64][]byte{}, lastIdem: -1}
			crashWorkload(vfs.NewFaulty(mem, inj), clock, seed, model)
			fired, op := inj.Fired()
			what := fmt.Sprintf("seed %d, fail op %d sticky=%v (%s)", seed, i, sticky, op)
			if !fired {
				if sticky {
					// No failure at all: the same invariants hold after a restart and a power loss.
					checkCrashModel(t, mem, clock, model, fmt.Sprintf("seed %d, no failure, restart", seed))
					mem.Crash()
					checkCrashModel(t, mem, clock, model, fmt.Sprintf("seed %d, no failure, power loss", seed))
					t.Logf("workload completed after %d operations; %d crash points checked", i, iterations)
					return
				}
				continue
			}
			iterations++
			checkCrashModel(t, mem, clock, model, what+", restart")
			mem.Crash()
			checkCrashModel(t, mem, clock, model, what+", power loss")
		}
	}
}

// TestCrashDropsOnlyUnflushed: with flush.messages=1 every acknowledged
// append survives a power loss.
func TestCrashDropsOnlyUnflushed(t *testing.T) {
	mem := vfs.NewMem()
	m := openManager(t, mem, "/data", nil)
	cfg := smallConfig()
	cfg.FlushMessages = 1
	l, err := m.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 50; i++ {
		if _, err := l.Append(simpleBatch(2, 40, 1, byte(i)), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	want := readAll(t, l, 0)
	mem.Crash()
	m2 := openManager(t, mem, "/data", nil)
	l2, err := m2.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if l2.LogEndOffset() != 100 || !bytes.Equal(readAll(t, l2, 0), want) {
		t.Fatalf("after power loss: LEO %d", l2.LogEndOffset())
	}
	// And without flushing, a power loss may lose the tail but never serves garbage.
	cfg.FlushMessages = 0
	l2.SetConfig(cfg)
	for i := 0; i < 10; i++ {
		if _, err := l2.Append(simpleBatch(2, 40, 1, byte(i)), AppendOptions{AssignOffsets: true}); err != nil {
			t.Fatal(err)
		}
	}
	mem.Crash()
	m3 := openManager(t, mem, "/data", nil)
	l3, err := m3.Open(tp0, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if leo := l3.LogEndOffset(); leo < 100 || leo > 120 || !bytes.Equal(readAll(t, l3, 0)[:len(want)], want) {
		t.Fatalf("after an unflushed power loss: LEO %d", leo)
	}
	if !errors.Is(func() error { _, err := l3.Read(l3.LogEndOffset()+1, 1, 200); return err }(), ErrOffsetOutOfRange) {
		t.Fatal("read past the end after crash")
	}
}

// TestFlushMs: with flush.ms, a RunRetention pass after the interval makes
// appends durable; before it they are lost to a power loss.
func TestFlushMs(t *testing.T) {
	mem := vfs.NewMem()
	clock := newManualClock()
	m := openManager(t, mem, "/data", clock)
	cfg := DefaultConfig()
	cfg.FlushMs = time.Minute
	l := mustOpen(t, m, cfg)
	if err := m.RunRetention(); err != nil { // the empty log's first checkpoint
		t.Fatal(err)
	}
	mustAppend(t, l, simpleBatch(3, 10, 1, 'a'), 0)
	clock.Advance(30 * time.Second)
	if err := m.RunRetention(); err != nil {
		t.Fatal(err)
	}
	clock.Advance(30 * time.Second)
	mustAppend(t, l, simpleBatch(3, 10, 1, 'b'), 0)
	if err := m.RunRetention(); err != nil { // a minute since the last flush: flushes both
		t.Fatal(err)
	}
	mustAppend(t, l, simpleBatch(3, 10, 1, 'c'), 0) // not flushed
	mem.Crash()
	m2 := openManager(t, mem, "/data", clock)
	defer m2.Close()
	l2 := mustOpen(t, m2, cfg)
	if l2.LogEndOffset() != 6 {
		t.Fatalf("after power loss LEO %d, want 6 (two flushed batches)", l2.LogEndOffset())
	}
}
