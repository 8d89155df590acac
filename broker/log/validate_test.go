package log

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

// withCRC recomputes a batch's CRC after a test edited it.
func withCRC(b []byte) []byte {
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

// rawBatch builds a batch whose header says count records and codec, around
// the records area recs (already compressed, or garbage).
func rawBatch(codec int16, count int32, recs []byte) []byte {
	b := testBatch{values: [][]byte{[]byte("x")}, producerID: -1, timestamp: 1}.encode()[:batchHeaderSize]
	b = append(b, recs...)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint16(b[offAttributes:], uint16(codec&attrCompressionMask))
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], uint32(count-1))
	binary.BigEndian.PutUint32(b[offRecordCount:], uint32(count))
	return withCRC(b)
}

var allCodecs = []int16{codecGzip, codecSnappy, codecSnappyXerial, codecLZ4, codecZstd}

func codecName(c int16) string {
	return map[int16]string{codecNone: "none", codecGzip: "gzip", codecSnappy: "snappy", codecSnappyXerial: "snappy-xerial", codecLZ4: "lz4", codecZstd: "zstd"}[c]
}

func TestValidateCompressedAcceptsEveryCodec(t *testing.T) {
	for _, codec := range append([]int16{codecNone}, allCodecs...) {
		vals := make([][]byte, 500)
		for i := range vals {
			vals[i] = []byte(strings.Repeat(fmt.Sprint(i), 1+i%40))
		}
		b := testBatch{values: vals, codec: codec, producerID: -1, timestamp: 5}.encode()
		if _, err := validateClientBatch(b, 1<<20); err != nil {
			t.Fatalf("%s: valid batch refused: %v", codecName(codec), err)
		}
	}
}

// TestValidateCompressedRefusesLies: each batch has a valid header and CRC,
// so today's header-only checks pass it; what is inside does not match.
func TestValidateCompressedRefusesLies(t *testing.T) {
	raw := func(n int, delta func(i int) int) []byte {
		var recs []byte
		for i := 0; i < n; i++ {
			var body []byte
			body = append(body, 0)
			body = binary.AppendVarint(body, int64(i))
			body = binary.AppendVarint(body, int64(delta(i)))
			body = binary.AppendVarint(body, -1)
			body = binary.AppendVarint(body, 3)
			body = append(body, "val"...)
			body = binary.AppendVarint(body, 0)
			recs = binary.AppendVarint(recs, int64(len(body)))
			recs = append(recs, body...)
		}
		return recs
	}
	seq := func(i int) int { return i }
	garbage := bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef, 0x01}, 20)
	for _, codec := range allCodecs {
		cases := []struct {
			name  string
			batch []byte
		}{
			{"garbage payload", rawBatch(codec, 1, garbage)},
			{"empty payload", rawBatch(codec, 1, nil)},
			{"count 2^31-1", rawBatch(codec, math.MaxInt32, compressOnce(codec, raw(2, seq)))},
			{"count above the records", rawBatch(codec, 3, compressOnce(codec, raw(2, seq)))},
			{"records beyond the count", rawBatch(codec, 2, compressOnce(codec, raw(3, seq)))},
			{"offset deltas with a gap", rawBatch(codec, 3, compressOnce(codec, raw(3, func(i int) int { return 2 * i })))},
			{"truncated stream", rawBatch(codec, 2, compressOnce(codec, raw(2, seq))[:8])},
		}
		for _, c := range cases {
			_, err := validateClientBatch(c.batch, 1<<20)
			if !IsCorrupt(err) {
				t.Errorf("%s, %s: got %v, want a corrupt-batch error", codecName(codec), c.name, err)
			}
		}
	}
}

// TestValidateCompressedBoundsDecompression: a small batch that expands
// beyond the bound is refused as it streams, without holding it in memory
// (the bound is lowered to 4 MiB to keep the test quick).
func TestValidateCompressedBoundsDecompression(t *testing.T) {
	const limit = 4 << 20
	vals := make([][]byte, 5)
	for i := range vals {
		vals[i] = bytes.Repeat([]byte{'z'}, 1<<20)
	}
	for _, codec := range allCodecs {
		b := testBatch{values: vals, codec: codec, producerID: -1, timestamp: 1}.encode()
		h := parseHeader(b)
		err := validateCompressedRecords(b, &h, limit)
		if !IsCorrupt(err) || !strings.Contains(err.Error(), "decompresses beyond") {
			t.Errorf("%s: a %d-byte batch expanding to 5 MiB: %v", codecName(codec), len(b), err)
		}
		if err := validateCompressedRecords(b, &h, 8<<20); err != nil {
			t.Errorf("%s: within the bound: %v", codecName(codec), err)
		}
	}
}

func TestReadVarintMatchesBinary(t *testing.T) {
	for _, v := range []int64{0, 1, -1, 63, -64, 64, 1 << 20, math.MaxInt64, math.MinInt64} {
		enc := binary.AppendVarint(nil, v)
		got, n, err := readVarint(bytes.NewReader(enc))
		if err != nil || got != v || n != len(enc) {
			t.Fatalf("readVarint(%d) = %d, %d, %v", v, got, n, err)
		}
	}
	if _, _, err := readVarint(bytes.NewReader(bytes.Repeat([]byte{0xff}, 11))); err == nil {
		t.Fatal("an 11-byte varint was accepted")
	}
}

// BenchmarkValidateBatch reports what validation costs per MB of records
// (b.SetBytes is the uncompressed records size): about 1 MiB of page-view-
// like records per batch, as producers batch them.
func BenchmarkValidateBatch(b *testing.B) {
	rng := rand.New(rand.NewSource(1))
	words := []string{"GET", "POST", "/index.html", "/cart", "/api/v1/items", "200", "404", "Mozilla/5.0", "curl/8.1", "de", "fr", "us"}
	vals := make([][]byte, 4000)
	raw := 0
	for i := range vals {
		var sb strings.Builder
		for sb.Len() < 250 {
			fmt.Fprintf(&sb, `"%s":%d,`, words[rng.Intn(len(words))], rng.Intn(1_000_000))
		}
		vals[i] = []byte(sb.String())
		raw += len(vals[i])
	}
	for _, codec := range append([]int16{codecNone}, allCodecs...) {
		batch := testBatch{values: vals, codec: codec, producerID: -1, timestamp: 1}.encode()
		b.Run(codecName(codec), func(b *testing.B) {
			b.SetBytes(int64(raw))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := validateClientBatch(batch, 64<<20); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// FuzzValidateCompressed feeds arbitrary records areas under each codec to
// the streaming validator, past the CRC a fuzzer rarely gets right: no
// panic, and an accepted area holds exactly the records its header claims.
func FuzzValidateCompressed(f *testing.F) {
	for _, codec := range append([]int16{codecNone}, allCodecs...) {
		b := testBatch{values: [][]byte{[]byte("a"), []byte("bb"), []byte("ccc")}, codec: codec, producerID: -1, timestamp: 10}.encode()
		f.Add(uint8(codec&attrCompressionMask), int32(3), b[batchHeaderSize:])
	}
	f.Fuzz(func(t *testing.T, codec uint8, count int32, recs []byte) {
		// The in-place walk of uncompressed records and the streaming walk
		// read the same grammar: they accept the same areas.
		if count >= 0 && count < 1<<16 {
			inPlace := walkRecords(recs, count) == nil
			u := batchHeader{RecordCount: count, LastOffsetDelta: count - 1}
			streamed := validateCompressedRecords(append(make([]byte, batchHeaderSize), recs...), &u, 1<<20) == nil
			if inPlace != streamed {
				t.Fatalf("in place %v, streamed %v", inPlace, streamed)
			}
		}
		h := batchHeader{RecordCount: count, LastOffsetDelta: count - 1, Attributes: int16(1 + codec%4)}
		b := append(make([]byte, batchHeaderSize), recs...)
		if err := validateCompressedRecords(b, &h, 1<<20); err != nil {
			if !IsCorrupt(err) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		s := <-scanners
		defer func() { scanners <- s }()
		if err := s.open(h.Attributes, recs, 1<<20); err != nil {
			t.Fatal(err)
		}
		for i := int32(0); i < count; i++ {
			if _, d, err := s.record(); err != nil || d != int64(i) {
				t.Fatalf("record %d of an accepted area: delta %d, %v", i, d, err)
			}
		}
	})
}

// TestDecompressionSlotsBoundConcurrency: decompression across all requests
// (appends and timestamp searches) takes one of decompressSlots scanners, so
// the decoders' memory is bounded whatever the number of requests at once.
func TestDecompressionSlotsBoundConcurrency(t *testing.T) {
	b := testBatch{values: [][]byte{[]byte("a"), []byte("b")}, codec: codecZstd, producerID: -1, timestamp: 10}.encode()
	h := parseHeader(b)
	var held []*recordScanner
	for range decompressSlots {
		held = append(held, <-scanners)
	}
	done := make(chan struct{})
	go func() {
		firstRecordAtOrAfter(b, &h, 11, 0, nil)
		_, _ = validateClientBatch(b, 1<<20)
		close(done)
	}()
	select {
	case <-done:
		t.Fatal("decompressed with every slot taken")
	case <-time.After(50 * time.Millisecond): // a bound on an absence
	}
	scanners <- held[0]
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("a freed slot was not used")
	}
	for _, s := range held[1:] {
		scanners <- s
	}
}

// TestValidateRecordFields: a record whose key, value or headers do not end
// exactly with it makes every consumer fail to decode the partition; it is
// refused, compressed or not, as Kafka's record reader refuses it.
func TestValidateRecordFields(t *testing.T) {
	record := func(fields []byte) []byte {
		body := []byte{0}
		body = binary.AppendVarint(body, 0) // timestamp delta
		body = binary.AppendVarint(body, 0) // offset delta
		body = append(body, fields...)
		return append(binary.AppendVarint(nil, int64(len(body))), body...)
	}
	v := func(xs ...int64) []byte {
		var b []byte
		for _, x := range xs {
			b = binary.AppendVarint(b, x)
		}
		return b
	}
	good := append(append(v(1), 'k'), append(append(v(2), "vv"...), append(v(1, 1), 'h', 2, 'x')...)...) // key "k", value "vv", header h=x
	cases := map[string][]byte{
		"key beyond the record":    append(v(50), "k"...),
		"negative key length":      v(-2, -1, 0),
		"value beyond the record":  append(v(-1, 9), "v"...),
		"header count beyond":      v(-1, -1, 1000),
		"null header key":          v(-1, -1, 1, -1, -1),
		"bytes after the headers":  append(v(-1, -1, 0), 7, 7),
		"headers missing entirely": v(-1, -1),
	}
	for _, codec := range append([]int16{codecNone}, allCodecs...) {
		if _, err := validateClientBatch(rawBatch(codec, 1, compressOnce(codec, record(good))), 1<<20); err != nil {
			t.Fatalf("%s: a well-formed record with a header refused: %v", codecName(codec), err)
		}
		for name, fields := range cases {
			_, err := validateClientBatch(rawBatch(codec, 1, compressOnce(codec, record(fields))), 1<<20)
			if !IsCorrupt(err) {
				t.Errorf("%s, %s: %v, want a corrupt-batch error", codecName(codec), name, err)
			}
		}
	}
}
