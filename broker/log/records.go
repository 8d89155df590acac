package log

import (
	"errors"
	"io"
)

// maxDecompressed bounds what one batch may decompress to: an append refuses
// a batch expanding further (validate.go), and the read path
// (OffsetForTimestamp) answers such a batch at batch granularity.
const maxDecompressed = 64 << 20

var errTooLarge = errors.New("log: batch decompresses beyond the limit")

// xerialMagic starts snappy data framed by the Java client (xerial snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// firstRecordAtOrAfter returns the offset and timestamp of the first record
// of the whole batch b whose timestamp is >= ts, as Kafka's ListOffsets
// answers. If the records cannot be read (or none qualifies) it answers with
// the batch: its base offset and max timestamp.
func firstRecordAtOrAfter(b []byte, h *batchHeader, ts, minOffset int64, budget *DecompressBudget) (int64, int64) {
	fallback := max(h.BaseOffset, minOffset)
	if h.Attributes&attrTimestampType != 0 || len(b) < batchHeaderSize {
		return fallback, h.MaxTimestamp // LogAppendTime: every record has maxTimestamp
	}
	limit := int64(maxDecompressed)
	codec := h.Attributes & attrCompressionMask
	if budget != nil && codec != 0 {
		limit = min(limit, budget.Remaining)
		if limit <= 0 {
			return fallback, h.MaxTimestamp
		}
	}
	s := <-scanners
	defer func() { scanners <- s }()
	if s.open(codec, b[batchHeaderSize:], limit) != nil {
		return fallback, h.MaxTimestamp
	}
	if budget != nil && codec != 0 {
		defer func() { budget.Remaining -= s.read(limit) }()
	}
	prev := int64(0)
	for i := int32(0); i < h.RecordCount; i++ {
		tsDelta, offDelta, err := s.record()
		if err != nil || offDelta < prev || offDelta > int64(h.LastOffsetDelta) {
			break // not a record this batch can hold
		}
		prev = offDelta
		off, rts := h.BaseOffset+offDelta, h.FirstTimestamp+tsDelta
		if rts >= ts && off >= minOffset {
			return off, rts
		}
	}
	return fallback, h.MaxTimestamp
}

// decompressRecords returns the records area of a batch, decompressed whole,
// never more than limit bytes (errTooLarge beyond): for the log cleaner,
// which keeps keys and values. It takes a decompression slot (validate.go)
// like every decompression.
func decompressRecords(codec int16, src []byte, limit int) ([]byte, error) {
	if codec == 0 {
		return src, nil
	}
	s := <-scanners
	defer func() { scanners <- s }()
	if err := s.open(codec, src, int64(limit)); err != nil {
		return nil, err
	}
	return io.ReadAll(s.br)
}
