package interop

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterListOffsetsLeaderEpochs: after a leader change ListOffsets
// answers each offset with the leader epoch its record was written in and
// the latest offset with the current epoch, as Kafka does. Answering 0
// (what a single node says) would make a client that validates its
// position (KIP-320) ask OffsetForLeaderEpoch about epoch 0, whose end is
// the first election's offset, and take that for a truncation.
func TestClusterListOffsetsLeaderEpochs(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("epochs")
	createReplicated(t, c, topic, 1, 3)
	before := c.waitLeaders(topic, 1, c.ids()...)[0]
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(60*time.Second))
	produceNumbered(t, cl, 50, "before")

	after, _ := killLeader(t, c, topic, before)
	since := time.Now().UnixMilli()
	produceNumbered(t, cl, 50, "after")

	ask := func(ts int64) kmsg.ListOffsetsResponseTopicPartition {
		t.Helper()
		req := kmsg.NewPtrListOffsetsRequest()
		req.ReplicaID = -1
		rt := kmsg.NewListOffsetsRequestTopic()
		rt.Topic = topic
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.CurrentLeaderEpoch, rp.Timestamp = after.Epoch, ts
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		resp, err := c.request(after.Leader, req)
		if err != nil {
			t.Fatalf("ListOffsets %d: %v", ts, err)
		}
		sp := resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0]
		if err := kerr.ErrorForCode(sp.ErrorCode); err != nil {
			t.Fatalf("ListOffsets %d: %v", ts, err)
		}
		return sp
	}
	for _, c := range []struct {
		name   string
		ts     int64
		offset int64
		epoch  int32
	}{
		{"earliest (-2)", -2, 0, before.Epoch},
		{"latest (-1)", -1, 100, after.Epoch},
		{"the first record after the election, by time", since, 50, after.Epoch},
		{"the first record, by time", 0, 0, before.Epoch},
	} {
		sp := ask(c.ts)
		if sp.Offset != c.offset || sp.LeaderEpoch != c.epoch {
			t.Errorf("%s: offset %d epoch %d, want offset %d epoch %d", c.name, sp.Offset, sp.LeaderEpoch, c.offset, c.epoch)
		}
	}
}

// killLeader kills -9 the leader of topic's partition 0 (as before saw it)
// and waits until the live brokers agree on a new leader in a later epoch.
// It returns that view and the live brokers.
func killLeader(t *testing.T, c *brokerCluster, topic string, before partitionView) (partitionView, []int32) {
	t.Helper()
	c.brokers[before.Leader].Kill()
	var live []int32
	for _, id := range c.ids() {
		if id != before.Leader {
			live = append(live, id)
		}
	}
	after := c.waitLeaders(topic, 1, live...)[0]
	if after.Leader == before.Leader || after.Epoch <= before.Epoch {
		t.Fatalf("after the kill: leader %d epoch %d; before: leader %d epoch %d", after.Leader, after.Epoch, before.Leader, before.Epoch)
	}
	return after, live
}
