package replica_test

import (
	"context"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/replica"
)

// replicaFetch sends broker `to` a follower's Fetch v12 (replica id from)
// for partition 0 and returns the partition's answer.
func replicaFetch(t *testing.T, c *testCluster, to, from, currentEpoch int32, fetchOffset int64, lastFetchedEpoch int32) kmsg.FetchResponseTopicPartition {
	t.Helper()
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(12)
	req.ReplicaID = from
	req.MaxBytes, req.MinBytes, req.MaxWaitMillis = 1<<20, 1, 0
	req.SessionID, req.SessionEpoch = 0, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = c.topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.CurrentLeaderEpoch, rp.FetchOffset, rp.LastFetchedEpoch = 0, currentEpoch, fetchOffset, lastFetchedEpoch
	rp.LogStartOffset, rp.PartitionMaxBytes = -1, 1<<20
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := req.RequestWith(ctx, c.client(c.node(to).addr))
	if err != nil {
		t.Fatalf("fetch from broker %d: %v", to, err)
	}
	if resp.ErrorCode != 0 || len(resp.Topics) != 1 || len(resp.Topics[0].Partitions) != 1 {
		t.Fatalf("fetch from broker %d: error %d, %d topics", to, resp.ErrorCode, len(resp.Topics))
	}
	return resp.Topics[0].Partitions[0]
}

// divergedLogs leaves broker 1 (stopped) with offsets 5 and 6 in epoch 0
// that broker 2, leader in epoch 1, never got: broker 2 holds 0-4 in epoch
// 0 and 5-7 in epoch 1.
func divergedLogs(t *testing.T, c *testCluster) {
	both := []int32{1, 2}
	c.elect(0, 1, both) // epoch 0
	for i := range 5 {
		if code, _ := c.produceRaw(1, 0, -1, "a"+strconv.Itoa(i)); code != 0 {
			t.Fatalf("produce a%d: code %d", i, code)
		}
	}
	c.waitFor("settle", c.settled)
	c.stop(2)
	if code, _ := c.produceRaw(1, 0, 1, "tail-1", "tail-2"); code != 0 { // offsets 5, 6 on broker 1 only
		t.Fatalf("acks=1 tail: code %d", code)
	}
	c.stop(1)
	c.elect(0, 2, both, 1) // epoch 1
	c.start(2)
	c.waitFor("broker 2 to lead epoch 1", func() bool { l, e, _ := c.node(2).mgr.Role(c.topic, 0); return l && e == 1 })
	if code, _ := c.produceRaw(2, 0, 1, "b0", "b1", "b2"); code != 0 { // offsets 5-7, epoch 1
		t.Fatalf("produce b: code %d", code)
	}
}

// KIP-320 on the leader: a follower's fetch whose last fetched epoch ends
// at the leader before the fetch offset gets that epoch's end as
// DivergingEpoch and no records; a consistent one gets records.
func TestFetchAnswersDivergingEpoch(t *testing.T) {
	c := newCluster(t, 2, 1, 1, time.Minute)
	divergedLogs(t, c)
	cases := []struct {
		name        string
		offset      int64
		lastEpoch   int32
		wantEpoch   int32
		wantEnd     int64
		wantRecords bool
	}{
		{"epoch 0 ends at 5, asked from 7", 7, 0, 0, 5, false},
		{"epoch 0 ends at 5, asked from 5", 5, 0, -1, -1, true},
		{"epoch 1 up to the log end", 8, 1, -1, -1, false},
		{"an epoch newer than the leader's", 8, 3, 1, 8, false},
	}
	for _, tc := range cases {
		rp := replicaFetch(t, c, 2, 1, 1, tc.offset, tc.lastEpoch)
		if rp.ErrorCode != 0 {
			t.Errorf("%s: error code %d", tc.name, rp.ErrorCode)
		}
		if rp.DivergingEpoch.Epoch != tc.wantEpoch || rp.DivergingEpoch.EndOffset != tc.wantEnd {
			t.Errorf("%s: diverging epoch %d end %d, want %d end %d", tc.name, rp.DivergingEpoch.Epoch, rp.DivergingEpoch.EndOffset, tc.wantEpoch, tc.wantEnd)
		}
		if got := len(rp.RecordBatches) > 0; got != tc.wantRecords {
			t.Errorf("%s: records %v, want %v", tc.name, got, tc.wantRecords)
		}
		if rp.HighWatermark < 0 {
			t.Errorf("%s: no high watermark in the answer", tc.name)
		}
	}
}

// epochRequestsServed scrapes how many OffsetForLeaderEpoch requests a
// broker has answered.
func epochRequestsServed(t *testing.T, c *testCluster, id int32) int {
	rec := httptest.NewRecorder()
	c.node(id).srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := regexp.MustCompile(`(?m)^sluice_broker_requests_total\{api="OffsetForLeaderEpoch"\} (\d+)`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// KIP-320 on the follower: the old leader comes back with a tail the new
// leader never got; its first Fetch is answered with the diverging epoch,
// it cuts its log there and catches up, with no OffsetForLeaderEpoch round
// trip.
func TestFollowerTruncatesOnDivergingEpoch(t *testing.T) {
	c := newCluster(t, 2, 1, 1, time.Minute)
	divergedLogs(t, c)
	before := epochRequestsServed(t, c, 2)
	c.start(1)
	c.waitFor("broker 1 back in the ISR", func() bool { return slices.Contains(c.current(0).ISR, 1) })
	c.waitFor("replicas to settle", c.settled)
	got := values(t, c, 1)
	want := map[int64]string{0: "a0", 4: "a4", 5: "b0", 6: "b1", 7: "b2"}
	for o, v := range want {
		if got[o] != v {
			t.Errorf("broker 1 offset %d: %q, want %q (all: %v)", o, got[o], v, got)
		}
	}
	if n := epochRequestsServed(t, c, 2) - before; n != 0 {
		t.Errorf("the leader answered %d OffsetForLeaderEpoch requests; the diverging epoch of Fetch should have made them needless", n)
	}
}

// A partition whose fetches fail is delayed alone: the fetcher's other
// partitions from the same leader go on replicating during its backoff
// (here 10 minutes, far longer than the test waits).
func TestPartitionErrorDelaysOnlyThatPartition(t *testing.T) {
	c := newClusterWith(t, 2, 2, 1, time.Minute, func(o *replica.Options) { o.FetchBackoff = 10 * time.Minute })
	both := []int32{1, 2}
	c.elect(0, 1, both)
	c.elect(1, 1, both)
	for p := int32(0); p < 2; p++ {
		if code, _ := c.produceRaw(1, p, -1, "x", "y"); code != 0 {
			t.Fatalf("partition %d: code %d", p, code)
		}
	}
	c.waitFor("settle", c.settled)
	// Broker 2 alone learns of a newer epoch of partition 1 that broker 1
	// does not know yet: broker 1 answers its fetches for partition 1 with
	// UNKNOWN_LEADER_EPOCH.
	st := c.current(1)
	st.LeaderEpoch++
	st.Version++
	c.node(2).mgr.Apply([]replica.State{st})
	for i := range 5 {
		if code, _ := c.produceRaw(1, 0, 1, "more"+strconv.Itoa(i)); code != 0 {
			t.Fatalf("produce: code %d", code)
		}
	}
	leader, _ := c.node(1).srv.PartitionLog(c.topic, 0)
	follower, _ := c.node(2).srv.PartitionLog(c.topic, 0)
	c.waitFor("broker 2 to replicate partition 0 while partition 1 is refused", func() bool {
		return follower.LogEndOffset() == leader.LogEndOffset()
	})
}

// A follower that was down while its leader's log start passed its log end
// (DeleteRecords or retention) cannot fetch from its log end any more: it
// restarts its log at the leader's log start, catches up and rejoins the
// ISR, instead of asking for the same out-of-range offset forever.
func TestFollowerBehindLeaderLogStartRestarts(t *testing.T) {
	c := newCluster(t, 2, 1, 1, time.Minute)
	both := []int32{1, 2}
	c.elect(0, 1, both)
	if code, _ := c.produceRaw(1, 0, -1, "a0", "a1"); code != 0 {
		t.Fatalf("produce a: code %d", code)
	}
	c.waitFor("settle", c.settled)
	c.stop(2)
	c.elect(0, 1, both, 2) // epoch 1, ISR [1]
	for i := range 3 {
		if code, _ := c.produceRaw(1, 0, -1, "b"+strconv.Itoa(i)); code != 0 { // offsets 2-4
			t.Fatalf("produce b%d: code %d", i, code)
		}
	}
	leader, err := c.node(1).srv.PartitionLog(c.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := leader.DeleteRecordsBefore(4); err != nil { // the leader's log start passes broker 2's log end (2)
		t.Fatal(err)
	}
	c.start(2)
	c.waitFor("broker 2 back in the ISR", func() bool { return slices.Contains(c.current(0).ISR, 2) })
	follower, err := c.node(2).srv.PartitionLog(c.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if follower.LogStartOffset() != 4 || follower.LogEndOffset() != leader.LogEndOffset() {
		t.Fatalf("broker 2's log [%d, %d), the leader's [%d, %d)", follower.LogStartOffset(), follower.LogEndOffset(),
			leader.LogStartOffset(), leader.LogEndOffset())
	}
	if got := values(t, c, 2); got[4] != "b2" {
		t.Errorf("broker 2 offset 4: %q, want b2 (all: %v)", got[4], got)
	}
}

// divergingAnswers scrapes how many diverging-epoch Fetch answers a
// broker's fetchers got.
func divergingAnswers(t *testing.T, c *testCluster, id int32) int {
	rec := httptest.NewRecorder()
	c.node(id).srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	m := regexp.MustCompile(`(?m)^sluice_replica_diverging_epochs_total (\d+)`).FindStringSubmatch(rec.Body.String())
	if m == nil {
		return 0
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// A follower whose log cannot be cut (its log failed or closed: a disk
// error) is delayed like any partition-level error, not sent back to its
// leader at once for the same diverging-epoch answer, round after round.
func TestFailedCutDelaysPartition(t *testing.T) {
	c := newClusterWith(t, 2, 1, 1, time.Minute, func(o *replica.Options) { o.FetchBackoff = 10 * time.Minute })
	both := []int32{1, 2}
	c.elect(0, 1, both) // epoch 0
	if code, _ := c.produceRaw(1, 0, -1, "a0", "a1"); code != 0 {
		t.Fatalf("produce a: code %d", code)
	}
	c.waitFor("settle", c.settled)
	c.stop(2)
	if code, _ := c.produceRaw(1, 0, 1, "tail"); code != 0 { // offset 2 on broker 1 only
		t.Fatalf("acks=1 tail: code %d", code)
	}
	l, err := c.node(1).srv.PartitionLog(c.topic, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil { // every write to broker 1's log fails from here on
		t.Fatal(err)
	}
	c.start(2)             // a follower of broker 1 that cannot read the tail (broker 1's log is closed)
	c.elect(0, 2, both, 1) // epoch 1: broker 1 follows and must cut offset 2
	c.waitFor("a diverging-epoch answer to broker 1", func() bool { return divergingAnswers(t, c, 1) > 0 })
	time.Sleep(300 * time.Millisecond)
	if n := divergingAnswers(t, c, 1); n != 1 {
		t.Errorf("broker 1 got %d diverging-epoch answers; after its failed cut it should wait its FetchBackoff (10 min)", n)
	}
}
