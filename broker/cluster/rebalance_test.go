package cluster

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/metadata"
)

// TestImbalance checks the per-broker threshold the way Kafka's controller
// applies it: a broker's partitions are given back only when the share of
// them led elsewhere is strictly above the percentage, and then all of
// them that are led elsewhere.
func TestImbalance(t *testing.T) {
	// Broker 1 prefers 10 partitions, broker 2 prefers 4.
	states := func(elsewhere1, elsewhere2 int) []PartitionState {
		var out []PartitionState
		for p := range 10 {
			st := PartitionState{Topic: "a", Partition: int32(p), Replicas: []int32{1, 2, 3}, Leader: 1}
			if p < elsewhere1 {
				st.Leader = 3
			}
			out = append(out, st)
		}
		for p := range 4 {
			st := PartitionState{Topic: "b", Partition: int32(p), Replicas: []int32{2, 3, 1}, Leader: 2}
			if p < elsewhere2 {
				st.Leader = -1 // offline counts as led elsewhere, as in Kafka
			}
			out = append(out, st)
		}
		return out
	}
	for _, c := range []struct {
		elsewhere1, elsewhere2, percent int
		want                            string
	}{
		{0, 0, 0, "map[]"},
		{1, 0, 0, "map[{a 0}:true]"},
		{1, 0, 10, "map[]"},                                 // 1/10 is not above 10 %
		{2, 0, 10, "map[{a 0}:true {a 1}:true]"},            // 2/10 is
		{1, 1, 10, "map[{b 0}:true]"},                       // 1/4 is, 1/10 not
		{10, 4, 100, "map[]"},                               // never above 100 %
		{3, 1, 25, "map[{a 0}:true {a 1}:true {a 2}:true]"}, // 3/10 > 25 %, 1/4 not
	} {
		got, ratios := imbalance(states(c.elsewhere1, c.elsewhere2), c.percent)
		if s := fmt.Sprint(got); s != c.want {
			t.Errorf("%d/10 and %d/4 led elsewhere at %d %%: %s, want %s (%+v)", c.elsewhere1, c.elsewhere2, c.percent, s, c.want, ratios)
		}
	}
}

// TestRebalanceThreshold runs the rebalance on three nodes with
// leader.imbalance.per.broker.percentage 50. Broker 1 prefers t-0 and t-1;
// its controlled shutdown moves both away. Back in the ISR of t-0 only, it
// is imbalanced (2 of 2 led elsewhere): the next check gives t-0 back, and
// only t-0 (t-1 does not have it in its ISR). Back in the ISR of t-1 too,
// it is at 1 of 2 = 50 %, not above: t-1 stays where it is.
func TestRebalanceThreshold(t *testing.T) {
	const check = 200 * time.Millisecond
	c := newTestCluster(t)
	c.opts = func(id int32) Options {
		return Options{AutoLeaderRebalance: true, LeaderImbalanceCheck: check, LeaderImbalancePercentage: 50}
	}
	n1 := c.start(1)
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	if err := n1.Store().CreateTopic(metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: 3,
		Replicas: [][]int32{{1, 2, 3}, {1, 3, 2}, {2, 3, 1}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.node(1).n.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	c.start(1)
	c.waitSettled(false)
	readmit := func(p int32) {
		t.Helper()
		st := stateOf(t, c, "t", p)
		if st.Leader == 1 || slices.Contains(st.ISR, 1) {
			t.Fatalf("t-%d after broker 1's controlled shutdown and return: %+v", p, st)
		}
		if _, err := c.node(st.Leader).n.AlterISR(ctx, "t", p, st.LeaderEpoch, append(slices.Clone(st.ISR), 1), st.Version); err != nil {
			t.Fatal(err)
		}
	}
	readmit(0)
	waitFor(t, "t-0 led by broker 1 again", 10*time.Second, func() (bool, string) {
		st := stateOf(t, c, "t", 0)
		return st.Leader == 1, fmt.Sprintf("%+v", st)
	})
	if st := stateOf(t, c, "t", 1); st.Leader == 1 {
		t.Fatalf("t-1 given to broker 1, which is not in its ISR: %+v", st)
	}
	readmit(1)
	// A non-event can only be watched for: ten checks, any of which would
	// have moved t-1 were the threshold not honoured.
	for range 10 {
		time.Sleep(check)
		if st := stateOf(t, c, "t", 1); st.Leader == 1 {
			t.Fatalf("t-1 given back to broker 1 at 1 of 2 partitions led elsewhere (50 %%, not above 50): %+v", st)
		}
	}
	c.checkHistory(false)
}
