package cluster

import (
	"encoding/json"
	"fmt"
	"sort"
	"strconv"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/internal/zksession"
)

// topicAssignment is a topic's /brokers/topics/<t> znode decoded.
type topicAssignment struct {
	Name     string
	ID       [16]byte
	Replicas [][]int32 // Replicas[p], preferred leader first
	Adding   [][]int32 // Adding[p]: a move of p in progress adds these replicas (nil: none)
	Removing [][]int32 // Removing[p]: ... and removes these
	Version  int32     // the znode's version
}

func readIDs(s *zksession.Session, rel string) ([]int32, error) {
	names, _, err := s.ZK().Children(s.Path(rel))
	if err != nil {
		return nil, fmt.Errorf("cluster: list %s: %w", rel, err)
	}
	ids := make([]int32, 0, len(names))
	for _, n := range names {
		if id, err := strconv.ParseInt(n, 10, 32); err == nil {
			ids = append(ids, int32(id))
		}
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	return ids, nil
}

// readBrokers returns the registered brokers by id.
func readBrokers(s *zksession.Session) (map[int32]BrokerInfo, error) {
	ids, err := readIDs(s, brokerIDsPath)
	if err != nil {
		return nil, err
	}
	out := make(map[int32]BrokerInfo, len(ids))
	for _, id := range ids {
		data, _, err := s.ZK().Get(s.Path(brokerPath(id)))
		if isNoNode(err) {
			continue // gone since the listing
		}
		if err != nil {
			return nil, fmt.Errorf("cluster: read %s: %w", brokerPath(id), err)
		}
		b, err := decodeBroker(id, data)
		if err != nil {
			return nil, err
		}
		out[id] = b
	}
	return out, nil
}

// readLiveness reads the registered brokers and the controlled shutdowns.
func readLiveness(s *zksession.Session) (liveness, map[int32]BrokerInfo, error) {
	brokers, err := readBrokers(s)
	if err != nil {
		return liveness{}, nil, err
	}
	l := liveness{live: map[int32]bool{}, shuttingDown: map[int32]bool{}}
	for id := range brokers {
		l.live[id] = true
	}
	ids, err := readIDs(s, shutdownPath)
	if err != nil {
		return liveness{}, nil, err
	}
	for _, id := range ids {
		if l.live[id] {
			l.shuttingDown[id] = true
		}
	}
	return l, brokers, nil
}

func readTopicNames(s *zksession.Session) ([]string, error) {
	names, _, err := s.ZK().Children(s.Path(topicsPath))
	if err != nil {
		return nil, fmt.Errorf("cluster: list %s: %w", topicsPath, err)
	}
	sort.Strings(names)
	return names, nil
}

// readAssignment reads a topic's assignment; ok is false when the topic
// does not exist (any more).
func readAssignment(s *zksession.Session, topic string) (topicAssignment, bool, error) {
	data, st, err := s.ZK().Get(s.Path(topicPath(topic)))
	if isNoNode(err) {
		return topicAssignment{}, false, nil
	}
	if err != nil {
		return topicAssignment{}, false, fmt.Errorf("cluster: read %s: %w", topicPath(topic), err)
	}
	a, err := decodeAssignment(topic, data)
	a.Version = st.Version
	return a, err == nil, err
}

func decodeAssignment(topic string, data []byte) (topicAssignment, error) {
	var z assignmentZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return topicAssignment{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, topicPath(topic), err)
	}
	n := len(z.Partitions)
	a := topicAssignment{Name: topic, Replicas: make([][]int32, n), Adding: make([][]int32, n), Removing: make([][]int32, n)}
	for k, replicas := range z.Partitions {
		p, err := strconv.Atoi(k)
		if err != nil || p < 0 || p >= n || len(replicas) == 0 {
			return topicAssignment{}, fmt.Errorf("%w: %s: partition %q", ErrCorrupt, topicPath(topic), k)
		}
		a.Replicas[p] = replicas
	}
	for _, m := range []struct {
		from map[string][]int32
		to   [][]int32
	}{{z.Adding, a.Adding}, {z.Removing, a.Removing}} {
		for k, replicas := range m.from {
			p, err := strconv.Atoi(k)
			if err != nil || p < 0 || p >= n {
				return topicAssignment{}, fmt.Errorf("%w: %s: moving partition %q", ErrCorrupt, topicPath(topic), k)
			}
			if len(replicas) > 0 {
				m.to[p] = replicas
			}
		}
	}
	if z.TopicID != "" {
		id, err := decodeTopicID(z.TopicID)
		if err != nil {
			return topicAssignment{}, fmt.Errorf("%w: %s: topic_id %q", ErrCorrupt, topicPath(topic), z.TopicID)
		}
		a.ID = id
	}
	return a, nil
}

func encodeAssignment(a topicAssignment) []byte {
	z := assignmentZNode{Version: 3, Partitions: map[string][]int32{}, TopicID: encodeTopicID(a.ID),
		Adding: map[string][]int32{}, Removing: map[string][]int32{}}
	for p, r := range a.Replicas {
		z.Partitions[strconv.Itoa(p)] = r
		if p < len(a.Adding) && len(a.Adding[p]) > 0 {
			z.Adding[strconv.Itoa(p)] = a.Adding[p]
		}
		if p < len(a.Removing) && len(a.Removing[p]) > 0 {
			z.Removing[strconv.Itoa(p)] = a.Removing[p]
		}
	}
	data, _ := json.Marshal(z)
	return data
}

// readState reads partition p's state, with its assignment from a (and
// the move in progress, if any); ok is false when it has none yet.
func readState(s *zksession.Session, a topicAssignment, p int32) (PartitionState, bool, error) {
	topic := a.Name
	data, st, err := s.ZK().Get(s.Path(statePath(topic, p)))
	if isNoNode(err) {
		return PartitionState{}, false, nil
	}
	if err != nil {
		return PartitionState{}, false, fmt.Errorf("cluster: read %s: %w", statePath(topic, p), err)
	}
	ps, err := decodeState(topic, p, data, st.Version)
	a.fill(&ps)
	return ps, err == nil, err
}

// fill sets the assignment fields of partition ps.Partition's state.
func (a topicAssignment) fill(ps *PartitionState) {
	p := ps.Partition
	ps.Replicas = a.Replicas[p]
	if int(p) < len(a.Adding) {
		ps.Adding = a.Adding[p]
	}
	if int(p) < len(a.Removing) {
		ps.Removing = a.Removing[p]
	}
}

// readControllerEpoch returns /controller_epoch's epoch and znode version.
func readControllerEpoch(s *zksession.Session) (epoch, version int32, ok bool, err error) {
	data, st, err := s.ZK().Get(s.Path(controllerEpochPath))
	if isNoNode(err) {
		return 0, 0, false, nil
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("cluster: read %s: %w", controllerEpochPath, err)
	}
	e, perr := strconv.ParseInt(string(data), 10, 32)
	if perr != nil {
		return 0, 0, false, fmt.Errorf("%w: %s: %q", ErrCorrupt, controllerEpochPath, data)
	}
	return int32(e), st.Version, true, nil
}

// readController returns the controller's broker id, or -1 with none.
func readController(s *zksession.Session) (int32, *zk.Stat, error) {
	data, st, err := s.ZK().Get(s.Path(controllerPath))
	if isNoNode(err) {
		return -1, nil, nil
	}
	if err != nil {
		return -1, nil, fmt.Errorf("cluster: read %s: %w", controllerPath, err)
	}
	var z controllerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return -1, nil, fmt.Errorf("%w: %s: %q", ErrCorrupt, controllerPath, data)
	}
	return z.BrokerID, st, nil
}
