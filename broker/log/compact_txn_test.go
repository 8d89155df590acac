package log

import (
	"bytes"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// controlOffsets returns the base offsets of the log's control batches.
func controlOffsets(t *testing.T, l *Log) []int64 {
	t.Helper()
	var out []int64
	for off := l.LogStartOffset(); off < l.LogEndOffset(); {
		r, err := l.Read(off, 1<<20, l.LogEndOffset())
		if err != nil {
			t.Fatal(err)
		}
		b, err := r.Bytes()
		r.Close()
		if err != nil || len(b) == 0 {
			t.Fatalf("read %d: %v", off, err)
		}
		for len(b) > 0 {
			h := parseHeader(b)
			if h.Attributes&attrControl != 0 {
				out = append(out, h.BaseOffset)
			}
			b = b[h.size():]
			off = h.lastOffset() + 1
		}
	}
	return out
}

// TestCompactTransactions: the cleaner removes aborted records (which
// supersede nothing), keeps markers while their transactions have data and
// until delete.retention.ms, then removes them (an ABORT with its index
// entry), and leaves an open transaction's records alone.
func TestCompactTransactions(t *testing.T) {
	clock := newManualClock()
	m, l := openCompactLog(t, vfs.NewMem(), clock)
	defer m.Close()
	now := func() int64 { return clock.Now().UnixMilli() }
	seq := map[int64]int32{}
	txn := func(pid int64, recs ...keyedRecord) int64 {
		t.Helper()
		res, err := l.Append(transactional(keyedBatch(recs, 0, now(), pid, seq[pid])), AppendOptions{AssignOffsets: true, Transactional: true})
		if err != nil {
			t.Fatal(err)
		}
		seq[pid] += int32(len(recs))
		return res.BaseOffset
	}
	plain := func(recs ...keyedRecord) {
		t.Helper()
		mustAppend(t, l, keyedBatch(recs, 0, now(), -1, 0), 0)
	}
	marker := func(pid int64, commit bool) int64 {
		t.Helper()
		off, err := l.AppendMarker(pid, 0, commit, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		return off
	}
	pad := func() {
		for range 3 {
			plain(keyedRecord{"pad", bytes.Repeat([]byte{'p'}, 300)})
		}
	}
	plain(keyedRecord{"k1", []byte("committed-k1")})   // 0
	txn(1, keyedRecord{"k1", []byte("aborted-k1")})    // 1
	txn(2, keyedRecord{"k2", []byte("superseded-k2")}) // 2
	abort1 := marker(1, false)                         // 3
	commit2 := marker(2, true)                         // 4
	plain(keyedRecord{"k2", []byte("newer-k2")})       // 5
	txn(1, keyedRecord{"k3", []byte("committed-k3")})  // 6
	txn(2, keyedRecord{"k4", []byte("committed-k4")})  // 7
	marker(1, true)
	marker(2, true)
	pad()
	openTxn := txn(5, keyedRecord{"k5", []byte("open-k5")})
	pad()
	plain(keyedRecord{"k5", []byte("plain-k5")})
	pad()
	l.SetHighWatermark(l.LogEndOffset())

	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	recs, _ := readAllRecords(t, l)
	if r, ok := recs[1]; ok {
		t.Fatalf("aborted record kept: %+v", r)
	}
	if r := recs[0]; string(r.value) != "committed-k1" {
		t.Fatalf("the aborted k1 superseded the committed one: %+v", recs)
	}
	if _, ok := recs[openTxn]; !ok {
		t.Fatal("a record of an open transaction was cleaned")
	}
	if got := controlOffsets(t, l); len(got) != 4 || got[0] != abort1 || got[1] != commit2 {
		t.Fatalf("markers within delete.retention.ms: %v, want all four", got)
	}
	if es, _ := l.AbortedTransactions(0, l.LogEndOffset()); len(es) != 1 || es[0].LastOffset != abort1 {
		t.Fatalf("aborted index %v", es)
	}

	// Past delete.retention.ms the spent markers go, the last ones of their producers stay.
	clock.Advance(2 * time.Hour)
	pad()
	l.SetHighWatermark(l.LogEndOffset())
	if _, err := l.Compact(); err != nil {
		t.Fatal(err)
	}
	got := controlOffsets(t, l)
	if len(got) != 2 || got[0] == abort1 || got[0] == commit2 {
		t.Fatalf("markers after delete.retention.ms: %v (ABORT at %d, COMMIT at %d must go)", got, abort1, commit2)
	}
	if es, _ := l.AbortedTransactions(0, l.LogEndOffset()); len(es) != 0 {
		t.Fatalf("the removed ABORT's index entry stayed: %v", es)
	}
	if _, ok := recs[openTxn]; !ok {
		t.Fatal("a record of an open transaction was cleaned")
	}
	if open := l.OpenTransactions(); len(open) != 1 || open[0].FirstOffset != openTxn {
		t.Fatalf("open transactions %v", open)
	}
	rp := replayTxns(t, l)
	if !reflect.DeepEqual(rp.open, map[int64]int64{5: openTxn}) {
		t.Fatalf("replay of the compacted log: open %v", rp.open)
	}
}
