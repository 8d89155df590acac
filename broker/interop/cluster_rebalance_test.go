package interop

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
)

// rebalanceCheck is leader.imbalance.check.interval.seconds in
// TestClusterPreferredLeaderReturns.
const rebalanceCheck = 2 * time.Second

// TestClusterPreferredLeaderReturns: three broker processes on a real
// ZooKeeper, a topic of 3 partitions, replication factor 3, min ISR 2, and
// acks=all idempotent producers recording a history. The preferred leader
// of partition 0 (its first replica) is killed with SIGKILL; another ISR
// member leads; the killed broker is restarted and waited for in the ISR.
// With auto.leader.rebalance.enable the controller's next imbalance check
// (every 2 s here; the broker prefers 1 partition and leads none of it:
// 100 % > leader.imbalance.per.broker.percentage 10) gives the partition
// back to it; without, the leader stays where it moved (checked after five
// check intervals). Either way nothing acknowledged is lost or doubled and
// the replicas hold identical batches.
func TestClusterPreferredLeaderReturns(t *testing.T) {
	for _, rebalance := range []bool{true, false} {
		t.Run(fmt.Sprintf("auto.leader.rebalance.enable=%v", rebalance), func(t *testing.T) {
			preferredLeaderReturns(t, rebalance)
		})
	}
}

func preferredLeaderReturns(t *testing.T, rebalance bool) {
	started := time.Now()
	c := startBrokerCluster(t, 3, fmt.Sprintf("auto.leader.rebalance.enable=%v", rebalance),
		fmt.Sprintf("leader.imbalance.check.interval.seconds=%d", int(rebalanceCheck.Seconds())),
		"leader.imbalance.per.broker.percentage=10")
	h := newClusterHistory(t)
	topic := newTopicName("preferred")
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	minISR := "2"
	if resp, err := adm.CreateTopic(ctx, 3, 3, map[string]*string{"min.insync.replicas": &minISR}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	c.waitLeaders(topic, 3, c.ids()...)
	before := c.fullISR(topic, 3, c.ids()[0], c.ids()...)[0]
	preferred := before.Replicas[0]
	if before.Leader != preferred {
		t.Fatalf("partition 0 of a new topic: %+v, want its first replica %d to lead", before, preferred)
	}
	// faultProducer's options, the records spread over every partition.
	prod := h.producers(c.client(kgo.RequiredAcks(kgo.AllISRAcks()), kgo.MetadataMinAge(250*time.Millisecond),
		kgo.RecordDeliveryTimeout(25*time.Second), kgo.ProduceRequestTimeout(5*time.Second),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner())), topic, 3)
	t.Cleanup(prod.halt)
	prod.awaitAcked(100, "before the kill")

	step(t, started, "kill -9 broker %d, partition 0's preferred leader (epoch %d)", preferred, before.Epoch)
	c.brokers[preferred].Kill()
	live := others(c.ids(), preferred)
	moved := c.waitLeaders(topic, 3, live...)[0]
	if moved.Leader == preferred || moved.Epoch <= before.Epoch {
		t.Fatalf("partition 0 after broker %d's kill: %+v (before %+v)", preferred, moved, before)
	}
	prod.awaitAcked(50, "to the new leader, the preferred one down")

	c.brokers[preferred].Restart(t)
	c.waitBrokers(c.ids()...)
	// Wait for the returning broker in the ISR of partition 0, asking a
	// broker that stayed up.
	var back partitionView
	eventually(t, 60*time.Second, fmt.Sprintf("broker %d back in the ISR of partition 0", preferred), func() error {
		v, err := c.topicView(live[0], topic)
		if err != nil {
			return err
		}
		if back = v[0]; !slices.Contains(back.ISR, preferred) {
			return fmt.Errorf("partition 0: %+v", back)
		}
		return nil
	})
	inISR := time.Now()
	step(t, started, "broker %d back in the ISR of partition 0: %+v", preferred, back)

	if rebalance {
		var led partitionView
		eventually(t, 30*time.Second, fmt.Sprintf("broker %d leads partition 0 again", preferred), func() error {
			for _, id := range c.ids() {
				v, err := c.topicView(id, topic)
				if err != nil {
					return err
				}
				if led = v[0]; led.Leader != preferred {
					return fmt.Errorf("broker %d answers partition 0: %+v", id, led)
				}
			}
			return nil
		})
		if led.Epoch <= moved.Epoch || !slices.Contains(led.ISR, preferred) {
			t.Fatalf("partition 0 led by its preferred replica again: %+v, after the failover %+v", led, moved)
		}
		step(t, started, "broker %d leads partition 0 again %.1fs after it was in the ISR (check interval %v): %+v",
			preferred, time.Since(inISR).Seconds(), rebalanceCheck, led)
	} else {
		// A non-event can only be watched for: five check intervals, each
		// of which would have given the partition back.
		for range 5 {
			time.Sleep(rebalanceCheck)
			for _, id := range c.ids() {
				v, err := c.topicView(id, topic)
				if err != nil {
					t.Fatal(err)
				}
				if v[0].Leader != moved.Leader || v[0].Epoch != moved.Epoch {
					t.Fatalf("auto.leader.rebalance.enable=false: broker %d answers partition 0 %+v, the leader after the failover was %+v", id, v[0], moved)
				}
			}
		}
	}

	prod.awaitAcked(100, "after the broker's return")
	prod.halt()
	c.fullISR(topic, 3, c.ids()[0], c.ids()...)
	ends := c.endOffsets(topic)
	read := h.finalRead(c, topic)
	stats := h.check()
	eventually(t, 20*time.Second, "every replica holds the batches up to the high watermarks", func() error {
		for _, id := range c.ids() {
			for p := range int32(3) {
				bs, err := c.replicaBatches(id, topic, p)
				if err != nil {
					return err
				}
				if ends[p] == 0 {
					t.Fatalf("partition %d: high watermark 0: the producers wrote nothing to it", p)
				}
				if len(bs) == 0 || bs[len(bs)-1].Last+1 < ends[p] {
					return fmt.Errorf("broker %d: partition %d holds batches up to %v, high watermark %d", id, p, lastOf(bs), ends[p])
				}
			}
		}
		return nil
	})
	batches := c.checkReplicasIdentical(topic, 3, ends, c.ids()...)
	if stats.ProducedOK == 0 || read == 0 {
		t.Errorf("nothing acknowledged (%d) or read back (%d): the scenario checked nothing", stats.ProducedOK, read)
	}
	t.Logf("figures: produces acked %d, failed or unknown %d, final read %d records (high watermarks %v), %d identical batches on %d replicas, %v",
		prod.acked, prod.unacked, read, ends, batches, len(c.ids()), time.Since(started).Round(time.Second))
}
