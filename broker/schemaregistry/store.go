package schemaregistry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// store keeps the state in step with the _schemas topic: one goroutine reads
// the topic from the start and applies each record; writers produce records
// and wait until that reader has applied them.
//
// Lock order: writeMu before mu. mu guards state and the reader's position;
// writeMu serializes this instance's writes (other instances race through
// the log, see state.register).
type store struct {
	topic   string
	logger  *slog.Logger
	metrics *metrics
	client  *kgo.Client // produces, and administers the topic
	reader  *kgo.Client // consumes partition 0 from the start
	admin   *kadm.Client

	hooks   hooks
	pending sync.Map // canonical text → parsedSchema of this instance's registrations in flight

	writeMu sync.Mutex

	mu       sync.RWMutex
	st       *state
	next     int64         // offset after the last record applied
	progress chan struct{} // closed and replaced when next advances
	readErr  error         // the reader's last fetch error, nil once it reads again
	cleaned  map[string]bool

	cancel context.CancelFunc
	done   chan struct{}
}

// openStore connects, creates the topic when missing (compacted, one
// partition), and starts the reader. It returns once the reader has applied
// every record that was in the topic when it started.
func openStore(ctx context.Context, opts Options, m *metrics) (*store, error) {
	base := append([]kgo.Opt{kgo.SeedBrokers(opts.Bootstrap...)}, opts.ClientOpts...)
	client, err := kgo.NewClient(append(base,
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(0),
	)...)
	if err != nil {
		return nil, fmt.Errorf("%w: connect to %v: %v", ErrStore, opts.Bootstrap, err)
	}
	s := &store{
		topic:    opts.Topic,
		logger:   opts.Logger,
		metrics:  m,
		client:   client,
		admin:    kadm.NewClient(client),
		st:       newState(),
		progress: make(chan struct{}),
		cleaned:  map[string]bool{},
		done:     make(chan struct{}),
		hooks:    opts.hooks,
	}
	if err := s.ensureTopic(ctx); err != nil {
		client.Close()
		return nil, err
	}
	end, err := s.endOffset(ctx)
	if err != nil {
		client.Close()
		return nil, err
	}
	s.reader, err = kgo.NewClient(append(base,
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{opts.Topic: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchMaxWait(time.Second),
	)...)
	if err != nil {
		client.Close()
		return nil, fmt.Errorf("%w: connect to %v: %v", ErrStore, opts.Bootstrap, err)
	}
	rctx, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	go s.read(rctx)
	if err := s.waitApplied(ctx, end); err != nil {
		s.close()
		return nil, fmt.Errorf("%w: reading topic %s up to offset %d: %v", ErrStore, s.topic, end, err)
	}
	s.logger.Info("schema registry caught up", "topic", s.topic, "records", end, "schemas", s.schemaCount())
	return s, nil
}

// ensureTopic creates the topic (cleanup.policy=compact, one partition) or
// checks that the existing one has a single partition: the registry's
// rules need one total order of records.
func (s *store) ensureTopic(ctx context.Context) error {
	compact := "compact"
	_, err := s.admin.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, s.topic)
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("%w: create topic %s (is a broker running at the bootstrap address?): %v", ErrStore, s.topic, err)
	}
	details, err := s.admin.ListTopics(ctx, s.topic)
	if err != nil {
		return fmt.Errorf("%w: describe topic %s: %v", ErrStore, s.topic, err)
	}
	d, ok := details[s.topic]
	if !ok || d.Err != nil {
		return fmt.Errorf("%w: describe topic %s: %v", ErrStore, s.topic, d.Err)
	}
	if n := len(d.Partitions); n != 1 {
		return fmt.Errorf("%w: %s has %d partitions; the registry needs exactly one (delete it or choose another --topic)", ErrTopic, s.topic, n)
	}
	// Time or size retention would drop schemas: refuse, as Confluent does.
	configs, err := s.admin.DescribeTopicConfigs(ctx, s.topic)
	if err != nil {
		return fmt.Errorf("%w: describe configs of %s: %v", ErrStore, s.topic, err)
	}
	rc, err := configs.On(s.topic, nil)
	if err != nil {
		return fmt.Errorf("%w: describe configs of %s: %v", ErrStore, s.topic, err)
	}
	for _, c := range rc.Configs {
		if c.Key == "cleanup.policy" && c.Value != nil && *c.Value != "compact" {
			return fmt.Errorf("%w: %s has cleanup.policy=%s, which would delete schemas; recreate it with cleanup.policy=compact or choose another --topic", ErrTopic, s.topic, *c.Value)
		}
	}
	return nil
}

// endOffset is the topic's current end: the offset the next record gets.
func (s *store) endOffset(ctx context.Context) (int64, error) {
	offs, err := s.admin.ListEndOffsets(ctx, s.topic)
	if err != nil {
		return 0, fmt.Errorf("%w: end offset of %s: %v", ErrStore, s.topic, err)
	}
	o, ok := offs.Lookup(s.topic, 0)
	if !ok {
		return 0, fmt.Errorf("%w: end offset of %s: partition 0 missing", ErrStore, s.topic)
	}
	if o.Err != nil {
		return 0, fmt.Errorf("%w: end offset of %s: %v", ErrStore, s.topic, o.Err)
	}
	return o.Offset, nil
}

// read applies the topic's records in order until ctx ends.
func (s *store) read(ctx context.Context) {
	defer close(s.done)
	for {
		fetches := s.reader.PollFetches(ctx)
		if ctx.Err() != nil {
			return
		}
		var fetchErr error
		fetches.EachError(func(topic string, p int32, err error) {
			if !errors.Is(err, context.Canceled) {
				fetchErr = err
			}
		})
		var hwm int64 = -1
		parsed := s.parseSchemas(fetches)
		s.mu.Lock()
		s.readErr = fetchErr
		fetches.EachPartition(func(p kgo.FetchTopicPartition) {
			hwm = max(hwm, p.HighWatermark)
			for _, r := range p.Records {
				s.applyLocked(r, parsed)
			}
		})
		if hwm >= 0 && s.next >= hwm {
			s.cleanupLocked()
		}
		s.mu.Unlock()
		if fetchErr != nil {
			s.logger.Warn("schema registry: reading the topic failed; retrying", "topic", s.topic, "err", fetchErr)
			select { // back off; kgo reconnects meanwhile
			case <-ctx.Done():
				return
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// parseSchemas parses the new schemas of fetched registration records
// before the reader takes mu: parsing a large schema takes a while (about
// 50 µs a field), and reads must not wait for it. A schema this instance
// is registering was parsed by its writer already.
func (s *store) parseSchemas(fetches kgo.Fetches) map[string]parsedSchema {
	var texts []string
	fetches.EachRecord(func(r *kgo.Record) {
		if r.Value == nil {
			return
		}
		if key, err := decodeKey(r.Key); err != nil || key.Type != keySchema {
			return
		}
		var v schemaValue
		if json.Unmarshal(r.Value, &v) == nil && v.Schema != "" {
			texts = append(texts, v.parseKey())
		}
	})
	if len(texts) == 0 {
		return nil
	}
	parsed := make(map[string]parsedSchema, len(texts))
	s.mu.RLock()
	for _, text := range texts {
		if id, ok := s.st.idByCanon[text]; ok && text == s.st.schemas[id].schema.canonical {
			parsed[text] = s.st.schemas[id].schema // plain Avro: key and text are one
		}
	}
	s.mu.RUnlock()
	for _, text := range texts {
		if _, ok := parsed[text]; ok {
			continue
		}
		if p, ok := s.pending.Load(text); ok {
			parsed[text] = p.(parsedSchema)
		} else if strings.Contains(text, "\x00") {
			continue // typed or with references: parsed in apply, against the state
		} else if ps, err := parseAvro(text); err == nil {
			parsed[text] = ps
		}
	}
	return parsed
}

func (s *store) applyLocked(r *kgo.Record, parsed map[string]parsedSchema) {
	if r.Offset < s.next {
		return
	}
	result := skipped
	if key, err := decodeKey(r.Key); err == nil {
		result = s.st.applyParsed(key, r.Value, parsed)
	} else {
		s.logger.Warn("schema registry: skipping a record it does not understand", "topic", s.topic, "offset", r.Offset, "err", err)
	}
	s.metrics.records.WithLabelValues(result.String()).Inc()
	s.metrics.schemas.Set(float64(len(s.st.schemas)))
	s.next = r.Offset + 1
	close(s.progress)
	s.progress = make(chan struct{})
}

// cleanupLocked writes a tombstone for each registration record that lost a
// race, so that compaction can never drop a winner and keep its loser. Every
// instance does it once caught up; duplicate tombstones are harmless.
func (s *store) cleanupLocked() {
	for nonce, key := range s.st.rejected {
		if s.cleaned[nonce] {
			continue
		}
		s.cleaned[nonce] = true
		k, _, err := logRecord{key: key}.encode()
		if err != nil {
			continue
		}
		s.client.Produce(context.Background(), &kgo.Record{Topic: s.topic, Partition: 0, Key: k}, func(_ *kgo.Record, err error) {
			if err != nil {
				s.logger.Warn("schema registry: tombstone for a losing registration failed", "nonce", nonce, "err", err)
				go func() { // the promise may run inside Produce, under mu
					s.mu.Lock()
					delete(s.cleaned, nonce)
					s.mu.Unlock()
				}()
			}
		})
	}
}

// waitApplied waits until the reader has applied every record below offset.
func (s *store) waitApplied(ctx context.Context, offset int64) error {
	for {
		s.mu.RLock()
		next, progress, readErr := s.next, s.progress, s.readErr
		s.mu.RUnlock()
		if next >= offset {
			return nil
		}
		select {
		case <-progress:
		case <-s.done:
			return ErrClosed
		case <-ctx.Done():
			if readErr != nil {
				return fmt.Errorf("%w (last read error: %v)", ctx.Err(), readErr)
			}
			return ctx.Err()
		}
	}
}

// sync waits until the reader has applied every record written before the
// call: afterwards reads see other instances' writes.
func (s *store) sync(ctx context.Context) error {
	end, err := s.endOffset(ctx)
	if err != nil {
		return err
	}
	return s.waitApplied(ctx, end)
}

// produce writes records in one batch, in order, and waits until the reader
// has applied them.
func (s *store) produce(ctx context.Context, records ...logRecord) error {
	krs := make([]*kgo.Record, 0, len(records))
	for _, r := range records {
		k, v, err := r.encode()
		if err != nil {
			return fmt.Errorf("%w: encode record: %v", ErrStore, err)
		}
		krs = append(krs, &kgo.Record{Topic: s.topic, Partition: 0, Key: k, Value: v})
	}
	results := s.client.ProduceSync(ctx, krs...)
	if err := results.FirstErr(); err != nil {
		return fmt.Errorf("%w: write to %s: %v", ErrStore, s.topic, err)
	}
	var last int64
	for _, r := range results {
		last = max(last, r.Record.Offset)
	}
	s.metrics.writes.Inc()
	return s.waitApplied(ctx, last+1)
}

// view runs fn with the state read-locked.
func (s *store) view(fn func(st *state)) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	fn(s.st)
}

func (s *store) schemaCount() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return len(s.st.schemas)
}

func (s *store) close() {
	if s.cancel != nil {
		s.cancel()
		<-s.done
	}
	if s.reader != nil {
		s.reader.Close()
	}
	s.client.Close()
}

func (r applyResult) String() string {
	switch r {
	case applied:
		return "applied"
	case rejected:
		return "rejected"
	default:
		return "skipped"
	}
}
