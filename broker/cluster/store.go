package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/internal/zksession"
)

// Store is the cluster's metadata.Store in ZooKeeper, as Kafka 2.x kept
// it: a topic's assignment and id in /brokers/topics/<t>, its overrides in
// /config/topics/<t>, producer-id blocks in /latest_producer_id_block.
// Every write is conditional (a create, or a set at the version read), so
// brokers writing at once never lose each other's changes. The controller
// creates the partition states of a new topic or partition when it sees
// the assignment.
type Store struct{ n *Node }

// Store returns the metadata store on this node's session.
func (n *Node) Store() *Store { return &Store{n: n} }

var _ metadata.Store = (*Store)(nil)

// maxCASRetries bounds the retries of a conditional write that keeps
// losing races.
const maxCASRetries = 20

type configZNode struct {
	Version int               `json:"version"`
	Config  map[string]string `json:"config"`
}

func readTopicConfig(s *zksession.Session, topic string) (map[string]string, error) {
	data, _, err := s.ZK().Get(s.Path(configPath(topic)))
	if isNoNode(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr("read %s: %v", configPath(topic), err)
	}
	var z configZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", metadata.ErrCorrupt, configPath(topic), err)
	}
	if len(z.Config) == 0 {
		return nil, nil
	}
	return z.Config, nil
}

func encodeConfig(cfg map[string]string) []byte {
	if cfg == nil {
		cfg = map[string]string{}
	}
	data, _ := json.Marshal(configZNode{Version: 1, Config: cfg})
	return data
}

func storeErr(format string, args ...any) error {
	return fmt.Errorf("%w: %s", metadata.ErrStorage, fmt.Sprintf(format, args...))
}

// Load implements metadata.Store. fresh is true while no topic was ever
// created in this cluster (/brokers/topics never had a child).
func (st *Store) Load() ([]metadata.Topic, bool, error) {
	s, err := st.n.session()
	if err != nil {
		return nil, false, storeErr("%v", err)
	}
	_, stat, err := s.ZK().Exists(s.Path(topicsPath))
	if err != nil {
		return nil, false, storeErr("%s: %v", topicsPath, err)
	}
	names, err := readTopicNames(s)
	if err != nil {
		return nil, false, storeErr("%v", err)
	}
	out := make([]metadata.Topic, 0, len(names))
	for _, name := range names {
		a, ok, err := readAssignment(s, name)
		if errors.Is(err, ErrCorrupt) {
			return nil, false, fmt.Errorf("%w: %v", metadata.ErrCorrupt, err)
		}
		if err != nil {
			return nil, false, storeErr("%v", err)
		}
		if !ok {
			continue
		}
		cfg, err := readTopicConfig(s, name)
		if err != nil {
			return nil, false, err
		}
		out = append(out, metadata.Topic{Name: name, ID: a.ID, Partitions: int32(len(a.Replicas)), Configs: cfg, Replicas: a.Replicas})
	}
	return out, stat.Cversion == 0, nil
}

// CreateTopic implements metadata.Store. Without t.Replicas the partitions
// are assigned over the live brokers (rack-aware when they all have racks)
// with the default replication factor.
func (st *Store) CreateTopic(t metadata.Topic) error {
	s, err := st.n.session()
	if err != nil {
		return storeErr("%v", err)
	}
	replicas := t.Replicas
	if replicas == nil {
		if replicas, err = st.assign(s, 0, t.Partitions, st.n.opts.DefaultReplicationFactor); err != nil {
			return err
		}
	}
	if len(replicas) != int(t.Partitions) {
		return fmt.Errorf("%w: topic %q: %d partitions, %d assigned", ErrInvalid, t.Name, t.Partitions, len(replicas))
	}
	data := encodeAssignment(topicAssignment{Name: t.Name, ID: t.ID, Replicas: replicas})
	for try := 0; try < maxCASRetries; try++ {
		cfgOp, err := st.configOp(s, t.Name, t.Configs)
		if err != nil {
			return err
		}
		_, err = s.ZK().Multi(&zk.CreateRequest{Path: s.Path(topicPath(t.Name)), Data: data, Acl: acl}, cfgOp)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNodeExists):
			if ok, _, _ := s.ZK().Exists(s.Path(topicPath(t.Name))); ok {
				return fmt.Errorf("%w: %q", metadata.ErrTopicExists, t.Name)
			}
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		default:
			return storeErr("create topic %q: %v", t.Name, err)
		}
	}
	return storeErr("create topic %q: lost %d races in a row", t.Name, maxCASRetries)
}

// configOp returns the op writing a topic's overrides: a create, or a set
// at the version read (a config node may outlive its topic, as in Kafka).
func (st *Store) configOp(s *zksession.Session, topic string, cfg map[string]string) (any, error) {
	ok, stat, err := s.ZK().Exists(s.Path(configPath(topic)))
	if err != nil {
		return nil, storeErr("%s: %v", configPath(topic), err)
	}
	if !ok {
		return &zk.CreateRequest{Path: s.Path(configPath(topic)), Data: encodeConfig(cfg), Acl: acl}, nil
	}
	return &zk.SetDataRequest{Path: s.Path(configPath(topic)), Data: encodeConfig(cfg), Version: stat.Version}, nil
}

// AssignReplicas assigns partitions [first, first+count) over the live
// brokers with replicationFactor replicas each (rack-aware when every
// broker has a rack), for a CreateTopics or CreatePartitions request that
// names a replication factor; the result goes in metadata.Topic.Replicas.
func (n *Node) AssignReplicas(first, count int32, replicationFactor int) ([][]int32, error) {
	s, err := n.session()
	if err != nil {
		return nil, err
	}
	return n.Store().assign(s, first, count, replicationFactor)
}

func (st *Store) assign(s *zksession.Session, first, count int32, rf int) ([][]int32, error) {
	brokers, err := readBrokers(s)
	if err != nil {
		return nil, storeErr("%v", err)
	}
	list := make([]BrokerInfo, 0, len(brokers))
	for _, b := range brokers {
		list = append(list, b)
	}
	st.n.mu.Lock()
	defer st.n.mu.Unlock()
	return assignReplicas(list, first, count, rf, st.n.rnd)
}

// UpdateTopic implements metadata.Store. Partitions may only be added;
// the new ones are assigned with the replication factor of partition 0
// unless t.Replicas lists every partition (a reassignment).
func (st *Store) UpdateTopic(t metadata.Topic) error {
	s, err := st.n.session()
	if err != nil {
		return storeErr("%v", err)
	}
	for try := 0; try < maxCASRetries; try++ {
		a, ok, err := readAssignment(s, t.Name)
		if err != nil {
			return storeErr("%v", err)
		}
		if !ok {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, t.Name)
		}
		have := int32(len(a.Replicas))
		switch {
		case len(t.Replicas) == int(t.Partitions) && t.Partitions >= have:
			a.Replicas = t.Replicas
		case t.Partitions < have:
			return fmt.Errorf("%w: topic %q has %d partitions: they cannot be reduced to %d", ErrInvalid, t.Name, have, t.Partitions)
		case t.Partitions > have:
			more, err := st.assign(s, have, t.Partitions-have, len(a.Replicas[0]))
			if err != nil {
				return err
			}
			a.Replicas = append(a.Replicas, more...)
		}
		cfgOp, err := st.configOp(s, t.Name, t.Configs)
		if err != nil {
			return err
		}
		_, err = s.ZK().Multi(&zk.SetDataRequest{Path: s.Path(topicPath(t.Name)), Data: encodeAssignment(a), Version: a.Version}, cfgOp)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode), errors.Is(err, zk.ErrNodeExists):
		default:
			return storeErr("update topic %q: %v", t.Name, err)
		}
	}
	return storeErr("update topic %q: lost %d races in a row", t.Name, maxCASRetries)
}

// DeleteTopic implements metadata.Store: the assignment, the partition
// states and the overrides go in one multi.
func (st *Store) DeleteTopic(name string) error {
	s, err := st.n.session()
	if err != nil {
		return storeErr("%v", err)
	}
	for try := 0; try < maxCASRetries; try++ {
		ok, _, err := s.ZK().Exists(s.Path(topicPath(name)))
		if err != nil {
			return storeErr("%v", err)
		}
		if !ok {
			return fmt.Errorf("%w: %q", metadata.ErrUnknownTopic, name)
		}
		ops, err := deleteTreeOps(s, topicPath(name))
		if err != nil {
			return err
		}
		if ok, _, _ := s.ZK().Exists(s.Path(configPath(name))); ok {
			ops = append(ops, &zk.DeleteRequest{Path: s.Path(configPath(name)), Version: -1})
		}
		_, err = s.ZK().Multi(ops...)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, zk.ErrNotEmpty), errors.Is(err, zk.ErrNoNode):
		default:
			return storeErr("delete topic %q: %v", name, err)
		}
	}
	return storeErr("delete topic %q: lost %d races in a row", name, maxCASRetries)
}

// deleteTreeOps lists delete ops for rel and everything under it, children first.
func deleteTreeOps(s *zksession.Session, rel string) ([]any, error) {
	kids, _, err := s.ZK().Children(s.Path(rel))
	if isNoNode(err) {
		return nil, nil
	}
	if err != nil {
		return nil, storeErr("%s: %v", rel, err)
	}
	var ops []any
	for _, k := range kids {
		sub, err := deleteTreeOps(s, rel+"/"+k)
		if err != nil {
			return nil, err
		}
		ops = append(ops, sub...)
	}
	return append(ops, &zk.DeleteRequest{Path: s.Path(rel), Version: -1}), nil
}

// producerBlockZNode is Kafka's /latest_producer_id_block JSON (the
// bounds as decimal strings, block_end inclusive).
type producerBlockZNode struct {
	Version    int    `json:"version"`
	Broker     int32  `json:"broker"`
	BlockStart string `json:"block_start"`
	BlockEnd   string `json:"block_end"`
}

// ReserveProducerIDs implements metadata.Store: a block is taken by a
// create or a set conditional on the version read, so two brokers never
// get the same block.
func (st *Store) ReserveProducerIDs(n int64) (int64, error) {
	s, err := st.n.session()
	if err != nil {
		return 0, storeErr("%v", err)
	}
	if n < 1 {
		return 0, metadata.ErrExhausted
	}
	p := s.Path(producerBlockPath)
	for try := 0; try < maxCASRetries; try++ {
		data, stat, err := s.ZK().Get(p)
		next := int64(0)
		switch {
		case isNoNode(err):
			stat = nil
		case err != nil:
			return 0, storeErr("read %s: %v", producerBlockPath, err)
		default:
			var z producerBlockZNode
			if jerr := json.Unmarshal(data, &z); jerr != nil || z.Version != 1 {
				return 0, fmt.Errorf("%w: %s: %q", metadata.ErrCorrupt, producerBlockPath, data)
			}
			end, perr := strconv.ParseInt(z.BlockEnd, 10, 64)
			if perr != nil || end < -1 {
				return 0, fmt.Errorf("%w: %s: block_end %q", metadata.ErrCorrupt, producerBlockPath, z.BlockEnd)
			}
			next = end + 1
		}
		if next > math.MaxInt64-n {
			return 0, metadata.ErrExhausted
		}
		block, _ := json.Marshal(producerBlockZNode{Version: 1, Broker: st.n.opts.Broker.ID,
			BlockStart: strconv.FormatInt(next, 10), BlockEnd: strconv.FormatInt(next+n-1, 10)})
		if stat == nil {
			_, err = s.ZK().Create(p, block, 0, acl)
		} else {
			_, err = s.ZK().Set(p, block, stat.Version)
		}
		switch {
		case err == nil:
			return next, nil
		case errors.Is(err, zk.ErrNodeExists), errors.Is(err, zk.ErrBadVersion), errors.Is(err, zk.ErrNoNode):
		default:
			return 0, storeErr("write %s: %v", producerBlockPath, err)
		}
	}
	return 0, storeErr("%s: lost %d races in a row", producerBlockPath, maxCASRetries)
}
