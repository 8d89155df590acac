package audit

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// batch encodes one RecordBatch v2 of records at times ts (ms), with attrs
// (a codec compresses it), producer pid.
func batch(t *testing.T, ts []int64, attrs int16, pid int64) []byte {
	t.Helper()
	var recs []byte
	for i, at := range ts {
		r := kmsg.Record{TimestampDelta64: at - ts[0], OffsetDelta: int32(i), Key: nil, Value: []byte("value")}
		body := r.AppendTo(nil)[1:] // Length 0 is one byte
		r.Length = int32(len(body))
		recs = r.AppendTo(recs)
	}
	if codec := attrs & attrCodec; codec != 0 {
		comp, err := kgo.DefaultCompressor(kgo.GzipCompression())
		if err != nil {
			t.Fatal(err)
		}
		out, _ := comp.Compress(new(bytes.Buffer), recs)
		recs = append([]byte(nil), out...)
	}
	maxTs := ts[0]
	for _, at := range ts {
		maxTs = max(maxTs, at)
	}
	b := kmsg.RecordBatch{Magic: 2, Attributes: attrs, LastOffsetDelta: int32(len(ts) - 1), FirstTimestamp: ts[0],
		MaxTimestamp: maxTs, ProducerID: pid, ProducerEpoch: 0, FirstSequence: -1, NumRecords: int32(len(ts)), Records: recs}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	return raw
}

func sums(cs []Count) map[Tier]map[int64]int64 {
	out := map[Tier]map[int64]int64{}
	for _, c := range cs {
		if out[c.Tier] == nil {
			out[c.Tier] = map[int64]int64{}
		}
		out[c.Tier][c.WindowStart] += c.Messages
	}
	return out
}

// The broker tier counts each record in its record time's window (a batch
// spanning windows record by record, compressed or not), every record of
// an append in the window of the broker's clock, a transaction's records
// only at its COMMIT, and neither internal topics nor _audit.
func TestBrokerCountsAppends(t *testing.T) {
	b, err := NewBroker(3, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	clock := time.UnixMilli(10 * 60_000)
	b.now = func() time.Time { return clock }
	m := int64(60_000)
	// One batch in window 0, one spanning windows 0..2 (gzip), both in one append.
	in := append(batch(t, []int64{1, 2, 3}, 0, -1), batch(t, []int64{m - 1, m, 2*m + 5}, 1, -1)...)
	b.Appended("pv", 0, in)
	// A transaction committed, one aborted, a marker of nothing held.
	b.Appended("pv", 1, batch(t, []int64{5 * m}, attrTransactional, 7))
	b.Appended("pv", 1, batch(t, []int64{6 * m, 6*m + 1}, attrTransactional, 8))
	b.Marker("pv", 1, 7, true)
	b.Marker("pv", 1, 8, false)
	b.Marker("pv", 1, 9, true)
	// Never counted.
	b.Appended(Topic, 0, batch(t, []int64{1}, 0, -1))
	b.Appended("__consumer_offsets", 0, batch(t, []int64{1}, 0, -1))
	// A control batch (a marker as the log holds it) is not a record.
	b.Appended("pv", 0, batch(t, []int64{1}, attrControl, 7))
	// LogAppendTime: every record at the batch's max timestamp.
	b.Appended("pv", 2, batch(t, []int64{1, 4 * m}, attrLogAppendTime, -1))

	got := sums(b.Counts())
	want := map[int64]int64{0: 4, m: 1, 2 * m: 1, 5 * m: 1, 4 * m: 2}
	if len(got[TierBroker]) != len(want) {
		t.Errorf("broker tier by record time %v, want %v", got[TierBroker], want)
	}
	for w, n := range want {
		if got[TierBroker][w] != n {
			t.Errorf("window %d: %d records, want %d (all: %v)", w, got[TierBroker][w], n, got[TierBroker])
		}
	}
	if c := got[TierBrokerClock]; len(c) != 1 || c[10*m] != 9 {
		t.Errorf("broker tier by its clock %v, want 9 records in window %d", c, 10*m)
	}
	for _, c := range b.Counts() {
		if c.Origin[:7] != "node-3/" {
			t.Errorf("origin %q, want node-3/...", c.Origin)
		}
	}
}

// The mirror tier's counts move only with a committed transaction, its
// records carry the cumulative count, and a restored tier goes on from the
// committed counts of its own origin only.
func TestMirrorCountsCommitWithTheCopies(t *testing.T) {
	m, err := NewMirror(MirrorOrigin("a-b", "cluster-a"), time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	rec := func(ms int64) *kgo.Record {
		return &kgo.Record{Topic: "pv", Value: []byte("v"), Timestamp: time.UnixMilli(ms)}
	}
	published := map[string]Count{}
	txn := func(commit bool, times ...int64) {
		for _, at := range times {
			m.Copied(rec(at))
		}
		rs, err := m.Records(time.Now(), 4)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs {
			var c Count
			if err := json.Unmarshal(r.Value, &c); err != nil || string(r.Key) != c.Key() || r.Partition < 0 || r.Partition >= 4 {
				t.Fatalf("record %s (partition %d): %v", r.Key, r.Partition, err)
			}
			if commit {
				published[c.Key()] = c
			}
		}
		m.Ended(commit)
	}
	txn(true, 1, 2, 60_001)
	txn(false, 3, 4, 5) // aborted: in neither the target nor the counts
	txn(true, 6)
	total := func() (n int64) {
		for _, c := range published {
			n += c.Messages
		}
		return n
	}
	if n := total(); n != 4 || len(published) != 2 {
		t.Fatalf("published %v (%d records), want 4 records in 2 keys", published, n)
	}
	// A new session from what was committed (and another mirror's counts).
	var committed []Count
	for _, c := range published {
		committed = append(committed, c)
	}
	other := Count{Version: 1, Tier: TierMirror, Topic: "pv", WindowStart: 0, WindowMs: 60_000, Origin: "x-b/cluster-x", Messages: 100}
	m2, _ := NewMirror(MirrorOrigin("a-b", "cluster-a"), time.Minute)
	if err := m2.Restore(append(committed, other)); err != nil {
		t.Fatal(err)
	}
	m = m2
	txn(true, 7)
	if n := total(); n != 5 {
		t.Errorf("after the restore: %d records, want 5", n)
	}
	m3, _ := NewMirror(MirrorOrigin("a-b", "cluster-a"), 2*time.Minute)
	if err := m3.Restore(committed); err == nil {
		t.Error("restoring counts of another window width: no error")
	}
}
