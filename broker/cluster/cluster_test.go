package cluster

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/metadata/storetest"
	"github.com/sluicehq/sluice/internal/zksession"
)

// TestStoreConformance runs metadata's Store suite against the ZooKeeper
// Store: each case on its own chroot, each open a new broker of that
// cluster (another Store over the same metadata, as after a restart).
func TestStoreConformance(t *testing.T) {
	c := newTestCluster(t)
	cases := 0
	storetest.Run(t, func(t *testing.T) func() metadata.Store {
		cases++
		c.chroot = fmt.Sprintf("/conformance%d", cases)
		id := int32(0)
		return func() metadata.Store {
			id++
			return c.start(id).Store()
		}
	})
}

func createTopic(t *testing.T, n *Node, name string, partitions int32, rf int) {
	t.Helper()
	replicas, err := n.AssignReplicas(0, partitions, rf)
	if err != nil {
		t.Fatal(err)
	}
	if err := n.Store().CreateTopic(metadata.Topic{Name: name, ID: metadata.NewTopicID(), Partitions: partitions, Replicas: replicas}); err != nil {
		t.Fatal(err)
	}
}

func mustSession(t *testing.T, n *Node) *zksession.Session {
	t.Helper()
	s, err := n.session()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func stateOf(t *testing.T, c *testCluster, topic string, p int32) PartitionState {
	t.Helper()
	a, _, err := readAssignment(c.watcher, topic)
	if err != nil {
		t.Fatal(err)
	}
	st, ok, err := readState(c.watcher, a, p)
	if err != nil || !ok {
		t.Fatalf("%s-%d: state %v %v", topic, p, ok, err)
	}
	return st
}

// TestRegistration: a broker registers its endpoints and rack; a second
// broker with the same id while the first's session lives is refused with
// ErrBrokerIDInUse; once the first is gone the id registers again.
func TestRegistration(t *testing.T) {
	c := newTestCluster(t)
	c.opts = func(id int32) Options { return Options{} }
	n1 := c.start(1)
	if _, err := c.tryStart(1, 300*time.Millisecond); !errors.Is(err, ErrBrokerIDInUse) {
		t.Fatalf("second broker 1: %v, want ErrBrokerIDInUse", err)
	}
	waitFor(t, "broker 1 in its own view", 10*time.Second, func() (bool, string) {
		addr, ok := n1.Addr(1)
		return ok && addr == "127.0.0.1:19001", addr
	})
	b, err := readBrokers(c.watcher)
	if err != nil || b[1].Host != "127.0.0.1" || b[1].Port != 9001 || len(b[1].Endpoints) != 1 {
		t.Fatalf("registration: %+v %v", b, err)
	}
	c.stop(1)
	c.start(1)
	c.waitSettled(false)
}

// TestFailoverAndFencing: the controller dies; another broker takes over
// with a higher controller epoch; the dead controller's partitions get new
// leaders from their ISR. Then a zombie of the old controller (its epoch's
// version, on a live session) tries to write a state and to create one:
// both are refused with ErrFenced and nothing changes in ZooKeeper.
func TestFailoverAndFencing(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.startThreeControlledBy1()
	createTopic(t, n1, "t", 6, 3)
	c.waitSettled(false)
	oldEpoch, oldVersion, _, err := readControllerEpoch(c.watcher)
	if err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	c.waitSettled(false)
	newEpoch, _, _, _ := readControllerEpoch(c.watcher)
	if newEpoch != oldEpoch+1 {
		t.Fatalf("controller epoch %d after failover, want %d", newEpoch, oldEpoch+1)
	}
	for p := int32(0); p < 6; p++ {
		st := stateOf(t, c, "t", p)
		if st.Leader == 1 || slices.Contains(st.ISR, 1) || len(st.ISR) != 2 {
			t.Fatalf("t-%d after broker 1 died: %+v", p, st)
		}
	}

	waitFor(t, "broker 3's metadata cache to show every partition as stored", 10*time.Second, func() (bool, string) {
		stored, err := c.states()
		cached := c.node(3).n.Partitions()
		if err != nil || len(cached) != len(stored) {
			return false, fmt.Sprintf("%d cached, %d stored (%v)", len(cached), len(stored), err)
		}
		for i := range stored {
			if cached[i].Version != stored[i].Version || !sameDecision(cached[i], stored[i]) {
				return false, fmt.Sprintf("cached %+v, stored %+v", cached[i], stored[i])
			}
		}
		return true, ""
	})

	zombieSession, err := zksession.Dial(c.zk.Connect(c.chroot), 5*time.Second, testLog)
	if err != nil {
		t.Fatal(err)
	}
	defer zombieSession.Close()
	zombie := &controller{n: c.node(2).n, s: zombieSession, log: testLog, epoch: oldEpoch, epochVersion: oldVersion}
	before := stateOf(t, c, "t", 0)
	next := before
	next.Leader, next.LeaderEpoch, next.ISR = 1, before.LeaderEpoch+1, []int32{1}
	if err := zombie.writeState(before, next); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie controller's write: %v, want ErrFenced", err)
	}
	a, _, _ := readAssignment(c.watcher, "t")
	if _, err := zombie.createState(a, PartitionState{Topic: "t", Partition: 9, Leader: 1, ISR: []int32{1}}); !errors.Is(err, ErrFenced) {
		t.Fatalf("zombie controller's create: %v, want ErrFenced", err)
	}
	if after := stateOf(t, c, "t", 0); after.Version != before.Version || !sameDecision(after, before) {
		t.Fatalf("a fenced write landed: %+v -> %+v", before, after)
	}
	if ok, _, _ := c.watcher.ZK().Exists(c.watcher.Path(partitionPath("t", 9))); ok {
		t.Fatal("a fenced create landed")
	}
	c.checkHistory(false)
}

// TestAlterISR: the leader shrinks and expands its ISR conditionally; a
// stale version, a wrong epoch or a non-leader is ErrStaleState and writes
// nothing; an ISR without its leader is ErrInvalid; a retried write that
// already landed is recognised; the controller is notified.
func TestAlterISR(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start(1)
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	createTopic(t, n1, "t", 1, 3)
	c.waitSettled(false)
	st := stateOf(t, c, "t", 0)
	leader := c.node(st.Leader).n
	other := st.ISR[1]
	if st.ISR[0] == st.Leader {
		other = st.ISR[1]
	} else {
		other = st.ISR[0]
	}
	ctx := context.Background()
	shrunk := slices.DeleteFunc(slices.Clone(st.ISR), func(b int32) bool { return b == other })
	v, err := leader.AlterISR(ctx, "t", 0, st.LeaderEpoch, shrunk, st.Version)
	if err != nil || v != st.Version+1 {
		t.Fatalf("shrink: version %d, %v", v, err)
	}
	// The same call again (its answer lost): recognised as done.
	if v2, err := leader.AlterISR(ctx, "t", 0, st.LeaderEpoch, shrunk, st.Version); err != nil || v2 != v {
		t.Fatalf("retried shrink: %d, %v; want %d", v2, err, v)
	}
	for _, bad := range []struct {
		name    string
		n       *Node
		epoch   int32
		isr     []int32
		version int32
	}{
		{"stale version", leader, st.LeaderEpoch, st.ISR, st.Version},
		{"old leader epoch", leader, st.LeaderEpoch - 1, st.ISR, v},
		{"not the leader", c.node(other).n, st.LeaderEpoch, []int32{other}, v},
	} {
		if _, err := bad.n.AlterISR(ctx, "t", 0, bad.epoch, bad.isr, bad.version); !isStale(err) {
			t.Fatalf("%s: %v, want ErrStaleState", bad.name, err)
		}
		if now := stateOf(t, c, "t", 0); now.Version != v {
			t.Fatalf("%s: a stale AlterISR landed: version %d, want %d", bad.name, now.Version, v)
		}
	}
	if _, err := leader.AlterISR(ctx, "t", 0, st.LeaderEpoch, []int32{other}, v); !errors.Is(err, ErrInvalid) {
		t.Fatalf("ISR without its leader: %v, want ErrInvalid", err)
	}
	if _, err := leader.AlterISR(ctx, "t", 0, st.LeaderEpoch, st.ISR, v); err != nil {
		t.Fatalf("expand: %v", err)
	}
	waitFor(t, "the controller to take the ISR change notifications", 10*time.Second, func() (bool, string) {
		kids, _, err := c.watcher.ZK().Children(c.watcher.Path(isrChangePath))
		return err == nil && len(kids) == 0, "notifications left"
	})
	c.checkHistory(false)
}

// TestOfflineAndUnclean: with unclean election off, a partition whose ISR
// is down to a dead leader stays offline although another replica lives,
// and comes back with that leader; with the topic's override on, the live
// replica leads alone.
func TestOfflineAndUnclean(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start(1)
	c.start(2)
	c.waitSettled(false)
	if err := n1.Store().CreateTopic(metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: 1, Replicas: [][]int32{{2, 1}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(false)
	st := stateOf(t, c, "t", 0)
	if _, err := c.node(2).n.AlterISR(context.Background(), "t", 0, st.LeaderEpoch, []int32{2}, st.Version); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	c.waitSettled(false)
	if st := stateOf(t, c, "t", 0); st.Leader != -1 || !slices.Equal(st.ISR, []int32{2}) {
		t.Fatalf("after the last ISR member died: %+v, want offline with ISR [2]", st)
	}
	c.start(2)
	c.waitSettled(false)
	if st := stateOf(t, c, "t", 0); st.Leader != 2 {
		t.Fatalf("after the last ISR member returned: %+v, want leader 2", st)
	}
	st = stateOf(t, c, "t", 0)
	if _, err := c.node(2).n.AlterISR(context.Background(), "t", 0, st.LeaderEpoch, []int32{2}, st.Version); err != nil {
		t.Fatal(err)
	}
	if err := n1.Store().UpdateTopic(metadata.Topic{Name: "t", Partitions: 1, Configs: map[string]string{"unclean.leader.election.enable": "true"}}); err != nil {
		t.Fatal(err)
	}
	c.stop(2)
	c.waitSettled(true)
	if st := stateOf(t, c, "t", 0); st.Leader != 1 || !slices.Equal(st.ISR, []int32{1}) {
		t.Fatalf("unclean election: %+v, want leader 1 alone", st)
	}
	c.checkHistory(true)
}

// TestControlledShutdownAndPreferred: a broker's controlled shutdown moves
// its leaderships away and takes it out of the ISRs before it stops; when
// it returns and is in the ISR again, auto rebalance gives its preferred
// partitions back; ElectPreferred does the same on demand.
func TestControlledShutdownAndPreferred(t *testing.T) {
	c := newTestCluster(t)
	c.opts = func(id int32) Options {
		return Options{AutoLeaderRebalance: true, LeaderImbalanceCheck: 300 * time.Millisecond}
	}
	n1 := c.start(1)
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	createTopic(t, n1, "t", 6, 3)
	c.waitSettled(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.node(2).n.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	for p := int32(0); p < 6; p++ {
		if st := stateOf(t, c, "t", p); st.Leader == 2 || slices.Contains(st.ISR, 2) {
			t.Fatalf("t-%d after broker 2's controlled shutdown: %+v", p, st)
		}
	}
	c.stop(2)
	c.start(2)
	c.waitSettled(false)
	// Broker 2 catches up: its leaders add it back to their ISRs.
	for p := int32(0); p < 6; p++ {
		st := stateOf(t, c, "t", p)
		if _, err := c.node(st.Leader).n.AlterISR(ctx, "t", p, st.LeaderEpoch, append(slices.Clone(st.ISR), 2), st.Version); err != nil && !isStale(err) {
			t.Fatal(err)
		}
	}
	waitFor(t, "preferred leaders back", 20*time.Second, func() (bool, string) {
		states, err := c.states()
		if err != nil {
			return false, err.Error()
		}
		for _, st := range states {
			if st.Replicas[0] == 2 && st.Leader != 2 {
				return false, "a partition preferring 2 is led elsewhere"
			}
		}
		return true, ""
	})
	c.checkHistory(false)
}

// TestElectPreferredOnDemand: without auto rebalance a returning broker
// does not get its preferred leaderships back by itself (checked once the
// controller has handled the ISR changes that readmitted it); ElectPreferred
// gives them back, and returns once the controller has done it.
func TestElectPreferredOnDemand(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start(1)
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	createTopic(t, n1, "t", 3, 3)
	c.waitSettled(false)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := c.node(1).n.ControlledShutdown(ctx); err != nil {
		t.Fatal(err)
	}
	c.stop(1)
	c.start(1)
	c.waitSettled(false)
	var prefer1 []TopicPartition
	for p := int32(0); p < 3; p++ {
		st := stateOf(t, c, "t", p)
		if st.Replicas[0] == 1 {
			prefer1 = append(prefer1, TopicPartition{"t", p})
		}
		if _, err := c.node(st.Leader).n.AlterISR(ctx, "t", p, st.LeaderEpoch, append(slices.Clone(st.ISR), 1), st.Version); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, "the controller to take the ISR change notifications", 10*time.Second, func() (bool, string) {
		kids, _, err := c.watcher.ZK().Children(c.watcher.Path(isrChangePath))
		return err == nil && len(kids) == 0, "notifications left"
	})
	for _, tp := range prefer1 {
		if st := stateOf(t, c, tp.Topic, tp.Partition); st.Leader == 1 {
			t.Fatalf("%v: leadership moved back without auto rebalance: %+v", tp, st)
		}
	}
	if err := c.node(2).n.ElectPreferred(ctx, prefer1); err != nil {
		t.Fatal(err)
	}
	for _, tp := range prefer1 {
		if st := stateOf(t, c, tp.Topic, tp.Partition); st.Leader != 1 {
			t.Fatalf("%v after ElectPreferred: %+v, want leader 1", tp, st)
		}
	}
	c.checkHistory(false)
}

// TestPausedLeaderAndController: the broker that is both controller and
// leader is cut off from ZooKeeper past its session. Another broker becomes
// controller with a higher epoch and elects new leaders with higher leader
// epochs; the paused broker's AlterISR on the state it knew fails with
// ErrStaleState. When it is back it registers again, is no longer
// controller, and is told the new states.
func TestPausedLeaderAndController(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.startThreeControlledBy1()
	if err := n1.Store().CreateTopic(metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: 1, Replicas: [][]int32{{1, 2, 3}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(false)
	old := stateOf(t, c, "t", 0)
	epoch, _, _, _ := readControllerEpoch(c.watcher)
	if old.Leader != 1 {
		t.Fatalf("t-0: %+v, want leader 1", old)
	}
	c.node(1).proxy.cut()
	waitFor(t, "a new controller and leader", 20*time.Second, func() (bool, string) {
		ctl, _, err := readController(c.watcher)
		e, _, _, _ := readControllerEpoch(c.watcher)
		st := stateOf(t, c, "t", 0)
		return err == nil && ctl > 1 && e > epoch && st.Leader > 1, "not yet"
	})
	now := stateOf(t, c, "t", 0)
	if now.LeaderEpoch <= old.LeaderEpoch || slices.Contains(now.ISR, 1) {
		t.Fatalf("after broker 1's session expired: %+v (was %+v)", now, old)
	}
	c.node(1).proxy.heal()
	c.waitSettled(false)
	if _, err := n1.AlterISR(context.Background(), "t", 0, old.LeaderEpoch, []int32{1}, old.Version); !isStale(err) {
		t.Fatalf("the paused leader's AlterISR: %v, want ErrStaleState", err)
	}
	if _, self := n1.Controller(); self {
		t.Fatal("the paused controller still controls")
	}
	waitFor(t, "broker 1 to be told the new leader", 10*time.Second, func() (bool, string) {
		c.mu.Lock()
		defer c.mu.Unlock()
		d := c.delivered[1]
		return len(d) > 0 && d[len(d)-1].Leader == now.Leader && d[len(d)-1].LeaderEpoch >= now.LeaderEpoch, "not yet"
	})
	c.checkHistory(false)
}
