package group

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
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
	var body []byte
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0)                   // attributes
		rec = kbin.AppendVarlong(rec, 0)       // timestamp delta
		rec = kbin.AppendVarint(rec, int32(i)) // offset delta
		rec = kbin.AppendVarint(rec, int32(len(r.key)))
		rec = append(rec, r.key...)
		if r.value == nil {
			rec = kbin.AppendVarint(rec, -1)
		} else {
			rec = kbin.AppendVarint(rec, int32(len(r.value)))
			rec = append(rec, r.value...)
		}
		rec = kbin.AppendVarint(rec, 0) // headers
		body = kbin.AppendVarint(body, int32(len(rec)))
		body = append(body, rec...)
	}
	b := make([]byte, 0, 61+len(body))
	b = kbin.AppendInt64(b, 0)  // base offset
	b = kbin.AppendInt32(b, 0)  // length, below
	b = kbin.AppendInt32(b, -1) // partition leader epoch
	b = append(b, 2)            // magic
	b = kbin.AppendInt32(b, 0)  // crc, below
	b = kbin.AppendInt16(b, 0)  // attributes: no compression, CreateTime
	b = kbin.AppendInt32(b, int32(len(recs)-1))
	b = kbin.AppendInt64(b, nowMs)
	b = kbin.AppendInt64(b, nowMs)
	b = kbin.AppendInt64(b, -1) // producer id
	b = kbin.AppendInt16(b, -1) // producer epoch
	b = kbin.AppendInt32(b, -1) // base sequence
	b = kbin.AppendInt32(b, int32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crc32.MakeTable(crc32.Castagnoli)))
	return b
}

// decodeBatches walks concatenated batches and calls fn for every record.
// It returns the offset after the last whole batch (from when none) and an
// ErrCorruptOffsets error for the last unreadable record met (the walk goes
// on with the next batch). A compressed or control batch is skipped: sluice
// writes neither here.
func decodeBatches(b []byte, from int64, fn func(offset int64, r record) error) (next int64, corrupt error) {
	next = from
	for len(b) >= 61 {
		size := 12 + int64(int32(binary.BigEndian.Uint32(b[8:])))
		if size < 61 || size > int64(len(b)) {
			break // a partial batch at the end of a read
		}
		last := int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if last+1 > next {
			next = last + 1
		}
		var batch kmsg.RecordBatch
		err := batch.ReadFrom(b[:size])
		b = b[size:]
		if err != nil {
			corrupt = fmt.Errorf("%w: batch ending at offset %d: %v", ErrCorruptOffsets, last, err)
			continue
		}
		if batch.Attributes&0x0007 != 0 || batch.Attributes&0x0020 != 0 {
			continue
		}
		r := kbin.Reader{Src: batch.Records}
		for i := int32(0); i < batch.NumRecords && r.Ok(); i++ {
			length := r.Varint()
			rr := kbin.Reader{Src: r.Span(int(length))}
			rr.Int8()
			rr.Varlong()
			delta := rr.Varint()
			var rec record
			if n := rr.Varint(); n >= 0 {
				rec.key = rr.Span(int(n))
			}
			if n := rr.Varint(); n >= 0 {
				rec.value = rr.Span(int(n))
				if rec.value == nil {
					rec.value = []byte{}
				}
			}
			if !rr.Ok() || !r.Ok() {
				corrupt = fmt.Errorf("%w: record %d of batch at offset %d is truncated", ErrCorruptOffsets, i, batch.FirstOffset)
				break
			}
			if batch.FirstOffset+int64(delta) < from {
				continue
			}
			if err := fn(batch.FirstOffset+int64(delta), rec); err != nil {
				return next, err
			}
		}
	}
	return next, corrupt
}
