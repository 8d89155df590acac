package interop

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Network partitions of a partition's leader (issue 20): three brokers and
// ZooKeeper each on their own loopback address of a chaos harness run
// (startBrokerClusterOnNetwork), cut apart with nft rules while franz-go
// producers (acks=all, idempotent, min ISR 2) record a history. The test's
// own clients stay at 127.0.0.1 and still reach the cut-off leader, so the
// old leader keeps receiving produces after its epoch ended: it must never
// acknowledge one to acks=all, and after the heal it truncates what it
// wrote alone and follows the new leader. A leader cut from its followers
// alone keeps its ZooKeeper session and its epoch: it shrinks the ISR to
// itself and refuses acks=all below min.insync.replicas. Each scenario
// fails with the harness's message when nft, cgroup2 or ip is missing.

// TestClusterLeaderPartitioned: the leader is partitioned (both ways) from
// ZooKeeper and from both followers for longer than its ZooKeeper session;
// the followers elect one of them; raw acks=all produces of marked values
// sent to the old leader meanwhile are never acknowledged; after the heal
// no acknowledged write is lost, no offset holds two values, the replicas'
// batches are identical and no log holds a marked value.
func TestClusterLeaderPartitioned(t *testing.T) {
	partitionLeader(t, "leader-partitioned", false)
}

// TestClusterLeaderCutOneWay is TestClusterLeaderPartitioned with the cut
// one way only: the leader's packets to ZooKeeper and the followers are
// dropped, theirs to it still arrive (TCP stalls both ways all the same:
// nothing the leader sends, acks included, gets through).
func TestClusterLeaderCutOneWay(t *testing.T) {
	partitionLeader(t, "leader-cut-one-way", true)
}

func partitionLeader(t *testing.T, scenario string, oneWay bool) {
	started := time.Now()
	c := startBrokerClusterOnNetwork(t, scenario, 3)
	nw := c.net.run.Net
	step(t, started, "ZooKeeper at %s, brokers at %v", c.net.zk.HostPort, c.bootstrap())
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "partitioned", nil)
	prod := h.producers(faultProducer(c), topic, 2)
	t.Cleanup(prod.halt)

	v := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
	old := v.Leader
	live := others(c.ids(), old)
	prod.awaitAcked(100, "before the partition")
	zkHost, _, _ := strings.Cut(c.net.zk.HostPort, ":")
	peers := []string{zkHost, c.net.addrs[live[0]], c.net.addrs[live[1]]}
	if oneWay {
		for _, p := range peers {
			if err := nw.Cut(c.net.addrs[old], p); err != nil {
				t.Fatal(err)
			}
		}
	} else if err := nw.Partition([]string{c.net.addrs[old]}, peers); err != nil {
		t.Fatal(err)
	}
	cutAt := time.Now()
	c.net.run.Note(fmt.Sprintf("broker%d", old), "partitioned", fmt.Sprint(nw.Faults()))
	step(t, started, "leader %d (%s) cut off: %v", old, c.net.addrs[old], nw.Faults())

	// Marked produces sent to the old leader at once, in its old epoch
	// (before the others notice), and more after the new leader is elected.
	var marked []string
	var answers []func() string
	send := func(phase string) {
		for i := range 4 {
			value := fmt.Sprintf("cutoff-%s-%d", phase, i)
			marked = append(marked, value)
			answers = append(answers, c.sendProduce(old, topic, 0, value))
		}
	}
	send("early")
	after := c.waitLeaders(topic, 1, live...)[0]
	step(t, started, "broker %d leads in epoch %d (was %d in %d)", after.Leader, after.Epoch, old, v.Epoch)
	if after.Epoch <= v.Epoch || after.Leader == old {
		t.Fatalf("leader %d epoch %d after the partition, %d epoch %d before", after.Leader, after.Epoch, old, v.Epoch)
	}
	send("late")
	prod.awaitAcked(50, "new leader")
	// Keep the cut well past the old leader's ZooKeeper session.
	if rest := 3*clusterSession - time.Since(cutAt); rest > 0 {
		time.Sleep(rest)
	}
	// What the old leader wrote alone, read from its data directory while
	// it is still cut off: what the heal must truncate.
	held := c.holding(old, topic, marked)
	if len(held) == 0 {
		t.Errorf("the cut-off leader %d appended none of the %d marked values: its truncation is not exercised", old, len(marked))
	}
	answered := make(chan string, len(answers))
	for _, answer := range answers {
		go func() { answered <- answer() }()
	}
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	c.net.run.Note("network", "healed", "")
	step(t, started, "healed after %v", time.Since(cutAt).Round(100*time.Millisecond))
	codes := map[string]int{}
	for range answers {
		select {
		case got := <-answered:
			if strings.HasPrefix(got, "ok") {
				t.Errorf("the cut-off leader %d acknowledged a marked value to acks=all: %s", old, got)
			}
			codes[strings.SplitN(got, ":", 2)[0]]++
		case <-time.After(45 * time.Second):
			t.Fatalf("the cut-off leader %d never answered its acks=all produces", old)
		}
	}
	step(t, started, "the old leader %d held %d of the %d marked values while cut off; it answered them: %v", old, len(held), len(answers), codes)

	ends := heal(t, c, topic, prod)
	finish(t, c, h, topic, ends, prod, 1, started)
	truncations := 0
	for _, line := range strings.Split(c.brokers[old].Output(), "\n") {
		if strings.Contains(line, topic) && strings.Contains(line, "msg=truncated") {
			truncations++
		}
	}
	t.Logf("truncations logged by the old leader %d: %d", old, truncations)
	for _, id := range c.ids() {
		if found := c.holding(id, topic, marked); len(found) > 0 {
			t.Errorf("broker %d's log holds %q, written by the cut-off leader: not truncated", id, found)
		}
	}
}

// TestClusterLeaderCutFromFollowers: the leader's packets to both
// followers are dropped (one way; ZooKeeper still reaches it and it keeps
// its session). The followers fetch but receive nothing, so after
// replica.lag.time.max.ms the leader shrinks the ISR to itself, stays the
// leader in the same epoch, and with min ISR 2 answers acks=all produces
// NOT_ENOUGH_REPLICAS and acknowledges none; after the heal the followers
// catch up, the ISR is full again, and the history and the replicas'
// batches check out.
func TestClusterLeaderCutFromFollowers(t *testing.T) {
	started := time.Now()
	c := startBrokerClusterOnNetwork(t, "leader-cut-from-followers", 3, "replica.lag.time.max.ms=2000")
	nw := c.net.run.Net
	step(t, started, "ZooKeeper at %s, brokers at %v", c.net.zk.HostPort, c.bootstrap())
	h := newClusterHistory(t)
	topic := faultTopic(t, c, "cutfollowers", nil)
	prod := h.producers(faultProducer(c), topic, 2)
	t.Cleanup(prod.halt)

	v := c.fullISR(topic, 1, c.ids()[0], c.ids()...)[0]
	leader := v.Leader
	prod.awaitAcked(100, "before the cut")
	for _, f := range others(c.ids(), leader) {
		if err := nw.Cut(c.net.addrs[leader], c.net.addrs[f]); err != nil {
			t.Fatal(err)
		}
	}
	cutAt := time.Now()
	c.net.run.Note(fmt.Sprintf("broker%d", leader), "cut", fmt.Sprint(nw.Faults()))
	step(t, started, "leader %d (%s) cut from its followers: %v", leader, c.net.addrs[leader], nw.Faults())
	eventually(t, 30*time.Second, "the ISR shrinks to the leader alone", func() error {
		for _, id := range c.ids() {
			pv, err := c.topicView(id, topic)
			if err != nil {
				return err
			}
			if got := pv[0]; got.Leader != leader || got.Epoch != v.Epoch || !slices.Equal(got.ISR, []int32{leader}) {
				return fmt.Errorf("broker %d answers leader %d epoch %d ISR %v", id, got.Leader, got.Epoch, got.ISR)
			}
		}
		return nil
	})
	shrunk := prod.ok.Load()
	step(t, started, "ISR [%d] after %v; %d produces acknowledged so far", leader, time.Since(cutAt).Round(100*time.Millisecond), shrunk)
	codes := map[string]int{}
	for i := range 4 {
		got := c.sendProduce(leader, topic, 0, fmt.Sprintf("below-min-isr-%d", i))()
		codes[strings.SplitN(got, ":", 2)[0]]++
		if !strings.HasPrefix(got, kerr.NotEnoughReplicas.Message) {
			t.Errorf("an acks=all produce to leader %d with ISR [%d] and min ISR 2 was answered %q, want NOT_ENOUGH_REPLICAS", leader, leader, got)
		}
	}
	time.Sleep(clusterSession)
	if acked := prod.ok.Load() - shrunk; acked > 0 {
		t.Errorf("%d produces were acknowledged to acks=all while the ISR was [%d] (min ISR 2)", acked, leader)
	}
	if pv, err := c.topicView(leader, topic); err != nil || pv[0].Leader != leader || pv[0].Epoch != v.Epoch {
		t.Errorf("after %v cut from its followers: %+v %v; want broker %d still leading in epoch %d", time.Since(cutAt).Round(100*time.Millisecond), pv, err, leader, v.Epoch)
	}
	step(t, started, "leader %d answered its acks=all produces below min ISR: %v", leader, codes)
	if err := nw.Heal(); err != nil {
		t.Fatal(err)
	}
	c.net.run.Note("network", "healed", "")
	step(t, started, "healed after %v", time.Since(cutAt).Round(100*time.Millisecond))
	ends := heal(t, c, topic, prod)
	finish(t, c, h, topic, ends, prod, 1, started)
}
