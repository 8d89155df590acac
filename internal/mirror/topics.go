package mirror

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/audit"
)

// skippedConfigs are source topic configs the target does not copy:
// message.timestamp.type=LogAppendTime would make the target stamp its own
// time over the source's (the mirror carries the source timestamp as the
// record's CreateTime), and the rest describe the source's brokers.
var skippedConfigs = map[string]bool{
	"message.timestamp.type":                  true,
	"min.insync.replicas":                     true,
	"leader.replication.throttled.replicas":   true,
	"follower.replication.throttled.replicas": true,
	"confluent.placement.constraints":         true,
}

// Selection chooses the source topics to mirror.
type Selection struct {
	// Topics must match the whole topic name.
	Topics *regexp.Regexp
	// Exclude, when set, drops topics matching it (the whole name).
	Exclude *regexp.Regexp
}

// internalTopic is a topic of a cluster's own machinery.
func internalTopic(name string) bool {
	return strings.HasPrefix(name, "__") || name == "_schemas"
}

func fullMatch(re *regexp.Regexp, s string) bool {
	loc := re.FindStringIndex(s)
	return loc != nil && loc[0] == 0 && loc[1] == len(s)
}

// Match reports whether topic is mirrored. An internal topic (`__*`,
// `_schemas`) is mirrored only when the Topics pattern is that literal name.
//
// The _audit topic is never mirrored: each cluster's _audit holds its own
// tiers' books (the mirror publishes its own counts to the target's).
func (s Selection) Match(topic string) bool {
	if topic == audit.Topic {
		return false
	}
	if s.Topics == nil || !fullMatch(s.Topics, topic) {
		return false
	}
	if s.Exclude != nil && fullMatch(s.Exclude, topic) {
		return false
	}
	if internalTopic(topic) {
		lit, complete := s.Topics.LiteralPrefix()
		if complete && lit == topic {
			return true
		}
		for _, alt := range strings.Split(s.Topics.String(), "|") {
			if alt == regexp.QuoteMeta(topic) {
				return true
			}
		}
		return false
	}
	return true
}

// sourceTopic is a selected topic with its partition count.
type sourceTopic struct {
	name       string
	partitions int32
	id         kadm.TopicID // zero when the source has no topic IDs
}

// listSelected lists the source's topics that s selects, sorted.
func listSelected(ctx context.Context, adm *kadm.Client, s Selection) ([]sourceTopic, error) {
	details, err := adm.ListTopicsWithInternal(ctx)
	if err != nil {
		return nil, fmt.Errorf("mirror: list the source's topics: %w", err)
	}
	var out []sourceTopic
	for name, d := range details {
		if d.Err != nil || !s.Match(name) {
			continue
		}
		out = append(out, sourceTopic{name: name, partitions: int32(len(d.Partitions)), id: d.ID})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out, nil
}

// sourceConfigs returns the non-default configs of a source topic that the
// target copies.
func sourceConfigs(ctx context.Context, adm *kadm.Client, topic string) (map[string]*string, error) {
	rcs, err := adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return nil, fmt.Errorf("mirror: describe the configs of %s on the source: %w", topic, err)
	}
	rc, err := rcs.On(topic, nil)
	if err == nil {
		err = rc.Err
	}
	if err != nil {
		return nil, fmt.Errorf("mirror: describe the configs of %s on the source: %w", topic, err)
	}
	out := map[string]*string{}
	for _, c := range rc.Configs {
		if c.Source != 1 || c.Sensitive || c.Value == nil || skippedConfigs[c.Key] { // 1: DYNAMIC_TOPIC_CONFIG
			continue
		}
		v := *c.Value
		out[c.Key] = &v
	}
	return out, nil
}

// ensureTargetTopic creates topic on the target with the source's
// partition count and configs, or grows an existing one to at least
// partitions. It returns the target's partition count.
func ensureTargetTopic(ctx context.Context, src, dst *kadm.Client, t sourceTopic) (created bool, err error) {
	details, err := dst.ListTopics(ctx, t.name)
	if err != nil {
		return false, fmt.Errorf("mirror: look up %s on the target: %w", t.name, err)
	}
	if d, ok := details[t.name]; ok && d.Err == nil {
		have := int32(len(d.Partitions))
		if have >= t.partitions {
			return false, nil
		}
		resp, err := dst.UpdatePartitions(ctx, int(t.partitions), t.name)
		if err == nil {
			var r kadm.CreatePartitionsResponse
			if r, err = resp.On(t.name, nil); err == nil {
				err = r.Err
			}
		}
		if err != nil && !errors.Is(err, kerr.InvalidPartitions) {
			return false, fmt.Errorf("mirror: grow %s on the target from %d to %d partitions: %w", t.name, have, t.partitions, err)
		}
		return false, nil
	}
	configs, err := sourceConfigs(ctx, src, t.name)
	if err != nil {
		return false, err
	}
	resp, err := dst.CreateTopic(ctx, t.partitions, -1, configs, t.name)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return false, fmt.Errorf("mirror: create %s on the target (%d partitions): %w", t.name, t.partitions, err)
	}
	return err == nil, nil
}
