package interop

// Cluster mode end to end: three `sluice broker --zookeeper` processes on a
// real ZooKeeper, franz-go clients.

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func createReplicated(t *testing.T, c *brokerCluster, topic string, partitions int32, rf int16) {
	t.Helper()
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, partitions, rf, nil, topic)
	if err != nil || resp.Err != nil {
		t.Fatalf("create %s (%d partitions, rf %d): %v %v", topic, partitions, rf, err, resp.Err)
	}
}

// TestClusterMetadataAndPlacement: every broker answers the same Metadata
// (brokers, controller, each partition's leader, replicas, ISR), and each
// broker holds the partition logs assigned to it and no other.
func TestClusterMetadataAndPlacement(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("placed")
	createReplicated(t, c, topic, 6, 2)
	view := c.waitLeaders(topic, 6, c.ids()...)
	controllers := map[int32]bool{}
	for _, id := range c.ids() {
		m, err := c.metadata(id, topic)
		if err != nil {
			t.Fatal(err)
		}
		controllers[m.ControllerID] = true
	}
	if len(controllers) != 1 {
		t.Fatalf("brokers name different controllers: %v", controllers)
	}
	leaders := map[int32]int{}
	for p, pv := range view {
		if len(pv.Replicas) != 2 || pv.Replicas[0] == pv.Replicas[1] {
			t.Fatalf("partition %d: replicas %v, want 2 distinct", p, pv.Replicas)
		}
		if !slices.Equal(pv.ISR, sorted(pv.Replicas)) || len(pv.Offline) != 0 {
			t.Fatalf("partition %d: ISR %v offline %v, replicas %v", p, pv.ISR, pv.Offline, pv.Replicas)
		}
		if !slices.Contains(pv.Replicas, pv.Leader) {
			t.Fatalf("partition %d: leader %d is not a replica (%v)", p, pv.Leader, pv.Replicas)
		}
		leaders[pv.Leader]++
	}
	if len(leaders) != 3 {
		t.Errorf("6 partitions led by %v: the assignment should spread leaders over the 3 brokers", leaders)
	}
	eventually(t, 20*time.Second, "each broker holds exactly its replicas", func() error {
		for _, id := range c.ids() {
			var want []int32
			for p, pv := range view {
				if slices.Contains(pv.Replicas, id) {
					want = append(want, p)
				}
			}
			slices.Sort(want)
			if got := c.partitionDirs(id, topic); !slices.Equal(got, want) {
				return fmt.Errorf("broker %d holds partitions %v, assigned %v", id, got, want)
			}
		}
		return nil
	})
	// A replication factor above the live brokers is refused.
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, 1, 4, nil, newTopicName("too-many"))
	if err == nil {
		err = resp.Err
	}
	if !errorsIs(err, kerr.InvalidReplicationFactor) {
		t.Fatalf("replication factor 4 on 3 brokers: %v, want INVALID_REPLICATION_FACTOR", err)
	}
}

// TestClusterProduceConsume: a client bootstrapped with every broker
// produces to the leaders and reads every acknowledged record back once, at
// its acknowledged offset; Produce, Fetch and ListOffsets sent to a broker
// that does not lead the partition are NOT_LEADER_OR_FOLLOWER.
func TestClusterProduceConsume(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("leaders")
	createReplicated(t, c, topic, 3, 2)
	view := c.waitLeaders(topic, 3, c.ids()...)

	acked := produceNumbered(t, c.client(kgo.DefaultProduceTopic(topic), kgo.RequiredAcks(kgo.AllISRAcks())), 300, "r")
	checkReadBack(t, c.client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())), acked)

	for p, pv := range view {
		for _, id := range c.ids() {
			if id == pv.Leader {
				continue
			}
			if code := c.produceCode(id, topic, p); code != kerr.NotLeaderForPartition.Code {
				t.Errorf("produce to broker %d (not leader of %s-%d): code %d, want NOT_LEADER_OR_FOLLOWER", id, topic, p, code)
			}
			if code := c.listOffsetsCode(id, topic, p); code != kerr.NotLeaderForPartition.Code {
				t.Errorf("list offsets at broker %d (not leader of %s-%d): code %d", id, topic, p, code)
			}
			if code := c.fetchCode(id, topic, p); code != kerr.NotLeaderForPartition.Code {
				t.Errorf("fetch from broker %d (not leader of %s-%d): code %d", id, topic, p, code)
			}
		}
		if code := c.produceCode(pv.Leader, topic, 3); code != kerr.UnknownTopicOrPartition.Code {
			t.Errorf("produce to partition 3 of a 3-partition topic: code %d, want UNKNOWN_TOPIC_OR_PARTITION", code)
		}
	}
}

// TestClusterLeaderKilled: the leader of a partition is killed (SIGKILL);
// when its session expires the controller elects another ISR member, every
// live broker says so, and a producing client fails over to it.
func TestClusterLeaderKilled(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("failover")
	createReplicated(t, c, topic, 1, 3)
	before := c.waitLeaders(topic, 1, c.ids()...)[0]
	cl := c.client(kgo.DefaultProduceTopic(topic), kgo.RecordDeliveryTimeout(60*time.Second))
	produceNumbered(t, cl, 50, "before")

	after, live := killLeader(t, c, topic, before)
	if slices.Contains(after.ISR, before.Leader) || !slices.Equal(after.Offline, []int32{before.Leader}) {
		t.Fatalf("after the kill: ISR %v offline %v; the killed broker %d must be out of the ISR and offline", after.ISR, after.Offline, before.Leader)
	}
	// The CLI sees it through Metadata: the partition is under-replicated.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := "--bootstrap=" + strings.Join(c.bootstrap(before.Leader), ",")
	status := mustCLI(t, ctx, "", "cluster", "status", b)
	if !strings.Contains(status, "brokers 2") || !strings.Contains(status, "under-replicated 1") || !strings.Contains(status, fmt.Sprintf("%s-0", topic)) {
		t.Errorf("cluster status after the kill:\n%s", status)
	}
	described := mustCLI(t, ctx, "", "topics", "describe", topic, b)
	// The ISR column, as a set (brokers list ISR members in the order the
	// last ISR write gave them).
	var isrShown []int32
	for _, line := range strings.Split(described, "\n") {
		groups := regexp.MustCompile(`\[([0-9 ]*)\]`).FindAllStringSubmatch(line, -1)
		if f := strings.Fields(line); len(f) > 0 && f[0] == "0" && len(groups) >= 2 {
			for _, id := range strings.Fields(groups[1][1]) { // replicas, then isr
				var n int32
				fmt.Sscan(id, &n)
				isrShown = append(isrShown, n)
			}
		}
	}
	slices.Sort(isrShown)
	if want := slices.Sorted(slices.Values(after.ISR)); !slices.Equal(isrShown, want) {
		t.Errorf("topics describe does not show the ISR %v (shows %v):\n%s", want, isrShown, described)
	}
	acked := produceNumbered(t, cl, 50, "after")
	for r := range acked {
		if r.p != 0 {
			t.Fatalf("record on partition %d", r.p)
		}
	}
	// The killed broker comes back and is a live replica again.
	c.brokers[before.Leader].Restart(t)
	c.waitBrokers(c.ids()...)
	eventually(t, 30*time.Second, "the restarted broker is listed live", func() error {
		v, err := c.topicView(live[0], topic)
		if err != nil {
			return err
		}
		if len(v[0].Offline) != 0 {
			return fmt.Errorf("offline %v", v[0].Offline)
		}
		return nil
	})
}

// TestClusterCreatePartitionsDeleteTopics: added partitions are assigned
// and opened on their replicas; a deleted topic's logs go from every
// replica and every broker stops listing it.
func TestClusterCreatePartitionsDeleteTopics(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("grow")
	createReplicated(t, c, topic, 2, 2)
	c.waitLeaders(topic, 2, c.ids()...)
	adm := kadm.NewClient(c.client())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if rs, err := adm.CreatePartitions(ctx, 3, topic); err != nil || rs[topic].Err != nil {
		t.Fatalf("create partitions: %v %v", err, rs[topic].Err)
	}
	view := c.waitLeaders(topic, 5, c.ids()...)
	total := 0
	eventually(t, 20*time.Second, "the new partitions open on their replicas", func() error {
		total = 0
		for _, id := range c.ids() {
			dirs := c.partitionDirs(id, topic)
			for _, p := range dirs {
				if !slices.Contains(view[p].Replicas, id) {
					return fmt.Errorf("broker %d holds %s-%d, assigned to %v", id, topic, p, view[p].Replicas)
				}
			}
			total += len(dirs)
		}
		if total != 10 {
			return fmt.Errorf("%d partition logs, want 10 (5 partitions x 2 replicas)", total)
		}
		return nil
	})
	if rs, err := adm.DeleteTopics(ctx, topic); err != nil || rs[topic].Err != nil {
		t.Fatalf("delete: %v %v", err, rs[topic].Err)
	}
	eventually(t, 30*time.Second, "the topic is gone from every broker", func() error {
		for _, id := range c.ids() {
			if dirs := c.partitionDirs(id, topic); len(dirs) != 0 {
				return fmt.Errorf("broker %d still holds %v", id, dirs)
			}
			m, err := c.metadata(id, topic)
			if err != nil {
				return err
			}
			if len(m.Topics) != 1 || m.Topics[0].ErrorCode != kerr.UnknownTopicOrPartition.Code {
				return fmt.Errorf("broker %d still answers %+v", id, m.Topics)
			}
		}
		return nil
	})
}

// ackedRecord is where an acknowledged record landed.
type ackedRecord struct {
	p int32
	o int64
}

// produceNumbered produces n records prefix-i synchronously and returns
// where each was acknowledged.
func produceNumbered(t *testing.T, cl *kgo.Client, n int, prefix string) map[ackedRecord]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	acked := map[ackedRecord]string{}
	var wg sync.WaitGroup
	var firstErr error
	for i := range n {
		wg.Add(1)
		v := fmt.Sprintf("%s-%06d", prefix, i)
		cl.Produce(ctx, &kgo.Record{Value: []byte(v)}, func(r *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			k := ackedRecord{r.Partition, r.Offset}
			if old, dup := acked[k]; dup {
				t.Errorf("offset %v acknowledged for %q and %q", k, old, v)
			}
			acked[k] = v
		})
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("produce: %v", firstErr)
	}
	return acked
}

// checkReadBack consumes until every acknowledged record was read, and
// fails on a record read twice, at another offset, or never acknowledged.
func checkReadBack(t *testing.T, cl *kgo.Client, acked map[ackedRecord]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	seen := map[string]ackedRecord{}
	for len(seen) < len(acked) {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("read %d of %d acknowledged records", len(seen), len(acked))
		}
		fs.EachError(func(topic string, p int32, err error) { t.Logf("fetch %s-%d: %v", topic, p, err) })
		fs.EachRecord(func(r *kgo.Record) {
			k := ackedRecord{r.Partition, r.Offset}
			v := string(r.Value)
			if want, ok := acked[k]; !ok || want != v {
				t.Errorf("read %q at %v, acknowledged there: %q", v, k, want)
			}
			if prev, dup := seen[v]; dup {
				t.Errorf("%q read twice (%v and %v)", v, prev, k)
			}
			seen[v] = k
		})
	}
}

func (c *brokerCluster) produceCode(id int32, topic string, p int32) int16 {
	req := kmsg.NewPtrProduceRequest()
	req.Acks, req.TimeoutMillis = -1, 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = p
	rp.Records = batchOf("x")
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(id, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.(*kmsg.ProduceResponse).Topics[0].Partitions[0].ErrorCode
}

func (c *brokerCluster) listOffsetsCode(id int32, topic string, p int32) int16 {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = p, -1, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(id, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.(*kmsg.ListOffsetsResponse).Topics[0].Partitions[0].ErrorCode
}

func (c *brokerCluster) fetchCode(id int32, topic string, p int32) int16 {
	req := kmsg.NewPtrFetchRequest()
	req.SetVersion(11)
	req.ReplicaID, req.MaxBytes, req.SessionEpoch = -1, 1<<20, -1
	rt := kmsg.NewFetchRequestTopic()
	rt.Topic = topic
	rp := kmsg.NewFetchRequestTopicPartition()
	rp.Partition, rp.PartitionMaxBytes, rp.CurrentLeaderEpoch = p, 1<<20, -1
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	resp, err := c.request(id, req)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.(*kmsg.FetchResponse).Topics[0].Partitions[0].ErrorCode
}
