package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/go-zookeeper/zk"
)

// AlterISR replaces the ISR of a partition this broker leads at
// leaderEpoch, if its stored state is still at version, and returns the new
// version. It fails with an error wrapping ErrStaleState when the state
// moved on (another version, leader or leader epoch): the caller stops
// acting as leader until it is given a newer state. A write whose answer
// was lost and that landed is recognised on the retry (the stored state is
// the one asked for) and reported as done. After a write it leaves an
// /isr_change_notification so the controller reacts (a preferred replica
// back in the ISR, an ISR below what acks=all needs). It implements
// broker/replica's ISRWriter.
func (n *Node) AlterISR(ctx context.Context, topic string, partition, leaderEpoch int32, isr []int32, version int32) (int32, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s, err := n.session()
	if err != nil {
		return 0, err
	}
	self := n.opts.Broker.ID
	a, ok, err := readAssignment(s, topic)
	if err != nil {
		return 0, err
	}
	if !ok || int(partition) >= len(a.Replicas) || partition < 0 {
		return 0, fmt.Errorf("%w: %s-%d no longer exists", ErrStaleState, topic, partition)
	}
	replicas := a.Replicas[partition]
	if err := checkISR(isr, self, replicas); err != nil {
		return 0, fmt.Errorf("%w: AlterISR %s-%d: %v", ErrInvalid, topic, partition, err)
	}
	cur, ok, err := readState(s, a, partition)
	if err != nil {
		return 0, err
	}
	want := cur
	want.Leader, want.LeaderEpoch, want.ISR = self, leaderEpoch, slices.Clone(isr)
	switch {
	case !ok:
		return 0, fmt.Errorf("%w: %s-%d has no state", ErrStaleState, topic, partition)
	case cur.Version != version && sameDecision(cur, want):
		return cur.Version, nil // our earlier write landed; its answer was lost
	case cur.Version != version || cur.Leader != self || cur.LeaderEpoch != leaderEpoch:
		return 0, fmt.Errorf("%w: %s-%d is at version %d (leader %d, epoch %d), not %d (leader %d, epoch %d)", ErrStaleState,
			topic, partition, cur.Version, cur.Leader, cur.LeaderEpoch, version, self, leaderEpoch)
	}
	st, err := s.ZK().Set(s.Path(statePath(topic, partition)), encodeState(want), version)
	if errors.Is(err, zk.ErrBadVersion) || errors.Is(err, zk.ErrNoNode) {
		return 0, fmt.Errorf("%w: %s-%d moved past version %d", ErrStaleState, topic, partition, version)
	}
	if err != nil {
		return 0, fmt.Errorf("cluster: AlterISR %s-%d: %w", topic, partition, err)
	}
	want.Version = st.Version
	n.stateChanged(cur, want)
	note, _ := json.Marshal(partitionsZNode{Version: 1, Partitions: []topicPartition{{topic, partition}}})
	if _, err := s.ZK().Create(s.Path(isrChangePrefix), note, zk.FlagSequence, acl); err != nil {
		n.log.Warn("ISR change notification not written; the controller sees the change at its next event", "err", err)
	}
	return st.Version, nil
}

// checkISR: the ISR holds the leader, only assigned replicas, none twice.
func checkISR(isr []int32, leader int32, replicas []int32) error {
	if !slices.Contains(isr, leader) {
		return fmt.Errorf("ISR %v does not hold its leader %d", isr, leader)
	}
	for i, b := range isr {
		if !slices.Contains(replicas, b) {
			return fmt.Errorf("ISR member %d is not a replica (%v)", b, replicas)
		}
		if slices.Contains(isr[:i], b) {
			return fmt.Errorf("ISR %v lists %d twice", isr, b)
		}
	}
	return nil
}

// ControlledShutdown asks the controller to move this broker's
// leaderships to other ISR members and to take it out of the ISRs, and
// waits until that is done (or ctx ends). Partitions where no other ISR
// member is live keep this broker as leader: stopping takes them offline.
// The request is an ephemeral /admin/controlled_shutdown/<id>, gone with
// the session; the broker is expected to stop after it returns.
func (n *Node) ControlledShutdown(ctx context.Context) error {
	s, err := n.session()
	if err != nil {
		return err
	}
	self := n.opts.Broker.ID
	p := s.Path(shutdownPath + "/" + fmt.Sprint(self))
	if _, err := s.ZK().Create(p, nil, zk.FlagEphemeral, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		return fmt.Errorf("cluster: controlled shutdown: %w", err)
	}
	for {
		changed := n.Changed()
		left, err := n.pendingShutdown(self)
		if err != nil {
			return err
		}
		if len(left) == 0 {
			n.log.Info("controlled shutdown: leaderships moved")
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("cluster: controlled shutdown: %d partitions still wait (%v): %w", len(left), left[0], ctx.Err())
		}
	}
}

// pendingShutdown lists the partitions where self still leads with
// another eligible ISR member, or is in the ISR of a live other leader.
func (n *Node) pendingShutdown(self int32) ([]partitionKey, error) {
	s, err := n.session()
	if err != nil {
		return nil, err
	}
	l, _, err := readLiveness(s)
	if err != nil {
		return nil, err
	}
	states, err := n.States()
	if err != nil {
		return nil, err
	}
	var left []partitionKey
	for _, st := range states {
		if !slices.Contains(st.ISR, self) || st.Leader < 0 {
			continue
		}
		others := slices.ContainsFunc(st.ISR, func(b int32) bool { return b != self && l.eligible(b) })
		if st.Leader != self || others {
			left = append(left, partitionKey{st.Topic, st.Partition})
		}
	}
	return left, nil
}

// TopicPartition names a partition for ElectPreferred.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// ElectPreferred asks the controller to move the leadership of each named
// partition to its preferred replica (the first of its assignment) where
// that replica is live and in the ISR, and waits until the controller took
// the request (ElectLeaders, `sluice topics elect`). The request is Kafka's
// /admin/preferred_replica_election; one runs at a time, and a second
// waits for the first.
func (n *Node) ElectPreferred(ctx context.Context, partitions []TopicPartition) error {
	s, err := n.session()
	if err != nil {
		return err
	}
	z := partitionsZNode{Version: 1}
	for _, tp := range partitions {
		z.Partitions = append(z.Partitions, topicPartition{tp.Topic, tp.Partition})
	}
	data, _ := json.Marshal(z)
	if err := s.Ensure("/admin"); err != nil {
		return err
	}
	for {
		_, err := s.ZK().Create(s.Path(preferredPath), data, 0, acl)
		if err == nil {
			break
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return fmt.Errorf("cluster: preferred election: %w", err)
		}
		if err := waitGone(ctx, s.ZK(), s.Path(preferredPath)); err != nil {
			return err
		}
	}
	return waitGone(ctx, s.ZK(), s.Path(preferredPath))
}

// waitGone waits until path does not exist.
func waitGone(ctx context.Context, c *zk.Conn, path string) error {
	for {
		ok, _, ch, err := c.ExistsW(path)
		if err != nil {
			return fmt.Errorf("cluster: watch %s: %w", path, err)
		}
		if !ok {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
