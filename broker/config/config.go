// Package config holds the broker's configuration: Kafka-named server
// properties with Kafka's defaults, read from a .properties file, and the
// per-topic configuration derived from them plus a topic's overrides.
//
// Broker properties (server.properties names) map onto topic configs the way
// Kafka maps them:
//
//	broker property                 topic config            default
//	log.segment.bytes               segment.bytes           1073741824
//	log.roll.ms / log.roll.hours    segment.ms              168 h
//	log.index.size.max.bytes        segment.index.bytes     10485760
//	log.index.interval.bytes        index.interval.bytes    4096
//	log.retention.ms/minutes/hours  retention.ms            168 h
//	log.retention.bytes             retention.bytes         -1
//	log.flush.interval.messages     flush.messages          page cache
//	log.flush.interval.ms           flush.ms                page cache
//	message.max.bytes               max.message.bytes       1048588
//	log.message.timestamp.type      message.timestamp.type  CreateTime
//	log.cleanup.policy              cleanup.policy          delete
//
// Unknown broker properties are kept (and reported by Unknown) but ignored,
// as Kafka does; unknown topic configs are rejected.
package config

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalid is returned (wrapped) for a malformed properties file, an
// unparsable value or an unknown topic config.
var ErrInvalid = errors.New("config: invalid")

// Broker is the typed broker configuration. Durations are in milliseconds as
// in Kafka; -1 means "unset / forever" where Kafka uses it so.
type Broker struct {
	NodeID                      int32  // node.id / broker.id
	Listener                    string // listeners (host:port; used when --listen is not given)
	AdvertisedListener          string // advertised.listeners (host:port; a PLAINTEXT:// prefix is accepted)
	NumPartitions               int32  // num.partitions
	DefaultReplicationFactor    int16  // default.replication.factor
	AutoCreateTopics            bool   // auto.create.topics.enable
	DeleteTopicEnable           bool   // delete.topic.enable
	SocketRequestMaxBytes       int32  // socket.request.max.bytes
	ConnectionsMaxIdleMs        int64  // connections.max.idle.ms
	FetchSessionSlots           int64  // max.incremental.fetch.session.cache.slots
	MaxConnections              int64  // max.connections: open client connections; more are closed at accept
	MaxConnectionsPerIP         int64  // max.connections.per.ip: the same, per client address
	QueuedMaxRequestBytes       int64  // queued.max.request.bytes: request bytes read but not yet answered, all connections (<= 0: no bound, as in Kafka)
	FetchMaxBytes               int64  // fetch.max.bytes: record bytes of one Fetch answer (soft: the first batch goes whole)
	LogRetentionCheckIntervalMs int64  // log.retention.check.interval.ms
	ClusterID                   string // cluster.id
	// The broker audit tier (internal/audit.Broker): audit.enable,
	// audit.window.ms, audit.publish.interval.ms.
	AuditEnable            bool
	AuditWindowMs          int64
	AuditPublishIntervalMs int64
	TopicDefaults          Topic // the log.* properties, as topic configs

	// Cluster mode (--zookeeper); see broker/cluster.
	ZookeeperConnect          string // zookeeper.connect: host:port[,host:port]/chroot ("" = single node)
	ZookeeperSessionTimeoutMs int64  // zookeeper.session.timeout.ms
	Rack                      string // broker.rack ("" = none)
	AutoLeaderRebalance       bool   // auto.leader.rebalance.enable: the preferred replica leads again once back in the ISR
	LeaderImbalanceCheckSecs  int64  // leader.imbalance.check.interval.seconds: how often the controller checks the leaders' balance
	LeaderImbalancePercentage int64  // leader.imbalance.per.broker.percentage: a broker's share of preferred partitions led elsewhere that triggers a rebalance
	ReplicaLagTimeMaxMs       int64  // replica.lag.time.max.ms: a follower this far behind leaves the ISR

	// Security is listeners, TLS and SASL (listeners.go); not reported by
	// DescribeConfigs.
	Security Security

	props map[string]string // everything that was set, raw
}

// Topic is a topic's effective configuration (Kafka topic-config names).
type Topic struct {
	SegmentBytes         int64  // segment.bytes
	SegmentMs            int64  // segment.ms
	SegmentIndexBytes    int64  // segment.index.bytes
	IndexIntervalBytes   int64  // index.interval.bytes
	RetentionMs          int64  // retention.ms (-1 = forever)
	RetentionBytes       int64  // retention.bytes (-1 = no limit)
	FlushMessages        int64  // flush.messages (math.MaxInt64 = leave it to the page cache)
	FlushMs              int64  // flush.ms (math.MaxInt64 = leave it to the page cache)
	MaxMessageBytes      int64  // max.message.bytes
	MessageTimestampType string // message.timestamp.type: CreateTime | LogAppendTime
	CleanupPolicy        string // cleanup.policy: delete | compact | compact,delete
	DeleteRetentionMs    int64  // delete.retention.ms: how long compaction keeps tombstones
	MinInsyncReplicas    int64  // min.insync.replicas: fewest ISR members an acks=all produce needs (cluster mode)
	// UncleanLeaderElection is unclean.leader.election.enable: with no live
	// ISR member, an out-of-sync replica may lead (losing data).
	UncleanLeaderElection bool
	// LeaderThrottledReplicas and FollowerThrottledReplicas are
	// leader.replication.throttled.replicas and
	// follower.replication.throttled.replicas, normalized:
	// "partition:broker,..." or "*" (see ThrottledReplica); "" none.
	LeaderThrottledReplicas   string
	FollowerThrottledReplicas string
}

// DefaultQueuedMaxRequestBytes is sluice's default queued.max.request.bytes:
// 256 MiB. Apache Kafka's default is -1 (no bound in bytes; it bounds the
// number of queued requests instead, queued.max.requests = 500).
const DefaultQueuedMaxRequestBytes = 256 << 20

// Default returns the broker configuration with Apache Kafka's defaults.
func Default() Broker {
	return Broker{
		NodeID:                      0,
		NumPartitions:               1,
		DefaultReplicationFactor:    1,
		AutoCreateTopics:            true,
		DeleteTopicEnable:           true,
		SocketRequestMaxBytes:       104857600,
		ConnectionsMaxIdleMs:        600000,
		FetchSessionSlots:           1000,
		MaxConnections:              math.MaxInt32,
		MaxConnectionsPerIP:         math.MaxInt32,
		QueuedMaxRequestBytes:       DefaultQueuedMaxRequestBytes,
		FetchMaxBytes:               57671680,
		LogRetentionCheckIntervalMs: 300000,
		ClusterID:                   "sluice-cluster",
		AuditWindowMs:               600000,
		AuditPublishIntervalMs:      60000,
		ZookeeperSessionTimeoutMs:   18000,
		AutoLeaderRebalance:         true,
		LeaderImbalanceCheckSecs:    300,
		LeaderImbalancePercentage:   10,
		ReplicaLagTimeMaxMs:         30000,
		TopicDefaults: Topic{
			SegmentBytes:         1 << 30,
			SegmentMs:            168 * 3600 * 1000,
			SegmentIndexBytes:    10 << 20,
			IndexIntervalBytes:   4096,
			RetentionMs:          168 * 3600 * 1000,
			RetentionBytes:       -1,
			FlushMessages:        math.MaxInt64,
			FlushMs:              math.MaxInt64,
			MaxMessageBytes:      1048588,
			MessageTimestampType: "CreateTime",
			CleanupPolicy:        "delete",
			DeleteRetentionMs:    86400000,
			MinInsyncReplicas:    1,
		},
		props:    map[string]string{},
		Security: Security{SaslMaxReceiveSize: DefaultSaslMaxReceiveSize, SaslHandshakeTimeoutMs: 10000},
	}
}

// brokerProp describes one supported broker property.
type brokerProp struct {
	name  string
	doc   string
	apply func(b *Broker, v string) error
	get   func(b *Broker) string
}

func parseInt(v string, bits int) (int64, error) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, bits)
	if err != nil {
		return 0, fmt.Errorf("not an integer: %q", v)
	}
	return n, nil
}

// parseInt64AtLeast parses a 64-bit integer property value that must be at
// least min.
func parseInt64AtLeast(v string, min int64) (int64, error) {
	n, err := parseInt(v, 64)
	if err != nil {
		return 0, err
	}
	if n < min {
		return 0, fmt.Errorf("must be >= %d, got %d", min, n)
	}
	return n, nil
}

func int64Prop(name, doc string, field func(*Broker) *int64, min int64) brokerProp {
	return brokerProp{name: name, doc: doc,
		apply: func(b *Broker, v string) error {
			n, err := parseInt64AtLeast(v, min)
			if err != nil {
				return err
			}
			*field(b) = n
			return nil
		},
		get: func(b *Broker) string { return strconv.FormatInt(*field(b), 10) },
	}
}

func boolProp(name, doc string, field func(*Broker) *bool) brokerProp {
	return brokerProp{name: name, doc: doc,
		apply: func(b *Broker, v string) error {
			x, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("not a boolean: %q", v)
			}
			*field(b) = x
			return nil
		},
		get: func(b *Broker) string { return strconv.FormatBool(*field(b)) },
	}
}

func scaledProp(name, doc string, field func(*Broker) *int64, scale int64) brokerProp {
	return brokerProp{name: name, doc: doc,
		apply: func(b *Broker, v string) error {
			n, err := parseInt(v, 64)
			if err != nil {
				return err
			}
			if n < 0 {
				*field(b) = -1
				return nil
			}
			if n > math.MaxInt64/scale {
				return fmt.Errorf("too large: %d", n)
			}
			*field(b) = n * scale
			return nil
		},
		get: func(b *Broker) string {
			if *field(b) < 0 {
				return "-1"
			}
			return strconv.FormatInt(*field(b)/scale, 10)
		},
	}
}

var brokerProps = []brokerProp{
	{name: "node.id", doc: "this broker's id",
		apply: func(b *Broker, v string) error {
			n, err := parseInt(v, 32)
			if err != nil || n < 0 {
				return fmt.Errorf("must be a non-negative integer: %q", v)
			}
			b.NodeID = int32(n)
			return nil
		},
		get: func(b *Broker) string { return strconv.Itoa(int(b.NodeID)) }},
	{name: "listeners", doc: "host:port to listen on when --listen is not given (a PLAINTEXT:// prefix is accepted)",
		apply: func(b *Broker, v string) error {
			b.Listener = stripListener(v)
			return nil
		},
		get: func(b *Broker) string { return b.Listener }},
	{name: "advertised.listeners", doc: "host:port clients are told to connect to (default: the bound listen address)",
		apply: func(b *Broker, v string) error {
			b.AdvertisedListener = stripListener(v)
			return nil
		},
		get: func(b *Broker) string { return b.AdvertisedListener }},
	{name: "num.partitions", doc: "partitions of an auto-created topic or of CreateTopics with -1",
		apply: func(b *Broker, v string) error {
			n, err := parseInt(v, 32)
			if err != nil || n < 1 {
				return fmt.Errorf("must be a positive integer: %q", v)
			}
			b.NumPartitions = int32(n)
			return nil
		},
		get: func(b *Broker) string { return strconv.Itoa(int(b.NumPartitions)) }},
	{name: "default.replication.factor", doc: "replication factor of auto-created topics and of CreateTopics with -1 (only 1 on a single node)",
		apply: func(b *Broker, v string) error {
			n, err := parseInt(v, 16)
			if err != nil || n < 1 {
				return fmt.Errorf("must be a positive integer: %q", v)
			}
			b.DefaultReplicationFactor = int16(n)
			return nil
		},
		get: func(b *Broker) string { return strconv.Itoa(int(b.DefaultReplicationFactor)) }},
	boolProp("auto.create.topics.enable", "create a topic on first use (Metadata, Produce)", func(b *Broker) *bool { return &b.AutoCreateTopics }),
	boolProp("delete.topic.enable", "allow DeleteTopics", func(b *Broker) *bool { return &b.DeleteTopicEnable }),
	{name: "socket.request.max.bytes", doc: "largest request frame accepted; a larger one closes the connection",
		apply: func(b *Broker, v string) error {
			n, err := parseInt(v, 32)
			if err != nil || n < 64 {
				return fmt.Errorf("must be an integer >= 64: %q", v)
			}
			b.SocketRequestMaxBytes = int32(n)
			return nil
		},
		get: func(b *Broker) string { return strconv.Itoa(int(b.SocketRequestMaxBytes)) }},
	int64Prop("connections.max.idle.ms", "close a connection that sent no request for this long", func(b *Broker) *int64 { return &b.ConnectionsMaxIdleMs }, 1),
	int64Prop("max.incremental.fetch.session.cache.slots", "incremental fetch sessions kept (0 disables them)", func(b *Broker) *int64 { return &b.FetchSessionSlots }, 0),
	int64Prop("max.connections", "client connections open at once; more are closed as they arrive", func(b *Broker) *int64 { return &b.MaxConnections }, 0),
	int64Prop("max.connections.per.ip", "client connections open at once from one address; more are closed as they arrive", func(b *Broker) *int64 { return &b.MaxConnectionsPerIP }, 0),
	int64Prop("queued.max.request.bytes", "request bytes read but not yet answered, over all connections; reading waits beyond it (0 or -1: no bound)", func(b *Broker) *int64 { return &b.QueuedMaxRequestBytes }, -1),
	int64Prop("fetch.max.bytes", "record bytes of one Fetch answer (the first batch is sent whole even if larger)", func(b *Broker) *int64 { return &b.FetchMaxBytes }, 1024),
	int64Prop("log.retention.check.interval.ms", "how often retention (and flush.ms) runs", func(b *Broker) *int64 { return &b.LogRetentionCheckIntervalMs }, 1),
	boolProp("audit.enable", "count the records this broker's partition leaders append per topic and window and publish the counts to _audit (the broker tier of sluice audit)", func(b *Broker) *bool { return &b.AuditEnable }),
	int64Prop("audit.window.ms", "width of the broker audit tier's windows (must divide sluice audit's --window)", func(b *Broker) *int64 { return &b.AuditWindowMs }, 1),
	int64Prop("audit.publish.interval.ms", "how often the broker publishes its audit counts to _audit (and at shutdown)", func(b *Broker) *int64 { return &b.AuditPublishIntervalMs }, 1),
	{name: "cluster.id", doc: "cluster id reported in Metadata",
		apply: func(b *Broker, v string) error { b.ClusterID = strings.TrimSpace(v); return nil },
		get:   func(b *Broker) string { return b.ClusterID }},
	{name: "zookeeper.connect", doc: "ZooKeeper host:port[,host:port]/chroot of the cluster (--zookeeper wins; empty = single node)",
		apply: func(b *Broker, v string) error { b.ZookeeperConnect = strings.TrimSpace(v); return nil },
		get:   func(b *Broker) string { return b.ZookeeperConnect }},
	int64Prop("zookeeper.session.timeout.ms", "ZooKeeper session timeout: a broker silent this long is dead to the cluster", func(b *Broker) *int64 { return &b.ZookeeperSessionTimeoutMs }, 400),
	{name: "broker.rack", doc: "this broker's rack; replicas of a partition are spread over racks when every broker has one",
		apply: func(b *Broker, v string) error { b.Rack = strings.TrimSpace(v); return nil },
		get:   func(b *Broker) string { return b.Rack }},
	boolProp("auto.leader.rebalance.enable", "give leadership back to the preferred replica once it is in the ISR again", func(b *Broker) *bool { return &b.AutoLeaderRebalance }),
	int64Prop("leader.imbalance.check.interval.seconds", "how often the controller checks whether preferred replicas should lead again", func(b *Broker) *int64 { return &b.LeaderImbalanceCheckSecs }, 1),
	{name: "leader.imbalance.per.broker.percentage", doc: "rebalance a broker's partitions once more than this percentage of those it prefers is led elsewhere (0..100)",
		apply: func(b *Broker, v string) error {
			n, err := parseInt64AtLeast(v, 0)
			if err != nil || n > 100 {
				return fmt.Errorf("must be an integer from 0 to 100: %q", v)
			}
			b.LeaderImbalancePercentage = n
			return nil
		},
		get: func(b *Broker) string { return strconv.FormatInt(b.LeaderImbalancePercentage, 10) }},
	int64Prop("replica.lag.time.max.ms", "a follower that has not caught up for this long leaves the ISR", func(b *Broker) *int64 { return &b.ReplicaLagTimeMaxMs }, 1),
	int64Prop("min.insync.replicas", "fewest in-sync replicas an acks=all produce needs (topic: min.insync.replicas)", func(b *Broker) *int64 { return &b.TopicDefaults.MinInsyncReplicas }, 1),
	boolProp("unclean.leader.election.enable", "let an out-of-sync replica lead when no in-sync one is live, losing data (topic: unclean.leader.election.enable)", func(b *Broker) *bool { return &b.TopicDefaults.UncleanLeaderElection }),
	int64Prop("log.segment.bytes", "segment file size before rolling (topic: segment.bytes)", func(b *Broker) *int64 { return &b.TopicDefaults.SegmentBytes }, 14),
	int64Prop("log.roll.ms", "segment age before rolling (topic: segment.ms)", func(b *Broker) *int64 { return &b.TopicDefaults.SegmentMs }, 1),
	scaledProp("log.roll.hours", "segment age before rolling, hours (log.roll.ms wins)", func(b *Broker) *int64 { return &b.TopicDefaults.SegmentMs }, 3600*1000),
	int64Prop("log.index.size.max.bytes", "offset index size (topic: segment.index.bytes)", func(b *Broker) *int64 { return &b.TopicDefaults.SegmentIndexBytes }, 4),
	int64Prop("log.index.interval.bytes", "bytes between index entries (topic: index.interval.bytes)", func(b *Broker) *int64 { return &b.TopicDefaults.IndexIntervalBytes }, 0),
	scaledProp("log.retention.ms", "age after which segments are deleted, -1 forever (topic: retention.ms)", func(b *Broker) *int64 { return &b.TopicDefaults.RetentionMs }, 1),
	scaledProp("log.retention.minutes", "retention in minutes (log.retention.ms wins)", func(b *Broker) *int64 { return &b.TopicDefaults.RetentionMs }, 60*1000),
	scaledProp("log.retention.hours", "retention in hours (log.retention.minutes and .ms win)", func(b *Broker) *int64 { return &b.TopicDefaults.RetentionMs }, 3600*1000),
	int64Prop("log.retention.bytes", "partition size above which old segments are deleted, negative = no limit (topic: retention.bytes)", func(b *Broker) *int64 { return &b.TopicDefaults.RetentionBytes }, math.MinInt64),
	int64Prop("log.flush.interval.messages", "fsync after this many messages (topic: flush.messages); default: page cache", func(b *Broker) *int64 { return &b.TopicDefaults.FlushMessages }, 1),
	int64Prop("log.flush.interval.ms", "fsync data older than this (topic: flush.ms); default: page cache", func(b *Broker) *int64 { return &b.TopicDefaults.FlushMs }, 0),
	int64Prop("message.max.bytes", "largest record batch accepted (topic: max.message.bytes)", func(b *Broker) *int64 { return &b.TopicDefaults.MaxMessageBytes }, 0),
	{name: "log.message.timestamp.type", doc: "CreateTime or LogAppendTime (topic: message.timestamp.type)",
		apply: func(b *Broker, v string) error {
			t, err := parseTimestampType(v)
			b.TopicDefaults.MessageTimestampType = t
			return err
		},
		get: func(b *Broker) string { return b.TopicDefaults.MessageTimestampType }},
	int64Prop("log.cleaner.delete.retention.ms", "how long compaction keeps tombstones (topic: delete.retention.ms)", func(b *Broker) *int64 { return &b.TopicDefaults.DeleteRetentionMs }, 0),
	{name: "log.cleanup.policy", doc: "delete, compact or compact,delete (topic: cleanup.policy)",
		apply: func(b *Broker, v string) error {
			p, err := parseCleanupPolicy(v)
			b.TopicDefaults.CleanupPolicy = p
			return err
		},
		get: func(b *Broker) string { return b.TopicDefaults.CleanupPolicy }},
}

// stripListener turns "PLAINTEXT://host:port[,...]" into "host:port" (the
// first listener; sluice has one plaintext listener).
func stripListener(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, ','); i >= 0 {
		v = v[:i]
	}
	if i := strings.Index(v, "://"); i >= 0 {
		v = v[i+3:]
	}
	return v
}

// applyOrder makes the more precise duration keys win whatever the file order:
// coarse keys are applied first.
var applyOrder = map[string]int{
	"log.roll.hours": -2, "log.retention.hours": -2, "log.retention.minutes": -1,
}

var brokerAliases = map[string]string{"broker.id": "node.id"}

// FromProperties applies properties on top of Kafka's defaults.
func FromProperties(props map[string]string) (Broker, error) {
	b := Default()
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if applyOrder[keys[i]] != applyOrder[keys[j]] {
			return applyOrder[keys[i]] < applyOrder[keys[j]]
		}
		return keys[i] < keys[j]
	})
	for _, k := range keys {
		v := props[k]
		b.props[k] = v
		name := k
		if a, ok := brokerAliases[k]; ok {
			name = a
		}
		p, ok := findBrokerProp(name)
		if !ok {
			continue
		}
		if err := p.apply(&b, v); err != nil {
			return Broker{}, fmt.Errorf("%w: %s: %v", ErrInvalid, k, err)
		}
	}
	sec, err := parseSecurity(props)
	if err != nil {
		return Broker{}, err
	}
	b.Security = sec
	// Kafka's KafkaConfig: the retention time from .ms, .minutes or .hours
	// is -1 when negative and must not be 0.
	if b.TopicDefaults.RetentionMs == 0 {
		return Broker{}, fmt.Errorf("%w: log.retention.ms (or .minutes, .hours) must be unlimited (-1) or at least 1 ms, got 0", ErrInvalid)
	}
	return b, nil
}

// Parse reads a properties file's bytes into a Broker configuration.
func Parse(data []byte) (Broker, error) {
	props, err := ParseProperties(data)
	if err != nil {
		return Broker{}, err
	}
	return FromProperties(props)
}

func findBrokerProp(name string) (brokerProp, bool) {
	for _, p := range brokerProps {
		if p.name == name {
			return p, true
		}
	}
	return brokerProp{}, false
}

// Unknown lists the properties that were set but are not understood (and so
// ignored), sorted.
func (b Broker) Unknown() []string {
	var out []string
	for k := range b.props {
		name := k
		if a, ok := brokerAliases[k]; ok {
			name = a
		}
		if _, ok := findBrokerProp(name); !ok && !IsGroupProperty(name) && !IsTxnProperty(name) && !IsSecurityProperty(name) {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Entry is one configuration value as DescribeConfigs reports it.
type Entry struct {
	Name      string
	Value     string
	IsDefault bool   // Kafka's default, not set anywhere
	Source    int8   // Kafka ConfigSource: 1 dynamic topic, 4 static broker, 5 default
	Type      int8   // Kafka ConfigType: 1 boolean, 2 string, 3 int, 4 short, 5 long, 7 list
	Doc       string // one line
}

// Kafka ConfigType codes.
const (
	typeBoolean int8 = 1
	typeString  int8 = 2
	typeInt     int8 = 3
	typeShort   int8 = 4
	typeLong    int8 = 5
	typeList    int8 = 7
)

// kafkaTypes gives each property's Kafka type; unlisted ones are LONG, or
// BOOLEAN / STRING by their parser.
var kafkaTypes = map[string]int8{
	"node.id": typeInt, "max.incremental.fetch.session.cache.slots": typeInt, "num.partitions": typeInt, "default.replication.factor": typeShort,
	"socket.request.max.bytes": typeInt, "log.segment.bytes": typeInt, "log.index.size.max.bytes": typeInt,
	"log.index.interval.bytes": typeInt, "message.max.bytes": typeInt, "log.retention.minutes": typeInt,
	"log.retention.hours": typeInt, "log.roll.hours": typeInt, "listeners": typeString,
	"advertised.listeners": typeString, "cluster.id": typeString, "log.message.timestamp.type": typeString,
	"log.cleanup.policy": typeList, "auto.create.topics.enable": typeBoolean, "delete.topic.enable": typeBoolean,
	"segment.bytes": typeInt, "segment.index.bytes": typeInt, "index.interval.bytes": typeInt,
	"max.message.bytes": typeInt, "message.timestamp.type": typeString, "cleanup.policy": typeList,
	"max.connections": typeInt, "max.connections.per.ip": typeInt, "fetch.max.bytes": typeInt,
	"zookeeper.connect": typeString, "broker.rack": typeString, "zookeeper.session.timeout.ms": typeInt,
	"min.insync.replicas": typeInt, "unclean.leader.election.enable": typeBoolean, "auto.leader.rebalance.enable": typeBoolean,
	"leader.imbalance.check.interval.seconds": typeLong, "leader.imbalance.per.broker.percentage": typeInt,
	"leader.replication.throttled.replicas": typeList, "follower.replication.throttled.replicas": typeList,
}

func kafkaType(name string) int8 {
	if t, ok := kafkaTypes[name]; ok {
		return t
	}
	return typeLong
}

// Entries lists every supported broker property with its effective value.
func (b Broker) Entries() []Entry {
	def := Default()
	out := make([]Entry, 0, len(brokerProps))
	for _, p := range brokerProps {
		v := p.get(&b)
		set := v != p.get(&def)
		src := int8(5)
		if set {
			src = 4
		}
		out = append(out, Entry{Name: p.name, Value: v, IsDefault: !set, Source: src, Type: kafkaType(p.name), Doc: p.doc})
	}
	return out
}
