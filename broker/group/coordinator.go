package group

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
	"github.com/sluicehq/sluice/internal/clock"
)

// Sentinel errors of the group package.
var (
	// ErrStorage wraps a failure to read or append the offsets topic.
	ErrStorage = errors.New("group: storage")
	// ErrCorruptOffsets is a record of the offsets topic that cannot be parsed.
	ErrCorruptOffsets = errors.New("group: corrupt offsets record")
	// ErrRecordTooLarge is a batch larger than the offsets topic accepts
	// (its max.message.bytes). Storage.Append wraps it.
	ErrRecordTooLarge = errors.New("group: record batch too large for the offsets topic")
)

// OffsetsTopic is the name of the internal compacted topic holding
// committed offsets and group metadata.
const OffsetsTopic = "__consumer_offsets"

// Storage is what the coordinator needs from the broker: the partitions of
// the offsets topic. Implementations must be safe for concurrent use; the
// coordinator calls them while holding its own lock and they must never call
// back into it.
type Storage interface {
	// OffsetsPartitions returns the partition count of OffsetsTopic. When the
	// topic does not exist it is created (cleanup.policy=compact) with
	// Options.OffsetsPartitions partitions if create is true; otherwise 0 is
	// returned.
	OffsetsPartitions(create bool) (int32, error)
	// Append appends one RecordBatch v2 to a partition of OffsetsTopic; the
	// log assigns the offsets. After a nil return the records are readable
	// (in a cluster: replicated to the ISR). An error wrapping a *kerr.Error
	// is answered with its code (NOT_COORDINATOR, REQUEST_TIMED_OUT, ...).
	Append(partition int32, batch []byte) error
	// Read returns whole record batches of a partition of OffsetsTopic,
	// starting with the one holding offset from, up to about maxBytes (at
	// least one batch); nothing at the end of the log.
	Read(partition int32, from int64, maxBytes int) ([]byte, error)
	// PartitionExists reports whether the topic has that partition.
	PartitionExists(topic string, partition int32) bool
	// MaxBatchBytes returns the largest batch Append accepts (the offsets
	// topic's max.message.bytes); 0 when unknown (the topic does not exist
	// yet). A larger batch's Append fails with an error wrapping
	// ErrRecordTooLarge.
	MaxBatchBytes() int
}

// StagedStorage is a Storage whose appends commit later (a cluster's
// replicated append): AppendStaged appends and returns wait, which blocks
// until the records are committed (nil) or returns the failure (wrapping a
// *kerr.Error for the client's code). In a Clustered coordinator an
// OffsetCommit calls wait without holding the coordinator's lock, so a
// slow ISR holds up only the committing group's commits; the group's
// commits stay in order.
type StagedStorage interface {
	AppendStaged(partition int32, batch []byte) (wait func() error, err error)
}

// Options configure a Coordinator. Zero fields take Kafka's defaults.
type Options struct {
	Storage Storage
	Clock   clock.Clock  // nil = clock.Real; tests pass a clock.Manual and call Tick
	Logger  *slog.Logger // nil = slog.Default()

	OffsetsPartitions      int32         // offsets.topic.num.partitions (50)
	MinSessionTimeout      time.Duration // group.min.session.timeout.ms (6 s)
	MaxSessionTimeout      time.Duration // group.max.session.timeout.ms (30 min)
	InitialRebalanceDelay  time.Duration // group.initial.rebalance.delay.ms (3 s); negative = none
	OffsetsRetention       time.Duration // offsets.retention.minutes (7 days)
	OffsetsRetentionCheck  time.Duration // offsets.retention.check.interval.ms (10 min)
	MaxGroupSize           int           // group.max.size (sluice: 10,000; Kafka: unbounded)
	OffsetMetadataMaxBytes int           // offset.metadata.max.bytes (4096)
	// MaxGroupMetadataBytes bounds one group's members: their ids, clients,
	// protocol metadata and assignments, as memory.go counts them
	// (group.max.metadata.bytes, sluice: 4 MiB).
	MaxGroupMetadataBytes int64
	// MaxCoordinatorBytes bounds what all groups hold together: members,
	// pending member ids, committed offsets and group ids
	// (group.coordinator.max.bytes, sluice: 256 MiB).
	MaxCoordinatorBytes int64
	// Clustered: New loads no partition; the server loads each offsets
	// partition when this broker becomes its leader (LoadPartition) and
	// drops it when it stops leading (DropPartition); see partitions.go.
	Clustered bool
}

func (o *Options) defaults() {
	o.Clock = clock.OrReal(o.Clock)
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	if o.OffsetsPartitions <= 0 {
		o.OffsetsPartitions = 50
	}
	if o.MinSessionTimeout <= 0 {
		o.MinSessionTimeout = 6 * time.Second
	}
	if o.MaxSessionTimeout <= 0 {
		o.MaxSessionTimeout = 30 * time.Minute
	}
	if o.InitialRebalanceDelay == 0 {
		o.InitialRebalanceDelay = 3 * time.Second
	} else if o.InitialRebalanceDelay < 0 {
		o.InitialRebalanceDelay = 0
	}
	if o.OffsetsRetention <= 0 {
		o.OffsetsRetention = 7 * 24 * time.Hour
	}
	if o.OffsetsRetentionCheck <= 0 {
		o.OffsetsRetentionCheck = 10 * time.Minute
	}
	if o.MaxGroupSize <= 0 {
		o.MaxGroupSize = 10000
	}
	if o.OffsetMetadataMaxBytes <= 0 {
		o.OffsetMetadataMaxBytes = 4096
	}
	if o.MaxGroupMetadataBytes <= 0 {
		o.MaxGroupMetadataBytes = 4 << 20
	}
	if o.MaxCoordinatorBytes <= 0 {
		o.MaxCoordinatorBytes = 256 << 20
	}
}

// Coordinator is the group coordinator of a single broker: it owns every
// group (each maps to one partition of OffsetsTopic by hash, all served
// here). All methods are safe for concurrent use.
type Coordinator struct {
	opts   Options
	clock  clock.Clock
	logger *slog.Logger

	mu sync.Mutex // guards the fields below and every group and member
	// groups by id.
	groups map[string]*group
	// partitions of OffsetsTopic; 0 until the topic exists.
	partitions int32
	// lastExpiry is when offsets were last checked for expiry.
	lastExpiry time.Time
	// timers and expiries queue the groups that have something due
	// (schedule.go).
	timers, expiries deadlineQueue
	// mem counts the bytes all groups hold (memory.go).
	mem memory
	// pending holds the offsets of open transactions (TxnOffsetCommit),
	// by producer id, then group (txn_offsets.go).
	pending map[int64]map[string]map[topicPartition]committed
	// committing marks a group with a staged commit waiting for its
	// storage (StagedStorage); its channel is closed when it is applied.
	committing map[string]chan struct{}
	// loads counts the loads and drops of each offsets partition: a
	// staged commit whose partition was dropped or loaded again meanwhile
	// is not applied (this broker's view of the group is gone).
	loads map[int32]uint64

	generations atomic.Int64 // generations formed (rebalances completed), for metrics
	commits     atomic.Int64 // offsets committed, for metrics
	tickVisits  atomic.Int64 // groups Tick looked at (timers and expiries), for metrics and tests
}

// Stats is a snapshot of the coordinator for metrics.
type Stats struct {
	Groups      map[State]int // groups per state
	Members     int           // members of all groups
	Generations int64         // generations formed since start
	Commits     int64         // offsets committed since start
	// Bytes is what all groups hold, as bounded by Options.MaxCoordinatorBytes.
	Bytes int64
	// TickVisits counts the groups Tick has looked at since start: a group
	// is looked at when one of its deadlines or its offsets' expiry is due,
	// never merely because it exists.
	TickVisits int64
}

// Stats returns the current counts.
func (c *Coordinator) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := Stats{Groups: map[State]int{}, Generations: c.generations.Load(), Commits: c.commits.Load(),
		Bytes: c.mem.used, TickVisits: c.tickVisits.Load()}
	for _, g := range c.groups {
		st.Groups[g.state]++
		st.Members += len(g.members)
	}
	return st
}

// New loads the committed offsets and group metadata from OffsetsTopic (if
// it exists) and returns the coordinator.
func New(opts Options) (*Coordinator, error) {
	opts.defaults()
	if opts.Storage == nil {
		return nil, fmt.Errorf("group: Options.Storage is required")
	}
	c := &Coordinator{opts: opts, clock: opts.Clock, logger: opts.Logger, groups: map[string]*group{}, pending: map[int64]map[string]map[topicPartition]committed{},
		committing: map[string]chan struct{}{}, loads: map[int32]uint64{},
		timers:   deadlineQueue{slot: func(g *group) *queueSlot { return &g.timer }},
		expiries: deadlineQueue{slot: func(g *group) *queueSlot { return &g.expiry }}}
	c.lastExpiry = c.clock.Now()
	n, err := opts.Storage.OffsetsPartitions(false)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrStorage, OffsetsTopic, err)
	}
	c.partitions = n
	for p := int32(0); p < n && !opts.Clustered; p++ {
		if err := c.load(p); err != nil {
			return nil, err
		}
	}
	now := c.clock.Now()
	for _, g := range c.sortedGroups() {
		c.reschedule(g, now)
	}
	return c, nil
}

// load replays one partition of the offsets topic into the groups.
func (c *Coordinator) load(p int32) error {
	now := c.clock.Now()
	var from int64
	for {
		b, err := c.opts.Storage.Read(p, from, 1<<20)
		if err != nil {
			return fmt.Errorf("%w: read %s-%d at %d: %w", ErrStorage, OffsetsTopic, p, from, err)
		}
		if len(b) == 0 {
			return nil
		}
		next, err := walkBatches(b, from, func(bt recbatch.Batch, off int64, r record) error {
			replay := c.replay
			if bt.Transactional && bt.ProducerID >= 0 {
				replay = func(p int32, r record, now time.Time) error { return c.replayPending(p, bt.ProducerID, r, now) }
			}
			if err := replay(p, r, now); err != nil {
				// A record sluice cannot read is skipped, not fatal: the
				// broker must start whatever the log holds.
				c.logger.Warn("skipping an unreadable record of the offsets topic", "partition", p, "offset", off, "err", err)
			}
			return nil
		}, func(bt recbatch.Batch, commit bool) { c.completeTxnLocked(p, bt.ProducerID, commit) })
		if err != nil {
			c.logger.Warn("skipping the rest of an unreadable batch of the offsets topic", "partition", p, "err", err)
		}
		if next <= from {
			return nil
		}
		from = next
	}
}

// replay applies one record of partition p.
func (c *Coordinator) replay(p int32, r record, now time.Time) error {
	if len(r.key) < 2 {
		return fmt.Errorf("%w: key of %d bytes in %s-%d", ErrCorruptOffsets, len(r.key), OffsetsTopic, p)
	}
	switch version := int16(r.key[0])<<8 | int16(r.key[1]); version {
	case 0, keyOffsetCommit:
		var k kmsg.OffsetCommitKey
		if err := k.ReadFrom(r.key); err != nil {
			return fmt.Errorf("%w: offset key in %s-%d: %v", ErrCorruptOffsets, OffsetsTopic, p, err)
		}
		tp := topicPartition{k.Topic, k.Partition}
		if r.value == nil {
			if g := c.groups[k.Group]; g != nil {
				g.dropOffset(tp)
				c.dropIfUnused(g)
			}
			return nil
		}
		var v kmsg.OffsetCommitValue
		if err := v.ReadFrom(r.value); err != nil {
			return fmt.Errorf("%w: offset value in %s-%d: %v", ErrCorruptOffsets, OffsetsTopic, p, err)
		}
		g := c.groupOrNew(k.Group, now)
		g.setOffset(tp, committed{offset: v.Offset, leaderEpoch: v.LeaderEpoch, metadata: v.Metadata, commitMs: v.CommitTimestamp})
	case keyGroupMetadata:
		var k kmsg.GroupMetadataKey
		if err := k.ReadFrom(r.key); err != nil {
			return fmt.Errorf("%w: group key in %s-%d: %v", ErrCorruptOffsets, OffsetsTopic, p, err)
		}
		if r.value == nil {
			if g := c.groups[k.Group]; g != nil {
				g.resetMembership()
				c.dropIfUnused(g)
			}
			return nil
		}
		var v kmsg.GroupMetadataValue
		if err := v.ReadFrom(r.value); err != nil {
			return fmt.Errorf("%w: group value in %s-%d: %v", ErrCorruptOffsets, OffsetsTopic, p, err)
		}
		c.groupOrNew(k.Group, now).restore(&v, now)
	default:
		c.logger.Warn("skipping a record of unknown key version in the offsets topic", "partition", p, "version", version)
	}
	return nil
}

// Tick runs what time decides: join phases whose wait is over, members whose
// session expired, syncs that never came, and (every
// offsets.retention.check.interval.ms) the expiry of offsets of empty
// groups. It looks only at the groups that have something due
// (schedule.go), so its cost at rest does not grow with the number of
// groups. The broker calls it a few times a second; tests call it after
// advancing their clock.
func (c *Coordinator) Tick() {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	// Each due group is looked at once per Tick, even if it comes due
	// again at once.
	for _, g := range c.timers.popDue(now) {
		c.tickVisits.Add(1)
		c.tickGroup(g, now)
		c.reschedule(g, now)
	}
	if now.Sub(c.lastExpiry) >= c.opts.OffsetsRetentionCheck {
		c.lastExpiry = now
		c.expireOffsetsLocked(now)
	}
}

func (c *Coordinator) sortedGroups() []*group {
	out := make([]*group, 0, len(c.groups))
	for _, g := range c.groups {
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].id < out[j].id })
	return out
}

// groupOrNew returns the group, creating it Empty.
func (c *Coordinator) groupOrNew(id string, now time.Time) *group {
	g := c.groups[id]
	if g == nil {
		g = newGroup(id, now, &c.mem)
		c.groups[id] = g
	}
	return g
}

// dropIfUnused forgets an Empty group without offsets or expected members.
func (c *Coordinator) dropIfUnused(g *group) {
	if g.state == StateEmpty && len(g.members) == 0 && len(g.offsets) == 0 && len(g.pending) == 0 {
		c.forget(g)
	}
}

// ensurePartitions creates the offsets topic on first use.
func (c *Coordinator) ensurePartitions() error {
	if c.partitions > 0 {
		return nil
	}
	n, err := c.opts.Storage.OffsetsPartitions(true)
	if err != nil {
		return fmt.Errorf("%w: create %s: %w", ErrStorage, OffsetsTopic, err)
	}
	if n <= 0 {
		return fmt.Errorf("%w: %s has no partitions", ErrStorage, OffsetsTopic)
	}
	c.partitions = n
	return nil
}

// appendRecords writes records of group g to its offsets partition.
func (c *Coordinator) appendRecords(groupID string, recs []record) error {
	return c.appendRecordsAs(groupID, recs, recbatch.NoProducer)
}

// appendRecordsAs is appendRecords in a batch stamped with producer prod
// (a transactional producer's offsets, txn_offsets.go).
func (c *Coordinator) appendRecordsAs(groupID string, recs []record, prod recbatch.Producer) error {
	if len(recs) == 0 {
		return nil
	}
	if err := c.ensurePartitions(); err != nil {
		return err
	}
	batch := recbatch.Encode(toBatchRecords(recs), c.clock.Now().UnixMilli(), prod)
	p := partitionFor(groupID, c.partitions)
	if limit := c.opts.Storage.MaxBatchBytes(); limit > 0 && len(batch) > limit {
		return fmt.Errorf("%w: %d bytes for group %q, max.message.bytes of %s is %d", ErrRecordTooLarge, len(batch), groupID, OffsetsTopic, limit)
	}
	err := c.opts.Storage.Append(p, batch)
	if err != nil {
		// The topic may have been deleted by an administrator: recreate it
		// (same partition count, so groups keep their partitions) and retry.
		if n, qerr := c.opts.Storage.OffsetsPartitions(false); qerr == nil && n == 0 {
			c.logger.Warn("the offsets topic is gone; recreating it", "topic", OffsetsTopic)
			c.partitions = 0
			if err = c.ensurePartitions(); err == nil {
				p = partitionFor(groupID, c.partitions)
				err = c.opts.Storage.Append(p, batch)
			}
		}
	}
	if err != nil {
		return fmt.Errorf("%w: append to %s-%d: %w", ErrStorage, OffsetsTopic, p, err)
	}
	return nil
}

// appendTombstones writes records of group groupID in as many batches as
// the offsets topic's max.message.bytes needs (an expiry or a delete of a
// group with many offsets), in order. Each record stands alone, so a
// failure part way leaves records that a retry writes again, harmlessly.
func (c *Coordinator) appendTombstones(groupID string, recs []record) error {
	limit := c.opts.Storage.MaxBatchBytes()
	for len(recs) > 0 {
		n, size := 0, recordBatchOverhead
		for n < len(recs) && (n == 0 || limit <= 0 || size+len(recs[n].key)+len(recs[n].value)+recordOverhead <= limit) {
			size += len(recs[n].key) + len(recs[n].value) + recordOverhead
			n++
		}
		if err := c.appendRecords(groupID, recs[:n]); err != nil {
			return err
		}
		recs = recs[n:]
	}
	return nil
}

// EnsureOffsetsTopic creates the offsets topic if it does not exist yet
// (FindCoordinator does, as Kafka does).
func (c *Coordinator) EnsureOffsetsTopic() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ensurePartitions()
}

func newMemberID(prefix string) string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	if len(prefix) > 200 {
		prefix = prefix[:200]
	}
	return prefix + "-" + hex.EncodeToString(b[:4]) + "-" + hex.EncodeToString(b[4:6]) + "-" +
		hex.EncodeToString(b[6:8]) + "-" + hex.EncodeToString(b[8:10]) + "-" + hex.EncodeToString(b[10:])
}
