package interop

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestClusterControlledShutdown: SIGTERM to a broker that leads partitions
// moves its leaderships to other ISR members before it stops — the moment
// it has exited, the others list no partition led by it, and at no point
// during the stop was a partition without a leader. (After kill -9 the
// dead broker stays leader until its session expires.)
func TestClusterControlledShutdown(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("handover")
	createReplicated(t, c, topic, 3, 3)
	view := c.waitLeaders(topic, 3, c.ids()...)
	stopping := view[0].Leader
	var watcher int32
	for _, id := range c.ids() {
		if id != stopping {
			watcher = id
			break
		}
	}
	var (
		mu      sync.Mutex
		gaps    []string
		polling = make(chan struct{})
		polled  = make(chan struct{})
	)
	go func() {
		defer close(polled)
		for {
			select {
			case <-polling:
				return
			default:
			}
			v, err := c.topicView(watcher, topic)
			if err != nil {
				continue
			}
			for p, pv := range v {
				if pv.Leader < 0 {
					mu.Lock()
					gaps = append(gaps, fmt.Sprintf("partition %d had no leader: %+v", p, pv))
					mu.Unlock()
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	c.brokers[stopping].Stop()
	v, err := c.topicView(watcher, topic)
	close(polling)
	<-polled
	if err != nil {
		t.Fatal(err)
	}
	for p, pv := range v {
		if pv.Leader == stopping || pv.Leader < 0 || slices.Contains(pv.ISR, stopping) {
			t.Errorf("right after broker %d stopped: partition %d is %+v; its leadership should have moved first", stopping, p, pv)
		}
	}
	if len(gaps) > 0 {
		t.Errorf("during the controlled shutdown: %v", gaps)
	}
	if out := c.brokers[stopping].Output(); !strings.Contains(out, "controlled shutdown done") {
		t.Errorf("broker %d did not log a completed controlled shutdown", stopping)
	}
}

// TestClusterGroupCoordinator: FindCoordinator names the same broker, the
// leader of the group's __consumer_offsets partition, at every broker; a
// group consumes and commits through it; the group APIs sent to another
// broker are NOT_COORDINATOR.
func TestClusterGroupCoordinator(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("grouped")
	createReplicated(t, c, topic, 3, 2)
	c.waitLeaders(topic, 3, c.ids()...)
	acked := produceNumbered(t, c.client(kgo.DefaultProduceTopic(topic)), 90, "g")
	groupID := newTopicName("group")
	consumer, err := kgo.NewClient(kgo.SeedBrokers(c.bootstrap()...), kgo.ConsumeTopics(topic), kgo.ConsumerGroup(groupID),
		kgo.DisableAutoCommit(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	checkReadBack(t, consumer, acked)
	consumer.Close() // leaves the group: it is Empty, and takes commits of generation -1

	coordinator := c.findCoordinator(groupID)
	offsets := c.waitLeaders("__consumer_offsets", 50, c.ids()...)
	found := false
	for _, pv := range offsets {
		if len(pv.Replicas) != 3 {
			t.Fatalf("__consumer_offsets has replicas %v: want replication factor 3 on 3 brokers", pv.Replicas)
		}
		found = found || pv.Leader == coordinator
	}
	if !found {
		t.Fatalf("coordinator %d leads no offsets partition", coordinator)
	}
	ends := map[int32]int64{}
	for r := range acked {
		ends[r.p] = max(ends[r.p], r.o+1)
	}
	for _, id := range c.ids() {
		code := c.offsetCommit(id, groupID, topic, ends)
		want := int16(0)
		if id != coordinator {
			want = kerr.NotCoordinator.Code
		}
		if code != want {
			t.Errorf("OffsetCommit at broker %d (coordinator %d): code %d, want %d", id, coordinator, code, want)
		}
	}
	for _, id := range c.ids() {
		got, code := c.offsetFetch(id, groupID, topic)
		if id != coordinator {
			if code != kerr.NotCoordinator.Code {
				t.Errorf("OffsetFetch at broker %d (coordinator %d): code %d, want NOT_COORDINATOR", id, coordinator, code)
			}
			continue
		}
		if code != 0 || fmt.Sprint(got) != fmt.Sprint(ends) {
			t.Errorf("OffsetFetch at the coordinator: %v code %d, committed %v", got, code, ends)
		}
	}
}

// findCoordinator asks every broker for the coordinator of a group and
// returns it once all agree.
func (c *brokerCluster) findCoordinator(groupID string) int32 {
	c.t.Helper()
	var agreed int32
	eventually(c.t, 30*time.Second, "every broker names the coordinator of "+groupID, func() error {
		names := map[int32]bool{}
		for _, id := range c.ids() {
			req := kmsg.NewPtrFindCoordinatorRequest()
			req.CoordinatorKey, req.CoordinatorKeys = groupID, []string{groupID} // v0-3, v4+
			resp, err := c.request(id, req)
			if err != nil {
				return err
			}
			r := resp.(*kmsg.FindCoordinatorResponse)
			if len(r.Coordinators) == 1 { // v4+
				k := r.Coordinators[0]
				r.ErrorCode, r.NodeID, r.Host, r.Port = k.ErrorCode, k.NodeID, k.Host, k.Port
			}
			if c.brokers[r.NodeID] == nil && r.ErrorCode == 0 {
				return fmt.Errorf("broker %d names node %d, not a broker of the cluster", id, r.NodeID)
			}
			if r.ErrorCode != 0 {
				return fmt.Errorf("broker %d: %v", id, kerr.ErrorForCode(r.ErrorCode))
			}
			if r.Host+":"+fmt.Sprint(r.Port) != c.brokers[r.NodeID].Addr {
				return fmt.Errorf("broker %d names node %d at %s:%d, which listens at %s", id, r.NodeID, r.Host, r.Port, c.brokers[r.NodeID].Addr)
			}
			names[r.NodeID] = true
			agreed = r.NodeID
		}
		if len(names) != 1 {
			return fmt.Errorf("brokers name coordinators %v", names)
		}
		return nil
	})
	return agreed
}

// offsetFetch asks broker id for a group's committed offsets of topic.
func (c *brokerCluster) offsetFetch(id int32, groupID, topic string) (map[int32]int64, int16) {
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group = groupID // v0-7; the client picks the version
	rt := kmsg.NewOffsetFetchRequestTopic()
	rt.Topic = topic
	rt.Partitions = []int32{0, 1, 2}
	req.Topics = append(req.Topics, rt)
	g := kmsg.NewOffsetFetchRequestGroup() // v8+
	g.Group = groupID
	gt := kmsg.NewOffsetFetchRequestGroupTopic()
	gt.Topic, gt.Partitions = topic, rt.Partitions
	g.Topics = append(g.Topics, gt)
	req.Groups = append(req.Groups, g)
	resp, err := c.request(id, req)
	if err != nil {
		c.t.Fatal(err)
	}
	r := resp.(*kmsg.OffsetFetchResponse)
	if len(r.Groups) == 1 { // v8+: fold the group's answer into the v7 shape
		r.ErrorCode = r.Groups[0].ErrorCode
		r.Topics = nil
		for _, gt := range r.Groups[0].Topics {
			t := kmsg.NewOffsetFetchResponseTopic()
			t.Topic = gt.Topic
			for _, gp := range gt.Partitions {
				p := kmsg.NewOffsetFetchResponseTopicPartition()
				p.Partition, p.Offset, p.ErrorCode = gp.Partition, gp.Offset, gp.ErrorCode
				t.Partitions = append(t.Partitions, p)
			}
			r.Topics = append(r.Topics, t)
		}
	}
	if r.ErrorCode != 0 {
		return nil, r.ErrorCode
	}
	out := map[int32]int64{}
	for _, t := range r.Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return nil, p.ErrorCode
			}
			if p.Offset >= 0 {
				out[p.Partition] = p.Offset
			}
		}
	}
	return out, 0
}

// offsetCommit commits offsets of topic for an Empty group (generation -1)
// at broker id and returns the first error code.
func (c *brokerCluster) offsetCommit(id int32, groupID, topic string, offsets map[int32]int64) int16 {
	req := kmsg.NewPtrOffsetCommitRequest()
	req.Group, req.Generation = groupID, -1
	rt := kmsg.NewOffsetCommitRequestTopic()
	rt.Topic = topic
	for p, o := range offsets {
		rp := kmsg.NewOffsetCommitRequestTopicPartition()
		rp.Partition, rp.Offset, rp.LeaderEpoch = p, o, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(id, req)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, t := range resp.(*kmsg.OffsetCommitResponse).Topics {
		for _, p := range t.Partitions {
			if p.ErrorCode != 0 {
				return p.ErrorCode
			}
		}
	}
	return 0
}
