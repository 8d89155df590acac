package server

import (
	"encoding/binary"
	"hash/crc32"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	plog "github.com/sluicehq/sluice/broker/log"
)

// withAttributes sets a batch's attributes bits (and its CRC).
func withAttributes(b []byte, bits uint16) []byte {
	binary.BigEndian.PutUint16(b[21:], binary.BigEndian.Uint16(b[21:])|bits)
	binary.BigEndian.PutUint32(b[17:21], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// consumeValues reads the topic from the start at an isolation level until
// it has want records, and returns their values sorted.
func consumeValues(t *testing.T, addr, topic string, level kgo.IsolationLevel, want int) []string {
	t.Helper()
	cl := newClient(t, addr, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(level))
	ctx := testCtx(t)
	var got []string
	for len(got) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d records: %v", len(got), want, got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	cl.Close()
	sort.Strings(got)
	return got
}

func listLatest(t *testing.T, ts *testServer, topic string, isolation int8) int64 {
	t.Helper()
	p := listOffsetsOne(t, ts, 4, isolation, topic, -1)
	if p.ErrorCode != 0 {
		t.Fatalf("list offsets: %v", kerr.ErrorForCode(p.ErrorCode))
	}
	return p.Offset
}

// listOffsetsOne sends a ListOffsets request of the given version and
// isolation for partition 0 of topic at timestamp (-1 latest, -2 earliest,
// -3 the max timestamp) and returns the partition's answer.
func listOffsetsOne(t *testing.T, ts *testServer, version int16, isolation int8, topic string, timestamp int64) kmsg.ListOffsetsResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrListOffsetsRequest()
	req.SetVersion(version)
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Timestamp = timestamp
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp := roundTrip(t, ts.addr, req).(*kmsg.ListOffsetsResponse)
	return resp.Topics[0].Partitions[0]
}

// TestReadCommitted appends committed, aborted and open transactions
// through the log API and reads them with franz-go: read_committed sees
// exactly the committed records (and nothing past the open transaction),
// read_uncommitted sees every record; ListOffsets read_committed answers
// the last stable offset.
func TestReadCommitted(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	if sp := produceRaw(t, cl, "txn", 0, -1, makeBatch(-1, 0, 0, 2, "plain0-")); sp.ErrorCode != 0 {
		t.Fatalf("produce: %v", kerr.ErrorForCode(sp.ErrorCode))
	}
	tt, _ := ts.topics.get("txn")
	l := tt.parts[0].log
	appendTxn := func(pid int64, seq int32, n int, prefix string) {
		t.Helper()
		if _, err := l.Append(withAttributes(makeBatch(pid, 0, seq, n, prefix), 0x10), plog.AppendOptions{AssignOffsets: true, Transactional: true}); err != nil {
			t.Fatal(err)
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	marker := func(pid int64, commit bool) {
		t.Helper()
		if _, err := l.AppendMarker(pid, 0, commit, 0, 0); err != nil {
			t.Fatal(err)
		}
		l.SetHighWatermark(l.LogEndOffset())
	}
	appendTxn(1, 0, 3, "commit1-")
	appendTxn(2, 0, 2, "abort2-")
	appendTxn(1, 3, 2, "commit1b-")
	appendTxn(2, 2, 1, "abort2b-")
	marker(2, false)
	marker(1, true)
	if sp := produceRaw(t, cl, "txn", 0, -1, makeBatch(-1, 0, 0, 1, "plain1-")); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}
	openAt := l.LogEndOffset()
	appendTxn(3, 0, 2, "open3-")
	if sp := produceRaw(t, cl, "txn", 0, -1, makeBatch(-1, 0, 0, 1, "plain2-")); sp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(sp.ErrorCode))
	}

	if got := listLatest(t, ts, "txn", 1); got != openAt {
		t.Fatalf("ListOffsets read_committed = %d, want the LSO %d", got, openAt)
	}
	if got, hw := listLatest(t, ts, "txn", 0), l.HighWatermark(); got != hw {
		t.Fatalf("ListOffsets read_uncommitted = %d, want the high watermark %d", got, hw)
	}
	committed := consumeValues(t, ts.addr, "txn", kgo.ReadCommitted(), 8)
	for _, v := range committed {
		if !strings.HasPrefix(v, "commit1") && !strings.HasPrefix(v, "plain0") && !strings.HasPrefix(v, "plain1") {
			t.Fatalf("read_committed saw %q: %v", v, committed)
		}
	}
	all := consumeValues(t, ts.addr, "txn", kgo.ReadUncommitted(), 14)
	if len(all) != 14 {
		t.Fatalf("read_uncommitted: %v", all)
	}
	// The open transaction commits: read_committed now reads to the end.
	marker(3, true)
	if got := listLatest(t, ts, "txn", 1); got != l.HighWatermark() {
		t.Fatalf("ListOffsets read_committed = %d after the last commit, want %d", got, l.HighWatermark())
	}
	committed = consumeValues(t, ts.addr, "txn", kgo.ReadCommitted(), 11)
	for _, v := range committed {
		if strings.HasPrefix(v, "abort") {
			t.Fatalf("read_committed saw the aborted %q: %v", v, committed)
		}
	}
	if len(committed) != 11 {
		t.Fatalf("read_committed after the commit: %v", committed)
	}
}

// TestProduceRefusesMarkers: a control batch (a forged COMMIT/ABORT marker)
// or a transactional batch from a client is refused with INVALID_RECORD and
// never lands.
func TestProduceRefusesMarkers(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	for name, bits := range map[string]uint16{"control": 0x30, "transactional": 0x10} {
		sp := produceRaw(t, cl, "forged", 0, -1, withAttributes(makeBatch(5, 0, 0, 1, "x"), bits))
		if sp.ErrorCode != kerr.InvalidRecord.Code {
			t.Fatalf("%s batch from a client: code %d (%v), want INVALID_RECORD", name, sp.ErrorCode, kerr.ErrorForCode(sp.ErrorCode))
		}
	}
	tt, _ := ts.topics.get("forged")
	if tt != nil && tt.parts[0].log.LogEndOffset() != 0 {
		t.Fatalf("a refused batch landed: log end %d", tt.parts[0].log.LogEndOffset())
	}
}
