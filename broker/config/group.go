package config

import (
	"fmt"
	"strings"
)

// Group is the group coordinator's, the log cleaner's and producer-state housekeeping's part
// of the broker configuration, with Kafka's property names and defaults.
// It is read from the properties a Broker was built from (Broker.Group), so
// that these keys live apart from the log properties.
type Group struct {
	MinSessionTimeoutMs             int64 // group.min.session.timeout.ms (6000)
	MaxSessionTimeoutMs             int64 // group.max.session.timeout.ms (1800000)
	InitialRebalanceDelayMs         int64 // group.initial.rebalance.delay.ms (3000)
	MaxSize                         int64 // group.max.size (sluice: 10000; Kafka: unbounded)
	MaxMetadataBytes                int64 // group.max.metadata.bytes (sluice: 4194304): one group's member metadata and assignments
	CoordinatorMaxBytes             int64 // group.coordinator.max.bytes (sluice: 268435456): all groups' members, offsets and ids together
	OffsetsRetentionMinutes         int64 // offsets.retention.minutes (10080 = 7 days)
	OffsetsRetentionCheckIntervalMs int64 // offsets.retention.check.interval.ms (600000)
	OffsetsTopicNumPartitions       int64 // offsets.topic.num.partitions (50)
	OffsetMetadataMaxBytes          int64 // offset.metadata.max.bytes (4096)
	ProducerIDExpirationMs          int64 // producer.id.expiration.ms (86400000 = 1 day)
	LogCleanerBackoffMs             int64 // log.cleaner.backoff.ms (15000): pause between compaction passes
}

type groupProp struct {
	name  string
	min   int64
	field func(*Group) *int64
}

var groupProps = []groupProp{
	{"group.min.session.timeout.ms", 1, func(g *Group) *int64 { return &g.MinSessionTimeoutMs }},
	{"group.max.session.timeout.ms", 1, func(g *Group) *int64 { return &g.MaxSessionTimeoutMs }},
	{"group.initial.rebalance.delay.ms", 0, func(g *Group) *int64 { return &g.InitialRebalanceDelayMs }},
	{"group.max.size", 1, func(g *Group) *int64 { return &g.MaxSize }},
	{"group.max.metadata.bytes", 1, func(g *Group) *int64 { return &g.MaxMetadataBytes }},
	{"group.coordinator.max.bytes", 1, func(g *Group) *int64 { return &g.CoordinatorMaxBytes }},
	{"offsets.retention.minutes", 1, func(g *Group) *int64 { return &g.OffsetsRetentionMinutes }},
	{"offsets.retention.check.interval.ms", 1, func(g *Group) *int64 { return &g.OffsetsRetentionCheckIntervalMs }},
	{"offsets.topic.num.partitions", 1, func(g *Group) *int64 { return &g.OffsetsTopicNumPartitions }},
	{"offset.metadata.max.bytes", 0, func(g *Group) *int64 { return &g.OffsetMetadataMaxBytes }},
	{"producer.id.expiration.ms", 1, func(g *Group) *int64 { return &g.ProducerIDExpirationMs }},
	{"log.cleaner.backoff.ms", 1, func(g *Group) *int64 { return &g.LogCleanerBackoffMs }},
}

// DefaultGroup returns Kafka's defaults (sluice's where Kafka has no such key
// or no bound).
func DefaultGroup() Group {
	return Group{MinSessionTimeoutMs: 6000, MaxSessionTimeoutMs: 1800000, InitialRebalanceDelayMs: 3000, MaxSize: 10000,
		MaxMetadataBytes: 4 << 20, CoordinatorMaxBytes: 256 << 20,
		OffsetsRetentionMinutes: 7 * 24 * 60, OffsetsRetentionCheckIntervalMs: 600000, OffsetsTopicNumPartitions: 50,
		OffsetMetadataMaxBytes: 4096, ProducerIDExpirationMs: 24 * 3600 * 1000, LogCleanerBackoffMs: 15000}
}

// IsGroupProperty reports whether name is one of Group's properties.
func IsGroupProperty(name string) bool {
	for _, p := range groupProps {
		if p.name == name {
			return true
		}
	}
	return false
}

// Group returns the group properties set on b, over Kafka's defaults.
func (b Broker) Group() (Group, error) {
	g := DefaultGroup()
	for _, p := range groupProps {
		v, ok := b.props[p.name]
		if !ok {
			continue
		}
		n, err := parseInt64AtLeast(strings.TrimSpace(v), p.min)
		if err != nil {
			return Group{}, fmt.Errorf("%w: %s: %v", ErrInvalid, p.name, err)
		}
		*p.field(&g) = n
	}
	if g.MinSessionTimeoutMs > g.MaxSessionTimeoutMs {
		return Group{}, fmt.Errorf("%w: group.min.session.timeout.ms %d exceeds group.max.session.timeout.ms %d", ErrInvalid, g.MinSessionTimeoutMs, g.MaxSessionTimeoutMs)
	}
	return g, nil
}
