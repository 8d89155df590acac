package server

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/cluster"
	"github.com/sluicehq/sluice/broker/config"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/metadata"
	"github.com/sluicehq/sluice/broker/replica"
	"github.com/sluicehq/sluice/internal/topicname"
)

// partition is one served partition: its log, and the mutex that keeps
// append + high-watermark update atomic.
type partition struct {
	tp  plog.TopicPartition
	log *plog.Log
	mu  sync.Mutex // serialises Append and SetHighWatermark
}

// topic is a served topic. Its fields never change after it is published
// in the registry, except by replacing the *topic.
type topic struct {
	name      string
	id        [16]byte
	overrides map[string]string
	cfg       config.Topic
	// npart is the topic's partition count; parts are the partitions with
	// a replica on this broker, in partition order: all of them on a
	// single node, those assigned here in cluster mode. Look a partition
	// up with partition(p), never by indexing parts.
	npart int32
	parts []*partition
	// replicas is the cluster's assignment, replicas[p] preferred leader
	// first (nil on a single node).
	replicas [][]int32
}

// partition returns partition p when this broker holds a replica of it
// (every partition on a single node), else nil.
func (t *topic) partition(p int32) *partition {
	if p < 0 || p >= t.npart {
		return nil
	}
	if len(t.parts) == int(t.npart) { // all here: parts[p] is partition p
		return t.parts[p]
	}
	i := sort.Search(len(t.parts), func(i int) bool { return t.parts[i].tp.Partition >= p })
	if i < len(t.parts) && t.parts[i].tp.Partition == p {
		return t.parts[i]
	}
	return nil
}

// hasPartition reports whether the topic has partition p (here or on
// another broker).
func (t *topic) hasPartition(p int32) bool { return p >= 0 && p < t.npart }

// registry is the serving view of the topic metadata: the topics of the
// metadata.Store, each with its open partition logs. The store decides what
// exists; the registry opens and deletes the partitions that follow.
//
// Concurrency: mu guards the maps only and is held for map operations, never
// across file I/O. Produce, Fetch and Metadata take it for reading to look a
// topic up; CreateTopics and DeleteTopics reserve the name under mu (in
// busy), then write the store and create or delete the partition
// directories without it, and publish the result under mu again. So a
// 65,536-partition create or delete never stalls traffic to other topics.
type registry struct {
	store   metadata.Store
	mgr     *plog.Manager
	broker  config.Broker
	logger  *slog.Logger
	metrics *metrics
	// placement is the cluster's replica assignment (nil on a single
	// node): in cluster mode a topic is registered with no open partition
	// and the cluster's states open the partitions assigned here
	// (cluster_registry.go).
	placement placement

	mu     sync.RWMutex
	topics map[string]*topic
	busy   map[string]bool // names being created or deleted

	replicated bool // cluster mode: the high watermark is replication's (Options.Replicated)

	// coordinatorRepl is cluster mode's replica Manager, through which the
	// coordinators' internal topics append and wait (group_storage.go);
	// nil on a single node.
	coordinatorRepl atomic.Pointer[replica.Manager]
	// groupEpochs are, per __consumer_offsets partition the group
	// coordinator loaded in cluster mode, the leader epoch it loaded in:
	// its appends go in that epoch only (group_storage.go), so a
	// coordinator that lost the partition, even one that leads it again in
	// a later epoch before it reloaded, never appends.
	groupEpochs sync.Map // int32 -> int32
}

// openRegistry loads the store, opens every registered partition and
// deletes partition directories of topics the store does not list (a
// DeleteTopics interrupted after the store was written). A store never
// written adopts the partition directories it finds instead.
func openRegistry(store metadata.Store, mgr *plog.Manager, b config.Broker, logger *slog.Logger, m *metrics, pl placement, replicated bool) (*registry, error) {
	r := &registry{store: store, mgr: mgr, broker: b, logger: logger, metrics: m, placement: pl, topics: map[string]*topic{}, busy: map[string]bool{}, replicated: replicated}
	topics, fresh, err := store.Load()
	if err != nil {
		return nil, metaErr(err)
	}
	onDisk := map[string]int32{}
	for _, tp := range mgr.Partitions() {
		onDisk[tp.Topic] = max(onDisk[tp.Topic], tp.Partition+1)
	}
	if fresh && len(onDisk) > 0 && pl != nil {
		logger.Warn("the cluster has no topics but this data directory holds partitions: they are left on disk, unserved",
			"topics", len(onDisk))
	}
	if fresh && len(onDisk) > 0 && pl == nil {
		// No metadata but data: adopt what is on disk rather than lose it.
		names := make([]string, 0, len(onDisk))
		for name := range onDisk {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			t := metadata.Topic{Name: name, ID: metadata.NewTopicID(), Partitions: onDisk[name]}
			logger.Warn("adopting partition directories without a registry entry", "topic", name, "partitions", t.Partitions)
			if err := store.CreateTopic(t); err != nil {
				return nil, metaErr(err)
			}
			topics = append(topics, t)
		}
	}
	start := time.Now()
	partitions := 0
	for _, mt := range topics {
		t := &topic{name: mt.Name, id: mt.ID, overrides: mt.Configs, cfg: b.ResolveTopic(mt.Configs), npart: mt.Partitions}
		if pl != nil { // cluster mode: the partitions assigned here open as their states arrive
			r.topics[t.name] = t
			continue
		}
		if err := r.openPartitions(t, mt.Partitions); err != nil {
			return nil, err
		}
		r.topics[t.name] = t
		partitions += len(t.parts)
	}
	if len(topics) > 0 {
		logger.Info("opened topics", "topics", len(topics), "partitions", partitions, "elapsed", time.Since(start).String())
	}
	if !fresh {
		if err := deleteStrays(mgr, logger, r.topics, topics, pl); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// deleteStrays deletes the partition directories the metadata does not
// account for: those of topics that no longer exist (deleted while this
// broker was down) or beyond their partition count and, in cluster mode,
// stray replicas (Kafka's stray-replica cleanup): partitions of a live
// topic whose assignment no longer lists this broker (moved away while it
// was down). A partition in a move lists both its old and new replicas,
// so a replica being moved off this broker is kept until the move ends.
func deleteStrays(mgr *plog.Manager, logger *slog.Logger, registered map[string]*topic, topics []metadata.Topic, pl placement) error {
	assigned := map[string][][]int32{}
	for _, mt := range topics {
		if int32(len(mt.Replicas)) == mt.Partitions {
			assigned[mt.Name] = mt.Replicas
		}
	}
	var orphans, strays []plog.TopicPartition
	for _, tp := range mgr.Partitions() {
		t, ok := registered[tp.Topic]
		switch {
		case !ok || tp.Partition >= t.npart:
			orphans = append(orphans, tp)
		case pl != nil && assigned[tp.Topic] != nil && !slices.Contains(assigned[tp.Topic][tp.Partition], pl.ID()):
			strays = append(strays, tp)
		}
	}
	if len(orphans) > 0 {
		logger.Warn("deleting partitions of unregistered topics", "partitions", len(orphans), "first", orphans[0].String())
	}
	if len(strays) > 0 {
		logger.Warn("deleting stray replicas: partitions no longer assigned to this broker", "partitions", len(strays), "first", strays[0].String())
	}
	if all := append(orphans, strays...); len(all) > 0 {
		if err := mgr.DeleteMany(all); err != nil {
			return fmt.Errorf("%w: delete orphan partitions: %v", ErrStorage, err)
		}
	}
	return nil
}

// metaErr maps a metadata store error to the server's sentinels.
func metaErr(err error) error {
	if errors.Is(err, metadata.ErrCorrupt) {
		return fmt.Errorf("%w: %w", ErrCorruptMeta, err)
	}
	return fmt.Errorf("%w: %w", ErrStorage, err)
}

// openPartitions opens (creating if needed) partitions 0..n-1 of t.
func (r *registry) openPartitions(t *topic, n int32) error {
	tps := make([]plog.TopicPartition, n)
	for p := range tps {
		tps[p] = plog.TopicPartition{Topic: t.name, Partition: int32(p)}
	}
	lc := logConfig(t.cfg)
	lc.ProducerIDExpiration = producerIDExpiration(r.broker)
	logs, err := r.mgr.OpenMany(tps, lc)
	t.parts = make([]*partition, 0, n)
	for i, l := range logs {
		if l != nil {
			t.parts = append(t.parts, &partition{tp: tps[i], log: l})
		}
	}
	t.npart = int32(len(t.parts))
	if err != nil {
		return fmt.Errorf("%w: open partitions of %s: %v", ErrStorage, t.name, err)
	}
	for _, p := range t.parts {
		if r.replicated {
			break // the leader's Manager moves it once the ISR has the records
		}
		// Single node: everything in the log is committed.
		if l := p.log; l.HighWatermark() < l.LogEndOffset() {
			if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
				return fmt.Errorf("%w: set high watermark %s: %v", ErrStorage, p.tp, err)
			}
		}
	}
	return nil
}

// logConfig converts a topic's configuration into the partition log's.
func logConfig(t config.Topic) plog.Config {
	c := plog.DefaultConfig()
	c.SegmentBytes = t.SegmentBytes
	c.SegmentMs = time.Duration(t.SegmentMs) * time.Millisecond
	c.IndexIntervalBytes = int(t.IndexIntervalBytes)
	c.SegmentIndexBytes = int(t.SegmentIndexBytes)
	c.RetentionMs = time.Duration(t.RetentionMs) * time.Millisecond
	if t.RetentionMs < 0 {
		c.RetentionMs = -1
	}
	c.RetentionBytes = t.RetentionBytes
	if t.RetentionBytes < 0 {
		c.RetentionBytes = -1
	}
	c.Compact = strings.Contains(t.CleanupPolicy, "compact")
	c.DeleteRetention = max(time.Duration(t.DeleteRetentionMs)*time.Millisecond, time.Millisecond)
	if t.CleanupPolicy == "compact" {
		// A compact-only topic is never trimmed by time or size (Kafka's rule).
		c.RetentionMs, c.RetentionBytes = -1, -1
	}
	c.FlushMessages = 0
	if !config.PageCacheFlush(t.FlushMessages) {
		c.FlushMessages = t.FlushMessages
	}
	c.FlushMs = 0
	if !config.PageCacheFlush(t.FlushMs) {
		c.FlushMs = time.Duration(t.FlushMs) * time.Millisecond
	}
	c.MaxMessageBytes = int(t.MaxMessageBytes)
	if t.MessageTimestampType == "LogAppendTime" {
		c.TimestampType = plog.LogAppendTime
	} else {
		c.TimestampType = plog.CreateTime
	}
	return c
}

// get returns a published topic.
func (r *registry) get(name string) (*topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.topics[name]
	return t, ok
}

// byID returns a published topic by its id.
func (r *registry) byID(id [16]byte) (*topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, t := range r.topics {
		if t.id == id {
			return t, true
		}
	}
	return nil, false
}

// list returns the published topics sorted by name.
func (r *registry) list() []*topic {
	r.mu.RLock()
	out := make([]*topic, 0, len(r.topics))
	for _, t := range r.topics {
		out = append(out, t)
	}
	r.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

// getOrAutoCreate returns the topic, creating it with num.partitions when
// auto-creation is allowed. The error code is 0 or a Kafka error code.
func (r *registry) getOrAutoCreate(name string, allow bool) (*topic, int16) {
	if t, ok := r.get(name); ok {
		return t, 0
	}
	if !allow || !r.broker.AutoCreateTopics {
		return nil, kerr.UnknownTopicOrPartition.Code
	}
	if topicname.Check(name) != nil {
		return nil, kerr.InvalidTopicException.Code
	}
	t, code, _ := r.create(name, r.broker.NumPartitions, nil, nil, false)
	if code == kerr.TopicAlreadyExists.Code {
		if t, ok := r.get(name); ok {
			return t, 0
		}
		// Still being created (or deleted) by another request: retriable.
		return nil, kerr.LeaderNotAvailable.Code
	}
	if code == 0 {
		r.logger.Info("auto-created topic", "topic", name, "partitions", r.broker.NumPartitions)
	}
	return t, code
}

// reserve checks that name is free and marks it busy. It returns a Kafka
// error code and message.
func (r *registry) reserveLocked(name string) (int16, string) {
	if _, ok := r.topics[name]; ok || r.busy[name] {
		return kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %q already exists", name)
	}
	for other := range r.topics {
		if topicname.Collides(other, name) {
			return kerr.InvalidTopicException.Code, fmt.Sprintf("topic %q collides with existing topic %q ('.' and '_' are interchangeable in metric names)", name, other)
		}
	}
	for other := range r.busy {
		if topicname.Collides(other, name) {
			return kerr.InvalidTopicException.Code, fmt.Sprintf("topic %q collides with topic %q, being created or deleted", name, other)
		}
	}
	return 0, ""
}

// create registers a topic and opens its partitions. validateOnly checks
// without creating. replicas is the cluster's assignment (nil: the cluster
// Store assigns with default.replication.factor; ignored on a single
// node). It returns a Kafka error code and a message. In cluster mode no
// partition is opened here: each replica opens when its state arrives.
func (r *registry) create(name string, partitions int32, replicas [][]int32, overrides map[string]string, validateOnly bool) (*topic, int16, string) {
	if topicname.Check(name) != nil {
		return nil, kerr.InvalidTopicException.Code, fmt.Sprintf("topic name %q is not legal: use 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'", name)
	}
	if partitions < 1 || partitions > metadata.MaxPartitions {
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d out of range 1..%d", partitions, metadata.MaxPartitions)
	}
	r.mu.Lock()
	if code, msg := r.reserveLocked(name); code != 0 {
		r.mu.Unlock()
		return nil, code, msg
	}
	t := &topic{name: name, id: metadata.NewTopicID(), overrides: overrides, cfg: r.broker.ResolveTopic(overrides), npart: partitions}
	if r.placement == nil {
		replicas = nil
	}
	if validateOnly {
		r.mu.Unlock()
		return t, 0, ""
	}
	r.busy[name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.busy, name)
		r.mu.Unlock()
	}()

	// Register first, then create: a crash in between leaves a registered
	// topic whose missing partitions are created on the next start.
	if err := r.store.CreateTopic(metadata.Topic{Name: name, ID: t.id, Partitions: partitions, Configs: overrides, Replicas: replicas}); err != nil {
		code := kerr.KafkaStorageError.Code
		switch {
		case errors.Is(err, metadata.ErrTopicExists):
			code = kerr.TopicAlreadyExists.Code
		case errors.Is(err, cluster.ErrInvalid):
			code = kerr.InvalidReplicationFactor.Code
		}
		return nil, code, err.Error()
	}
	if r.placement != nil {
		r.mu.Lock()
		r.topics[name] = t
		r.mu.Unlock()
		return t, 0, ""
	}
	if err := r.openPartitions(t, partitions); err != nil {
		r.logger.Error("create topic", "topic", name, "err", err)
		// Unregister, then remove what was created; what a failure here
		// leaves is removed at the next start.
		if derr := r.store.DeleteTopic(name); derr == nil {
			tps := make([]plog.TopicPartition, partitions)
			for p := range tps {
				tps[p] = plog.TopicPartition{Topic: name, Partition: int32(p)}
			}
			_ = r.mgr.DeleteMany(tps)
		}
		return nil, kerr.KafkaStorageError.Code, err.Error()
	}
	r.mu.Lock()
	r.topics[name] = t
	r.mu.Unlock()
	return t, 0, ""
}

// delete unregisters a topic and removes its partitions.
func (r *registry) delete(name string) (int16, string) {
	r.mu.Lock()
	t, ok := r.topics[name]
	if !ok || r.busy[name] {
		r.mu.Unlock()
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	delete(r.topics, name) // no new request finds it from here on
	r.busy[name] = true
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.busy, name)
		r.mu.Unlock()
	}()
	if err := r.store.DeleteTopic(name); err != nil {
		r.mu.Lock()
		r.topics[name] = t
		r.mu.Unlock()
		return kerr.KafkaStorageError.Code, err.Error()
	}
	tps := make([]plog.TopicPartition, len(t.parts))
	for i, p := range t.parts {
		tps[i] = p.tp
	}
	if err := r.mgr.DeleteMany(tps); err != nil {
		r.logger.Error("delete partitions (removed at the next start)", "topic", name, "err", err)
	}
	r.metrics.forgetTopic(name)
	return 0, ""
}
