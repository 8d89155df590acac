package server

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
)

// sessionFetch sends a Fetch v12 that does not wait, with the given session
// id/epoch, partitions (partition -> fetch offset) of topic and forgotten
// partitions.
func sessionFetch(t *testing.T, rc *rawConn, topic string, id, epoch int32, parts map[int32]int64, forget []int32) *kmsg.FetchResponse {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.MaxBytes, req.SessionID, req.SessionEpoch = 1<<20, id, epoch
	if len(parts) > 0 {
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic = topic
		for p := int32(0); p < 8; p++ {
			if off, ok := parts[p]; ok {
				rp := kmsg.NewFetchRequestTopicPartition()
				rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = p, off, 1<<20
				rt.Partitions = append(rt.Partitions, rp)
			}
		}
		req.Topics = append(req.Topics, rt)
	}
	if len(forget) > 0 {
		ft := kmsg.NewFetchRequestForgottenTopic()
		ft.Topic, ft.Partitions = topic, forget
		req.ForgottenTopics = append(req.ForgottenTopics, ft)
	}
	rc.send(encodeRequest(req, 9))
	b, ok := rc.recv()
	if !ok {
		t.Fatal("connection closed")
	}
	resp := kmsg.NewPtrFetchResponse()
	resp.SetVersion(12)
	if err := resp.ReadFrom(b[5:]); err != nil {
		t.Fatal(err)
	}
	return resp
}

// answered maps partition -> (records bytes, high watermark) of an answer.
func answered(resp *kmsg.FetchResponse) map[int32][2]int64 {
	out := map[int32][2]int64{}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			out[p.Partition] = [2]int64{int64(len(p.RecordBatches)), p.HighWatermark}
		}
	}
	return out
}

func TestIncrementalFetchSessions(t *testing.T) {
	ts := startServer(t, "", nil)
	cl := newClient(t, ts.addr)
	if _, err := kadm.NewClient(cl).CreateTopic(testCtx(t), 2, 1, nil, "sess"); err != nil {
		t.Fatal(err)
	}
	produceRaw(t, cl, "sess", 0, -1, makeBatch(-1, -1, -1, 2, "a"))
	rc := dialRaw(t, ts.addr)

	// Full fetch creating a session: every partition is in the answer.
	full := sessionFetch(t, rc, "sess", 0, 0, map[int32]int64{0: 0, 1: 0}, nil)
	id := full.SessionID
	if full.ErrorCode != 0 || id == 0 {
		t.Fatalf("no session created: error %d id %d", full.ErrorCode, id)
	}
	if a := answered(full); len(a) != 2 || a[0][0] == 0 || a[0][1] != 2 {
		t.Fatalf("full answer %v", a)
	}
	// Incremental, offset of partition 0 moved: nothing new anywhere.
	inc := sessionFetch(t, rc, "sess", id, 1, map[int32]int64{0: 2}, nil)
	if inc.ErrorCode != 0 || inc.SessionID != id || len(answered(inc)) != 0 {
		t.Fatalf("idle incremental answer: error %d id %d parts %v", inc.ErrorCode, inc.SessionID, answered(inc))
	}
	// New records on partition 1 only: only partition 1 is answered, read
	// from the session's cached offset 0.
	produceRaw(t, cl, "sess", 1, -1, makeBatch(-1, -1, -1, 3, "b"))
	inc = sessionFetch(t, rc, "sess", id, 2, nil, nil)
	if a := answered(inc); len(a) != 1 || a[1][0] == 0 || a[1][1] != 3 {
		t.Fatalf("incremental answer after a produce to partition 1: %v", a)
	}
	// A stale epoch.
	if bad := sessionFetch(t, rc, "sess", id, 2, nil, nil); bad.ErrorCode != kerr.InvalidFetchSessionEpoch.Code {
		t.Fatalf("stale epoch: error %d", bad.ErrorCode)
	}
	// Forget partition 1; new records there are no longer answered.
	inc = sessionFetch(t, rc, "sess", id, 3, map[int32]int64{1: 3}, nil) // move 1's offset past its data
	inc = sessionFetch(t, rc, "sess", id, 4, nil, []int32{1})
	produceRaw(t, cl, "sess", 1, -1, makeBatch(-1, -1, -1, 1, "c"))
	if inc = sessionFetch(t, rc, "sess", id, 5, nil, nil); len(answered(inc)) != 0 {
		t.Fatalf("forgotten partition answered: %v", answered(inc))
	}
	// Epoch -1 closes the session.
	sessionFetch(t, rc, "sess", id, -1, map[int32]int64{0: 0}, nil)
	if gone := sessionFetch(t, rc, "sess", id, 6, nil, nil); gone.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("closed session: error %d", gone.ErrorCode)
	}
	if gone := sessionFetch(t, rc, "sess", 12345, 1, nil, nil); gone.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("unknown session: error %d", gone.ErrorCode)
	}
}

func TestFetchSessionEvictionAndDisabled(t *testing.T) {
	ts := startServer(t, "", func(c *config.Broker) { c.FetchSessionSlots = 1 })
	if _, err := kadm.NewClient(newClient(t, ts.addr)).CreateTopic(testCtx(t), 1, 1, nil, "ev"); err != nil {
		t.Fatal(err)
	}
	rc := dialRaw(t, ts.addr)
	a := sessionFetch(t, rc, "ev", 0, 0, map[int32]int64{0: 0}, nil).SessionID
	b := sessionFetch(t, rc, "ev", 0, 0, map[int32]int64{0: 0}, nil).SessionID
	if a == 0 || b == 0 || a == b {
		t.Fatalf("sessions %d %d", a, b)
	}
	if r := sessionFetch(t, rc, "ev", a, 1, nil, nil); r.ErrorCode != kerr.FetchSessionIDNotFound.Code {
		t.Fatalf("evicted session: error %d", r.ErrorCode)
	}
	if r := sessionFetch(t, rc, "ev", b, 1, nil, nil); r.ErrorCode != 0 {
		t.Fatalf("live session: error %d", r.ErrorCode)
	}

	off := startServer(t, "", func(c *config.Broker) { c.FetchSessionSlots = 0 })
	if _, err := kadm.NewClient(newClient(t, off.addr)).CreateTopic(testCtx(t), 1, 1, nil, "ev"); err != nil {
		t.Fatal(err)
	}
	if r := sessionFetch(t, dialRaw(t, off.addr), "ev", 0, 0, map[int32]int64{0: 0}, nil); r.SessionID != 0 || r.ErrorCode != 0 {
		t.Fatalf("sessions disabled: id %d error %d", r.SessionID, r.ErrorCode)
	}
}

// TestConsumeWhileProducingWithSessions: a franz-go consumer (which uses
// incremental fetch sessions) follows three partitions while they are
// written, and receives every record exactly once, in order.
func TestConsumeWhileProducingWithSessions(t *testing.T) {
	ts := startServer(t, "", nil)
	if _, err := kadm.NewClient(newClient(t, ts.addr)).CreateTopic(testCtx(t), 3, 1, nil, "live"); err != nil {
		t.Fatal(err)
	}
	cons := newClient(t, ts.addr, kgo.ConsumeTopics("live"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(100*time.Millisecond))
	prod := newClient(t, ts.addr, kgo.DefaultProduceTopic("live"), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	const n = 3000
	go func() {
		for i := 0; i < n; i++ {
			prod.Produce(context.Background(), &kgo.Record{Value: []byte(fmt.Sprint(i))}, nil)
			if i%100 == 0 {
				_ = prod.Flush(context.Background())
			}
		}
		_ = prod.Flush(context.Background())
	}()
	ctx := testCtx(t)
	seen := map[string]bool{}
	next := map[int32]int64{}
	for len(seen) < n {
		fs := cons.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", len(seen), n)
		}
		for _, r := range fs.Records() {
			if r.Offset != next[r.Partition] {
				t.Fatalf("partition %d: offset %d, want %d", r.Partition, r.Offset, next[r.Partition])
			}
			next[r.Partition]++
			if seen[string(r.Value)] {
				t.Fatalf("record %s twice", r.Value)
			}
			seen[string(r.Value)] = true
		}
	}
	if ts.sessions.count() == 0 {
		t.Fatalf("the consumer did not use a fetch session")
	}
}
