package log

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
)

// RecordBatch v2 header layout (all big-endian). Only baseOffset and
// partitionLeaderEpoch lie outside the CRC, which covers bytes 21..end.
const (
	offBaseOffset      = 0  // int64
	offLength          = 8  // int32: bytes after this field
	offLeaderEpoch     = 12 // int32
	offMagic           = 16 // int8
	offCRC             = 17 // uint32, CRC32C of bytes [21, end)
	offAttributes      = 21 // int16
	offLastOffsetDelta = 23 // int32
	offFirstTimestamp  = 27 // int64
	offMaxTimestamp    = 35 // int64
	offProducerID      = 43 // int64
	offProducerEpoch   = 51 // int16
	offBaseSequence    = 53 // int32
	offRecordCount     = 57 // int32
	batchHeaderSize    = 61

	logOverhead = 12 // baseOffset + length: the part of the header before "length" counts

	attrCompressionMask = 0x07
	attrTimestampType   = 0x08
	attrTransactional   = 0x10
	attrControl         = 0x20
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// batchHeader is the decoded fixed part of a RecordBatch v2.
type batchHeader struct {
	BaseOffset      int64
	Length          int32
	LeaderEpoch     int32
	Magic           int8
	CRC             uint32
	Attributes      int16
	LastOffsetDelta int32
	FirstTimestamp  int64
	MaxTimestamp    int64
	ProducerID      int64
	ProducerEpoch   int16
	BaseSequence    int32
	RecordCount     int32
}

// size is the whole batch size in bytes.
func (h batchHeader) size() int64 { return logOverhead + int64(h.Length) }

// lastOffset is the offset of the batch's last record.
func (h batchHeader) lastOffset() int64 { return h.BaseOffset + int64(h.LastOffsetDelta) }

// lastSequence is the batch's last sequence number (sequences wrap at MaxInt32).
func (h *batchHeader) lastSequence() int32 {
	return addSeq(h.BaseSequence, h.LastOffsetDelta)
}

func addSeq(seq, delta int32) int32 {
	if int64(seq)+int64(delta) > math.MaxInt32 {
		return int32(int64(seq) + int64(delta) - math.MaxInt32 - 1)
	}
	return seq + delta
}

// parseHeader decodes the first batchHeaderSize bytes of b; len(b) must be at least that.
func parseHeader(b []byte) batchHeader {
	_ = b[batchHeaderSize-1]
	return batchHeader{
		BaseOffset:      int64(binary.BigEndian.Uint64(b[offBaseOffset:])),
		Length:          int32(binary.BigEndian.Uint32(b[offLength:])),
		LeaderEpoch:     int32(binary.BigEndian.Uint32(b[offLeaderEpoch:])),
		Magic:           int8(b[offMagic]),
		CRC:             binary.BigEndian.Uint32(b[offCRC:]),
		Attributes:      int16(binary.BigEndian.Uint16(b[offAttributes:])),
		LastOffsetDelta: int32(binary.BigEndian.Uint32(b[offLastOffsetDelta:])),
		FirstTimestamp:  int64(binary.BigEndian.Uint64(b[offFirstTimestamp:])),
		MaxTimestamp:    int64(binary.BigEndian.Uint64(b[offMaxTimestamp:])),
		ProducerID:      int64(binary.BigEndian.Uint64(b[offProducerID:])),
		ProducerEpoch:   int16(binary.BigEndian.Uint16(b[offProducerEpoch:])),
		BaseSequence:    int32(binary.BigEndian.Uint32(b[offBaseSequence:])),
		RecordCount:     int32(binary.BigEndian.Uint32(b[offRecordCount:])),
	}
}

// checkFrame checks what can be checked from the header alone: magic, length
// and the offset/count fields. avail is how many bytes follow the batch start.
func checkFrame(h *batchHeader, avail int64) error {
	if h.Magic != 2 {
		return fmt.Errorf("%w: magic %d, want 2", ErrCorruptBatch, h.Magic)
	}
	if h.Length < batchHeaderSize-logOverhead {
		return fmt.Errorf("%w: batch length %d below the v2 header size", ErrCorruptBatch, h.Length)
	}
	if h.size() > avail {
		return fmt.Errorf("%w: batch length %d exceeds the %d bytes available", ErrCorruptBatch, h.Length, avail-logOverhead)
	}
	if h.LastOffsetDelta < 0 || h.RecordCount < 0 {
		return fmt.Errorf("%w: negative lastOffsetDelta %d or record count %d", ErrCorruptBatch, h.LastOffsetDelta, h.RecordCount)
	}
	if h.BaseOffset < 0 {
		return fmt.Errorf("%w: negative base offset %d", ErrCorruptBatch, h.BaseOffset)
	}
	return nil
}

// checkCRC verifies the CRC32C of a whole batch b (len(b) == size).
func checkCRC(b []byte, h *batchHeader) error {
	if got := crc32.Checksum(b[offAttributes:], crcTable); got != h.CRC {
		return fmt.Errorf("%w: crc %08x, header says %08x", ErrCorruptBatch, got, h.CRC)
	}
	return nil
}

// validateClientBatch checks one whole batch b as received from a producer:
// the header, the CRC, and the records against the header's count (walked in
// place when uncompressed, decompressed as a stream otherwise: validate.go).
func validateClientBatch(b []byte, maxBytes int) (batchHeader, error) {
	if len(b) < batchHeaderSize {
		return batchHeader{}, fmt.Errorf("%w: %d bytes, shorter than a v2 batch header", ErrCorruptBatch, len(b))
	}
	h := parseHeader(b)
	if h.Magic != 2 {
		return h, fmt.Errorf("%w: magic %d, want 2 (message formats v0/v1 are not supported)", ErrCorruptBatch, h.Magic)
	}
	if h.Length < batchHeaderSize-logOverhead || h.size() != int64(len(b)) {
		return h, fmt.Errorf("%w: batch length field %d does not match %d bytes", ErrCorruptBatch, h.Length, len(b)-logOverhead)
	}
	if maxBytes > 0 && len(b) > maxBytes {
		return h, fmt.Errorf("%w: batch of %d bytes exceeds max.message.bytes %d", ErrBatchTooLarge, len(b), maxBytes)
	}
	if err := checkCRC(b, &h); err != nil {
		return h, err
	}
	if codec := h.Attributes & attrCompressionMask; codec > 4 {
		return h, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
	}
	if h.RecordCount <= 0 {
		return h, fmt.Errorf("%w: batch has %d records", ErrCorruptBatch, h.RecordCount)
	}
	if h.LastOffsetDelta != h.RecordCount-1 {
		return h, fmt.Errorf("%w: lastOffsetDelta %d with %d records", ErrCorruptBatch, h.LastOffsetDelta, h.RecordCount)
	}
	// Which kinds of batch a caller may append (control, transactional) is
	// AppendOptions.checkKinds's decision; a marker has no sequence.
	if h.ProducerID >= 0 && (h.ProducerEpoch < 0 || (h.BaseSequence < 0 && h.Attributes&attrControl == 0)) {
		return h, fmt.Errorf("%w: producer id %d with epoch %d, sequence %d", ErrInvalidRecord, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
	}
	if h.Attributes&attrCompressionMask == 0 {
		if err := walkRecords(b[batchHeaderSize:], h.RecordCount); err != nil {
			return h, err
		}
	} else if err := validateCompressedRecords(b, &h, maxDecompressed); err != nil {
		return h, err
	}
	return h, nil
}

// walkRecords checks the framing of uncompressed records: count records, each
// a varint length followed by that many bytes, offset deltas 0, 1, 2, ...,
// key, value and headers ending exactly with the record.
func walkRecords(b []byte, count int32) error {
	for i := int32(0); i < count; i++ {
		length, n := binary.Varint(b)
		if n <= 0 || length < 2 || length > int64(len(b)-n) {
			return fmt.Errorf("%w: record %d: bad length", ErrCorruptBatch, i)
		}
		rec := b[n : n+int(length)]
		b = b[n+int(length):]
		// attributes int8, timestampDelta varint, offsetDelta varint
		rec = rec[1:]
		_, m := binary.Varint(rec)
		if m <= 0 {
			return fmt.Errorf("%w: record %d: bad timestamp delta", ErrCorruptBatch, i)
		}
		delta, k := binary.Varint(rec[m:])
		if k <= 0 || delta != int64(i) {
			return fmt.Errorf("%w: record %d: offset delta %d", ErrCorruptBatch, i, delta)
		}
		if err := checkRecordFields(rec[m+k:]); err != nil {
			return fmt.Errorf("%w: record %d: %v", ErrCorruptBatch, i, err)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last record", ErrCorruptBatch, len(b))
	}
	return nil
}

// setBaseOffset rewrites the base offset (outside the CRC).
func setBaseOffset(b []byte, off int64) { binary.BigEndian.PutUint64(b[offBaseOffset:], uint64(off)) }

// setLeaderEpoch rewrites partitionLeaderEpoch (outside the CRC).
func setLeaderEpoch(b []byte, epoch int32) {
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], uint32(epoch))
}

// setLogAppendTime sets the timestamp type bit and maxTimestamp and recomputes the CRC.
func setLogAppendTime(b []byte, ts int64) {
	attr := binary.BigEndian.Uint16(b[offAttributes:]) | attrTimestampType
	binary.BigEndian.PutUint16(b[offAttributes:], attr)
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(ts))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
}
