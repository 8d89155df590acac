package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/zksession"
)

// controller is this node's run as the cluster's controller under one
// controller epoch. Every state write it makes is a ZooKeeper multi that
// first checks /controller_epoch still has epochVersion: once a newer
// controller incremented the epoch, none of this controller's writes land.
type controller struct {
	n            *Node
	s            *zksession.Session
	log          *slog.Logger
	epoch        int32
	epochVersion int32
}

// campaign races for /controller until ctx ends and runs the controller
// each time it wins.
func (n *Node) campaign(ctx context.Context, s *zksession.Session) {
	for ctx.Err() == nil {
		c, err := n.elect(ctx, s)
		if err != nil {
			if ctx.Err() == nil {
				n.log.Warn("controller election", "err", err)
				pause(ctx, 500*time.Millisecond)
			}
			continue
		}
		n.mu.Lock()
		n.leading, n.controller = true, n.opts.Broker.ID
		n.mu.Unlock()
		n.notifyChanged()
		err = c.run(ctx)
		n.mu.Lock()
		n.leading = false
		n.mu.Unlock()
		s.DeleteOwned(controllerPath)
		n.notifyChanged()
		if ctx.Err() == nil {
			n.log.Warn("controller stopped", "epoch", c.epoch, "err", err)
		} else {
			n.log.Info("controller stopped", "epoch", c.epoch)
		}
	}
}

// elect blocks until this node is the controller (or ctx ends). Like
// Kafka, it creates /controller and increments /controller_epoch in one
// multi conditional on the epoch's version, so exactly one broker wins each
// epoch.
func (n *Node) elect(ctx context.Context, s *zksession.Session) (*controller, error) {
	zc := s.ZK()
	for ctx.Err() == nil {
		epoch, version, ok, err := readControllerEpoch(s)
		if err != nil {
			return nil, err
		}
		if !ok {
			if _, err := zc.Create(s.Path(controllerEpochPath), []byte("0"), 0, acl); err != nil && !errors.Is(err, zk.ErrNodeExists) {
				return nil, fmt.Errorf("cluster: create %s: %w", controllerEpochPath, err)
			}
			continue
		}
		data, _ := json.Marshal(controllerZNode{Version: 1, BrokerID: n.opts.Broker.ID, Timestamp: strconv.FormatInt(time.Now().UnixMilli(), 10)})
		resp, err := zc.Multi(
			&zk.CreateRequest{Path: s.Path(controllerPath), Data: data, Acl: acl, Flags: zk.FlagEphemeral},
			&zk.SetDataRequest{Path: s.Path(controllerEpochPath), Data: []byte(strconv.Itoa(int(epoch + 1))), Version: version})
		if err == nil {
			c := &controller{n: n, s: s, epoch: epoch + 1, epochVersion: resp[1].Stat.Version}
			c.log = n.log.With("controller_epoch", c.epoch)
			c.log.Info("elected controller")
			return c, nil
		}
		// Lost the race, or the answer was lost: the node tells which.
		_, st, rerr := readController(s)
		if rerr != nil {
			return nil, rerr
		}
		if st != nil && st.EphemeralOwner == s.SessionID() {
			epoch, version, _, err := readControllerEpoch(s)
			if err != nil {
				return nil, err
			}
			return &controller{n: n, s: s, log: n.log.With("controller_epoch", epoch), epoch: epoch, epochVersion: version}, nil
		}
		exists, _, ch, err := zc.ExistsW(s.Path(controllerPath))
		if err != nil {
			return nil, fmt.Errorf("cluster: watch %s: %w", controllerPath, err)
		}
		if !exists {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
		}
	}
	return nil, ctx.Err()
}

// run reconciles the partition states with the brokers' liveness after
// every change it watches, until ctx ends (the session ended or the node
// closes) or the controller is fenced. With AutoLeaderRebalance, every
// LeaderImbalanceCheck it runs one round that also gives imbalanced
// brokers their preferred partitions back (rebalance.go).
func (c *controller) run(ctx context.Context) error {
	w := newWatchSet()
	var check <-chan time.Time
	if c.n.opts.AutoLeaderRebalance {
		t := time.NewTicker(c.n.opts.LeaderImbalanceCheck)
		defer t.Stop()
		check = t.C
	}
	rebalance := false
	for {
		again, err := c.reconcile(w, rebalance)
		if errors.Is(err, ErrFenced) {
			return err
		}
		var retry <-chan time.Time
		switch {
		case err != nil:
			c.log.Warn("reconciling partition states; retrying", "err", err)
			retry = time.After(200 * time.Millisecond)
		case again:
			continue // a state moved under a write: decide again from a fresh read
		default:
			rebalance = false
		}
		select {
		case <-w.Wake():
		case <-retry:
		case <-check:
			rebalance = true
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// reconcile reads the brokers, topics and partition states and writes
// every state decide changes; with rebalance it also moves the leaders of
// imbalanced brokers' partitions back to them. again is true when a write
// lost a race with another writer (an AlterISR) and the round should be
// run again.
func (c *controller) reconcile(w *watchSet, rebalance bool) (again bool, err error) {
	s, zc := c.s, c.s.ZK()
	for _, p := range []string{brokerIDsPath, shutdownPath, topicsPath, isrChangePath} {
		if err := w.children(zc, s.Path(p)); err != nil {
			return false, err
		}
	}
	if err := w.data(zc, s.Path(preferredPath)); err != nil {
		return false, err
	}
	notes, _, err := zc.Children(s.Path(isrChangePath))
	if err != nil {
		return false, fmt.Errorf("cluster: list %s: %w", isrChangePath, err)
	}
	l, _, err := readLiveness(s)
	if err != nil {
		return false, err
	}
	wanted, prefVersion, err := c.readPreferred()
	if err != nil {
		return false, err
	}
	names, err := readTopicNames(s)
	if err != nil {
		return false, err
	}
	var topics []topicAssignment
	for _, topic := range names {
		if err := w.data(zc, s.Path(topicPath(topic))); err != nil && !isNoNode(err) {
			return false, err
		}
		a, ok, err := readAssignment(s, topic)
		if err != nil || !ok {
			if err != nil {
				c.log.Warn("skipping a topic", "topic", topic, "err", err)
			}
			continue
		}
		topics = append(topics, a)
	}
	var imbalanced map[partitionKey]bool
	if rebalance {
		if imbalanced, err = c.imbalanced(topics); err != nil {
			return false, err
		}
	}
	for _, a := range topics {
		unclean, err := c.uncleanFor(a.Name)
		if err != nil {
			return false, err
		}
		for p := range a.Replicas {
			k := partitionKey{a.Name, int32(p)}
			moved, err := c.reconcilePartition(a, int32(p), a.Replicas[p], l, decision{unclean: unclean,
				preferred: imbalanced[k] || wanted[k]})
			if err != nil {
				return false, err
			}
			if !moved && (len(a.Adding[p]) > 0 || len(a.Removing[p]) > 0) {
				if moved, err = c.advanceMove(&a, int32(p), l); err != nil {
					return false, err
				}
			}
			again = again || moved
		}
	}
	for _, name := range notes {
		_ = zc.Delete(s.Path(isrChangePath+"/"+name), -1)
	}
	if prefVersion >= 0 && !again {
		_ = zc.Delete(s.Path(preferredPath), prefVersion)
	}
	return again, nil
}

// reconcilePartition creates or moves one partition's state; moved is true
// when its state changed under the write.
func (c *controller) reconcilePartition(a topicAssignment, p int32, replicas []int32, l liveness, d decision) (moved bool, err error) {
	st, ok, err := readState(c.s, a, p)
	if err != nil {
		return false, err
	}
	if !ok {
		init, ok := initialState(a.Name, p, replicas, l)
		if !ok {
			return false, nil // no replica live: the partition waits for one
		}
		init.ControllerEpoch = c.epoch
		return c.createState(a, init)
	}
	next, changed := decide(st, l, d)
	if !changed {
		return false, nil
	}
	next.ControllerEpoch = c.epoch
	err = c.writeState(st, next)
	if errors.Is(err, errMoved) {
		return true, nil
	}
	return false, err
}

// errMoved: a conditional state write found a newer version.
var errMoved = errors.New("cluster: partition state moved")

// writeState writes next in place of old, conditional on old's version
// and on this controller's epoch still being the newest.
func (c *controller) writeState(old, next PartitionState) error {
	resp, err := c.s.ZK().Multi(
		&zk.CheckVersionRequest{Path: c.s.Path(controllerEpochPath), Version: c.epochVersion},
		&zk.SetDataRequest{Path: c.s.Path(statePath(old.Topic, old.Partition)), Data: encodeState(next), Version: old.Version})
	if err != nil {
		return c.multiErr(resp, err, statePath(old.Topic, old.Partition))
	}
	next.Version = resp[1].Stat.Version
	c.log.Info("partition state", "topic", next.Topic, "partition", next.Partition, "leader", next.Leader,
		"leader_epoch", next.LeaderEpoch, "isr", next.ISR, "was_leader", old.Leader, "was_isr", old.ISR)
	c.n.stateChanged(old, next)
	return nil
}

// createState creates a new partition's state (and the partitions/<p>
// nodes above it), conditional on the controller epoch and on the topic's
// assignment being the one read (a topic deleted meanwhile is not revived).
func (c *controller) createState(a topicAssignment, init PartitionState) (bool, error) {
	s := c.s
	ops := []any{
		&zk.CheckVersionRequest{Path: s.Path(controllerEpochPath), Version: c.epochVersion},
		&zk.CheckVersionRequest{Path: s.Path(topicPath(a.Name)), Version: a.Version},
	}
	for _, p := range []string{partitionsPath(a.Name), partitionPath(a.Name, init.Partition)} {
		ok, _, err := s.ZK().Exists(s.Path(p))
		if err != nil {
			return false, fmt.Errorf("cluster: %s: %w", p, err)
		}
		if !ok {
			ops = append(ops, &zk.CreateRequest{Path: s.Path(p), Acl: acl})
		}
	}
	ops = append(ops, &zk.CreateRequest{Path: s.Path(statePath(a.Name, init.Partition)), Data: encodeState(init), Acl: acl})
	resp, err := s.ZK().Multi(ops...)
	if err != nil {
		err = c.multiErr(resp, err, statePath(a.Name, init.Partition))
		if errors.Is(err, errMoved) {
			return true, nil
		}
		return false, err
	}
	init.Version = 0
	c.log.Info("new partition", "topic", init.Topic, "partition", init.Partition, "leader", init.Leader, "isr", init.ISR)
	c.n.stateChanged(PartitionState{Topic: init.Topic, Partition: init.Partition, Leader: -1, Version: -1, Replicas: init.Replicas}, init)
	return false, nil
}

// multiErr classifies a failed multi whose first op checks the controller
// epoch: that check failing is ErrFenced; a later op's version or
// existence conflict is errMoved.
func (c *controller) multiErr(resp []zk.MultiResponse, err error, what string) error {
	for i, r := range resp {
		switch {
		case r.Error == nil:
			continue
		case i == 0 && (errors.Is(r.Error, zk.ErrBadVersion) || errors.Is(r.Error, zk.ErrNoNode)):
			return fmt.Errorf("%w: epoch %d is no longer the newest (%s)", ErrFenced, c.epoch, controllerEpochPath)
		case errors.Is(r.Error, zk.ErrBadVersion), errors.Is(r.Error, zk.ErrNoNode), errors.Is(r.Error, zk.ErrNodeExists):
			return fmt.Errorf("%w: %s: %v", errMoved, what, r.Error)
		}
	}
	return fmt.Errorf("cluster: write %s: %w", what, err)
}

// readPreferred reads the pending preferred-leader election request, if
// any: the partitions it names, and its version (-1: none).
func (c *controller) readPreferred() (map[partitionKey]bool, int32, error) {
	data, st, err := c.s.ZK().Get(c.s.Path(preferredPath))
	if isNoNode(err) {
		return nil, -1, nil
	}
	if err != nil {
		return nil, -1, fmt.Errorf("cluster: read %s: %w", preferredPath, err)
	}
	var z partitionsZNode
	if err := json.Unmarshal(data, &z); err != nil {
		c.log.Warn("ignoring an unreadable preferred election request", "path", preferredPath, "err", err)
		return nil, st.Version, nil
	}
	out := map[partitionKey]bool{}
	for _, tp := range z.Partitions {
		out[partitionKey{tp.Topic, tp.Partition}] = true
	}
	return out, st.Version, nil
}

// uncleanFor returns unclean.leader.election.enable for a topic: its
// override in /config/topics/<t>, else the broker's default.
func (c *controller) uncleanFor(topic string) (bool, error) {
	cfg, err := readTopicConfig(c.s, topic)
	if err != nil {
		return false, err
	}
	if v, ok := cfg["unclean.leader.election.enable"]; ok {
		return v == "true", nil
	}
	return c.n.opts.UncleanLeaderElection, nil
}

// stateChanged reports a state write to OnStateChange.
func (n *Node) stateChanged(old, next PartitionState) {
	if n.opts.OnStateChange != nil {
		n.opts.OnStateChange(old, next)
	}
}
