package cluster

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/metadata"
)

// TestInvariantsUnderFaults drives four brokers through a random sequence
// (seed logged) of broker deaths, returns, session expiries (a broker cut
// off from ZooKeeper until its session ends: a pause or a partition, the
// controller included), controlled shutdowns, and AlterISR calls by the
// leaders, some on a fresh version and some on a stale one. After each
// step the controller must settle; at the end the recorded history of
// state writes must hold every invariant (checkHistory): one chain of
// conditional writes per partition, leader epochs only growing, one leader
// per epoch (in what ZooKeeper held and in what brokers were told), the
// leader in the ISR, no election from outside the ISR. Every AlterISR on a
// stale version must have failed with ErrStaleState. It runs with unclean
// election off (30 steps) and on (12 steps; the ISR rule is then not checked).
func TestInvariantsUnderFaults(t *testing.T) {
	t.Run("clean", func(t *testing.T) { runFaults(t, false, 30) })
	t.Run("unclean", func(t *testing.T) { runFaults(t, true, 12) })
}

// runFaults runs steps random faults with unclean election on or off.
func runFaults(t *testing.T, unclean bool, steps int) {
	rnd := seeded(t)
	c := newTestCluster(t)
	c.opts = func(int32) Options { return Options{UncleanLeaderElection: unclean} }
	ids := []int32{1, 2, 3, 4}
	for _, id := range ids {
		c.start(id)
	}
	c.waitSettled(unclean)
	first := c.node(1).n
	createTopic(t, first, "a", 6, 3)
	if err := first.Store().CreateTopic(metadata.Topic{Name: "b", ID: metadata.NewTopicID(), Partitions: 2}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(unclean)
	ctx := context.Background()
	counts := map[string]int{}
	for step := 0; step < steps; step++ {
		live := c.liveIDs()
		dead := slices.DeleteFunc(slices.Clone(ids), func(id int32) bool { return slices.Contains(live, id) })
		op := []string{"kill", "return", "expire", "alter", "alter", "stale", "shutdown"}[rnd.IntN(7)]
		if len(live) < 3 && len(dead) > 0 && rnd.IntN(2) == 0 {
			op = "return"
		}
		switch {
		case (op == "kill" || op == "shutdown") && len(live) <= 1, op == "return" && len(dead) == 0:
			op = "alter"
		}
		counts[op]++
		switch op {
		case "kill":
			id := live[rnd.IntN(len(live))]
			t.Logf("step %d: kill %d", step, id)
			c.stop(id)
		case "shutdown":
			id := live[rnd.IntN(len(live))]
			t.Logf("step %d: controlled shutdown of %d", step, id)
			sctx, cancel := context.WithTimeout(ctx, 20*time.Second)
			err := c.node(id).n.ControlledShutdown(sctx)
			cancel()
			if err != nil {
				t.Fatalf("controlled shutdown of %d: %v", id, err)
			}
			c.stop(id)
		case "return":
			id := dead[rnd.IntN(len(dead))]
			t.Logf("step %d: return %d", step, id)
			c.start(id)
		case "expire":
			id := live[rnd.IntN(len(live))]
			t.Logf("step %d: expire %d's session", step, id)
			tn := c.node(id)
			tn.proxy.cut()
			waitFor(t, "the cut-off broker's session to expire", 20*time.Second, func() (bool, string) {
				ok, _, err := c.watcher.ZK().Exists(c.watcher.Path(brokerPath(id)))
				return err == nil && !ok, "still registered"
			})
			tn.proxy.heal()
		case "alter", "stale":
			c.alterRandom(ctx, t, rnd, op == "stale")
		}
		c.waitSettled(unclean)
	}
	t.Logf("operations: %v", counts)
	c.checkHistory(unclean)
}

// alterRandom has the leader of a random partition shrink or expand its
// ISR: on the current version, or (stale) on an older one, which must fail.
func (c *testCluster) alterRandom(ctx context.Context, t *testing.T, rnd interface {
	IntN(int) int
	Perm(int) []int
}, stale bool) {
	t.Helper()
	states, err := c.states()
	if err != nil {
		t.Fatal(err)
	}
	live := c.liveIDs()
	for _, i := range rnd.Perm(len(states)) {
		if c.alterOne(ctx, t, rnd, states[i], live, stale) {
			return
		}
	}
}

// alterOne changes st's ISR through its leader, if it has a live one and
// there is a change to make.
func (c *testCluster) alterOne(ctx context.Context, t *testing.T, rnd interface{ IntN(int) int }, st PartitionState, live []int32, stale bool) bool {
	t.Helper()
	tn := c.node(st.Leader)
	if st.Leader < 0 || tn == nil {
		return false
	}
	isr := slices.Clone(st.ISR)
	var outside []int32
	for _, r := range st.Replicas {
		if !slices.Contains(isr, r) && slices.Contains(live, r) {
			outside = append(outside, r)
		}
	}
	if len(outside) > 0 && (len(isr) == 1 || rnd.IntN(2) == 0) {
		isr = append(isr, outside[rnd.IntN(len(outside))])
	} else if len(isr) > 1 {
		drop := isr[rnd.IntN(len(isr))]
		if drop == st.Leader {
			drop = isr[(slices.Index(isr, drop)+1)%len(isr)]
		}
		isr = slices.DeleteFunc(isr, func(b int32) bool { return b == drop })
	} else {
		return false // nothing to change
	}
	version := st.Version
	if stale {
		version = st.Version - 1 - int32(rnd.IntN(2))
	}
	t.Logf("AlterISR %s-%d by %d: %v -> %v at version %d (stored %d)", st.Topic, st.Partition, st.Leader, st.ISR, isr, version, st.Version)
	_, err := tn.n.AlterISR(ctx, st.Topic, st.Partition, st.LeaderEpoch, isr, version)
	switch {
	case stale && !isStale(err):
		t.Fatalf("AlterISR on stale version %d (stored %d): %v, want ErrStaleState", version, st.Version, err)
	case !stale && err != nil && !isStale(err): // a race with the controller may make it stale
		t.Fatalf("AlterISR: %v", err)
	}
	return true
}
