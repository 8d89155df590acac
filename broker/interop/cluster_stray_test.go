package interop

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestClusterStrayReplicasRemoved: broker 2 is stopped; meanwhile one
// partition of a topic is moved off it ([1 2] to [1 3]) and another topic
// with a replica on it is deleted. When broker 2 starts again its data
// directory still holds both replicas; it deletes them (Kafka's
// stray-replica cleanup) and keeps the one it is still assigned.
func TestClusterStrayReplicasRemoved(t *testing.T) {
	c := startBrokerCluster(t, 3)
	moved, gone := newTopicName("stray-moved"), newTopicName("stray-gone")
	createAssigned(t, c, moved, [][]int32{{1, 2}, {2, 1}}, nil)
	createAssigned(t, c, gone, [][]int32{{2, 1}}, nil)
	c.fullISR(moved, 2, 1, 1, 2)
	c.fullISR(gone, 1, 1, 1, 2)
	cl := c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	for i := range 50 {
		for _, topic := range []string{moved, gone} {
			if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i)}).FirstErr(); err != nil {
				t.Fatalf("produce to %s: %v", topic, err)
			}
		}
	}
	if dirs := c.partitionDirs(2, moved); len(dirs) != 2 {
		t.Fatalf("broker 2 holds partitions %v of %s before the stop, want [0 1]", dirs, moved)
	}

	c.brokers[2].Stop()
	adm := kadm.NewClient(c.clientOf([]int32{1, 3}))
	var req kadm.AlterPartitionAssignmentsReq
	req.Assign(moved, 0, []int32{1, 3})
	resp, err := adm.AlterPartitionAssignments(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range resp.Sorted() {
		if r.Err != nil {
			t.Fatalf("%s-%d: %v %s", r.Topic, r.Partition, r.Err, r.ErrMessage)
		}
	}
	c.waitMovedAmong(moved, 0, []int32{1, 3}, 1, 3)
	if _, err := adm.DeleteTopic(ctx, gone); err != nil {
		t.Fatalf("delete %s: %v", gone, err)
	}
	if dirs := c.partitionDirs(2, moved); len(dirs) != 2 {
		t.Fatalf("stopped broker 2 holds partitions %v of %s, want [0 1] (the test needs the stray on disk)", dirs, moved)
	}

	c.brokers[2].Restart(t)
	c.waitBrokers(c.ids()...)
	eventually(t, 30*time.Second, "broker 2 deletes its stray replicas", func() error {
		if dirs := c.partitionDirs(2, moved); len(dirs) != 1 || dirs[0] != 1 {
			return fmt.Errorf("broker 2 holds partitions %v of %s, want [1] (partition 0 moved away)", dirs, moved)
		}
		if dirs := c.partitionDirs(2, gone); len(dirs) != 0 {
			return fmt.Errorf("broker 2 holds partitions %v of the deleted %s", dirs, gone)
		}
		return nil
	})
	if !strings.Contains(c.brokers[2].Output(), "deleting stray replicas") {
		t.Errorf("broker 2 did not log the stray replicas it deleted")
	}
	// The replica it kept is in sync again; the moved one stays on 1 and 3.
	c.waitMoved(moved, map[int32][]int32{0: {1, 3}, 1: {2, 1}}, c.ids()...)
}

// waitMovedAmong waits until the brokers asked show partition p of topic
// with exactly the target replicas, all in the ISR, and no move listed.
func (c *brokerCluster) waitMovedAmong(topic string, p int32, target []int32, asked ...int32) {
	c.t.Helper()
	c.waitMoved(topic, map[int32][]int32{p: target}, asked...)
}
