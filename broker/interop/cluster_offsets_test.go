package interop

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
	"github.com/sluicehq/sluice/internal/history"
)

// TestClusterCommitSurvivesCoordinatorKill: a franz-go group consumer
// reads part of a topic and commits; the moment the commit is answered its
// coordinator (the leader of the group's __consumer_offsets partition,
// replication factor 3, min.insync.replicas 2) is killed with SIGKILL. The
// new leader of that partition coordinates the group and its OffsetFetch
// answers the committed offsets; a consumer of the group started after the
// failover begins exactly at them (no committed record read again, none
// skipped) and reads the rest. The history (produces, polls, the commit,
// the offsets fetched back) has no anomaly: no commit going backwards, no
// record at two offsets.
func TestClusterCommitSurvivesCoordinatorKill(t *testing.T) {
	c := startBrokerCluster(t, 3, "min.insync.replicas=2")
	h := newClusterHistory(t)
	topic := newTopicName("commits")
	createReplicated(t, c, topic, 3, 3)
	c.waitLeaders(topic, 3, c.ids()...)

	const total = 300
	prod := c.client(kgo.RequiredAcks(kgo.AllISRAcks()))
	pp := h.process()
	for i := range total {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if err := h.produce(ctx, prod, pp, topic, fmt.Sprintf("v-%04d", i)); err != nil {
			t.Fatalf("produce %d: %v", i, err)
		}
		cancel()
	}

	groupID := newTopicName("group")
	consume := func(proc int, stopAfter int) (*kgo.Client, map[string]bool) {
		cl := c.client(kgo.ConsumeTopics(topic), kgo.ConsumerGroup(groupID), kgo.DisableAutoCommit(),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.SessionTimeout(6*time.Second), kgo.FetchMaxPartitionBytes(1024))
		read := map[string]bool{}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		for len(read) < stopAfter {
			p := h.rec.Invoke(proc, history.Poll)
			fs := cl.PollRecords(ctx, 20)
			if ctx.Err() != nil {
				t.Fatalf("consumer %d: read %d records, want %d", proc, len(read), stopAfter)
			}
			var recs []history.Record
			fs.EachError(func(topic string, p int32, err error) { t.Logf("consumer %d: fetch %s-%d: %v", proc, topic, p, err) })
			fs.EachRecord(func(r *kgo.Record) {
				recs = append(recs, history.Record{Topic: topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				read[string(r.Value)] = true
			})
			p.Complete(history.Op{Outcome: history.OK, Records: recs})
		}
		return cl, read
	}

	// The first member reads about a third, commits what it polled, and its
	// coordinator is killed right after the answer.
	first, readFirst := consume(h.process(), total/3)
	coordinator := c.findCoordinator(groupID)
	committed := first.UncommittedOffsets()[topic]
	// The followers of the offsets partition are slow (SIGSTOP for 500 ms,
	// well inside their sessions and replica.lag.time.max.ms): a commit
	// answered before they hold it is lost with the coordinator.
	var followers []int32
	for _, id := range c.ids() {
		if id != coordinator {
			followers = append(followers, id)
		}
	}
	c.signal(syscall.SIGSTOP, followers...)
	resumed := time.AfterFunc(500*time.Millisecond, func() { c.signal(syscall.SIGCONT, followers...) })
	cp := h.rec.Invoke(h.process(), history.Commit)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	err := first.CommitUncommittedOffsets(ctx)
	cancel()
	c.brokers[coordinator].Kill()
	if resumed.Stop() {
		c.signal(syscall.SIGCONT, followers...)
	}
	if err != nil {
		t.Fatalf("commit: %v", err)
	}
	commitOp := history.Op{Outcome: history.OK, Group: groupID}
	want := map[int32]int64{}
	for p, o := range committed {
		commitOp.Offsets = append(commitOp.Offsets, history.Offset{Topic: topic, Partition: p, Offset: o.Offset})
		want[p] = o.Offset
	}
	cp.Complete(commitOp)
	t.Logf("committed %v at coordinator %d, then killed it", want, coordinator)
	closed := make(chan struct{})
	go func() { // its leave goes to the new coordinator, or its session ends
		defer close(closed)
		first.Close()
	}()
	t.Cleanup(func() { <-closed }) // before the client's own cleanup closes it again: two Closes at once race in franz-go

	var live []int32
	for _, id := range c.ids() {
		if id != coordinator {
			live = append(live, id)
		}
	}
	// The new coordinator: the broker the live ones name, and it answers the
	// committed offsets.
	var got map[int32]int64
	var newCoordinator int32
	eventually(t, 60*time.Second, "the new coordinator answers OffsetFetch", func() error {
		id, err := c.coordinatorAmong(groupID, live)
		if err != nil {
			return err
		}
		fp := h.rec.Invoke(h.process(), history.FetchCommitted)
		offsets, code := c.offsetFetch(id, groupID, topic)
		if code != 0 {
			return fmt.Errorf("broker %d: OffsetFetch code %d", id, code)
		}
		op := history.Op{Outcome: history.OK, Group: groupID}
		for p, o := range offsets {
			op.Offsets = append(op.Offsets, history.Offset{Topic: topic, Partition: p, Offset: o})
		}
		fp.Complete(op)
		got, newCoordinator = offsets, id
		return nil
	})
	offsets, err := c.topicView(newCoordinator, group.OffsetsTopic)
	if err != nil {
		t.Fatal(err)
	}
	if p := group.PartitionFor(groupID, int32(len(offsets))); offsets[p].Leader != newCoordinator {
		t.Errorf("new coordinator %d, but %s-%d is led by %d", newCoordinator, group.OffsetsTopic, p, offsets[p].Leader)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("new coordinator %d answers committed offsets %v; %v were committed at %d before it was killed", newCoordinator, got, want, coordinator)
	}

	// A new member starts where the group committed.
	secondProc := h.process()
	h.rec.Invoke(secondProc, history.Assign).Complete(history.Op{Outcome: history.OK, Offsets: offsetsOf(topic, want)})
	rest := 0
	for p, end := range c.endOffsets(topic, live...) {
		rest += int(end - want[p])
	}
	_, readSecond := consume(secondProc, rest)
	hist := h.rec.History()
	firstSeen := map[int32]int64{}
	for _, op := range hist {
		if op.Process != secondProc || op.Kind != history.Poll {
			continue
		}
		for _, r := range op.Records {
			if _, ok := firstSeen[r.Partition]; !ok {
				firstSeen[r.Partition] = r.Offset
			}
			if r.Offset < want[r.Partition] {
				t.Errorf("after the failover the group read %s-%d@%d, below its committed offset %d", topic, r.Partition, r.Offset, want[r.Partition])
			}
		}
	}
	for p, o := range want {
		if f, ok := firstSeen[p]; ok && f != o {
			t.Errorf("after the failover the group began %s-%d at %d, committed %d", topic, p, f, o)
		}
	}
	for v := range readFirst {
		readSecond[v] = true
	}
	if len(readSecond) != total {
		t.Errorf("the group read %d distinct records of %d", len(readSecond), total)
	}
	stats := h.check()
	t.Logf("records produced %d, read by the first member %d, by the second %d; history %+v", total, len(readFirst), rest, stats)
}

func offsetsOf(topic string, m map[int32]int64) []history.Offset {
	var out []history.Offset
	for p, o := range m {
		out = append(out, history.Offset{Topic: topic, Partition: p, Offset: o})
	}
	return out
}

// coordinatorAmong is the broker the listed brokers all name as the
// coordinator of groupID, if they agree and it is one of them.
func (c *brokerCluster) coordinatorAmong(groupID string, live []int32) (int32, error) {
	var agreed int32 = -1
	for _, id := range live {
		got, err := c.findCoordinatorAt(id, groupID)
		if err != nil {
			return -1, err
		}
		if agreed >= 0 && got != agreed {
			return -1, fmt.Errorf("brokers name %d and %d", agreed, got)
		}
		agreed = got
	}
	for _, id := range live {
		if id == agreed {
			return agreed, nil
		}
	}
	return -1, fmt.Errorf("%w among %v: named %d", errNoCoordinator, live, agreed)
}

// findCoordinatorAt asks broker id for the coordinator of groupID.
func (c *brokerCluster) findCoordinatorAt(id int32, groupID string) (int32, error) {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorKey, req.CoordinatorKeys = groupID, []string{groupID} // v0-3, v4+
	resp, err := c.request(id, req)
	if err != nil {
		return -1, err
	}
	r := resp.(*kmsg.FindCoordinatorResponse)
	if len(r.Coordinators) == 1 { // v4+
		r.ErrorCode, r.NodeID = r.Coordinators[0].ErrorCode, r.Coordinators[0].NodeID
	}
	if r.ErrorCode != 0 {
		return -1, fmt.Errorf("broker %d: %w", id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r.NodeID, nil
}

// signal sends sig to the listed brokers' processes.
func (c *brokerCluster) signal(sig syscall.Signal, ids ...int32) {
	c.t.Helper()
	for _, id := range ids {
		if err := syscall.Kill(c.brokers[id].PID(), sig); err != nil {
			c.t.Fatalf("signal %v to broker %d: %v", sig, id, err)
		}
	}
}
