package server

// Registry changes of the admin APIs (CreatePartitions, AlterConfigs,
// IncrementalAlterConfigs), kept apart from registry.go. A topic is
// immutable once registered: each change replaces the *topic, keeping the
// existing *partition values (their mutexes serialise appends).

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/metadata"
)

// addPartitions raises a topic's partition count to count. It returns a
// Kafka error code and a message. As create does, it holds registry.mu only
// to reserve the topic and to publish the result, not while it writes the
// metadata store and creates the new partition directories. In cluster
// mode assigned lists the new partitions' replicas (nil: the Store assigns
// them with partition 0's replication factor) and no partition is opened
// here: the cluster's states open those assigned to this broker.
func (r *registry) addPartitions(name string, count int32, assigned [][]int32, validateOnly bool) (int16, string) {
	r.mu.Lock()
	t, ok := r.topics[name]
	var code int16
	var msg string
	switch {
	case !ok:
		code, msg = kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	case r.busy[name]:
		code, msg = kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q is being changed; retry", name)
	case name == group.OffsetsTopic:
		code, msg = kerr.InvalidPartitions.Code, "the partition count of "+group.OffsetsTopic+" is fixed: groups map to its partitions by hash"
	case count <= t.npart:
		code, msg = kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q has %d partitions; the count can only grow", name, t.npart)
	case r.placement != nil && assigned != nil && len(assigned) != int(count-t.npart):
		code, msg = kerr.InvalidReplicaAssignment.Code, fmt.Sprintf("%d new partitions, %d assigned", count-t.npart, len(assigned))
	case r.placement != nil && assigned != nil && len(t.replicas) != int(t.npart):
		code, msg = kerr.InvalidPartitions.Code, fmt.Sprintf("topic %q: its assignment is not known here yet; retry", name)
	case count > metadata.MaxPartitions:
		code, msg = kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d out of range 1..%d", count, metadata.MaxPartitions)
	}
	if code != 0 || validateOnly {
		r.mu.Unlock()
		return code, msg
	}
	r.busy[name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.busy, name)
		r.mu.Unlock()
	}()
	// Register first, then create: a crash in between leaves partitions
	// that the next start creates.
	var replicas [][]int32
	if r.placement != nil && assigned != nil {
		replicas = append(slices.Clone(t.replicas), assigned...)
	}
	if err := r.store.UpdateTopic(metadata.Topic{Name: name, ID: t.id, Partitions: count, Configs: t.overrides, Replicas: replicas}); err != nil {
		if errors.Is(err, cluster.ErrInvalid) {
			return kerr.InvalidReplicationFactor.Code, err.Error()
		}
		return kerr.KafkaStorageError.Code, err.Error()
	}
	if r.placement != nil {
		nt := *t
		nt.npart = count
		r.mu.Lock()
		r.topics[name] = &nt
		r.mu.Unlock()
		return 0, ""
	}
	tps := make([]plog.TopicPartition, 0, int(count)-len(t.parts))
	for p := t.npart; p < count; p++ {
		tps = append(tps, plog.TopicPartition{Topic: name, Partition: p})
	}
	lc := logConfig(t.cfg)
	lc.ProducerIDExpiration = producerIDExpiration(r.broker)
	logs, err := r.mgr.OpenMany(tps, lc)
	nt := &topic{name: t.name, id: t.id, overrides: t.overrides, cfg: t.cfg}
	nt.parts = append(make([]*partition, 0, count), t.parts...)
	for i, l := range logs {
		if l == nil {
			break // registered but not open: a restart opens the rest
		}
		nt.parts = append(nt.parts, &partition{tp: tps[i], log: l})
	}
	nt.npart = int32(len(nt.parts))
	r.mu.Lock()
	r.topics[name] = nt // the partitions opened so far are served
	r.mu.Unlock()
	if err != nil {
		r.logger.Error("open new partitions", "topic", name, "err", err)
		return kerr.KafkaStorageError.Code, err.Error()
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
	if r.busy[name] {
		return kerr.InvalidConfig.Code, fmt.Sprintf("topic %q is being changed; retry", name)
	}
	if validateOnly {
		return 0, ""
	}
	if len(overrides) == 0 {
		overrides = nil
	}
	// One small atomic write under registry.mu: config changes are rare.
	if err := r.store.UpdateTopic(metadata.Topic{Name: name, ID: t.id, Partitions: t.npart, Configs: overrides}); err != nil {
		return kerr.KafkaStorageError.Code, err.Error()
	}
	nt := &topic{name: t.name, id: t.id, overrides: overrides, cfg: r.broker.ResolveTopic(overrides), npart: t.npart, parts: t.parts, replicas: t.replicas}
	r.topics[name] = nt
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
