package server

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/config"
	plog "github.com/sluicehq/sluice/broker/log"
)

const registryFile = "topics.json"

// partition is one served partition: its log, and the mutex that keeps
// append + high-watermark update atomic.
type partition struct {
	tp  plog.TopicPartition
	log *plog.Log
	mu  sync.Mutex // serialises Append and SetHighWatermark
}

// topic is a registered topic. Its fields never change after registration
// except by replacing the *topic in the registry.
type topic struct {
	name      string
	id        [16]byte
	overrides map[string]string
	cfg       config.Topic
	parts     []*partition
}

// registry is the set of topics, persisted in topics.json.
type registry struct {
	store   MetaStore
	mgr     *plog.Manager
	broker  config.Broker
	logger  *slog.Logger
	metrics *metrics

	mu     sync.RWMutex // guards topics and the registry file
	topics map[string]*topic
}

type registryFileV1 struct {
	Version int             `json:"version"`
	Topics  []registryTopic `json:"topics"`
}

type registryTopic struct {
	Name       string            `json:"name"`
	ID         string            `json:"id"`
	Partitions int32             `json:"partitions"`
	Configs    map[string]string `json:"configs,omitempty"`
}

// openRegistry loads topics.json, opens every registered partition and
// deletes partition directories of topics that are no longer registered
// (a DeleteTopics interrupted after the registry was written).
func openRegistry(store MetaStore, mgr *plog.Manager, b config.Broker, logger *slog.Logger, m *metrics) (*registry, error) {
	r := &registry{store: store, mgr: mgr, broker: b, logger: logger, metrics: m, topics: map[string]*topic{}}
	data, err := store.ReadFile(registryFile)
	fileExists := true
	switch {
	case isNotExist(err):
		fileExists = false
	case err != nil:
		return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, registryFile, err)
	}
	var f registryFileV1
	if fileExists {
		if err := json.Unmarshal(data, &f); err != nil {
			return nil, fmt.Errorf("%w: %s: %v (restore it from a backup or remove it to adopt the partition directories found)", ErrCorruptMeta, registryFile, err)
		}
		if f.Version != 1 {
			return nil, fmt.Errorf("%w: %s: version %d not understood", ErrCorruptMeta, registryFile, f.Version)
		}
	}
	onDisk := map[string]int32{}
	for _, tp := range mgr.Partitions() {
		if tp.Partition+1 > onDisk[tp.Topic] {
			onDisk[tp.Topic] = tp.Partition + 1
		}
	}
	if !fileExists && len(onDisk) > 0 {
		// No registry but data: adopt what is on disk rather than lose it.
		for name, n := range onDisk {
			f.Topics = append(f.Topics, registryTopic{Name: name, ID: hex.EncodeToString(newTopicID()), Partitions: n})
			logger.Warn("adopting partition directories without a registry entry", "topic", name, "partitions", n)
		}
	}
	for _, rt := range f.Topics {
		id, err := hex.DecodeString(rt.ID)
		if err != nil || len(id) != 16 || rt.Partitions < 1 {
			return nil, fmt.Errorf("%w: %s: topic %q has a bad id or partition count", ErrCorruptMeta, registryFile, rt.Name)
		}
		t := &topic{name: rt.Name, overrides: rt.Configs, cfg: b.ResolveTopic(rt.Configs)}
		copy(t.id[:], id)
		if err := r.openPartitions(t, rt.Partitions); err != nil {
			return nil, err
		}
		r.topics[t.name] = t
	}
	if fileExists {
		for _, tp := range mgr.Partitions() {
			if t, ok := r.topics[tp.Topic]; ok && int(tp.Partition) < len(t.parts) {
				continue
			}
			logger.Warn("deleting partition of an unregistered topic", "topic", tp.Topic, "partition", tp.Partition)
			if err := mgr.Delete(tp); err != nil {
				return nil, fmt.Errorf("%w: delete orphan %s-%d: %v", ErrStorage, tp.Topic, tp.Partition, err)
			}
		}
	} else if len(f.Topics) > 0 {
		if err := r.persistLocked(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

func (r *registry) openPartitions(t *topic, n int32) error {
	lc := logConfig(t.cfg)
	lc.ProducerIDExpiration = producerIDExpiration(r.broker)
	for p := int32(0); p < n; p++ {
		tp := plog.TopicPartition{Topic: t.name, Partition: p}
		l, err := r.mgr.Open(tp, lc)
		if err != nil {
			return fmt.Errorf("%w: open %s-%d: %v", ErrStorage, t.name, p, err)
		}
		// Single node: everything in the log is committed.
		if l.HighWatermark() < l.LogEndOffset() {
			if err := l.SetHighWatermark(l.LogEndOffset()); err != nil {
				return fmt.Errorf("%w: set high watermark %s-%d: %v", ErrStorage, t.name, p, err)
			}
		}
		t.parts = append(t.parts, &partition{tp: tp, log: l})
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
	if t.RetentionMs < 0 {
		c.RetentionMs = -1
	} else {
		c.RetentionMs = time.Duration(t.RetentionMs) * time.Millisecond
	}
	c.RetentionBytes = t.RetentionBytes
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

// persistLocked writes topics.json. Callers hold r.mu for writing (or own r
// exclusively).
func (r *registry) persistLocked() error {
	f := registryFileV1{Version: 1}
	for _, t := range r.topics {
		f.Topics = append(f.Topics, registryTopic{Name: t.name, ID: hex.EncodeToString(t.id[:]), Partitions: int32(len(t.parts)), Configs: t.overrides})
	}
	sort.Slice(f.Topics, func(i, j int) bool { return f.Topics[i].Name < f.Topics[j].Name })
	data, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return fmt.Errorf("%w: encode registry: %v", ErrStorage, err)
	}
	return r.store.WriteFileAtomic(registryFile, data)
}

// get returns a registered topic.
func (r *registry) get(name string) (*topic, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	t, ok := r.topics[name]
	return t, ok
}

// byID returns a registered topic by its id.
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

// list returns the registered topics sorted by name.
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
	if code := validTopicName(name); code != 0 {
		return nil, code
	}
	t, code, _ := r.create(name, r.broker.NumPartitions, nil, false)
	if code == kerr.TopicAlreadyExists.Code {
		if t, ok := r.get(name); ok {
			return t, 0
		}
	}
	if code == 0 {
		r.logger.Info("auto-created topic", "topic", name, "partitions", r.broker.NumPartitions)
	}
	return t, code
}

// create registers a topic and opens its partitions. validateOnly checks
// without creating. It returns a Kafka error code and a message.
func (r *registry) create(name string, partitions int32, overrides map[string]string, validateOnly bool) (*topic, int16, string) {
	if code := validTopicName(name); code != 0 {
		return nil, code, fmt.Sprintf("topic name %q is not legal: use 1-249 characters of [a-zA-Z0-9._-], not '.' or '..'", name)
	}
	if partitions < 1 || partitions > 1<<16 {
		return nil, kerr.InvalidPartitions.Code, fmt.Sprintf("partition count %d out of range 1..65536", partitions)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.topics[name]; ok {
		return nil, kerr.TopicAlreadyExists.Code, fmt.Sprintf("topic %q already exists", name)
	}
	for other := range r.topics {
		if collides(other, name) {
			return nil, kerr.InvalidTopicException.Code, fmt.Sprintf("topic %q collides with existing topic %q ('.' and '_' are interchangeable in metric names)", name, other)
		}
	}
	t := &topic{name: name, overrides: overrides, cfg: r.broker.ResolveTopic(overrides)}
	copy(t.id[:], newTopicID())
	if validateOnly {
		return t, 0, ""
	}
	// Register first, then create: a crash in between leaves a registered
	// topic whose missing partitions are created on the next open.
	t.parts = make([]*partition, partitions) // placeholder for persistLocked's count
	r.topics[name] = t
	if err := r.persistLocked(); err != nil {
		delete(r.topics, name)
		return nil, kerr.KafkaStorageError.Code, err.Error()
	}
	t.parts = nil
	if err := r.openPartitions(t, partitions); err != nil {
		r.logger.Error("create topic", "topic", name, "err", err)
		for _, p := range t.parts {
			_ = r.mgr.Delete(p.tp)
		}
		delete(r.topics, name)
		_ = r.persistLocked()
		return nil, kerr.KafkaStorageError.Code, err.Error()
	}
	return t, 0, ""
}

// delete unregisters a topic and removes its partitions.
func (r *registry) delete(name string) (int16, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	t, ok := r.topics[name]
	if !ok {
		return kerr.UnknownTopicOrPartition.Code, fmt.Sprintf("topic %q does not exist", name)
	}
	delete(r.topics, name)
	if err := r.persistLocked(); err != nil {
		r.topics[name] = t
		return kerr.KafkaStorageError.Code, err.Error()
	}
	for _, p := range t.parts {
		if err := r.mgr.Delete(p.tp); err != nil {
			r.logger.Error("delete partition (removed on next start)", "topic", name, "partition", p.tp.Partition, "err", err)
		}
	}
	r.metrics.forgetTopic(name)
	return 0, ""
}

// validTopicName applies Kafka's topic-name rules.
func validTopicName(name string) int16 {
	if name == "" || name == "." || name == ".." || len(name) > 249 || !utf8.ValidString(name) {
		return kerr.InvalidTopicException.Code
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return kerr.InvalidTopicException.Code
		}
	}
	return 0
}

func collides(a, b string) bool {
	if a == b {
		return false
	}
	norm := func(s string) string {
		out := []byte(s)
		for i := range out {
			if out[i] == '.' {
				out[i] = '_'
			}
		}
		return string(out)
	}
	return norm(a) == norm(b)
}

func newTopicID() []byte {
	id := make([]byte, 16)
	_, _ = rand.Read(id)
	id[6] = id[6]&0x0f | 0x40
	id[8] = id[8]&0x3f | 0x80
	return id
}
