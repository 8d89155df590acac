package workload

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/internal/history"
)

// Acks is the producer's acknowledgement level.
type Acks int

// The acknowledgement levels.
const (
	AcksAll    Acks = iota // acks=all: the in-sync replicas have it
	AcksLeader             // acks=1: the leader has it
)

// ProducerConfig configures a Producer.
type ProducerConfig struct {
	// Bootstrap lists the seed brokers.
	Bootstrap []string
	// Topic is produced to; it must exist.
	Topic string
	// Partitions: values go round-robin to partitions [0, Partitions)
	// (default 1).
	Partitions int32
	// Process is the history's process id of this producer.
	Process int
	// Prefix starts every value ("<prefix>-<n>"); it must be unique among
	// the run's producers (default "p<Process>").
	Prefix string
	// Acks is the acknowledgement level (acks=1 implies not idempotent:
	// Kafka's idempotence needs acks=all).
	Acks Acks
	// Idempotent turns on the idempotent producer.
	Idempotent bool
	// Timeout bounds one produce, retries included (default 10 s); past
	// it the outcome is unknown.
	Timeout time.Duration
	// Encode, if set, turns a value into the record's bytes (a JSON
	// document carrying it, say); the history keeps the value. A reader
	// of such records decodes them back (FinalReadDecoded).
	Encode func(value string) []byte
	// Options are extra franz-go options.
	Options []kgo.Opt
}

// Producer produces unique values one at a time, recording each with
// the producer's idempotence and the Produce requests that carried it.
type Producer struct {
	cfg        ProducerConfig
	rec        *history.Recorder
	cl         *kgo.Client
	n          int
	idempotent bool
	sent       *produceWrites
}

// produceWrites counts the Produce requests a client wrote to a broker
// (kgo.HookBrokerWrite). A Producer has one record in flight at a time,
// so the requests written while it produces a value are that value's
// sends: the first and every retry the client made of it.
type produceWrites struct{ n atomic.Int64 }

var _ kgo.HookBrokerWrite = (*produceWrites)(nil)

// OnBrokerWrite counts a Produce request any of whose bytes were written:
// the broker may have read and appended it.
func (w *produceWrites) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, written int, _, _ time.Duration, _ error) {
	if key == kmsg.Produce.Int16() && written > 0 {
		w.n.Add(1)
	}
}

// NewProducer connects a producer; Close releases it.
func NewProducer(rec *history.Recorder, cfg ProducerConfig) (*Producer, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.Prefix == "" {
		cfg.Prefix = fmt.Sprintf("p%d", cfg.Process)
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	sent := &produceWrites{}
	opts := []kgo.Opt{kgo.SeedBrokers(cfg.Bootstrap...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.RecordDeliveryTimeout(cfg.Timeout), kgo.ProducerLinger(0), kgo.WithHooks(sent)}
	switch {
	case cfg.Acks == AcksLeader:
		opts = append(opts, kgo.RequiredAcks(kgo.LeaderAck()), kgo.DisableIdempotentWrite())
	case !cfg.Idempotent:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()), kgo.DisableIdempotentWrite())
	default:
		opts = append(opts, kgo.RequiredAcks(kgo.AllISRAcks()))
	}
	cl, err := kgo.NewClient(append(opts, cfg.Options...)...)
	if err != nil {
		return nil, fmt.Errorf("workload: producer: %w", err)
	}
	return &Producer{cfg: cfg, rec: rec, cl: cl, sent: sent, idempotent: cfg.Acks == AcksAll && cfg.Idempotent}, nil
}

// Close closes the client.
func (p *Producer) Close() { p.cl.Close() }

// Produce sends the next value and records the produce.
func (p *Producer) Produce(ctx context.Context) history.Op {
	v := fmt.Sprintf("%s-%d", p.cfg.Prefix, p.n)
	part := int32(p.n) % p.cfg.Partitions
	p.n++
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	inv := p.rec.Invoke(p.cfg.Process, history.Produce)
	raw := []byte(v)
	if p.cfg.Encode != nil {
		raw = p.cfg.Encode(v)
	}
	r := &kgo.Record{Topic: p.cfg.Topic, Partition: part, Value: raw}
	before := p.sent.n.Load()
	err := p.cl.ProduceSync(ctx, r).FirstErr()
	op := history.Op{Outcome: history.OK, Topic: p.cfg.Topic, Partition: part, Offset: r.Offset, Value: v,
		Idempotent: p.idempotent, Attempts: int(p.sent.n.Load() - before)}
	if err != nil {
		op.Outcome, op.Offset, op.Error = ProduceOutcome(err), -1, err.Error()
	}
	return inv.Complete(op)
}

// Run produces n values (n <= 0: until ctx ends), one at a time.
func (p *Producer) Run(ctx context.Context, n int) {
	for i := 0; (n <= 0 || i < n) && ctx.Err() == nil; i++ {
		p.Produce(ctx)
	}
}

// ProduceOutcome classifies a produce error: fail for the refusals that
// mean the record never landed, unknown for the rest.
func ProduceOutcome(err error) history.Outcome {
	for _, refused := range []error{kerr.MessageTooLarge, kerr.RecordListTooLarge, kerr.InvalidRecord,
		kerr.TopicAuthorizationFailed, kerr.InvalidTopicException} {
		if errors.Is(err, refused) {
			return history.Fail
		}
	}
	return history.Unknown
}
