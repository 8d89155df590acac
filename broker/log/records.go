package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// maxDecompressed bounds what the read path (OffsetForTimestamp) will
// decompress for one batch; a batch expanding further is answered at batch
// granularity.
const maxDecompressed = 64 << 20

var errTooLarge = errors.New("log: batch decompresses beyond the limit")

var (
	zstdOnce    sync.Once
	zstdDecoder *zstd.Decoder
	zstdErr     error
)

// xerialMagic starts snappy data framed by the Java client (xerial snappy-java).
var xerialMagic = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// decompressRecords returns the records area of a batch, decompressed, never
// more than limit bytes.
func decompressRecords(codec int16, src []byte, limit int) ([]byte, error) {
	readAll := func(r io.Reader) ([]byte, error) {
		b, err := io.ReadAll(io.LimitReader(r, int64(limit)+1))
		if err != nil {
			return nil, err
		}
		if len(b) > limit {
			return nil, errTooLarge
		}
		return b, nil
	}
	switch codec {
	case 0:
		return src, nil
	case 1:
		r, err := gzip.NewReader(bytes.NewReader(src))
		if err != nil {
			return nil, err
		}
		defer r.Close()
		return readAll(r)
	case 2:
		if !bytes.HasPrefix(src, xerialMagic) {
			return snappyBlock(nil, src, limit)
		}
		if len(src) < 16 {
			return nil, errors.New("log: short xerial snappy header")
		}
		var out []byte
		for p := src[16:]; len(p) > 0; {
			if len(p) < 4 {
				return nil, errors.New("log: truncated xerial snappy chunk")
			}
			n := int(binary.BigEndian.Uint32(p))
			if n < 0 || n > len(p)-4 {
				return nil, errors.New("log: bad xerial snappy chunk length")
			}
			var err error
			if out, err = snappyBlock(out, p[4:4+n], limit); err != nil {
				return nil, err
			}
			p = p[4+n:]
		}
		return out, nil
	case 3:
		return readAll(lz4.NewReader(bytes.NewReader(src)))
	case 4:
		zstdOnce.Do(func() {
			zstdDecoder, zstdErr = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxDecompressed))
		})
		if zstdErr != nil {
			return nil, zstdErr
		}
		b, err := zstdDecoder.DecodeAll(src, nil)
		if err != nil {
			return nil, err
		}
		if len(b) > limit {
			return nil, errTooLarge
		}
		return b, nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
}

func snappyBlock(dst, src []byte, limit int) ([]byte, error) {
	n, err := s2.DecodedLen(src)
	if err != nil {
		return nil, err
	}
	if n < 0 || len(dst)+n > limit {
		return nil, errTooLarge
	}
	b, err := s2.Decode(nil, src)
	if err != nil {
		return nil, err
	}
	return append(dst, b...), nil
}

// firstRecordAtOrAfter returns the offset and timestamp of the first record
// of the whole batch b whose timestamp is >= ts, as Kafka's ListOffsets
// answers. If the records cannot be read (or none qualifies) it answers with
// the batch: its base offset and max timestamp.
func firstRecordAtOrAfter(b []byte, h *batchHeader, ts, minOffset int64) (int64, int64) {
	fallback := max(h.BaseOffset, minOffset)
	if h.Attributes&attrTimestampType != 0 || len(b) < batchHeaderSize {
		return fallback, h.MaxTimestamp // LogAppendTime: every record has maxTimestamp
	}
	recs, err := decompressRecords(h.Attributes&attrCompressionMask, b[batchHeaderSize:], maxDecompressed)
	if err != nil {
		return fallback, h.MaxTimestamp
	}
	prev := int64(0)
	for i := int32(0); i < h.RecordCount && len(recs) > 0; i++ {
		length, n := binary.Varint(recs)
		if n <= 0 || length < 2 || length > int64(len(recs)-n) {
			break
		}
		rec := recs[n+1 : n+int(length)] // skip the attributes byte
		recs = recs[n+int(length):]
		tsDelta, m := binary.Varint(rec)
		if m <= 0 {
			break
		}
		offDelta, k := binary.Varint(rec[m:])
		if k <= 0 || offDelta < prev || offDelta > int64(h.LastOffsetDelta) {
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
