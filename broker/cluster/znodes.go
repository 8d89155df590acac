package cluster

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/go-zookeeper/zk"
)

// Paths under the chroot (see the layout in doc.go).
const (
	brokerIDsPath       = "/brokers/ids"
	topicsPath          = "/brokers/topics"
	topicConfigsPath    = "/config/topics"
	controllerPath      = "/controller"
	controllerEpochPath = "/controller_epoch"
	isrChangePath       = "/isr_change_notification"
	isrChangePrefix     = isrChangePath + "/isr_change_"
	preferredPath       = "/admin/preferred_replica_election"
	shutdownPath        = "/admin/controlled_shutdown"
	producerBlockPath   = "/latest_producer_id_block"
)

// persistentPaths are created (with parents) when a Node or Store starts.
var persistentPaths = []string{brokerIDsPath, topicsPath, topicConfigsPath, isrChangePath, shutdownPath}

func brokerPath(id int32) string     { return brokerIDsPath + "/" + strconv.Itoa(int(id)) }
func topicPath(topic string) string  { return topicsPath + "/" + topic }
func configPath(topic string) string { return topicConfigsPath + "/" + topic }
func partitionsPath(topic string) string {
	return topicPath(topic) + "/partitions"
}
func partitionPath(topic string, p int32) string {
	return partitionsPath(topic) + "/" + strconv.Itoa(int(p))
}
func statePath(topic string, p int32) string { return partitionPath(topic, p) + "/state" }

var acl = zk.WorldACL(zk.PermAll)

// Endpoint is one listener a broker advertises.
type Endpoint struct {
	Name string // listener name, e.g. "PLAINTEXT", "REPLICATION"
	Host string
	Port int32
}

// BrokerInfo is what /brokers/ids/<id> holds.
type BrokerInfo struct {
	ID        int32
	Host      string // the client listener
	Port      int32
	Rack      string // broker.rack; "" = none
	Endpoints []Endpoint
}

// brokerZNode is Kafka's /brokers/ids/<id> JSON (version 5), with
// endpoints as "NAME://host:port" strings and the protocol map.
type brokerZNode struct {
	Version   int               `json:"version"`
	Host      string            `json:"host"`
	Port      int32             `json:"port"`
	JMXPort   int               `json:"jmx_port"`
	Endpoints []string          `json:"endpoints"`
	Protocols map[string]string `json:"listener_security_protocol_map"`
	Rack      *string           `json:"rack,omitempty"`
	Timestamp string            `json:"timestamp"`
}

func encodeBroker(b BrokerInfo, nowMillis int64) []byte {
	z := brokerZNode{Version: 5, Host: b.Host, Port: b.Port, JMXPort: -1, Endpoints: []string{}, Protocols: map[string]string{},
		Timestamp: strconv.FormatInt(nowMillis, 10)}
	for _, e := range b.Endpoints {
		z.Endpoints = append(z.Endpoints, fmt.Sprintf("%s://%s:%d", e.Name, e.Host, e.Port))
		z.Protocols[e.Name] = "PLAINTEXT"
	}
	if b.Rack != "" {
		z.Rack = &b.Rack
	}
	data, _ := json.Marshal(z)
	return data
}

func decodeBroker(id int32, data []byte) (BrokerInfo, error) {
	var z brokerZNode
	if err := json.Unmarshal(data, &z); err != nil {
		return BrokerInfo{}, fmt.Errorf("%w: %s: %v", ErrCorrupt, brokerPath(id), err)
	}
	b := BrokerInfo{ID: id, Host: z.Host, Port: z.Port}
	if z.Rack != nil {
		b.Rack = *z.Rack
	}
	for _, s := range z.Endpoints {
		var e Endpoint
		name, rest, ok := strings.Cut(s, "://")
		i := strings.LastIndexByte(rest, ':')
		if !ok || i < 0 {
			return BrokerInfo{}, fmt.Errorf("%w: %s: endpoint %q", ErrCorrupt, brokerPath(id), s)
		}
		host, port := rest[:i], rest[i+1:]
		n, err := strconv.ParseInt(port, 10, 32)
		if err != nil {
			return BrokerInfo{}, fmt.Errorf("%w: %s: endpoint %q", ErrCorrupt, brokerPath(id), s)
		}
		e.Name, e.Host, e.Port = name, host, int32(n)
		b.Endpoints = append(b.Endpoints, e)
	}
	return b, nil
}

// PartitionState is one partition's state as the controller decided it,
// with its assignment: what /brokers/topics/<t>/partitions/<p>/state and
// /brokers/topics/<t> hold. It has the fields of broker/replica.State
// (plus ControllerEpoch), so the server's adapter copies them.
type PartitionState struct {
	Topic           string
	Partition       int32
	Leader          int32 // broker id; -1 = no leader (offline)
	LeaderEpoch     int32
	ISR             []int32
	Replicas        []int32 // the assignment, preferred leader first (during a move: target first, then the replicas leaving)
	Adding          []int32 // a move in progress: the replicas joining (in Replicas, maybe not in the ISR yet)
	Removing        []int32 // a move in progress: the replicas leaving once every target replica is in the ISR
	ControllerEpoch int32   // the epoch of the controller that last chose the leader
	Version         int32   // the state znode's version; AlterISR is conditional on it
}

// stateZNode is Kafka's partition state JSON.
type stateZNode struct {
	Version         int     `json:"version"`
	Leader          int32   `json:"leader"`
	LeaderEpoch     int32   `json:"leader_epoch"`
	ISR             []int32 `json:"isr"`
	ControllerEpoch int32   `json:"controller_epoch"`
}

func encodeState(s PartitionState) []byte {
	isr := s.ISR
	if isr == nil {
		isr = []int32{}
	}
	data, _ := json.Marshal(stateZNode{Version: 1, Leader: s.Leader, LeaderEpoch: s.LeaderEpoch, ISR: isr, ControllerEpoch: s.ControllerEpoch})
	return data
}

func decodeState(topic string, p int32, data []byte, version int32) (PartitionState, error) {
	var z stateZNode
	if err := json.Unmarshal(data, &z); err != nil || z.Version != 1 {
		return PartitionState{}, fmt.Errorf("%w: %s: %q", ErrCorrupt, statePath(topic, p), data)
	}
	return PartitionState{Topic: topic, Partition: p, Leader: z.Leader, LeaderEpoch: z.LeaderEpoch, ISR: z.ISR,
		ControllerEpoch: z.ControllerEpoch, Version: version}, nil
}

// sameDecision reports whether a and b hold the same leader, epochs and
// ISR (their versions may differ).
func sameDecision(a, b PartitionState) bool {
	return a.Leader == b.Leader && a.LeaderEpoch == b.LeaderEpoch && a.ControllerEpoch == b.ControllerEpoch && slices.Equal(a.ISR, b.ISR)
}

// assignmentZNode is Kafka's /brokers/topics/<t> JSON (version 3, with the
// topic id as Kafka's base64 UUID, and KIP-455's moves in progress: the
// replicas being added to and removed from each moving partition).
type assignmentZNode struct {
	Version    int                `json:"version"`
	Partitions map[string][]int32 `json:"partitions"`
	TopicID    string             `json:"topic_id,omitempty"`
	Adding     map[string][]int32 `json:"adding_replicas"`
	Removing   map[string][]int32 `json:"removing_replicas"`
}

type controllerZNode struct {
	Version   int    `json:"version"`
	BrokerID  int32  `json:"brokerid"`
	Timestamp string `json:"timestamp"`
}

// topicPartition names one partition in the admin and notification znodes.
type topicPartition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
}

type partitionsZNode struct {
	Version    int              `json:"version"`
	Partitions []topicPartition `json:"partitions"`
}

// Sentinel errors.
var (
	// ErrStaleState: AlterISR's version, leader or leader epoch is not the
	// stored state's (a new leader, epoch or controller moved it on).
	ErrStaleState = errors.New("cluster: stale partition state")
	// ErrFenced: a controller's write was refused because a newer
	// controller epoch exists; the controller has stepped down.
	ErrFenced = errors.New("cluster: controller fenced")
	// ErrBrokerIDInUse: another live ZooKeeper session holds /brokers/ids/<id>.
	ErrBrokerIDInUse = errors.New("cluster: broker id in use")
	// ErrCorrupt: a znode holds data that cannot be parsed.
	ErrCorrupt = errors.New("cluster: corrupt znode")
	// ErrInvalid: a request that can never succeed (an ISR without its
	// leader, a replica outside the assignment, too few brokers).
	ErrInvalid = errors.New("cluster: invalid request")
	// ErrClosed: the Node was closed.
	ErrClosed = errors.New("cluster: closed")
)

// encodeTopicID writes a topic id as Kafka does (URL-safe base64 without
// padding); the zero id is "" (none).
func encodeTopicID(id [16]byte) string {
	if id == [16]byte{} {
		return ""
	}
	return base64.RawURLEncoding.EncodeToString(id[:])
}

func decodeTopicID(s string) ([16]byte, error) {
	var id [16]byte
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) != 16 {
		return id, fmt.Errorf("%w: topic id %q", ErrCorrupt, s)
	}
	copy(id[:], b)
	return id, nil
}
