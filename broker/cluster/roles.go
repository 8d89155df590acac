package cluster

import (
	"context"
	"maps"
	"slices"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/zksession"
)

type partitionKey struct {
	topic     string
	partition int32
}

// watchStates keeps this broker's view of the cluster fresh for one
// session: the live brokers, the controller and the state of every
// partition (Partitions); the states of the partitions with a replica here
// are delivered to OnStates when they change.
// Every read is preceded by a watch on what it reads, so no change is
// missed; a failed read is retried after a short pause.
func (n *Node) watchStates(ctx context.Context, s *zksession.Session) {
	w := newWatchSet()
	delivered := map[partitionKey]PartitionState{}
	for {
		retry := n.readRoles(s, w, delivered)
		var again <-chan time.Time
		if retry != nil {
			n.log.Warn("reading partition states; retrying", "err", retry)
			again = time.After(200 * time.Millisecond)
		}
		select {
		case <-w.Wake():
		case <-again:
		case <-ctx.Done():
			return
		}
	}
}

func (n *Node) readRoles(s *zksession.Session, w *watchSet, delivered map[partitionKey]PartitionState) error {
	c := s.ZK()
	if err := w.children(c, s.Path(brokerIDsPath)); err != nil {
		return err
	}
	brokers, err := readBrokers(s)
	if err != nil {
		return err
	}
	if err := w.data(c, s.Path(controllerPath)); err != nil {
		return err
	}
	controller, _, err := readController(s)
	if err != nil {
		return err
	}
	if err := w.children(c, s.Path(topicsPath)); err != nil {
		return err
	}
	names, err := readTopicNames(s)
	if err != nil {
		return err
	}
	var changed []PartitionState
	all := map[partitionKey]PartitionState{}
	configs := make(map[string]int32, len(names))
	for _, topic := range names {
		if err := w.data(c, s.Path(topicPath(topic))); err != nil && !isNoNode(err) {
			return err
		}
		if err := w.data(c, s.Path(configPath(topic))); err != nil && !isNoNode(err) {
			return err
		}
		configs[topic] = -1
		if ok, stat, err := c.Exists(s.Path(configPath(topic))); err != nil {
			return err
		} else if ok {
			configs[topic] = stat.Version
		}
		a, ok, err := readAssignment(s, topic)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		for p, replicas := range a.Replicas {
			if err := w.data(c, s.Path(statePath(topic, int32(p)))); err != nil {
				return err
			}
			st, ok, err := readState(s, a, int32(p))
			if err != nil {
				return err
			}
			k := partitionKey{topic, int32(p)}
			if !ok {
				st = PartitionState{Topic: topic, Partition: int32(p), Leader: -1, Version: -1}
				a.fill(&st)
				all[k] = st
				continue
			}
			all[k] = st
			if !slices.Contains(replicas, n.opts.Broker.ID) {
				continue
			}
			if old, seen := delivered[k]; !seen || !sameAssignedState(old, st) {
				changed = append(changed, st)
				delivered[k] = st
			}
		}
	}
	n.mu.Lock()
	moved := !maps.EqualFunc(n.brokers, brokers, equalBroker) || n.controller != controller ||
		!maps.EqualFunc(n.partitions, all, sameAssignedState)
	n.brokers, n.controller, n.partitions = brokers, controller, all
	if !maps.Equal(n.configVersions, configs) {
		n.configVersions = configs
		n.configGen++
		moved = true
	}
	n.mu.Unlock()
	if len(changed) > 0 && n.opts.OnStates != nil {
		n.opts.OnStates(changed)
	}
	if moved || len(changed) > 0 {
		n.notifyChanged()
	}
	return nil
}

// ConfigGeneration counts the changes of the topics' overrides
// (/config/topics) this node saw: a reader that last read the Store at
// another generation reads it again.
func (n *Node) ConfigGeneration() int64 {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.configGen
}

// Partitions returns every partition of the cluster as this node last saw
// it (the watch keeps it fresh; Metadata and DescribeTopics answer from
// it), sorted by topic and partition. Partitions without a state yet are
// listed with leader -1 and Version -1.
func (n *Node) Partitions() []PartitionState {
	n.mu.Lock()
	out := make([]PartitionState, 0, len(n.partitions))
	for _, st := range n.partitions {
		out = append(out, st)
	}
	n.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

func equalBroker(a, b BrokerInfo) bool {
	return a.ID == b.ID && a.Host == b.Host && a.Port == b.Port && a.Rack == b.Rack && slices.Equal(a.Endpoints, b.Endpoints)
}

func sortBrokers(bs []BrokerInfo) {
	sort.Slice(bs, func(i, j int) bool { return bs[i].ID < bs[j].ID })
}

// States reads the current state of every partition of the cluster (for
// Metadata, `sluice topics describe` and `sluice cluster status`), sorted
// by topic and partition. Partitions without a state yet (no replica was
// ever live) are listed with leader -1 and Version -1.
func (n *Node) States() ([]PartitionState, error) {
	s, err := n.session()
	if err != nil {
		return nil, err
	}
	names, err := readTopicNames(s)
	if err != nil {
		return nil, err
	}
	var out []PartitionState
	for _, topic := range names {
		a, ok, err := readAssignment(s, topic)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		for p := range a.Replicas {
			st, ok, err := readState(s, a, int32(p))
			if err != nil {
				return nil, err
			}
			if !ok {
				st = PartitionState{Topic: topic, Partition: int32(p), Leader: -1, Version: -1}
				a.fill(&st)
			}
			out = append(out, st)
		}
	}
	return out, nil
}

// sameAssignedState reports whether a and b are the same state version
// with the same assignment and move in progress.
func sameAssignedState(a, b PartitionState) bool {
	return a.Version == b.Version && slices.Equal(a.Replicas, b.Replicas) &&
		slices.Equal(a.Adding, b.Adding) && slices.Equal(a.Removing, b.Removing)
}
