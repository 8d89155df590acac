package workload

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/history"
)

// TxnProducerConfig configures a TxnProducer.
type TxnProducerConfig struct {
	Bootstrap []string
	// Topic is produced to; it must exist.
	Topic string
	// Partitions: a transaction writes to partitions of [0, Partitions)
	// (default 1).
	Partitions int32
	// Process is the history's process id; values are "t<Process>-<n>".
	Process int
	// TransactionalID is the producer's transactional.id (default
	// "chaos-txn-<Process>").
	TransactionalID string
	// MaxRecords bounds the values of one transaction: 1 to MaxRecords
	// (default 4), each to the next partition in turn.
	MaxRecords int
	// AbortEvery: every AbortEvery-th transaction is aborted on purpose
	// (0: none).
	AbortEvery int
	// Timeout bounds one transaction, EndTxn included (default 10 s).
	Timeout time.Duration
	// Seed seeds the sizes of the transactions.
	Seed int64
	// Options are extra franz-go options.
	Options []kgo.Opt
}

// TxnProducer runs transactions of unique values one at a time, recording
// each as a txn op (history.TxnCheck says what its outcomes mean).
type TxnProducer struct {
	cfg TxnProducerConfig
	rec *history.Recorder
	rng *rand.Rand
	cl  *kgo.Client
	n   int // values made
	txn int // transactions begun
}

// NewTxnProducer makes a transactional producer; Close releases it.
func NewTxnProducer(rec *history.Recorder, cfg TxnProducerConfig) (*TxnProducer, error) {
	if cfg.Partitions <= 0 {
		cfg.Partitions = 1
	}
	if cfg.TransactionalID == "" {
		cfg.TransactionalID = fmt.Sprintf("chaos-txn-%d", cfg.Process)
	}
	if cfg.MaxRecords <= 0 {
		cfg.MaxRecords = 4
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	p := &TxnProducer{cfg: cfg, rec: rec, rng: rand.New(rand.NewSource(cfg.Seed))}
	return p, p.connect()
}

func (p *TxnProducer) connect() error {
	opts := []kgo.Opt{kgo.SeedBrokers(p.cfg.Bootstrap...), kgo.TransactionalID(p.cfg.TransactionalID),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RecordDeliveryTimeout(p.cfg.Timeout), kgo.ProducerLinger(0)}
	cl, err := kgo.NewClient(append(opts, p.cfg.Options...)...)
	if err != nil {
		return fmt.Errorf("workload: transactional producer: %w", err)
	}
	p.cl = cl
	return nil
}

// Close closes the client (an open transaction is left to the coordinator
// to abort when it times out or the id is used again).
func (p *TxnProducer) Close() {
	if p.cl != nil {
		p.cl.Close()
	}
}

// Transaction runs one transaction and records it: begin, 1 to MaxRecords
// produces, then commit, or abort when it is one to abort or a produce
// failed. After any error the client is replaced by a new one with the same
// transactional id, whose InitProducerId fences the old epoch and has the
// coordinator abort what it left open.
func (p *TxnProducer) Transaction(ctx context.Context) history.Op {
	p.txn++
	abort := p.cfg.AbortEvery > 0 && p.txn%p.cfg.AbortEvery == 0
	k := 1 + p.rng.Intn(p.cfg.MaxRecords)
	ctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
	defer cancel()
	inv := p.rec.Invoke(p.cfg.Process, history.Txn)
	op := history.Op{Topic: p.cfg.Topic}
	var err error
	if p.cl == nil {
		err = p.connect()
	}
	if err == nil {
		err = p.cl.BeginTransaction()
	}
	if err != nil {
		// nothing was produced: nothing can be committed
		op.Outcome, op.Error = history.Fail, err.Error()
		p.reset()
		return inv.Complete(op)
	}
	var rs []*kgo.Record
	for i := 0; i < k; i++ {
		v := fmt.Sprintf("t%d-%d", p.cfg.Process, p.n)
		r := &kgo.Record{Topic: p.cfg.Topic, Partition: int32(p.n) % p.cfg.Partitions, Value: []byte(v), Offset: -1}
		p.n++
		rs = append(rs, r)
		op.Records = append(op.Records, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: -1, Value: v})
	}
	err = p.cl.ProduceSync(ctx, rs...).FirstErr()
	for i, r := range rs {
		if err == nil {
			op.Records[i].Offset = r.Offset
		}
	}
	switch {
	case err != nil || abort:
		// commit is never sent: the transaction can only end aborted
		op.Outcome = history.Fail
		if err != nil {
			op.Error = "produce: " + err.Error()
		}
		if aerr := p.cl.EndTransaction(ctx, kgo.TryAbort); aerr != nil || err != nil {
			if aerr != nil {
				op.Error += "; abort: " + aerr.Error()
			}
			p.reset()
		}
	default:
		if cerr := p.cl.EndTransaction(ctx, kgo.TryCommit); cerr != nil {
			op.Outcome, op.Error = history.Unknown, "commit: "+cerr.Error()
			if errors.Is(cerr, context.Canceled) && ctx.Err() == nil {
				op.Error += " (canceled)"
			}
			p.reset()
		} else {
			op.Outcome = history.OK
		}
	}
	return inv.Complete(op)
}

// reset drops the client; the next transaction connects anew.
func (p *TxnProducer) reset() {
	p.cl.Close()
	p.cl = nil
}

// FinalReadIsolated reads every partition of topic with isolation level
// iso after the faults, recording one final-read. With read_committed it
// first waits (bounded by ctx) until no transaction is open, every
// partition's last stable offset at its high watermark, so that every
// transaction is decided and its markers written; its Ranges are then
// [log start, high watermark). Control records are kept by the client so
// the read knows where each partition ends (they are not recorded).
func FinalReadIsolated(ctx context.Context, rec *history.Recorder, process int, bootstrap []string, topic string, iso kgo.IsolationLevel) (history.Op, error) {
	inv := rec.Invoke(process, history.FinalRead)
	fail := func(err error) (history.Op, error) {
		err = fmt.Errorf("workload: final read of %s: %w", topic, err)
		return inv.Complete(history.Op{Outcome: history.Fail, Error: err.Error()}), err
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...))
	if err != nil {
		return fail(err)
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	var starts, ends kadm.ListedOffsets
	for {
		if starts, err = adm.ListStartOffsets(ctx, topic); err == nil {
			err = starts.Error()
		}
		if err == nil {
			if ends, err = adm.ListEndOffsets(ctx, topic); err == nil {
				err = ends.Error()
			}
		}
		var stable kadm.ListedOffsets
		if err == nil {
			if stable, err = adm.ListCommittedOffsets(ctx, topic); err == nil {
				err = stable.Error()
			}
		}
		open := false
		if err == nil {
			ends.Each(func(e kadm.ListedOffset) {
				if s, ok := stable.Lookup(topic, e.Partition); !ok || s.Offset != e.Offset {
					open = true
				}
			})
			if !open || iso != kgo.ReadCommitted() {
				break
			}
			err = errors.New("a transaction is still open (last stable offset below the high watermark)")
		}
		select {
		case <-ctx.Done():
			return fail(fmt.Errorf("%w (last: %v)", ctx.Err(), err))
		case <-time.After(250 * time.Millisecond): // the broker coming back, the coordinator finishing
		}
	}
	var ranges []history.Range
	offs := map[int32]kgo.Offset{}
	left := map[int32]int64{} // partition → the last offset still to read
	ends.Each(func(e kadm.ListedOffset) {
		s, _ := starts.Lookup(topic, e.Partition)
		ranges = append(ranges, history.Range{Topic: topic, Partition: e.Partition, Start: s.Offset, End: e.Offset})
		if e.Offset > s.Offset {
			offs[e.Partition] = kgo.NewOffset().At(s.Offset)
			left[e.Partition] = e.Offset - 1
		}
	})
	var recs []history.Record
	if len(offs) > 0 {
		rd, err := kgo.NewClient(kgo.SeedBrokers(bootstrap...), kgo.FetchMaxWait(200*time.Millisecond),
			kgo.FetchIsolationLevel(iso), kgo.KeepControlRecords(),
			kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: offs}))
		if err != nil {
			return fail(err)
		}
		defer rd.Close()
		for len(left) > 0 {
			fs := rd.PollFetches(ctx)
			if ctx.Err() != nil {
				return fail(fmt.Errorf("%w with %d partitions unread to their end", ctx.Err(), len(left)))
			}
			fs.EachRecord(func(r *kgo.Record) {
				last, ok := left[r.Partition]
				if !ok || r.Offset > last {
					return
				}
				if !r.Attrs.IsControl() {
					recs = append(recs, history.Record{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Value: string(r.Value)})
				}
				if r.Offset == last {
					delete(left, r.Partition)
				}
			})
		}
	}
	return inv.Complete(history.Op{Outcome: history.OK, Records: recs, Ranges: ranges}), nil
}
