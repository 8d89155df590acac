// Package recbatch encodes and walks the uncompressed RecordBatch v2 batches
// that the broker's coordinators write to their internal topics
// (__consumer_offsets, __transaction_state): key/value records, optionally
// from a transactional producer, and the COMMIT / ABORT control batches
// (transaction markers) that end such a producer's records.
//
//	baseOffset int64 | length int32 | leaderEpoch int32 | magic int8 = 2 |
//	crc uint32 (CRC-32C of attributes..end) | attributes int16 | lastOffsetDelta int32 |
//	firstTimestamp int64 | maxTimestamp int64 | producerId int64 | producerEpoch int16 |
//	baseSequence int32 | recordCount int32 | records
//
// The log assigns baseOffset on append; everything else is fixed here.
package recbatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrCorrupt marks a batch or record that cannot be read.
var ErrCorrupt = errors.New("recbatch: corrupt batch")

// Attribute bits of a batch.
const (
	attrTransactional = 0x0010
	attrControl       = 0x0020
	attrCodecMask     = 0x0007
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// Record is one key/value; a nil Value is a tombstone.
type Record struct {
	Key, Value []byte
}

// Producer stamps a batch: NoProducer for a coordinator's own records, or a
// transactional producer's id, epoch and first sequence.
type Producer struct {
	ID            int64
	Epoch         int16
	Sequence      int32
	Transactional bool
}

// NoProducer is the producer of batches that belong to no producer.
var NoProducer = Producer{ID: -1, Epoch: -1, Sequence: -1}

// Encode builds one uncompressed batch holding recs (base offset 0).
func Encode(recs []Record, nowMs int64, p Producer) []byte {
	var body []byte
	for i, r := range recs {
		var rec []byte
		rec = append(rec, 0)                   // attributes
		rec = kbin.AppendVarlong(rec, 0)       // timestamp delta
		rec = kbin.AppendVarint(rec, int32(i)) // offset delta
		rec = kbin.AppendVarint(rec, int32(len(r.Key)))
		rec = append(rec, r.Key...)
		if r.Value == nil {
			rec = kbin.AppendVarint(rec, -1)
		} else {
			rec = kbin.AppendVarint(rec, int32(len(r.Value)))
			rec = append(rec, r.Value...)
		}
		rec = kbin.AppendVarint(rec, 0) // headers
		body = kbin.AppendVarint(body, int32(len(rec)))
		body = append(body, rec...)
	}
	var attrs int16
	if p.Transactional {
		attrs |= attrTransactional
	}
	b := make([]byte, 0, 61+len(body))
	b = kbin.AppendInt64(b, 0)  // base offset
	b = kbin.AppendInt32(b, 0)  // length, below
	b = kbin.AppendInt32(b, -1) // partition leader epoch
	b = append(b, 2)            // magic
	b = kbin.AppendInt32(b, 0)  // crc, below
	b = kbin.AppendInt16(b, attrs)
	b = kbin.AppendInt32(b, int32(len(recs)-1))
	b = kbin.AppendInt64(b, nowMs)
	b = kbin.AppendInt64(b, nowMs)
	b = kbin.AppendInt64(b, p.ID)
	b = kbin.AppendInt16(b, p.Epoch)
	b = kbin.AppendInt32(b, p.Sequence)
	b = kbin.AppendInt32(b, int32(len(recs)))
	b = append(b, body...)
	binary.BigEndian.PutUint32(b[8:], uint32(len(b)-12))
	binary.BigEndian.PutUint32(b[17:], crc32.Checksum(b[21:], crcTable))
	return b
}

// Batch describes the batch a walked record or marker belongs to.
type Batch struct {
	FirstOffset   int64
	ProducerID    int64
	ProducerEpoch int16
	Transactional bool
}

// Visitor receives what Walk reads. Record is called for every record of a
// data batch at or after the walk's start offset; Marker (if set) for every
// COMMIT or ABORT control batch of a producer. An error from Record stops
// the walk and is returned.
type Visitor struct {
	Record func(b Batch, offset int64, r Record) error
	Marker func(b Batch, offset int64, commit bool)
}

// Walk reads concatenated batches b (as a log read returns them, starting
// with the batch holding offset from). It returns the offset after the last
// whole batch (from when none) and an ErrCorrupt error for the last
// unreadable batch or record met; the walk goes on with the next batch. A
// compressed batch is skipped: the coordinators write none.
func Walk(b []byte, from int64, v Visitor) (next int64, corrupt error) {
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
			corrupt = fmt.Errorf("%w: batch ending at offset %d: %v", ErrCorrupt, last, err)
			continue
		}
		info := Batch{FirstOffset: batch.FirstOffset, ProducerID: batch.ProducerID, ProducerEpoch: batch.ProducerEpoch,
			Transactional: batch.Attributes&attrTransactional != 0}
		if batch.Attributes&attrCodecMask != 0 {
			continue
		}
		if batch.Attributes&attrControl != 0 {
			if commit, ok := markerType(batch.Records); ok && v.Marker != nil && batch.FirstOffset >= from {
				v.Marker(info, batch.FirstOffset, commit)
			}
			continue
		}
		if err := walkRecords(&batch, info, from, v.Record); err != nil {
			if !errors.Is(err, ErrCorrupt) {
				return next, err
			}
			corrupt = err
		}
	}
	return next, corrupt
}

func walkRecords(batch *kmsg.RecordBatch, info Batch, from int64, fn func(Batch, int64, Record) error) error {
	r := kbin.Reader{Src: batch.Records}
	for i := int32(0); i < batch.NumRecords && r.Ok(); i++ {
		length := r.Varint()
		rr := kbin.Reader{Src: r.Span(int(length))}
		rr.Int8()
		rr.Varlong()
		delta := rr.Varint()
		var rec Record
		if n := rr.Varint(); n >= 0 {
			rec.Key = rr.Span(int(n))
		}
		if n := rr.Varint(); n >= 0 {
			rec.Value = rr.Span(int(n))
			if rec.Value == nil {
				rec.Value = []byte{}
			}
		}
		if !rr.Ok() || !r.Ok() {
			return fmt.Errorf("%w: record %d of batch at offset %d is truncated", ErrCorrupt, i, batch.FirstOffset)
		}
		if batch.FirstOffset+int64(delta) < from || fn == nil {
			continue
		}
		if err := fn(info, batch.FirstOffset+int64(delta), rec); err != nil {
			return err
		}
	}
	return nil
}

// markerType reads the control record of a marker batch: key version int16,
// type int16 (0 ABORT, 1 COMMIT).
func markerType(records []byte) (commit bool, ok bool) {
	r := kbin.Reader{Src: records}
	length := r.Varint()
	rr := kbin.Reader{Src: r.Span(int(length))}
	rr.Int8()
	rr.Varlong()
	rr.Varint()
	n := rr.Varint()
	key := rr.Span(int(n))
	if !rr.Ok() || !r.Ok() || len(key) < 4 {
		return false, false
	}
	switch binary.BigEndian.Uint16(key[2:]) {
	case 0:
		return false, true
	case 1:
		return true, true
	}
	return false, false
}
