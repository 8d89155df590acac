package cluster

import (
	"fmt"
	"testing"
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
