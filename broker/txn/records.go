package txn

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
)

// StateTopic is the internal compacted topic of the coordinator's state.
const StateTopic = "__transaction_state"

// valueVersion is the TxnMetadataValue version written (flexible, with the
// previous producer id as tag 0).
const valueVersion = 1

func stateKey(id string) []byte {
	k := kmsg.NewTxnMetadataKey()
	k.Version, k.TransactionalID = 0, id
	return k.AppendTo(nil)
}

// value encodes m's persisted fields.
func (m *snapshot) value() []byte {
	v := kmsg.NewTxnMetadataValue()
	v.Version = valueVersion
	v.ProducerID, v.ProducerEpoch, v.TimeoutMillis, v.State = m.producerID, m.epoch, m.timeoutMs, m.state
	v.LastUpdateTimestamp, v.StartTimestamp, v.PreviousProducerID = m.updateMs, m.startMs, m.lastProducerID
	byTopic := map[string][]int32{}
	for tp := range m.partitions {
		byTopic[tp.Topic] = append(byTopic[tp.Topic], tp.Partition)
	}
	topics := make([]string, 0, len(byTopic))
	for t := range byTopic {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	for _, t := range topics {
		ps := byTopic[t]
		sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
		vt := kmsg.NewTxnMetadataValueTopic()
		vt.Topic, vt.Partitions = t, ps
		v.Topics = append(v.Topics, vt)
	}
	return v.AppendTo(nil)
}

// decodeRecord reads one record of the state topic: the id and, unless it
// is a tombstone (ok false), the snapshot.
func decodeRecord(r recbatch.Record) (id string, s snapshot, ok bool, err error) {
	var k kmsg.TxnMetadataKey
	if err := k.ReadFrom(r.Key); err != nil {
		return "", snapshot{}, false, fmt.Errorf("%w: key: %v", ErrCorruptState, err)
	}
	if r.Value == nil {
		return k.TransactionalID, snapshot{}, false, nil
	}
	var v kmsg.TxnMetadataValue
	if err := v.ReadFrom(r.Value); err != nil {
		return "", snapshot{}, false, fmt.Errorf("%w: value of %q: %v", ErrCorruptState, k.TransactionalID, err)
	}
	s = snapshot{producerID: v.ProducerID, lastProducerID: v.PreviousProducerID, epoch: v.ProducerEpoch, lastEpoch: -1,
		timeoutMs: v.TimeoutMillis, state: v.State, updateMs: v.LastUpdateTimestamp, startMs: v.StartTimestamp,
		partitions: map[TopicPartition]struct{}{}}
	if v.Version == 0 {
		s.lastProducerID = -1
	}
	for _, t := range v.Topics {
		for _, p := range t.Partitions {
			s.partitions[TopicPartition{t.Topic, p}] = struct{}{}
		}
	}
	return k.TransactionalID, s, true, nil
}
