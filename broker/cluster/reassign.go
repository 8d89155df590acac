package cluster

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/go-zookeeper/zk"
)

// Replica moves (KIP-455, as Kafka's ZooKeeper controller runs them; the
// protocol is in doc.go). During a move of partition p the assignment
// znode lists, for p:
//
//	replicas          RS = TRS ++ (ORS - TRS)   target first, then the replicas leaving
//	adding_replicas   AR = TRS - ORS
//	removing_replicas RR = ORS - TRS
//
// where ORS is the assignment before the move and TRS the target, so
// ORS = RS - AR and TRS = RS - RR can always be recovered from the znode
// alone: a new controller resumes a move from ZooKeeper.

// moving reports whether a move of the partition is in progress.
func (s PartitionState) moving() bool { return len(s.Adding) > 0 || len(s.Removing) > 0 }

// Target is the replica set a partition ends with: its assignment less the
// replicas a move in progress removes.
func (s PartitionState) Target() []int32 { return without(s.Replicas, s.Removing) }

// Origin is the replica set a partition had before its move in progress
// (its assignment when none is): what cancelling the move goes back to.
func (s PartitionState) Origin() []int32 { return without(s.Replicas, s.Adding) }

func without(xs, drop []int32) []int32 {
	out := make([]int32, 0, len(xs))
	for _, x := range xs {
		if !slices.Contains(drop, x) {
			out = append(out, x)
		}
	}
	return out
}

// Sentinel errors of Reassign.
var (
	// ErrNoReassignment: a cancel of a partition that is not moving.
	ErrNoReassignment = errors.New("cluster: no reassignment in progress")
	// ErrUnknownPartition: the topic or partition does not exist.
	ErrUnknownPartition = errors.New("cluster: unknown topic or partition")
	// ErrReplicationFactor: the target changes the number of replicas and
	// the request did not allow it.
	ErrReplicationFactor = errors.New("cluster: the reassignment changes the replication factor")
)

// Reassign starts, replaces or (target nil) cancels the move of one
// partition to the replica set target (preferred leader first): ReassignMany
// for that partition alone.
func (n *Node) Reassign(topic string, partition int32, target []int32, allowRFChange bool) error {
	refused, err := n.ReassignMany(topic, map[int32][]int32{partition: target}, allowRFChange)
	if err != nil {
		return err
	}
	return refused[partition]
}

// ReassignMany starts, replaces or (target nil) cancels the moves of
// partitions of topic, targets[p] being partition p's replica set
// (preferred leader first). It writes every accepted move into the topic's
// assignment znode in one write, conditionally on the version read; the
// controller carries them out (see doc.go). A target equal to the current
// assignment with no move in progress does nothing. A target must list
// distinct registered brokers; unless allowRFChange it must have as many
// replicas as the partition had before the move. refused holds each refused
// partition's reason; err fails them all (ZooKeeper, or lost races).
func (n *Node) ReassignMany(topic string, targets map[int32][]int32, allowRFChange bool) (refused map[int32]error, err error) {
	s, err := n.session()
	if err != nil {
		return nil, err
	}
	invalid := map[int32]error{}
	var brokers map[int32]BrokerInfo
	for p, target := range targets {
		if target == nil {
			continue
		}
		if len(target) == 0 {
			invalid[p] = fmt.Errorf("%w: %s-%d: an empty replica list", ErrInvalid, topic, p)
			continue
		}
		if brokers == nil {
			if brokers, err = readBrokers(s); err != nil {
				return nil, err
			}
		}
		for i, b := range target {
			if slices.Contains(target[:i], b) {
				invalid[p] = fmt.Errorf("%w: %s-%d: broker %d is listed twice in %v", ErrInvalid, topic, p, b, target)
				break
			}
			if _, ok := brokers[b]; !ok {
				invalid[p] = fmt.Errorf("%w: %s-%d: broker %d is not a live broker of the cluster", ErrInvalid, topic, p, b)
				break
			}
		}
	}
	for try := 0; try < maxCASRetries; try++ {
		a, ok, err := readAssignment(s, topic)
		if err != nil {
			return nil, err
		}
		refused = maps.Clone(invalid)
		var changed []int32
		for p, target := range targets {
			if refused[p] != nil {
				continue
			}
			if !ok || p < 0 || int(p) >= len(a.Replicas) {
				refused[p] = fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, p)
				continue
			}
			moved, err := a.reassign(p, target, allowRFChange)
			if err != nil {
				refused[p] = err
			} else if moved {
				changed = append(changed, p)
			}
		}
		if len(changed) == 0 {
			return refused, nil
		}
		_, err = s.ZK().Set(s.Path(topicPath(topic)), encodeAssignment(a), a.Version)
		switch {
		case err == nil:
			for _, p := range changed {
				n.log.Info("partition reassignment", "topic", topic, "partition", p, "target", targets[p],
					"replicas", a.Replicas[p], "adding", a.Adding[p], "removing", a.Removing[p])
			}
			return refused, nil
		case errors.Is(err, zk.ErrBadVersion):
		case errors.Is(err, zk.ErrNoNode):
			for _, p := range changed {
				refused[p] = fmt.Errorf("%w: %s-%d", ErrUnknownPartition, topic, p)
			}
			return refused, nil
		default:
			return nil, fmt.Errorf("cluster: reassign %s: %w", topic, err)
		}
	}
	return nil, fmt.Errorf("cluster: reassign %s: lost %d races in a row", topic, maxCASRetries)
}

// reassign writes into a the move of partition p to target (nil: the
// cancel of its move); changed is false when there is nothing to write.
func (a *topicAssignment) reassign(p int32, target []int32, allowRFChange bool) (changed bool, err error) {
	cur := PartitionState{Topic: a.Name, Partition: p}
	a.fill(&cur)
	origin := cur.Origin()
	switch {
	case target == nil && !cur.moving():
		return false, fmt.Errorf("%w: %s-%d", ErrNoReassignment, a.Name, p)
	case target == nil:
		a.Replicas[p], a.Adding[p], a.Removing[p] = origin, nil, nil
	case !cur.moving() && slices.Equal(target, cur.Replicas):
		return false, nil
	case !allowRFChange && len(target) != len(origin):
		return false, fmt.Errorf("%w: %s-%d has %d replicas, the target %v has %d", ErrReplicationFactor, a.Name, p, len(origin), target, len(target))
	default:
		a.Replicas[p] = append(slices.Clone(target), without(origin, target)...)
		a.Adding[p] = without(target, origin)
		a.Removing[p] = without(origin, target)
	}
	return true, nil
}

// Reassignments returns the partitions with a move in progress as this
// node last saw them (ListPartitionReassignments), sorted.
func (n *Node) Reassignments() []PartitionState {
	var out []PartitionState
	for _, st := range n.Partitions() {
		if st.moving() {
			out = append(out, st)
		}
	}
	return out
}

// advanceMove finishes the move of partition p of a once every target
// replica is in the ISR: the leader moves to a target replica if it is not
// one (a new leader epoch), the leaving replicas leave the ISR, and then
// the assignment becomes the target. Each write is conditional (the state
// on its version and the controller epoch, the assignment on the version
// read), so a controller that fails between them leaves a move the next one
// finishes. The finished move's assignment write leaves a at the znode's new
// version, so the rest of the round goes on with it (the other partitions
// of a topic whose moves finish together are not one round each). moved is
// true when a write lost a race.
func (c *controller) advanceMove(a *topicAssignment, p int32, l liveness) (moved bool, err error) {
	st, ok, err := readState(c.s, *a, p)
	if err != nil || !ok || !st.moving() {
		return false, err
	}
	target := st.Target()
	for _, b := range target {
		if !slices.Contains(st.ISR, b) {
			return false, nil // a target replica is still catching up
		}
	}
	next := st
	next.ISR = slices.DeleteFunc(slices.Clone(st.ISR), func(b int32) bool { return !slices.Contains(target, b) })
	if !slices.Contains(target, st.Leader) {
		leader := int32(-1)
		for _, b := range target {
			if l.eligible(b) {
				leader = b
				break
			}
		}
		if leader < 0 {
			return false, nil // no target replica can lead now: the move waits
		}
		next.Leader, next.LeaderEpoch = leader, st.LeaderEpoch+1
	}
	if next.Leader != st.Leader || !slices.Equal(next.ISR, st.ISR) {
		next.ControllerEpoch = c.epoch
		if err := c.writeState(st, next); err != nil {
			if errors.Is(err, errMoved) {
				return true, nil
			}
			return false, err
		}
	}
	done := *a
	done.Replicas, done.Adding, done.Removing = slices.Clone(a.Replicas), slices.Clone(a.Adding), slices.Clone(a.Removing)
	done.Replicas[p], done.Adding[p], done.Removing[p] = target, nil, nil
	resp, err := c.s.ZK().Multi(
		&zk.CheckVersionRequest{Path: c.s.Path(controllerEpochPath), Version: c.epochVersion},
		&zk.SetDataRequest{Path: c.s.Path(topicPath(a.Name)), Data: encodeAssignment(done), Version: a.Version})
	if err != nil {
		err = c.multiErr(resp, err, topicPath(a.Name))
		if errors.Is(err, errMoved) {
			return true, nil
		}
		return false, err
	}
	done.Version = resp[1].Stat.Version
	*a = done
	c.log.Info("partition reassignment completed", "topic", a.Name, "partition", p, "replicas", target, "leader", next.Leader)
	return false, nil
}
