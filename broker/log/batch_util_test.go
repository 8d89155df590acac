package log

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/snappy"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Codec numbers as in the batch attributes.
const (
	codecNone = 0
	codecGzip = 1
	codecLZ4  = 3
	codecZstd = 4

	codecSnappy       = 2
	codecSnappyXerial = 0x102 // snappy framed as the Java client does (attribute codec 2)
)

// testBatch describes a batch to encode.
type testBatch struct {
	values        [][]byte
	codec         int16
	timestamp     int64 // first timestamp; record i has timestamp+i
	producerID    int64 // -1 = not idempotent
	producerEpoch int16
	baseSequence  int32
	control       bool
}

func appendRecord(dst []byte, i int, value []byte) []byte {
	var body []byte
	body = append(body, 0) // attributes
	body = binary.AppendVarint(body, int64(i))
	body = binary.AppendVarint(body, int64(i))
	body = binary.AppendVarint(body, -1) // null key
	body = binary.AppendVarint(body, int64(len(value)))
	body = append(body, value...)
	body = binary.AppendVarint(body, 0) // no headers
	dst = binary.AppendVarint(dst, int64(len(body)))
	return append(dst, body...)
}

var compressCache sync.Map // codec+raw -> compressed: crash loops re-encode the same batches

func compress(codec int16, raw []byte) []byte {
	if codec == codecNone {
		return raw
	}
	key := string(rune('0'+codec)) + string(raw)
	if v, ok := compressCache.Load(key); ok {
		return v.([]byte)
	}
	out := compressOnce(codec, raw)
	compressCache.Store(key, out)
	return out
}

func compressOnce(codec int16, raw []byte) []byte {
	var buf bytes.Buffer
	switch codec {
	case codecNone:
		return raw
	case codecGzip:
		w := gzip.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case codecLZ4:
		w := lz4.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case codecZstd:
		w, _ := zstd.NewWriter(&buf)
		w.Write(raw)
		w.Close()
	case codecSnappy:
		return snappy.Encode(nil, raw)
	case codecSnappyXerial:
		buf.Write(xerialMagic)
		buf.Write([]byte{0, 0, 0, 1, 0, 0, 0, 1})
		for len(raw) > 0 {
			n := min(len(raw), 100)
			block := snappy.Encode(nil, raw[:n])
			buf.Write(binary.BigEndian.AppendUint32(nil, uint32(len(block))))
			buf.Write(block)
			raw = raw[n:]
		}
	default:
		panic(fmt.Sprintf("codec %d", codec))
	}
	return buf.Bytes()
}

// encode builds a RecordBatch v2 with franz-go's kmsg.RecordBatch.
func (tb testBatch) encode() []byte {
	var raw []byte
	for i, v := range tb.values {
		raw = appendRecord(raw, i, v)
	}
	attrs := tb.codec & attrCompressionMask
	if tb.control {
		attrs |= attrControl
	}
	pid := tb.producerID
	seq := tb.baseSequence
	if pid < 0 {
		seq = -1
	}
	rb := kmsg.RecordBatch{
		FirstOffset:          0,
		PartitionLeaderEpoch: -1,
		Magic:                2,
		Attributes:           attrs,
		LastOffsetDelta:      int32(len(tb.values) - 1),
		FirstTimestamp:       tb.timestamp,
		MaxTimestamp:         tb.timestamp + int64(len(tb.values)-1),
		ProducerID:           pid,
		ProducerEpoch:        tb.producerEpoch,
		FirstSequence:        seq,
		NumRecords:           int32(len(tb.values)),
		Records:              compress(tb.codec, raw),
	}
	b := rb.AppendTo(nil)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

// simpleBatch returns an uncompressed, non-idempotent batch of n records of size bytes each.
func simpleBatch(n, size int, ts int64, fill byte) []byte {
	vals := make([][]byte, n)
	for i := range vals {
		vals[i] = bytes.Repeat([]byte{fill}, size)
	}
	return testBatch{values: vals, timestamp: ts, producerID: -1}.encode()
}

func TestValidateClientBatchCodecs(t *testing.T) {
	for _, codec := range []int16{codecNone, codecGzip, codecLZ4, codecZstd} {
		b := testBatch{values: [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}, codec: codec, producerID: -1, timestamp: 1000}.encode()
		h, err := validateClientBatch(b, 1<<20)
		if err != nil {
			t.Fatalf("codec %d: %v", codec, err)
		}
		if h.RecordCount != 3 || h.LastOffsetDelta != 2 || h.MaxTimestamp != 1002 {
			t.Fatalf("codec %d: header %+v", codec, h)
		}
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }
