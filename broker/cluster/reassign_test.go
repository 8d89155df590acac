package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/sluicehq/sluice/broker/metadata"
)

// TestReassignResumesAfterFailover: a move is written into the assignment
// znode in Kafka's layout (replicas = target then leaving, adding_replicas,
// removing_replicas), waits while a target replica is out of the ISR, and
// is finished by the next controller after the one that saw it start is
// gone: the leader moves to a target replica in a new epoch, the leaving
// replica leaves the ISR, the assignment becomes the target. Requests that
// can never succeed are refused with their sentinel, and a cancel goes back
// to the original replicas.
func TestReassignResumesAfterFailover(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.startThreeControlledBy1()
	c.start(4)
	c.waitSettled(false)
	for _, name := range []string{"t", "u"} {
		if err := n1.Store().CreateTopic(metadata.Topic{Name: name, ID: metadata.NewTopicID(), Partitions: 1, Replicas: [][]int32{{2, 3}}}); err != nil {
			t.Fatal(err)
		}
	}
	c.waitSettled(false)
	waitFor(t, "t-0 and u-0 led by 2 with ISR [2 3]", 10*time.Second, func() (bool, string) {
		a, b := stateOf(t, c, "t", 0), stateOf(t, c, "u", 0)
		return a.Leader == 2 && slices.Equal(a.ISR, []int32{2, 3}) && b.Leader == 2, fmt.Sprintf("%+v %+v", a, b)
	})

	for _, bad := range []struct {
		name   string
		topic  string
		p      int32
		target []int32
		rf     bool
		want   error
	}{
		{"a broker that is not registered", "t", 0, []int32{2, 9}, false, ErrInvalid},
		{"a broker twice", "t", 0, []int32{4, 4}, false, ErrInvalid},
		{"an empty list", "t", 0, []int32{}, true, ErrInvalid},
		{"another replication factor", "t", 0, []int32{2, 3, 4}, false, ErrReplicationFactor},
		{"an unknown partition", "t", 5, []int32{2, 3}, false, ErrUnknownPartition},
		{"an unknown topic", "nope", 0, []int32{2, 3}, false, ErrUnknownPartition},
		{"a cancel with no move", "t", 0, nil, false, ErrNoReassignment},
	} {
		if err := c.node(2).n.Reassign(bad.topic, bad.p, bad.target, bad.rf); !errors.Is(err, bad.want) {
			t.Errorf("%s: %v, want %v", bad.name, err, bad.want)
		}
	}
	if err := c.node(2).n.Reassign("t", 0, []int32{2, 3}, false); err != nil {
		t.Fatalf("the current replicas: %v", err)
	}
	if a, _, _ := readAssignment(c.watcher, "t"); !slices.Equal(a.Replicas[0], []int32{2, 3}) || a.Adding[0] != nil {
		t.Fatalf("a reassignment to the current replicas changed the assignment: %+v", a)
	}

	// t-0 moves from [2 3] to [4 3]; u-0 the same, then cancelled.
	for _, topic := range []string{"t", "u"} {
		if err := c.node(3).n.Reassign(topic, 0, []int32{4, 3}, false); err != nil {
			t.Fatalf("reassign %s-0: %v", topic, err)
		}
	}
	data, _, err := c.watcher.ZK().Get(c.watcher.Path(topicPath("t")))
	if err != nil {
		t.Fatal(err)
	}
	var z assignmentZNode
	if err := json.Unmarshal(data, &z); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(z.Partitions["0"], []int32{4, 3, 2}) || !slices.Equal(z.Adding["0"], []int32{4}) || !slices.Equal(z.Removing["0"], []int32{2}) {
		t.Fatalf("the moving assignment znode: %s", data)
	}
	waitFor(t, "every node to list both moves", 10*time.Second, func() (bool, string) {
		for _, id := range []int32{1, 2, 3, 4} {
			if got := c.node(id).n.Reassignments(); len(got) != 2 || !slices.Equal(got[0].Target(), []int32{4, 3}) || !slices.Equal(got[0].Origin(), []int32{3, 2}) {
				return false, fmt.Sprintf("broker %d lists %+v", id, got)
			}
		}
		return true, ""
	})
	if err := c.node(4).n.Reassign("u", 0, nil, false); err != nil {
		t.Fatalf("cancel u-0: %v", err)
	}
	// As in Kafka, the origin is the assignment less the adding replicas:
	// the replicas in the order the move listed them.
	if a, _, _ := readAssignment(c.watcher, "u"); !slices.Equal(a.Replicas[0], []int32{3, 2}) || a.Adding[0] != nil || a.Removing[0] != nil {
		t.Fatalf("after the cancel: %+v", a)
	}

	// The target replica 4 is not in the ISR: nothing finishes. The
	// controller goes; the next one finishes the move once 4 joins.
	time.Sleep(200 * time.Millisecond) // a controller round that could (wrongly) finish the move
	if st := stateOf(t, c, "t", 0); st.Leader != 2 || !st.moving() {
		t.Fatalf("t-0 moved before its target replica was in the ISR: %+v", st)
	}
	c.stop(1)
	c.waitSettled(false)
	st := stateOf(t, c, "t", 0)
	if _, err := c.node(2).n.AlterISR(context.Background(), "t", 0, st.LeaderEpoch, []int32{2, 3, 4}, st.Version); err != nil {
		t.Fatalf("the leader adds 4 to the ISR: %v", err)
	}
	waitFor(t, "the new controller to finish t-0's move", 15*time.Second, func() (bool, string) {
		a, _, err := readAssignment(c.watcher, "t")
		now := stateOf(t, c, "t", 0)
		done := err == nil && slices.Equal(a.Replicas[0], []int32{4, 3}) && a.Adding[0] == nil && a.Removing[0] == nil
		return done && now.Leader == 4 && now.LeaderEpoch == st.LeaderEpoch+1 && slices.Equal(now.ISR, []int32{3, 4}),
			fmt.Sprintf("assignment %+v, state %+v", a, now)
	})
	waitFor(t, "the nodes to list no move", 10*time.Second, func() (bool, string) {
		for _, id := range []int32{2, 3, 4} {
			if got := c.node(id).n.Reassignments(); len(got) != 0 {
				return false, fmt.Sprintf("broker %d lists %+v", id, got)
			}
		}
		return true, ""
	})
	c.checkHistory(false)
}

// TestDecideOutsideAssignment: ISR members a cancelled move took out of
// the assignment leave the ISR, a leader it took out is replaced by an
// assigned ISR member, and no preferred election runs while a partition
// is moving.
func TestDecideOutsideAssignment(t *testing.T) {
	l := liveness{live: map[int32]bool{1: true, 2: true, 3: true, 4: true}, shuttingDown: map[int32]bool{}}
	for _, tc := range []struct {
		name string
		in   PartitionState
		d    decision
		want PartitionState
	}{
		{"an ISR member not assigned leaves",
			PartitionState{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2, 4}, Replicas: []int32{1, 2}},
			decision{}, PartitionState{Leader: 1, LeaderEpoch: 3, ISR: []int32{1, 2}}},
		{"a leader not assigned is replaced",
			PartitionState{Leader: 4, LeaderEpoch: 3, ISR: []int32{1, 2, 4}, Replicas: []int32{2, 1}},
			decision{}, PartitionState{Leader: 2, LeaderEpoch: 4, ISR: []int32{1, 2}}},
		{"no preferred election while moving",
			PartitionState{Leader: 2, LeaderEpoch: 3, ISR: []int32{1, 2, 3}, Replicas: []int32{3, 1, 2}, Adding: []int32{3}, Removing: []int32{2}},
			decision{preferred: true}, PartitionState{Leader: 2, LeaderEpoch: 3, ISR: []int32{1, 2, 3}}},
	} {
		got, _ := decide(tc.in, l, tc.d)
		if got.Leader != tc.want.Leader || got.LeaderEpoch != tc.want.LeaderEpoch || !slices.Equal(got.ISR, tc.want.ISR) {
			t.Errorf("%s: got leader %d epoch %d ISR %v, want %d %d %v", tc.name, got.Leader, got.LeaderEpoch, got.ISR,
				tc.want.Leader, tc.want.LeaderEpoch, tc.want.ISR)
		}
	}
}

// TestAdvanceMoveFinishesTogether: moves of several partitions of one
// topic that can finish at once (here dropping a replica whose target
// replicas are all in the ISR) finish in one pass over the topic, as a
// reconcile round makes it: each finished move's assignment write leaves
// the round at the znode's new version instead of failing the next
// partition's write on a stale one (and costing a full round each).
func TestAdvanceMoveFinishesTogether(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.start(1)
	c.start(2)
	c.start(3)
	c.waitSettled(false)
	if err := n1.Store().CreateTopic(metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: 3,
		Replicas: [][]int32{{1, 2, 3}, {2, 3, 1}, {3, 1, 2}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(false)
	// No controller runs from here on: the pass below is the only writer.
	// The brokers' stops shrank the ISRs; every partition gets back its
	// preferred leader and a full ISR.
	for _, id := range []int32{1, 2, 3} {
		c.stop(id)
	}
	a, _, err := readAssignment(c.watcher, "t")
	if err != nil {
		t.Fatal(err)
	}
	for p := range a.Replicas {
		st := stateOf(t, c, "t", int32(p))
		st.Leader, st.ISR = a.Replicas[p][0], []int32{1, 2, 3}
		if _, err := c.watcher.ZK().Set(c.watcher.Path(statePath("t", int32(p))), encodeState(st), st.Version); err != nil {
			t.Fatal(err)
		}
	}
	targets := [][]int32{{1, 2}, {2, 1}, {1, 2}} // broker 3 leaves every partition
	for p, target := range targets {
		a.Replicas[p] = append(slices.Clone(target), 3)
		a.Adding[p], a.Removing[p] = nil, []int32{3}
	}
	if _, err := c.watcher.ZK().Set(c.watcher.Path(topicPath("t")), encodeAssignment(a), a.Version); err != nil {
		t.Fatal(err)
	}
	epoch, version, _, err := readControllerEpoch(c.watcher)
	if err != nil {
		t.Fatal(err)
	}
	ctrl := &controller{n: n1, s: c.watcher, log: testLog, epoch: epoch, epochVersion: version}
	a, _, err = readAssignment(c.watcher, "t")
	if err != nil {
		t.Fatal(err)
	}
	live := liveness{live: map[int32]bool{1: true, 2: true}, shuttingDown: map[int32]bool{}}
	for p := range a.Replicas {
		if moved, err := ctrl.advanceMove(&a, int32(p), live); err != nil || moved {
			t.Fatalf("t-%d: moved %v, err %v: the pass should finish it", p, moved, err)
		}
	}
	got, _, err := readAssignment(c.watcher, "t")
	if err != nil {
		t.Fatal(err)
	}
	for p, target := range targets {
		if !slices.Equal(got.Replicas[p], target) || got.Adding[p] != nil || got.Removing[p] != nil {
			t.Errorf("t-%d after the pass: replicas %v adding %v removing %v, want %v", p, got.Replicas[p], got.Adding[p], got.Removing[p], target)
		}
		if st := stateOf(t, c, "t", int32(p)); slices.Contains(st.ISR, 3) || st.Leader == 3 {
			t.Errorf("t-%d after the pass: %+v, broker 3 still in it", p, st)
		}
	}
}

// TestReassignManyOneWrite: the moves of several partitions of one topic
// (one AlterPartitionReassignments request) are written into its
// assignment in one write, a refused partition refusing only itself.
func TestReassignManyOneWrite(t *testing.T) {
	c := newTestCluster(t)
	n1 := c.startThreeControlledBy1()
	c.start(4)
	c.waitSettled(false)
	if err := n1.Store().CreateTopic(metadata.Topic{Name: "t", ID: metadata.NewTopicID(), Partitions: 4,
		Replicas: [][]int32{{2, 3}, {3, 2}, {2, 3}, {3, 2}}}); err != nil {
		t.Fatal(err)
	}
	c.waitSettled(false)
	before, _, err := readAssignment(c.watcher, "t")
	if err != nil {
		t.Fatal(err)
	}
	refused, err := c.node(2).n.ReassignMany("t", map[int32][]int32{
		0: {4, 3}, 1: {3, 4}, 2: {2, 9}, 3: {3, 2}, 7: {4, 3},
	}, false)
	if err != nil {
		t.Fatal(err)
	}
	if len(refused) != 2 || !errors.Is(refused[2], ErrInvalid) || !errors.Is(refused[7], ErrUnknownPartition) {
		t.Fatalf("refused %v, want partition 2 invalid (broker 9) and 7 unknown", refused)
	}
	after, _, err := readAssignment(c.watcher, "t")
	if err != nil {
		t.Fatal(err)
	}
	if after.Version != before.Version+1 {
		t.Errorf("the assignment went from version %d to %d: one write expected", before.Version, after.Version)
	}
	for p, want := range map[int][3][]int32{0: {{4, 3, 2}, {4}, {2}}, 1: {{3, 4, 2}, {4}, {2}}, 2: {{2, 3}, nil, nil}, 3: {{3, 2}, nil, nil}} {
		if !slices.Equal(after.Replicas[p], want[0]) || !slices.Equal(after.Adding[p], want[1]) || !slices.Equal(after.Removing[p], want[2]) {
			t.Errorf("t-%d: replicas %v adding %v removing %v, want %v", p, after.Replicas[p], after.Adding[p], after.Removing[p], want)
		}
	}
}
