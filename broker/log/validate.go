package log

// Compressed record batches are checked on append as Apache Kafka's
// LogValidator checks them: the records area is decompressed as a stream
// (never held whole, except a raw snappy block, which has no smaller unit)
// and walked record by record: each record's length frame, its offset delta
// (0, 1, 2, ... as the header's count implies), that its key, value and
// headers end exactly with it, and that nothing follows the last record. Nothing decompressed is kept; the batch is stored as sent.
//
// Bounds, so that a client cannot make the broker work or allocate without
// limit:
//   - a batch may not decompress beyond maxDecompressed (64 MiB); its record
//     count must fit in that many bytes (a record takes at least 7), so a
//     header claiming 2^31-1 records is refused before any decompression;
//   - zstd windows above maxDecompressed are refused;
//   - at most decompressSlots batches are decompressed at once, across all
//     partitions and requests (appends, and the timestamp search of
//     ListOffsets), each slot with its own decoders, so the decoders' memory
//     is bounded too.
//
// Uncompressed batches keep the cheaper in-place walk of walkRecords.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"runtime"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// minRecordBytes is the smallest record: a 1-byte length, then attributes,
// timestamp delta, offset delta, key length, value length and header count
// of one byte each.
const minRecordBytes = 7

// decompressSlots bounds the batches decompressed at once.
var decompressSlots = max(2, min(runtime.GOMAXPROCS(0), 8))

// scanners holds one recordScanner per slot; taking one is taking a slot.
var scanners = func() chan *recordScanner {
	ch := make(chan *recordScanner, decompressSlots)
	for range decompressSlots {
		ch <- &recordScanner{}
	}
	return ch
}()

// DecompressBudget bounds the bytes one request may decompress over all the
// batches it reads (ListOffsets by timestamp). A batch that would go beyond
// what remains is answered at batch granularity instead. nil = only the
// per-batch bound.
type DecompressBudget struct {
	Remaining int64
}

// recordScanner walks the records of one batch, decompressing as it goes.
// It keeps its decoders between batches.
type recordScanner struct {
	gz    *gzip.Reader
	zd    *zstd.Decoder
	lz    *lz4.Reader
	sn    snappyReader
	lim   limitReader
	br    *bufio.Reader
	inner *bytes.Reader
}

// errDecompress marks a records area that does not decompress.
var errDecompress = errors.New("log: records do not decompress")

// open starts reading the decompressed records area src of a batch of the
// given codec, at most limit bytes of it.
func (s *recordScanner) open(codec int16, src []byte, limit int64) error {
	if s.inner == nil {
		s.inner = bytes.NewReader(nil)
	}
	s.inner.Reset(src)
	var r io.Reader
	switch codec {
	case 0:
		r = s.inner
	case 1:
		if s.gz == nil {
			s.gz = new(gzip.Reader)
		}
		if err := s.gz.Reset(s.inner); err != nil {
			return fmt.Errorf("%w: gzip: %v", errDecompress, err)
		}
		r = s.gz
	case 2:
		if err := s.sn.reset(src, limit); err != nil {
			return err
		}
		r = &s.sn
	case 3:
		if s.lz == nil {
			s.lz = lz4.NewReader(nil)
		}
		s.lz.Reset(s.inner)
		r = s.lz
	case 4:
		if s.zd == nil {
			var err error
			s.zd, err = zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxWindow(maxDecompressed), zstd.WithDecoderMaxMemory(maxDecompressed))
			if err != nil {
				return fmt.Errorf("%w: zstd: %v", errDecompress, err)
			}
		}
		if err := s.zd.Reset(s.inner); err != nil {
			return fmt.Errorf("%w: zstd: %v", errDecompress, err)
		}
		r = s.zd
	default:
		return fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
	}
	s.lim = limitReader{r: r, left: limit}
	if s.br == nil {
		s.br = bufio.NewReaderSize(&s.lim, 32<<10)
	} else {
		s.br.Reset(&s.lim)
	}
	return nil
}

// read returns the bytes decompressed so far.
func (s *recordScanner) read(limit int64) int64 { return limit - s.lim.left }

// record reads one record whole: its length, attributes, timestamp delta and
// offset delta, then its key, value and headers (each a varint length, -1
// for null, and that many bytes), which must end exactly at the record's
// length, as Kafka's DefaultRecord reader requires.
func (s *recordScanner) record() (tsDelta, offDelta int64, err error) {
	length, _, err := readVarint(s.br)
	if err != nil {
		return 0, 0, err
	}
	if length < minRecordBytes-1 || length > maxDecompressed {
		return 0, 0, fmt.Errorf("record length %d", length)
	}
	if _, err := s.br.ReadByte(); err != nil { // attributes
		return 0, 0, err
	}
	left := length - 1
	varint := func() (int64, error) {
		v, n, err := readVarint(s.br)
		if left -= int64(n); err == nil && left < 0 {
			err = fmt.Errorf("record fields run past its length %d", length)
		}
		return v, err
	}
	field := func(nullable bool) error {
		n, err := varint()
		switch {
		case err != nil:
			return err
		case n == -1 && nullable:
			return nil
		case n < 0 || n > left:
			return fmt.Errorf("field length %d in a record with %d bytes left", n, left)
		}
		left -= n
		_, err = s.br.Discard(int(n))
		return err
	}
	if tsDelta, err = varint(); err != nil {
		return 0, 0, err
	}
	if offDelta, err = varint(); err != nil {
		return 0, 0, err
	}
	if err := field(true); err != nil { // key
		return 0, 0, err
	}
	if err := field(true); err != nil { // value
		return 0, 0, err
	}
	headers, err := varint()
	if err != nil {
		return 0, 0, err
	}
	if headers < 0 || headers > left {
		return 0, 0, fmt.Errorf("%d headers in a record with %d bytes left", headers, left)
	}
	for range headers {
		if err := field(false); err != nil { // header key
			return 0, 0, err
		}
		if err := field(true); err != nil { // header value
			return 0, 0, err
		}
	}
	if left != 0 {
		return 0, 0, fmt.Errorf("%d bytes after the record's headers", left)
	}
	return tsDelta, offDelta, nil
}

// checkRecordFields checks, in place, what follows an uncompressed record's
// offset delta (rest): key, value and headers ending exactly with the record.
// It is record's grammar on a byte slice (walkRecords keeps the uncompressed
// path free of a reader).
func checkRecordFields(rest []byte) error {
	var ok bool
	if rest, ok = skipField(rest, true); !ok {
		return errors.New("bad key")
	}
	if rest, ok = skipField(rest, true); !ok {
		return errors.New("bad value")
	}
	headers, n := binary.Varint(rest)
	if n <= 0 || headers < 0 || headers > int64(len(rest)-n) {
		return errors.New("bad header count")
	}
	rest = rest[n:]
	for range headers {
		if rest, ok = skipField(rest, false); !ok {
			return errors.New("bad header key")
		}
		if rest, ok = skipField(rest, true); !ok {
			return errors.New("bad header value")
		}
	}
	if len(rest) != 0 {
		return fmt.Errorf("%d bytes after the record's headers", len(rest))
	}
	return nil
}

// skipField skips a varint length (-1: null, if nullable) and that many bytes.
func skipField(b []byte, nullable bool) ([]byte, bool) {
	l, n := binary.Varint(b)
	if n <= 0 {
		return nil, false
	}
	b = b[n:]
	if l == -1 && nullable {
		return b, true
	}
	if l < 0 || l > int64(len(b)) {
		return nil, false
	}
	return b[l:], true
}

// readVarint reads a zigzag varint and says how many bytes it took.
func readVarint(r io.ByteReader) (int64, int, error) {
	var ux uint64
	for i := 0; i < binary.MaxVarintLen64; i++ {
		b, err := r.ReadByte()
		if err != nil {
			return 0, i, err
		}
		if b < 0x80 {
			if i == binary.MaxVarintLen64-1 && b > 1 {
				break
			}
			ux |= uint64(b) << (7 * i)
			x := int64(ux >> 1)
			if ux&1 != 0 {
				x = ^x
			}
			return x, i + 1, nil
		}
		ux |= uint64(b&0x7f) << (7 * i)
	}
	return 0, binary.MaxVarintLen64, errors.New("varint overflows 64 bits")
}

// atEnd reports whether the records area has nothing left.
func (s *recordScanner) atEnd() (bool, error) {
	_, err := s.br.ReadByte()
	if err == io.EOF {
		return true, nil
	}
	return false, err
}

// limitReader fails with errTooLarge past left bytes.
type limitReader struct {
	r    io.Reader
	left int64
}

func (l *limitReader) Read(p []byte) (int, error) {
	if l.left <= 0 {
		var one [1]byte
		if n, _ := l.r.Read(one[:]); n > 0 {
			return 0, errTooLarge
		}
		return l.r.Read(p[:0])
	}
	p = p[:min(int64(len(p)), l.left)]
	n, err := l.r.Read(p)
	l.left -= int64(n)
	return n, err
}

// snappyReader yields a snappy records area: one raw block (librdkafka,
// franz-go) or xerial framing (the Java client: a 16-byte header, then
// blocks each preceded by its big-endian length), one block at a time.
type snappyReader struct {
	src    []byte // blocks not yet decoded (xerial), or the raw block
	xerial bool
	limit  int64 // decoded bytes still allowed
	buf    []byte
	out    []byte // decoded bytes not yet read
}

func (r *snappyReader) reset(src []byte, limit int64) error {
	*r = snappyReader{src: src, limit: limit, buf: r.buf[:0]}
	if bytes.HasPrefix(src, xerialMagic) {
		if len(src) < 16 {
			return fmt.Errorf("%w: short xerial snappy header", errDecompress)
		}
		r.src, r.xerial = src[16:], true
	}
	return nil
}

func (r *snappyReader) Read(p []byte) (int, error) {
	for len(r.out) == 0 {
		if len(r.src) == 0 {
			return 0, io.EOF
		}
		block := r.src
		if r.xerial {
			if len(r.src) < 4 {
				return 0, fmt.Errorf("%w: truncated xerial snappy chunk", errDecompress)
			}
			n := int64(binary.BigEndian.Uint32(r.src))
			if n > int64(len(r.src)-4) {
				return 0, fmt.Errorf("%w: xerial snappy chunk of %d bytes, %d left", errDecompress, n, len(r.src)-4)
			}
			block, r.src = r.src[4:4+n], r.src[4+n:]
		} else {
			r.src = nil
		}
		n, err := s2.DecodedLen(block)
		if err != nil {
			return 0, fmt.Errorf("%w: snappy: %v", errDecompress, err)
		}
		if int64(n) > r.limit {
			return 0, errTooLarge
		}
		r.limit -= int64(n)
		if cap(r.buf) < n {
			r.buf = make([]byte, n)
		}
		out, err := s2.Decode(r.buf[:cap(r.buf)], block)
		if err != nil {
			return 0, fmt.Errorf("%w: snappy: %v", errDecompress, err)
		}
		r.out = out
	}
	n := copy(p, r.out)
	r.out = r.out[n:]
	return n, nil
}

// validateCompressedRecords decompresses the records area of a client batch
// as a stream and checks it against the header: h.RecordCount records with
// offset deltas 0..count-1, nothing after them, at most maxDecompressed
// bytes (limit).
func validateCompressedRecords(b []byte, h *batchHeader, limit int64) error {
	if int64(h.RecordCount) > limit/minRecordBytes {
		return fmt.Errorf("%w: %d records cannot fit in the %d bytes a batch may decompress to", ErrCorruptBatch, h.RecordCount, limit)
	}
	s := <-scanners
	defer func() { scanners <- s }()
	codec := h.Attributes & attrCompressionMask
	if err := s.open(codec, b[batchHeaderSize:], limit); err != nil {
		return fmt.Errorf("%w: %v", ErrCorruptBatch, err)
	}
	for i := int32(0); i < h.RecordCount; i++ {
		_, delta, err := s.record()
		if err != nil {
			return fmt.Errorf("%w: record %d of %d: %v", ErrCorruptBatch, i, h.RecordCount, decompressErr(err, limit))
		}
		if delta != int64(i) {
			return fmt.Errorf("%w: record %d has offset delta %d", ErrCorruptBatch, i, delta)
		}
	}
	end, err := s.atEnd()
	if err != nil {
		return fmt.Errorf("%w: after record %d: %v", ErrCorruptBatch, h.RecordCount, decompressErr(err, limit))
	}
	if !end {
		return fmt.Errorf("%w: more records than the header's count %d", ErrCorruptBatch, h.RecordCount)
	}
	return nil
}

// decompressErr words a scanning error for a client.
func decompressErr(err error, limit int64) error {
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("decompresses beyond %d bytes", limit)
	case err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF):
		return errors.New("records end early")
	}
	return err
}
