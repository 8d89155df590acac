package group

import (
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
)

// Key versions of __consumer_offsets records (Kafka's): 0 and 1 are offset
// commits, 2 is group metadata.
const (
	keyOffsetCommit  = 1
	keyGroupMetadata = 2
	// valueOffsetCommit is the OffsetCommitValue version written: v3
	// (offset, leader epoch, metadata, commit timestamp).
	valueOffsetCommit = 3
	// valueGroupMetadata is the GroupMetadataValue version written: v3
	// (with static members' instance ids).
	valueGroupMetadata = 3
)

// record is one key/value of the offsets topic; a nil value is a tombstone.
type record struct {
	key, value []byte
}

func offsetKey(group, topic string, partition int32) []byte {
	k := kmsg.OffsetCommitKey{Version: keyOffsetCommit, Group: group, Topic: topic, Partition: partition}
	return k.AppendTo(nil)
}

func offsetValue(o committed) []byte {
	v := kmsg.NewOffsetCommitValue()
	v.Version = valueOffsetCommit
	v.Offset, v.LeaderEpoch, v.Metadata, v.CommitTimestamp = o.offset, o.leaderEpoch, o.metadata, o.commitMs
	return v.AppendTo(nil)
}

func groupKey(group string) []byte {
	k := kmsg.GroupMetadataKey{Version: keyGroupMetadata, Group: group}
	return k.AppendTo(nil)
}

// javaStringHash is Java's String.hashCode over UTF-16 code units, so that a
// group maps to the same __consumer_offsets partition as on Kafka.
func javaStringHash(s string) int32 {
	var h int32
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			h = 31*h + int32(0xD800+(r>>10))
			h = 31*h + int32(0xDC00+(r&0x3FF))
			continue
		}
		h = 31*h + int32(r)
	}
	return h
}

// partitionFor is Kafka's Utils.abs(groupId.hashCode) % partitions.
func partitionFor(group string, partitions int32) int32 {
	h := javaStringHash(group)
	if h == -1<<31 {
		h = 0
	} else if h < 0 {
		h = -h
	}
	return h % partitions
}

// encodeBatch builds one uncompressed RecordBatch v2 holding recs, with
// producer id -1 and base offset 0 (the log assigns offsets).
func encodeBatch(recs []record, nowMs int64) []byte {
	return recbatch.Encode(toBatchRecords(recs), nowMs, recbatch.NoProducer)
}

func toBatchRecords(recs []record) []recbatch.Record {
	out := make([]recbatch.Record, len(recs))
	for i, r := range recs {
		out[i] = recbatch.Record{Key: r.key, Value: r.value}
	}
	return out
}

// decodeBatches walks concatenated batches and calls fn for every record
// of a non-transactional batch. It returns the offset after the last whole
// batch (from when none) and an ErrCorruptOffsets error for the last
// unreadable record met (the walk goes on with the next batch).
func decodeBatches(b []byte, from int64, fn func(offset int64, r record) error) (next int64, corrupt error) {
	return walkBatches(b, from, func(_ recbatch.Batch, off int64, r record) error { return fn(off, r) }, nil)
}

// walkBatches is decodeBatches with the batch of each record, and onMarker
// called for each transaction marker.
func walkBatches(b []byte, from int64, fn func(b recbatch.Batch, offset int64, r record) error, onMarker func(b recbatch.Batch, commit bool)) (next int64, corrupt error) {
	v := recbatch.Visitor{Record: func(bt recbatch.Batch, off int64, r recbatch.Record) error {
		if bt.Transactional && onMarker == nil {
			return nil
		}
		return fn(bt, off, record{key: r.Key, value: r.Value})
	}}
	if onMarker != nil {
		v.Marker = func(bt recbatch.Batch, _ int64, commit bool) { onMarker(bt, commit) }
	}
	next, err := recbatch.Walk(b, from, v)
	if err != nil && errors.Is(err, recbatch.ErrCorrupt) {
		err = fmt.Errorf("%w: %w", ErrCorruptOffsets, err)
	}
	return next, err
}
