package cluster

import (
	"math/rand/v2"
	"slices"
	"testing"
)

func live(ids ...int32) map[int32]bool {
	m := map[int32]bool{}
	for _, id := range ids {
		m[id] = true
	}
	return m
}

// TestDecide walks the election rules one case at a time.
func TestDecide(t *testing.T) {
	base := PartitionState{Topic: "t", Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 2, 3}, Replicas: []int32{1, 2, 3}, Version: 7}
	type want struct {
		leader, epoch int32
		isr           []int32
		changed       bool
	}
	for _, c := range []struct {
		name string
		s    PartitionState
		l    liveness
		d    decision
		want want
	}{
		{"all live: nothing", base, liveness{live: live(1, 2, 3)}, decision{}, want{1, 5, []int32{1, 2, 3}, false}},
		{"leader dead: next ISR member in assignment order", base, liveness{live: live(2, 3)}, decision{}, want{2, 6, []int32{2, 3}, true}},
		{"follower dead: out of the ISR, no new epoch", base, liveness{live: live(1, 3)}, decision{}, want{1, 5, []int32{1, 3}, true}},
		{"leader dead, no live ISR member: offline, ISR kept",
			PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1}, Replicas: []int32{1, 2, 3}}, liveness{live: live(2, 3)}, decision{}, want{-1, 6, []int32{1}, true}},
		{"offline, unclean: a live non-ISR replica leads alone",
			PartitionState{Leader: -1, LeaderEpoch: 6, ISR: []int32{1}, Replicas: []int32{1, 2, 3}}, liveness{live: live(3)}, decision{unclean: true}, want{3, 7, []int32{3}, true}},
		{"offline, last ISR member back: it leads",
			PartitionState{Leader: -1, LeaderEpoch: 6, ISR: []int32{1}, Replicas: []int32{3, 2, 1}}, liveness{live: live(1, 2, 3)}, decision{}, want{1, 7, []int32{1}, true}},
		{"leader shutting down: moves, and leaves the ISR", base, liveness{live: live(1, 2, 3), shuttingDown: live(1)}, decision{}, want{2, 6, []int32{2, 3}, true}},
		{"sole ISR member shutting down: stays",
			PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1}, Replicas: []int32{1, 2}}, liveness{live: live(1, 2), shuttingDown: live(1)}, decision{}, want{1, 5, []int32{1}, false}},
		{"follower shutting down: leaves the ISR", base, liveness{live: live(1, 2, 3), shuttingDown: live(3)}, decision{}, want{1, 5, []int32{1, 2}, true}},
		{"preferred back in the ISR: leads again",
			PartitionState{Leader: 2, LeaderEpoch: 6, ISR: []int32{2, 3, 1}, Replicas: []int32{1, 2, 3}}, liveness{live: live(1, 2, 3)}, decision{preferred: true}, want{1, 7, []int32{2, 3, 1}, true}},
		{"preferred not in the ISR: stays",
			PartitionState{Leader: 2, LeaderEpoch: 6, ISR: []int32{2, 3}, Replicas: []int32{1, 2, 3}}, liveness{live: live(1, 2, 3)}, decision{preferred: true}, want{2, 6, []int32{2, 3}, false}},
		{"leader dead, unclean on but an ISR member lives: clean election",
			PartitionState{Leader: 1, LeaderEpoch: 5, ISR: []int32{1, 3}, Replicas: []int32{1, 2, 3}}, liveness{live: live(2, 3)}, decision{unclean: true}, want{3, 6, []int32{3}, true}},
	} {
		got, changed := decide(c.s, c.l, c.d)
		if got.Leader != c.want.leader || got.LeaderEpoch != c.want.epoch || !slices.Equal(got.ISR, c.want.isr) || changed != c.want.changed {
			t.Errorf("%s: leader %d epoch %d isr %v changed %v; want %+v", c.name, got.Leader, got.LeaderEpoch, got.ISR, changed, c.want)
		}
		if got.Leader >= 0 && !slices.Contains(got.ISR, got.Leader) {
			t.Errorf("%s: leader %d not in ISR %v", c.name, got.Leader, got.ISR)
		}
	}
}

// TestDecideRandom: over random states and livenesses, with unclean
// election off, a new leader always comes from the old ISR, the leader is
// in the ISR, and epochs never go down.
func TestDecideRandom(t *testing.T) {
	seed := rand.Uint64()
	t.Logf("seed %d", seed)
	rnd := rand.New(rand.NewPCG(seed, 0))
	for i := 0; i < 20000; i++ {
		replicas := rnd.Perm(5)[:1+rnd.IntN(4)]
		s := PartitionState{Leader: -1, LeaderEpoch: int32(rnd.IntN(10)), Replicas: toIDs(replicas)}
		for _, r := range s.Replicas {
			if rnd.IntN(2) == 0 {
				s.ISR = append(s.ISR, r)
			}
		}
		if len(s.ISR) > 0 && rnd.IntN(4) > 0 {
			s.Leader = s.ISR[rnd.IntN(len(s.ISR))]
		}
		l := liveness{live: map[int32]bool{}, shuttingDown: map[int32]bool{}}
		for b := int32(0); b < 5; b++ {
			l.live[b] = rnd.IntN(3) > 0
			l.shuttingDown[b] = l.live[b] && rnd.IntN(5) == 0
		}
		d := decision{unclean: rnd.IntN(4) == 0, preferred: rnd.IntN(2) == 0}
		next, _ := decide(s, l, d)
		if next.LeaderEpoch < s.LeaderEpoch || (next.Leader != s.Leader) != (next.LeaderEpoch == s.LeaderEpoch+1) {
			t.Fatalf("%+v %+v -> %+v: epoch must grow by one exactly when the leader changes", s, l, next)
		}
		if next.Leader >= 0 && (!slices.Contains(next.ISR, next.Leader) || !l.live[next.Leader]) {
			t.Fatalf("%+v %+v -> %+v: leader not live or not in the ISR", s, l, next)
		}
		if !d.unclean && next.Leader >= 0 && !slices.Contains(s.ISR, next.Leader) {
			t.Fatalf("%+v -> %+v: a non-ISR replica elected with unclean election off", s, next)
		}
		if len(s.ISR) > 0 && len(next.ISR) == 0 {
			t.Fatalf("%+v -> %+v: ISR emptied", s, next)
		}
	}
}

func toIDs(xs []int) []int32 {
	out := make([]int32, len(xs))
	for i, x := range xs {
		out[i] = int32(x)
	}
	return out
}

// TestAssignReplicas: every partition gets rf distinct brokers, leaders
// spread evenly, and with racks each partition spans min(rf, racks) racks.
func TestAssignReplicas(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	var brokers []BrokerInfo
	for id := int32(1); id <= 6; id++ {
		brokers = append(brokers, BrokerInfo{ID: id, Rack: []string{"a", "b", "c"}[id%3]})
	}
	for _, racked := range []bool{false, true} {
		bs := slices.Clone(brokers)
		if !racked {
			for i := range bs {
				bs[i].Rack = ""
			}
		}
		got, err := assignReplicas(bs, 0, 12, 3, rnd)
		if err != nil {
			t.Fatal(err)
		}
		leaders := map[int32]int{}
		for p, r := range got {
			if len(r) != 3 || r[0] == r[1] || r[1] == r[2] || r[0] == r[2] {
				t.Fatalf("partition %d: replicas %v", p, r)
			}
			leaders[r[0]]++
			if racked {
				racks := map[string]bool{}
				for _, b := range r {
					racks[bs[b-1].Rack] = true
				}
				if len(racks) != 3 {
					t.Fatalf("partition %d: replicas %v on racks %v", p, r, racks)
				}
			}
		}
		for id, n := range leaders {
			if n != 2 {
				t.Fatalf("racks %v: broker %d leads %d of 12 partitions, want 2 each (%v)", racked, id, n, got)
			}
		}
	}
	if _, err := assignReplicas(brokers[:2], 0, 1, 3, rnd); err == nil {
		t.Fatal("replication factor 3 on 2 brokers accepted")
	}
}
