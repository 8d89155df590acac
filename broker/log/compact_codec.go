package log

import (
	"bytes"
	"fmt"
	"sync"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

var (
	zstdEncOnce sync.Once
	zstdEnc     *zstd.Encoder
	zstdEncErr  error
)

// compressRecords compresses a batch's records area with the batch's codec
// (Kafka's attribute values), for the compaction of compressed batches.
// Snappy is written as a plain block, which every client reads.
func compressRecords(codec int16, raw []byte) ([]byte, error) {
	var buf bytes.Buffer
	switch codec {
	case 0:
		return raw, nil
	case 1:
		w := gzip.NewWriter(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case 2:
		return s2.EncodeSnappy(nil, raw), nil
	case 3:
		w := lz4.NewWriter(&buf)
		if _, err := w.Write(raw); err != nil {
			return nil, err
		}
		if err := w.Close(); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	case 4:
		zstdEncOnce.Do(func() { zstdEnc, zstdEncErr = zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1)) })
		if zstdEncErr != nil {
			return nil, zstdEncErr
		}
		return zstdEnc.EncodeAll(raw, nil), nil
	}
	return nil, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
}
