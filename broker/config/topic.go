package config

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// topicProp describes one supported topic config.
type topicProp struct {
	name   string
	broker string // the broker property that supplies its default
	doc    string
	set    func(t *Topic, v string) error
	get    func(t *Topic) string
}

func topicInt(name, broker, doc string, field func(*Topic) *int64, min int64) topicProp {
	return topicProp{name: name, broker: broker, doc: doc,
		set: func(t *Topic, v string) error {
			n, err := parseInt64AtLeast(v, min)
			if err != nil {
				return err
			}
			*field(t) = n
			return nil
		},
		get: func(t *Topic) string { return strconv.FormatInt(*field(t), 10) },
	}
}

var topicProps = []topicProp{
	topicInt("segment.bytes", "log.segment.bytes", "segment file size before rolling", func(t *Topic) *int64 { return &t.SegmentBytes }, 14),
	topicInt("segment.ms", "log.roll.ms", "segment age before rolling", func(t *Topic) *int64 { return &t.SegmentMs }, 1),
	topicInt("segment.index.bytes", "log.index.size.max.bytes", "offset index size", func(t *Topic) *int64 { return &t.SegmentIndexBytes }, 4),
	topicInt("index.interval.bytes", "log.index.interval.bytes", "bytes between index entries", func(t *Topic) *int64 { return &t.IndexIntervalBytes }, 0),
	topicInt("retention.ms", "log.retention.ms", "age after which segments are deleted; -1 forever, 0 = keep none", func(t *Topic) *int64 { return &t.RetentionMs }, -1),
	// Kafka: retention.ms is at least -1; retention.bytes is any long (every
	// negative value is no limit). 0 deletes every segment retention may.
	topicInt("retention.bytes", "log.retention.bytes", "size above which old segments are deleted; negative = no limit, 0 = keep none", func(t *Topic) *int64 { return &t.RetentionBytes }, math.MinInt64),
	topicInt("flush.messages", "log.flush.interval.messages", "fsync after this many messages", func(t *Topic) *int64 { return &t.FlushMessages }, 1),
	topicInt("flush.ms", "log.flush.interval.ms", "fsync data older than this", func(t *Topic) *int64 { return &t.FlushMs }, 0),
	topicInt("max.message.bytes", "message.max.bytes", "largest record batch accepted", func(t *Topic) *int64 { return &t.MaxMessageBytes }, 0),
	topicInt("delete.retention.ms", "log.cleaner.delete.retention.ms", "how long compaction keeps tombstones", func(t *Topic) *int64 { return &t.DeleteRetentionMs }, 0),
	{name: "message.timestamp.type", broker: "log.message.timestamp.type", doc: "CreateTime or LogAppendTime",
		set: func(t *Topic, v string) error {
			x, err := parseTimestampType(v)
			t.MessageTimestampType = x
			return err
		},
		get: func(t *Topic) string { return t.MessageTimestampType }},
	{name: "cleanup.policy", broker: "log.cleanup.policy", doc: "delete, compact or compact,delete",
		set: func(t *Topic, v string) error {
			x, err := parseCleanupPolicy(v)
			t.CleanupPolicy = x
			return err
		},
		get: func(t *Topic) string { return t.CleanupPolicy }},
	topicInt("min.insync.replicas", "min.insync.replicas", "fewest in-sync replicas an acks=all produce needs (cluster mode)", func(t *Topic) *int64 { return &t.MinInsyncReplicas }, 1),
	{name: "unclean.leader.election.enable", broker: "unclean.leader.election.enable", doc: "let an out-of-sync replica lead when no in-sync one is live (cluster mode; loses data)",
		set: func(t *Topic, v string) error {
			x, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				return fmt.Errorf("not a boolean: %q", v)
			}
			t.UncleanLeaderElection = x
			return nil
		},
		get: func(t *Topic) string { return strconv.FormatBool(t.UncleanLeaderElection) }},
	throttledReplicasProp("leader.replication.throttled.replicas", func(t *Topic) *string { return &t.LeaderThrottledReplicas },
		"replicas (partition:broker,... or *) whose leader throttles its answers to out-of-sync followers to leader.replication.throttled.rate (cluster mode)"),
	throttledReplicasProp("follower.replication.throttled.replicas", func(t *Topic) *string { return &t.FollowerThrottledReplicas },
		"replicas (partition:broker,... or *) that fetch from their leader at most at follower.replication.throttled.rate while out of sync (cluster mode)"),
}

// throttledReplicasProp is a replication throttle's replica list: Kafka's
// "partition:broker,partition:broker" or "*" (every replica), "" none. No
// broker property supplies a default.
func throttledReplicasProp(name string, field func(*Topic) *string, doc string) topicProp {
	return topicProp{name: name, doc: doc,
		set: func(t *Topic, v string) error {
			x, err := normalizeThrottledReplicas(v)
			*field(t) = x
			return err
		},
		get: func(t *Topic) string { return *field(t) }}
}

func normalizeThrottledReplicas(v string) (string, error) {
	v = strings.ReplaceAll(strings.TrimSpace(v), " ", "")
	if v == "" || v == "*" {
		return v, nil
	}
	for _, e := range strings.Split(v, ",") {
		p, b, ok := strings.Cut(e, ":")
		if !ok {
			return "", fmt.Errorf("entry %q is not partition:broker (the list is partition:broker,... or *)", e)
		}
		if n, err := strconv.ParseInt(p, 10, 32); err != nil || n < 0 {
			return "", fmt.Errorf("entry %q: partition %q is not a partition number", e, p)
		}
		if n, err := strconv.ParseInt(b, 10, 32); err != nil || n < 0 {
			return "", fmt.Errorf("entry %q: broker %q is not a broker id", e, b)
		}
	}
	return v, nil
}

// ThrottledReplica reports whether a throttled-replicas list (a value of
// leader.replication.throttled.replicas or
// follower.replication.throttled.replicas, as normalized) names the
// replica of partition on broker: "*" names every replica.
func ThrottledReplica(list string, partition, broker int32) bool {
	switch list {
	case "":
		return false
	case "*":
		return true
	}
	want := strconv.Itoa(int(partition)) + ":" + strconv.Itoa(int(broker))
	for len(list) > 0 {
		var e string
		e, list, _ = strings.Cut(list, ",")
		if e == want {
			return true
		}
	}
	return false
}

func findTopicProp(name string) (topicProp, bool) {
	for _, p := range topicProps {
		if p.name == name {
			return p, true
		}
	}
	return topicProp{}, false
}

func parseTimestampType(v string) (string, error) {
	switch strings.TrimSpace(v) {
	case "CreateTime":
		return "CreateTime", nil
	case "LogAppendTime":
		return "LogAppendTime", nil
	}
	return "CreateTime", fmt.Errorf("must be CreateTime or LogAppendTime, got %q", v)
}

func parseCleanupPolicy(v string) (string, error) {
	parts := strings.Split(strings.ReplaceAll(v, " ", ""), ",")
	var del, comp bool
	for _, p := range parts {
		switch p {
		case "delete":
			del = true
		case "compact":
			comp = true
		default:
			return "delete", fmt.Errorf("must be delete, compact or compact,delete, got %q", v)
		}
	}
	switch {
	case del && comp:
		return "compact,delete", nil
	case comp:
		return "compact", nil
	}
	return "delete", nil
}

// ValidateTopicConfigs checks topic overrides (CreateTopics configs): every
// key must be a supported topic config with a valid value. A nil value means
// "use the default" and is accepted.
func ValidateTopicConfigs(overrides map[string]*string) error {
	var t Topic
	for k, v := range overrides {
		p, ok := findTopicProp(k)
		if !ok {
			return fmt.Errorf("%w: unknown topic config %q (supported: %s)", ErrInvalid, k, strings.Join(TopicConfigNames(), ", "))
		}
		if v == nil {
			continue
		}
		if err := p.set(&t, *v); err != nil {
			return fmt.Errorf("%w: %s: %v", ErrInvalid, k, err)
		}
	}
	return nil
}

// TopicConfigNames lists the supported topic config names, sorted.
func TopicConfigNames() []string {
	out := make([]string, 0, len(topicProps))
	for _, p := range topicProps {
		out = append(out, p.name)
	}
	sort.Strings(out)
	return out
}

// ResolveTopic applies a topic's overrides on top of the broker defaults.
// Overrides were validated when stored; an invalid one is ignored.
func (b Broker) ResolveTopic(overrides map[string]string) Topic {
	t := b.TopicDefaults
	for k, v := range overrides {
		if p, ok := findTopicProp(k); ok {
			tmp := t
			if p.set(&tmp, v) == nil {
				t = tmp
			}
		}
	}
	return t
}

// TopicEntries lists a topic's effective configs: overrides as source 1
// (dynamic topic config), inherited broker values as 4 (static broker) when
// the broker property was set, else 5 (default).
func (b Broker) TopicEntries(overrides map[string]string) []Entry {
	t := b.ResolveTopic(overrides)
	def := Default().TopicDefaults
	out := make([]Entry, 0, len(topicProps))
	for _, p := range topicProps {
		e := Entry{Name: p.name, Value: p.get(&t), Type: kafkaType(p.name), Doc: p.doc}
		switch _, over := overrides[p.name]; {
		case over:
			e.Source = 1
		case p.get(&b.TopicDefaults) != p.get(&def):
			e.Source = 4
		default:
			e.Source, e.IsDefault = 5, true
		}
		out = append(out, e)
	}
	return out
}

// PageCacheFlush reports whether a flush setting means "leave it to the page
// cache" (Kafka's Long.MAX_VALUE default).
func PageCacheFlush(v int64) bool { return v == math.MaxInt64 }
