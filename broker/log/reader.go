package log

import (
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/sluicehq/sluice/internal/vfs"
)

const readChunk = 32 << 10

var chunkPool = sync.Pool{New: func() any { b := make([]byte, readChunk); return &b }}

// fileReader reads a region [start, end) of a file through a buffer, so that
// walking batch headers costs one pread per chunk rather than one per batch.
type fileReader struct {
	f        vfs.File
	end      int64
	window   int // bytes read ahead per pread
	buf      []byte
	bufStart int64
	bufLen   int
	pooled   *[]byte
}

func newFileReader(f vfs.File, end int64) *fileReader {
	p := chunkPool.Get().(*[]byte)
	return &fileReader{f: f, end: end, window: readChunk, buf: *p, pooled: p}
}

// headerWindow is the read-ahead of the fetch path, which only needs batch
// headers: small, so that finding a region's ends does not copy the region
// (the data itself goes out with sendfile).
const headerWindow = 2048

func newHeaderReader(f vfs.File, end int64) *fileReader {
	r := newFileReader(f, end)
	r.window = headerWindow
	return r
}

func (r *fileReader) release() {
	if r.pooled != nil {
		*r.pooled = r.buf[:cap(r.buf)]
		if cap(r.buf) == readChunk {
			chunkPool.Put(r.pooled)
		}
		r.pooled = nil
	}
}

// errShort means fewer than the requested bytes exist before end.
var errShort = errors.New("log: short read")

// at returns n bytes at pos. The slice is valid until the next call.
func (r *fileReader) at(pos int64, n int) ([]byte, error) {
	if pos < 0 || int64(n) > r.end-pos {
		return nil, errShort
	}
	if pos >= r.bufStart && pos+int64(n) <= r.bufStart+int64(r.bufLen) {
		o := int(pos - r.bufStart)
		return r.buf[o : o+n], nil
	}
	want := max(n, r.window)
	if int64(want) > r.end-pos {
		want = int(r.end - pos)
	}
	if cap(r.buf) < want {
		r.buf = make([]byte, want)
	}
	r.buf = r.buf[:cap(r.buf)]
	m, err := r.f.ReadAt(r.buf[:want], pos)
	if m < want {
		if err == nil || err == io.EOF {
			err = fmt.Errorf("log: segment ends before %d: %w", pos+int64(want), io.ErrUnexpectedEOF)
		}
		r.bufLen = 0
		return nil, err
	}
	r.bufStart, r.bufLen = pos, want
	return r.buf[:n], nil
}

// header reads and frame-checks the batch header at pos.
func (r *fileReader) header(pos int64) (batchHeader, error) {
	b, err := r.at(pos, batchHeaderSize)
	if err != nil {
		return batchHeader{}, err
	}
	h := parseHeader(b)
	if err := checkFrame(&h, r.end-pos); err != nil {
		return h, err
	}
	return h, nil
}
