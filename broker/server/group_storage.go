package server

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/replica"
)

// internalTopic is a coordinator's compacted internal topic
// (__consumer_offsets, __transaction_state) in the registry: created on
// first use, appended to by the coordinator only, read back at start. It
// takes registry.mu and partition.mu.
type internalTopic struct {
	reg        *registry
	name       string
	partitions int32 // partitions of a newly created topic
}

func (it internalTopic) ensure(create bool) (int32, error) {
	if t, ok := it.reg.get(it.name); ok {
		return t.npart, nil
	}
	if !create {
		return 0, nil
	}
	overrides := map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(100 << 20)}
	replicas, err := it.reg.internalReplicas(it.partitions)
	if err != nil {
		return 0, fmt.Errorf("%w: assign %s: %v", ErrStorage, it.name, err)
	}
	t, code, msg := it.reg.create(it.name, it.partitions, replicas, overrides, false)
	if code == kerr.TopicAlreadyExists.Code {
		if t, ok := it.reg.get(it.name); ok {
			return t.npart, nil
		}
	}
	if code != 0 {
		return 0, fmt.Errorf("%w: create %s: %s", ErrStorage, it.name, msg)
	}
	it.reg.logger.Info("created an internal topic", "topic", it.name, "partitions", t.npart)
	return t.npart, nil
}

func (it internalTopic) partition(p int32) (*partition, error) {
	t, ok := it.reg.get(it.name)
	if !ok || t.partition(p) == nil {
		return nil, fmt.Errorf("%w: %s-%d does not exist here", ErrStorage, it.name, p)
	}
	return t.partition(p), nil
}

// coordinatorCommitTimeout bounds how long a coordinator's append waits
// for its replication in cluster mode (Kafka's offsets.commit.timeout.ms).
const coordinatorCommitTimeout = 5 * time.Second

// append appends one batch of the coordinator's (transactional ones
// admitted, plog.CoordinatorAppend) and commits it. On a single node the
// append is committed at once. In cluster mode it is a replicated append
// as leader, waited for as acks=all is (the internal topic's
// min.insync.replicas, at most coordinatorCommitTimeout): a coordinator
// answers a commit only once the ISR holds it, so a new leader of the
// partition (the next coordinator) has it. A failure is a *kerr.Error
// mapped as Kafka's group coordinator maps a produce's (see
// coordinatorAppendError); the records may still be in the log.
func (it internalTopic) append(p int32, batch []byte) error {
	part, err := it.partition(p)
	if err != nil {
		return err
	}
	if m := it.reg.coordinatorRepl.Load(); m != nil {
		return it.appendReplicated(m, part, batch)
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	if _, err := part.log.Append(batch, plog.CoordinatorAppend(batch)); err != nil {
		return err
	}
	return part.log.SetHighWatermark(part.log.LogEndOffset())
}

func (it internalTopic) appendReplicated(m *replica.Manager, part *partition, batch []byte) error {
	wait, err := it.stageReplicated(m, part, batch)
	if err != nil {
		return err
	}
	return wait()
}

// stageReplicated appends batch as the partition's leader and returns the
// wait for the ISR to hold it (at most coordinatorCommitTimeout). An
// offsets partition's append goes only in the leader epoch its groups were
// loaded in (registry.groupEpochs): NOT_COORDINATOR otherwise.
func (it internalTopic) stageReplicated(m *replica.Manager, part *partition, batch []byte) (wait func() error, err error) {
	epoch := int32(-1) // any: the transaction coordinator's topic
	if it.name == group.OffsetsTopic {
		e, ok := it.reg.groupEpochs.Load(part.tp.Partition)
		if !ok {
			return nil, coordinatorAppendError(it.name, part.tp.Partition, kerr.NotLeaderForPartition.Code)
		}
		epoch = e.(int32)
	}
	part.mu.Lock()
	res, code, err := m.AppendLeaderInEpoch(it.name, part.tp.Partition, epoch, -1, batch, plog.CoordinatorAppend(batch))
	part.mu.Unlock()
	if code != 0 {
		return nil, coordinatorAppendError(it.name, part.tp.Partition, code)
	}
	if err != nil {
		return nil, err
	}
	return func() error {
		code := m.WaitAppended(context.Background(), it.name, part.tp.Partition, res.Epoch, res.LastOffset, coordinatorCommitTimeout)
		if code != 0 {
			return coordinatorAppendError(it.name, part.tp.Partition, code)
		}
		return nil
	}, nil
}

// appendStaged is append whose commitment is waited for by the caller (a
// nil wait: committed already, on a single node).
func (it internalTopic) appendStaged(p int32, batch []byte) (wait func() error, err error) {
	m := it.reg.coordinatorRepl.Load()
	if m == nil {
		return nil, it.append(p, batch)
	}
	part, err := it.partition(p)
	if err != nil {
		return nil, err
	}
	return it.stageReplicated(m, part, batch)
}

// coordinatorAppendError maps the code of a failed replicated append to
// the one the coordinator's client gets, as Kafka's GroupMetadataManager
// does: NOT_LEADER_OR_FOLLOWER (and KAFKA_STORAGE_ERROR) become
// NOT_COORDINATOR (the client looks the coordinator up again);
// NOT_ENOUGH_REPLICAS, NOT_ENOUGH_REPLICAS_AFTER_APPEND and
// UNKNOWN_TOPIC_OR_PARTITION become COORDINATOR_NOT_AVAILABLE;
// REQUEST_TIMED_OUT stays.
func coordinatorAppendError(topic string, p int32, code int16) error {
	mapped := kerr.ErrorForCode(code)
	switch code {
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		mapped = kerr.NotCoordinator
	case kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.UnknownTopicOrPartition.Code:
		mapped = kerr.CoordinatorNotAvailable
	}
	return fmt.Errorf("%w: replicated append to %s-%d: %v", mapped, topic, p, kerr.ErrorForCode(code))
}

func (it internalTopic) read(p int32, from int64, maxBytes int) ([]byte, error) {
	part, err := it.partition(p)
	if err != nil {
		return nil, err
	}
	from = max(from, part.log.LogStartOffset())
	// A coordinator loads its partition when it becomes the leader, up to
	// the log end as Kafka does: a new leader's high watermark may still be
	// behind what the old one committed (followers learn it from the next
	// fetch answer), and its followers truncate to its log, so what it
	// holds is what the partition will hold (if it loses the leadership
	// first, the next leader loads the partition again). On a single node
	// the two are equal.
	bound := part.log.HighWatermark()
	if it.reg.coordinatorRepl.Load() != nil {
		bound = part.log.LogEndOffset()
	}
	r, err := part.log.Read(from, maxBytes, bound)
	if errors.Is(err, plog.ErrOffsetOutOfRange) && from >= part.log.LogEndOffset() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Bytes()
}

// maxBatchBytes is the topic's max.message.bytes (its first partition's:
// AlterConfigs sets every partition alike); 0 before it exists.
func (it internalTopic) maxBatchBytes() int {
	part, err := it.partition(0)
	if err != nil {
		return 0
	}
	return part.log.Config().MaxMessageBytes
}

// offsetsStorage is the group coordinator's view of the registry: the
// partitions of __consumer_offsets and the existence of committed
// partitions. The coordinator calls it under its own lock (lock order:
// Coordinator.mu -> registry.mu -> partition.mu).
type offsetsStorage struct {
	reg        *registry
	partitions int32 // partitions of a newly created offsets topic
}

var _ group.Storage = offsetsStorage{}

func (st offsetsStorage) topic() internalTopic {
	return internalTopic{reg: st.reg, name: group.OffsetsTopic, partitions: st.partitions}
}

func (st offsetsStorage) OffsetsPartitions(create bool) (int32, error) {
	return st.topic().ensure(create)
}

func (st offsetsStorage) Append(p int32, batch []byte) error {
	if err := st.topic().append(p, batch); err != nil {
		if errors.Is(err, plog.ErrBatchTooLarge) {
			return fmt.Errorf("%w: %w", group.ErrRecordTooLarge, err)
		}
		return err
	}
	return nil
}

var _ group.StagedStorage = offsetsStorage{}

// AppendStaged is Append whose replication (cluster mode) the coordinator
// waits for without its lock.
func (st offsetsStorage) AppendStaged(p int32, batch []byte) (func() error, error) {
	wait, err := st.topic().appendStaged(p, batch)
	if errors.Is(err, plog.ErrBatchTooLarge) {
		return nil, fmt.Errorf("%w: %w", group.ErrRecordTooLarge, err)
	}
	return wait, err
}

func (st offsetsStorage) Read(p int32, from int64, maxBytes int) ([]byte, error) {
	return st.topic().read(p, from, maxBytes)
}

func (st offsetsStorage) MaxBatchBytes() int { return st.topic().maxBatchBytes() }

func (st offsetsStorage) PartitionExists(topic string, p int32) bool {
	t, ok := st.reg.get(topic)
	return ok && t.hasPartition(p)
}
