package server

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
)

// offsetsStorage is the group coordinator's view of the registry: the
// partitions of __consumer_offsets and the existence of committed
// partitions. It takes registry.mu and partition.mu; the coordinator calls
// it under its own lock (lock order: Coordinator.mu -> registry.mu ->
// partition.mu).
type offsetsStorage struct {
	reg        *registry
	partitions int32 // partitions of a newly created offsets topic
}

var _ group.Storage = offsetsStorage{}

func (st offsetsStorage) OffsetsPartitions(create bool) (int32, error) {
	if t, ok := st.reg.get(group.OffsetsTopic); ok {
		return t.npart, nil
	}
	if !create {
		return 0, nil
	}
	overrides := map[string]string{"cleanup.policy": "compact", "segment.bytes": strconv.Itoa(100 << 20)}
	replicas, err := st.reg.internalReplicas(st.partitions)
	if err != nil {
		return 0, fmt.Errorf("%w: assign %s: %v", ErrStorage, group.OffsetsTopic, err)
	}
	t, code, msg := st.reg.create(group.OffsetsTopic, st.partitions, replicas, overrides, false)
	if code == kerr.TopicAlreadyExists.Code {
		if t, ok := st.reg.get(group.OffsetsTopic); ok {
			return t.npart, nil
		}
	}
	if code != 0 {
		return 0, fmt.Errorf("%w: create %s: %s", ErrStorage, group.OffsetsTopic, msg)
	}
	st.reg.logger.Info("created the offsets topic", "topic", group.OffsetsTopic, "partitions", t.npart)
	return t.npart, nil
}

func (st offsetsStorage) partition(p int32) (*partition, error) {
	t, ok := st.reg.get(group.OffsetsTopic)
	if !ok || t.partition(p) == nil {
		return nil, fmt.Errorf("%w: %s-%d does not exist here", ErrStorage, group.OffsetsTopic, p)
	}
	return t.partition(p), nil
}

func (st offsetsStorage) Append(p int32, batch []byte) error {
	part, err := st.partition(p)
	if err != nil {
		return err
	}
	part.mu.Lock()
	defer part.mu.Unlock()
	if _, err := part.log.Append(batch, plog.AppendOptions{AssignOffsets: true}); err != nil {
		if errors.Is(err, plog.ErrBatchTooLarge) {
			return fmt.Errorf("%w: %w", group.ErrRecordTooLarge, err)
		}
		return err
	}
	return part.log.SetHighWatermark(part.log.LogEndOffset())
}

func (st offsetsStorage) Read(p int32, from int64, maxBytes int) ([]byte, error) {
	part, err := st.partition(p)
	if err != nil {
		return nil, err
	}
	from = max(from, part.log.LogStartOffset())
	r, err := part.log.Read(from, maxBytes, part.log.HighWatermark())
	if errors.Is(err, plog.ErrOffsetOutOfRange) && from >= part.log.LogEndOffset() {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return r.Bytes()
}

// MaxBatchBytes is the offsets topic's max.message.bytes (its first
// partition's: AlterConfigs sets every partition alike).
func (st offsetsStorage) MaxBatchBytes() int {
	part, err := st.partition(0)
	if err != nil {
		return 0
	}
	return part.log.Config().MaxMessageBytes
}

func (st offsetsStorage) PartitionExists(topic string, p int32) bool {
	t, ok := st.reg.get(topic)
	return ok && t.hasPartition(p)
}
