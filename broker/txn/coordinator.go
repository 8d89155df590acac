package txn

import (
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
	"github.com/sluicehq/sluice/broker/internal/recbatch"
	"github.com/sluicehq/sluice/internal/clock"
)

// Sentinel errors of the txn package.
var (
	// ErrStorage wraps a failure to read or append StateTopic, or to write a marker.
	ErrStorage = errors.New("txn: storage")
	// ErrCorruptState is a record of StateTopic that cannot be parsed.
	ErrCorruptState = errors.New("txn: corrupt state record")
	// ErrPartitionGone is what Markers.WriteMarker wraps when the partition
	// no longer exists (its topic was deleted): the marker is skipped.
	ErrPartitionGone = errors.New("txn: partition does not exist")
	// ErrNotCoordinator: this broker does not own the id's partition of StateTopic.
	ErrNotCoordinator = errors.New("txn: not the coordinator")
	// ErrRecordTooLarge: the transaction's record does not fit one batch of StateTopic.
	ErrRecordTooLarge = errors.New("txn: state record too large")
)

// MaxTransactionalIDBytes bounds a transactional id (Kafka's string limit
// before flexible versions).
const MaxTransactionalIDBytes = 32767

// TopicPartition names one partition of a transaction.
type TopicPartition struct {
	Topic     string
	Partition int32
}

// StateLog is what the coordinator needs of StateTopic. Implementations are
// safe for concurrent use and never call back into the coordinator.
type StateLog interface {
	// Partitions returns the partition count of StateTopic; when it does not
	// exist it is created (compacted, with Options.StatePartitions
	// partitions) if create is true, else 0 is returned.
	Partitions(create bool) (int32, error)
	// Append appends one batch to a partition; after a nil return it is
	// durable as the log's flush policy makes it, and readable.
	Append(partition int32, batch []byte) error
	// Read returns whole batches of a partition from the one holding offset
	// from, up to about maxBytes (at least one batch); nothing at the end.
	Read(partition int32, from int64, maxBytes int) ([]byte, error)
	// MaxBatchBytes is the largest batch Append takes (0: unknown).
	MaxBatchBytes() int
}

// Markers writes transaction markers to the partitions of transactions.
type Markers interface {
	// WriteMarker appends the COMMIT (commit) or ABORT marker of producer
	// producerID at epoch to tp. An error wrapping ErrPartitionGone means
	// the partition no longer exists; the marker is then not needed.
	WriteMarker(tp TopicPartition, producerID int64, epoch int16, commit bool, coordinatorEpoch int32) error
	// PartitionExists reports whether tp exists (AddPartitionsToTxn).
	PartitionExists(tp TopicPartition) bool
}

// Ownership answers whether this broker coordinates the transactional ids
// of a partition of StateTopic, and at which coordinator epoch (the
// partition's leader epoch in a cluster).
type Ownership interface {
	Owns(partition int32) (coordinatorEpoch int32, ok bool)
}

// SingleNode owns every partition at coordinator epoch 0.
type SingleNode struct{}

// Owns implements Ownership.
func (SingleNode) Owns(int32) (int32, bool) { return 0, true }

// Options configure a Coordinator. Zero fields take Kafka's defaults.
type Options struct {
	StateLog  StateLog
	Markers   Markers
	Ownership Ownership // nil = SingleNode{}
	// AllocateProducerID returns a producer id never handed out before.
	AllocateProducerID func() (int64, error)
	Clock              clock.Clock  // nil = clock.Real; tests pass a clock.Manual and call Tick
	Logger             *slog.Logger // nil = slog.Default()

	StatePartitions   int32         // transaction.state.log.num.partitions (50)
	MaxTimeout        time.Duration // transaction.max.timeout.ms (15 min)
	MaxPartitions     int           // transaction.max.partitions (sluice: 10,000)
	MaxTransactionIDs int           // transaction.max.ids (sluice: 100,000)
}

func (o *Options) defaults() {
	o.Clock = clock.OrReal(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.Ownership == nil {
		o.Ownership = SingleNode{}
	}
	if o.StatePartitions <= 0 {
		o.StatePartitions = 50
	}
	if o.MaxTimeout <= 0 {
		o.MaxTimeout = 15 * time.Minute
	}
	if o.MaxPartitions <= 0 {
		o.MaxPartitions = 10000
	}
	if o.MaxTransactionIDs <= 0 {
		o.MaxTransactionIDs = 100000
	}
}

// snapshot is a transaction's persisted state (one StateTopic record) plus
// the previous epoch, which only memory keeps (as in Kafka).
type snapshot struct {
	producerID, lastProducerID int64
	epoch, lastEpoch           int16
	timeoutMs                  int32
	state                      kmsg.TransactionState
	partitions                 map[TopicPartition]struct{}
	startMs, updateMs          int64 // startMs -1: no transaction begun
}

func (s snapshot) clone() snapshot {
	c := s
	c.partitions = make(map[TopicPartition]struct{}, len(s.partitions))
	for tp := range s.partitions {
		c.partitions[tp] = struct{}{}
	}
	return c
}

func (s *snapshot) sortedPartitions() []TopicPartition {
	out := make([]TopicPartition, 0, len(s.partitions))
	for tp := range s.partitions {
		out = append(out, tp)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Topic != out[j].Topic {
			return out[i].Topic < out[j].Topic
		}
		return out[i].Partition < out[j].Partition
	})
	return out
}

// transaction is one transactional id.
type transaction struct {
	id        string
	partition int32 // of StateTopic

	mu sync.Mutex // guards snapshot; held over a whole operation
	snapshot
}

// Coordinator is the transaction coordinator of a broker. All methods are
// safe for concurrent use.
type Coordinator struct {
	opts   Options
	clock  clock.Clock
	logger *slog.Logger

	mu         sync.Mutex // guards the fields below (never held while a transaction's lock is taken)
	txns       map[string]*transaction
	partitions int32 // of StateTopic; 0 until it exists

	timedOut atomic.Int64 // transactions aborted for their timeout
}

// New replays the owned partitions of StateTopic (if it exists), completes
// the transactions found half ended, and returns the coordinator.
func New(opts Options) (*Coordinator, error) {
	opts.defaults()
	if opts.StateLog == nil || opts.Markers == nil || opts.AllocateProducerID == nil {
		return nil, fmt.Errorf("txn: Options.StateLog, Markers and AllocateProducerID are required")
	}
	c := &Coordinator{opts: opts, clock: opts.Clock, logger: opts.Logger, txns: map[string]*transaction{}}
	n, err := opts.StateLog.Partitions(false)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStorage, StateTopic, err)
	}
	c.partitions = n
	for p := int32(0); p < n; p++ {
		if _, ok := opts.Ownership.Owns(p); !ok {
			continue
		}
		if err := c.Load(p); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// Load replays partition p of StateTopic (this broker became its leader)
// and completes its transactions left in PrepareCommit or PrepareAbort.
func (c *Coordinator) Load(p int32) error {
	loaded := map[string]*transaction{}
	var from int64
	for {
		b, err := c.opts.StateLog.Read(p, from, 1<<20)
		if err != nil {
			return fmt.Errorf("%w: read %s-%d at %d: %w", ErrStorage, StateTopic, p, from, err)
		}
		if len(b) == 0 {
			break
		}
		next, corrupt := recbatch.Walk(b, from, recbatch.Visitor{Record: func(_ recbatch.Batch, off int64, r recbatch.Record) error {
			id, s, ok, err := decodeRecord(r)
			switch {
			case err != nil:
				c.logger.Warn("skipping an unreadable record of the transaction state topic", "partition", p, "offset", off, "err", err)
			case !ok:
				delete(loaded, id)
			default:
				loaded[id] = &transaction{id: id, partition: p, snapshot: s}
			}
			return nil
		}})
		if corrupt != nil {
			c.logger.Warn("skipping an unreadable batch of the transaction state topic", "partition", p, "err", corrupt)
		}
		if next <= from {
			break
		}
		from = next
	}
	c.mu.Lock()
	for id, t := range loaded {
		c.txns[id] = t
	}
	c.mu.Unlock()
	for _, t := range loaded {
		t.mu.Lock()
		switch t.state {
		case kmsg.TransactionStatePrepareCommit, kmsg.TransactionStatePrepareAbort:
			c.logger.Info("completing a transaction found half ended", "transactional_id", t.id, "state", t.state.String(), "partitions", len(t.partitions))
			if err := c.completeLocked(t); err != nil {
				c.logger.Warn("completing a transaction failed; retried later", "transactional_id", t.id, "err", err)
			}
		case kmsg.TransactionStatePrepareEpochFence:
			if err := c.abortLocked(t, false); err != nil {
				c.logger.Warn("aborting a fenced transaction failed; retried later", "transactional_id", t.id, "err", err)
			}
		}
		t.mu.Unlock()
	}
	return nil
}

// Unload forgets the transactions of partition p of StateTopic (this
// broker is no longer its leader).
func (c *Coordinator) Unload(p int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for id, t := range c.txns {
		if t.partition == p {
			delete(c.txns, id)
		}
	}
}

// statePartitions returns the partition count of StateTopic, creating it.
func (c *Coordinator) statePartitionsLocked() (int32, error) {
	if c.partitions > 0 {
		return c.partitions, nil
	}
	n, err := c.opts.StateLog.Partitions(true)
	if err != nil {
		return 0, fmt.Errorf("%w: create %s: %w", ErrStorage, StateTopic, err)
	}
	if n <= 0 {
		return 0, fmt.Errorf("%w: %s has no partitions", ErrStorage, StateTopic)
	}
	c.partitions = n
	return n, nil
}

// EnsureStateTopic creates StateTopic if needed (FindCoordinator for a
// transaction key does, as Kafka does) and returns the id's partition.
func (c *Coordinator) EnsureStateTopic(id string) (int32, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, err := c.statePartitionsLocked()
	if err != nil {
		return -1, err
	}
	return group.PartitionFor(id, n), nil
}

// lookup returns id's transaction; with create, a new one (producer id -1)
// if none is held. It fails with ErrNotCoordinator if the id's partition is
// not owned here.
func (c *Coordinator) lookup(id string, create bool) (*transaction, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.txns[id]; t != nil {
		if _, ok := c.opts.Ownership.Owns(t.partition); !ok {
			return nil, ErrNotCoordinator
		}
		return t, nil
	}
	if !create {
		return nil, nil
	}
	n, err := c.statePartitionsLocked()
	if err != nil {
		return nil, err
	}
	p := group.PartitionFor(id, n)
	if _, ok := c.opts.Ownership.Owns(p); !ok {
		return nil, ErrNotCoordinator
	}
	if len(c.txns) >= c.opts.MaxTransactionIDs {
		return nil, errTooManyIDs
	}
	t := &transaction{id: id, partition: p, snapshot: snapshot{producerID: -1, lastProducerID: -1, epoch: -1, lastEpoch: -1,
		state: kmsg.TransactionStateEmpty, partitions: map[TopicPartition]struct{}{}, startMs: -1}}
	c.txns[id] = t
	return t, nil
}

var errTooManyIDs = errors.New("txn: transaction.max.ids transactional ids are held")

// forgetNew drops a transaction created by lookup whose first record could
// not be written.
func (c *Coordinator) forgetNew(t *transaction) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.txns[t.id] == t {
		delete(c.txns, t.id)
	}
}

// writeLocked writes next as t's record and, once it is appended, makes it
// t's state. t.mu is held.
func (c *Coordinator) writeLocked(t *transaction, next snapshot) error {
	if _, ok := c.opts.Ownership.Owns(t.partition); !ok {
		return ErrNotCoordinator
	}
	next.updateMs = c.clock.Now().UnixMilli()
	batch := recbatch.Encode([]recbatch.Record{{Key: stateKey(t.id), Value: next.value()}}, next.updateMs, recbatch.NoProducer)
	if limit := c.opts.StateLog.MaxBatchBytes(); limit > 0 && len(batch) > limit {
		return fmt.Errorf("%w: %d bytes for %q (%d partitions), max.message.bytes of %s is %d", ErrRecordTooLarge, len(batch), t.id, len(next.partitions), StateTopic, limit)
	}
	if err := c.opts.StateLog.Append(t.partition, batch); err != nil {
		return fmt.Errorf("%w: append to %s-%d: %w", ErrStorage, StateTopic, t.partition, err)
	}
	t.snapshot = next
	return nil
}

// all returns the held transactions (a copy of the map's values).
func (c *Coordinator) all() []*transaction {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*transaction, 0, len(c.txns))
	for _, t := range c.txns {
		out = append(out, t)
	}
	return out
}
