package replica_test

import (
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	plog "github.com/sluicehq/sluice/broker/log"
)

var kerrTopicExists = kerr.TopicAlreadyExists

var all3 = []int32{1, 2, 3}

// Steady replication with acks=all over three brokers and two partitions.
func TestSteadyReplication(t *testing.T) {
	c := newCluster(t, 3, 2, 2, 10*time.Second)
	c.elect(0, 1, all3)
	c.elect(1, 2, all3)
	h := newHistory()
	for p, leader := range []int32{1, 2} {
		if err := c.produce(h, leader, int32(p), "steady", 200); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	if got := h.count(); got != 400 {
		t.Fatalf("%d records acknowledged, want 400", got)
	}
	c.check(h)
	// A follower refuses clients: only the leader serves.
	if code, _ := c.produceRaw(2, 0, -1, "to-a-follower"); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("produce to a follower: code %d, want NOT_LEADER_OR_FOLLOWER", code)
	}
}

// A follower stops: the ISR shrinks after LagTimeMax, acks=all with min ISR 2
// is refused with NOT_ENOUGH_REPLICAS; the follower returns, catches up, the
// ISR expands and acks=all works again. Nothing acknowledged is lost.
func TestISRShrinkAndExpand(t *testing.T) {
	c := newCluster(t, 2, 1, 2, 300*time.Millisecond)
	both := []int32{1, 2}
	c.elect(0, 1, both)
	h := newHistory()
	if err := c.produce(h, 1, 0, "before", 50); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	// acks=1 writes move the log end, which the stopped follower never reaches.
	if code, _ := c.produceRaw(1, 0, 1, "acks1-a", "acks1-b"); code != 0 {
		t.Fatalf("acks=1 produce: code %d", code)
	}
	c.waitFor("ISR to shrink to the leader", func() bool { return slices.Equal(c.current(0).ISR, []int32{1}) })
	c.waitFor("the leader to see the shrink", func() bool { return c.node(1).mgr.Stats().UnderMinISR == 1 })
	if code, _ := c.produceRaw(1, 0, -1, "refused"); code != kerr.NotEnoughReplicas.Code {
		t.Fatalf("acks=all below min ISR: code %d, want NOT_ENOUGH_REPLICAS", code)
	}
	if s := c.node(1).mgr.Stats(); s.ISRShrinks != 1 || s.UnderReplicated != 1 {
		t.Errorf("stats after shrink: %+v", s)
	}
	c.start(2)
	c.waitFor("ISR to expand", func() bool { return slices.Equal(c.current(0).ISR, both) })
	c.waitFor("the leader to see the expansion", func() bool { return c.node(1).mgr.Stats().UnderReplicated == 0 })
	code, off := c.produceRaw(1, 0, -1, "after")
	if code != 0 {
		t.Fatalf("acks=all after the expansion: code %d", code)
	}
	h.ack(0, off, "after")
	if s := c.node(1).mgr.Stats(); s.ISRExpands != 1 {
		t.Errorf("stats after expansion: %+v", s)
	}
	c.check(h)
}

// AppendLeaderInEpoch (a group coordinator's appends) appends only in the
// leadership it names: after the leadership moved away and back (a later
// epoch on the same broker) an append naming the old epoch is refused with
// NOT_LEADER_OR_FOLLOWER, one naming the current epoch lands.
func TestAppendLeaderInEpoch(t *testing.T) {
	c := newCluster(t, 2, 1, 1, 10*time.Second)
	both := []int32{1, 2}
	first := c.elect(0, 1, both)
	c.waitFor("broker 1 leads", func() bool { l, _, ok := c.node(1).mgr.Role(c.topic, 0); return ok && l })
	if _, code, err := c.node(1).mgr.AppendLeaderInEpoch(c.topic, 0, first.LeaderEpoch, 1, makeBatch(-1, -1, -1, []string{"a"}), plog.AppendOptions{}); code != 0 || err != nil {
		t.Fatalf("append in the current epoch %d: code %d, %v", first.LeaderEpoch, code, err)
	}
	c.elect(0, 2, both)
	c.waitFor("broker 1 follows", func() bool { l, _, ok := c.node(1).mgr.Role(c.topic, 0); return ok && !l })
	again := c.elect(0, 1, both)
	c.waitFor("broker 1 leads again", func() bool { l, e, ok := c.node(1).mgr.Role(c.topic, 0); return ok && l && e == again.LeaderEpoch })
	if _, code, _ := c.node(1).mgr.AppendLeaderInEpoch(c.topic, 0, first.LeaderEpoch, 1, makeBatch(-1, -1, -1, []string{"stale"}), plog.AppendOptions{}); code != kerr.NotLeaderForPartition.Code {
		t.Errorf("append naming epoch %d while leading in %d: code %d, want NOT_LEADER_OR_FOLLOWER", first.LeaderEpoch, again.LeaderEpoch, code)
	}
	if _, code, err := c.node(1).mgr.AppendLeaderInEpoch(c.topic, 0, again.LeaderEpoch, 1, makeBatch(-1, -1, -1, []string{"b"}), plog.AppendOptions{}); code != 0 || err != nil {
		t.Errorf("append in the current epoch %d: code %d, %v", again.LeaderEpoch, code, err)
	}
}
