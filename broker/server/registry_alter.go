package server

// Registry changes of the admin APIs (CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs), kept apart from registry.go. A topic is
// immutable once registered: each change replaces the *topic, keeping the
// existing *partition values (their mutexes serialise appends).

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
)

// addPartitions raises a topic's partition count to count. It returns a
// Kafka error code and a message.
func (r *registry) addPartitions(name string, count int32, validateOnly bool) (int16, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.topics[name]
	switch {
	case !ok:
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	case name == group.OffsetsTopic:
		return kerr.InvalidPartitions.Code, "the partition count of " + group.OffsetsTopic + " is fixed: groups map to its partitions by hash"
	case count <= int32(len(t.parts)):
		return kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the count can only grow", name, len(t.parts))
	case count > 1<<16:
		return kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d out of range 1..65536", count)
	}
	if validateOnly {
		return 0, ""
	}
	nt := &topic{name: t.name, id: t.id, overrides: t.overrides, cfg: t.cfg}
	// Register first (persistLocked counts len(parts)), then create: a crash
	// in between leaves partitions that the next open creates.
	nt.parts = make([]*partition, count)
	r.topics[name] = nt
	if err := r.persistLocked(); err != nil {
		r.topics[name] = t
		return kerr.KafkaStorageError.Code, err.Error()
	}
	nt.parts = append(make([]*partition, 0, count), t.parts...)
	lc := logConfig(t.cfg)
	lc.ProducerIDExpiration = producerIDExpiration(r.broker)
	for p := int32(len(t.parts)); p < count; p++ {
		tp := plog.TopicPartition{Topic: name, Partition: p}
		l, err := r.mgr.Open(tp, lc)
		if err != nil {
			// Registered but not open: the partitions opened so far are
			// served; a restart opens the rest.
			r.logger.Error("open new partition", "topic", name, "partition", p, "err", err)
			return kerr.KafkaStorageError.Code, err.Error()
		}
		nt.parts = append(nt.parts, &partition{tp: tp, log: l})
	}
	return 0, ""
}

// topicConfigs returns a copy of a topic's overrides.
func (r *registry) topicConfigs(name string) (map[string]string, bool) {
	t, ok := r.get(name)
	if !ok {
		return nil, false
	}
	out := make(map[string]string, len(t.overrides))
	for k, v := range t.overrides {
		out[k] = v
	}
	return out, true
}

// setConfigs replaces a topic's config overrides (validated here) and
// applies them to its open partitions.
func (r *registry) setConfigs(name string, overrides map[string]string, validateOnly bool) (int16, string) {
	check := make(map[string]*string, len(overrides))
	for k, v := range overrides {
		check[k] = &v
	}
	if err := config.ValidateTopicConfigs(check); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	if validateOnly {
		return 0, ""
	}
	if len(overrides) == 0 {
		overrides = nil
	}
	nt := &topic{name: t.name, id: t.id, overrides: overrides, cfg: r.broker.ResolveTopic(overrides), parts: t.parts}
	r.topics[name] = nt
	if err := r.persistLocked(); err != nil {
		r.topics[name] = t
		return kerr.KafkaStorageError.Code, err.Error()
	}
	lc := logConfig(nt.cfg)
	lc.ProducerIDExpiration = producerIDExpiration(r.broker)
	for _, p := range nt.parts {
		if err := p.log.SetConfig(lc); err != nil {
			return kerr.InvalidConfig.Code, err.Error()
		}
	}
	return 0, ""
}

// listConfig is a topic config whose value is a comma-separated list
// (IncrementalAlterConfigs APPEND / SUBTRACT).
func listConfig(name string) bool { return name == "cleanup.policy" }

// applyIncremental applies one IncrementalAlterConfigs operation (0 SET,
// 1 DELETE, 2 APPEND, 3 SUBTRACT) to overrides; def is the value in force
// when the key is not overridden.
func applyIncremental(overrides map[string]string, key string, op int8, value *string, def string) error {
	v := ""
	if value != nil {
		v = *value
	}
	switch op {
	case 0:
		if value == nil {
			return fmt.Errorf("SET of %s needs a value", key)
		}
		overrides[key] = v
	case 1:
		delete(overrides, key)
	case 2, 3:
		if !listConfig(key) {
			return fmt.Errorf("%s is not a list config: APPEND and SUBTRACT do not apply", key)
		}
		cur, ok := overrides[key]
		if !ok {
			cur = def
		}
		var items []string
		for _, it := range strings.Split(cur, ",") {
			if it = strings.TrimSpace(it); it != "" && (op == 2 || it != strings.TrimSpace(v)) {
				items = append(items, it)
			}
		}
		if op == 2 && !strings.Contains(","+cur+",", ","+v+",") {
			items = append(items, v)
		}
		overrides[key] = strings.Join(items, ",")
	default:
		return fmt.Errorf("unknown operation %d", op)
	}
	return nil
}
