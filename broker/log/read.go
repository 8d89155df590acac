package log

import (
	"fmt"
	"io"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Region is a byte range of one segment file holding whole batches. It pins
// the file open until Close.
type Region interface {
	// Len is the number of bytes in the region.
	Len() int64
	// WriteTo copies the region to w, with sendfile(2) when w is a socket
	// (syscall.Conn) and the segment is on disk.
	WriteTo(w io.Writer) (int64, error)
	// Bytes copies the region into memory (tests, replication).
	Bytes() ([]byte, error)
	// Close releases the segment file; always call it.
	Close() error
	// BaseOffset is the base offset of the region's first batch (which may
	// be below the offset asked for); -1 for an empty region.
	BaseOffset() int64
	// LastOffset is the last offset of the region's last batch; -1 for an
	// empty region. Offsets are contiguous (no compaction), so a non-empty
	// region holds LastOffset() - BaseOffset() + 1 records.
	LastOffset() int64
}

type emptyRegion struct{}

func (emptyRegion) BaseOffset() int64                { return -1 }
func (emptyRegion) LastOffset() int64                { return -1 }
func (emptyRegion) Len() int64                       { return 0 }
func (emptyRegion) WriteTo(io.Writer) (int64, error) { return 0, nil }
func (emptyRegion) Bytes() ([]byte, error)           { return nil, nil }
func (emptyRegion) Close() error                     { return nil }

type fileRegion struct {
	cache    *fileCache
	h        *handle
	f        vfs.File
	pos, n   int64
	base     int64 // first batch's base offset
	last     int64 // last batch's last offset
	once     sync.Once
	released bool
}

func (r *fileRegion) Len() int64        { return r.n }
func (r *fileRegion) BaseOffset() int64 { return r.base }
func (r *fileRegion) LastOffset() int64 { return r.last }

func (r *fileRegion) Bytes() ([]byte, error) {
	b := make([]byte, r.n)
	m, err := r.f.ReadAt(b, r.pos)
	if int64(m) == r.n {
		return b, nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF // the log was truncated under the reader
	}
	return nil, fmt.Errorf("log: read region: %w", err)
}

func (r *fileRegion) WriteTo(w io.Writer) (int64, error) {
	if rf, ok := r.f.(vfs.RawFile); ok {
		if sc, ok := w.(syscall.Conn); ok {
			n, handled, err := sendfile(sc, rf, r.pos, r.n)
			if handled {
				return n, err
			}
		}
	}
	return io.Copy(w, io.NewSectionReader(r.f, r.pos, r.n))
}

func (r *fileRegion) Close() error {
	r.once.Do(func() { r.cache.release(r.h) })
	return nil
}

// sendfile copies n bytes at off of src to dst in the kernel. The offset is
// passed explicitly, so concurrent readers of one file do not share a file
// position. handled is false if sendfile is not possible for this pair (the
// caller then copies through user space).
func sendfile(dst syscall.Conn, src vfs.RawFile, off, n int64) (written int64, handled bool, err error) {
	drc, err := dst.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	src0, err := src.SyscallConn()
	if err != nil {
		return 0, false, nil
	}
	var serr error
	unsupported := false
	werr := drc.Write(func(outfd uintptr) bool {
		for written < n {
			var m int
			var e error
			cerr := src0.Control(func(infd uintptr) {
				o := off + written
				m, e = syscall.Sendfile(int(outfd), int(infd), &o, int(min(n-written, 1<<30)))
			})
			if cerr != nil {
				serr = cerr
				return true
			}
			if m > 0 {
				written += int64(m)
			}
			switch {
			case e == syscall.EAGAIN:
				return false // wait until the socket is writable
			case e == syscall.EINTR:
				continue
			case e == syscall.EINVAL || e == syscall.ENOSYS || e == syscall.EOPNOTSUPP:
				if written == 0 {
					unsupported = true
				} else {
					serr = e
				}
				return true
			case e != nil:
				serr = e
				return true
			case m == 0:
				serr = io.ErrUnexpectedEOF // the file is shorter than the region
				return true
			}
		}
		return true
	})
	if unsupported {
		return 0, false, nil
	}
	if werr != nil && serr == nil {
		serr = werr
	}
	if serr != nil {
		return written, true, fmt.Errorf("log: sendfile: %w", serr)
	}
	return written, true, nil
}

// Read returns whole batches starting with the one that contains offset, up
// to maxBytes (but at least one whole batch if any is available) and only
// batches that end before maxOffset (the caller passes the high watermark or
// the log end). An offset outside [LogStartOffset, LogEndOffset] is
// ErrOffsetOutOfRange; offset == LogEndOffset (or >= maxOffset) gives an
// empty Region. A Region stops at a segment end.
func (l *Log) Read(offset int64, maxBytes int, maxOffset int64) (Region, error) {
	for {
		l.mu.RLock()
		if l.closed {
			l.mu.RUnlock()
			return nil, ErrClosed
		}
		if offset < l.logStart || offset > l.leo {
			start, end := l.logStart, l.leo
			l.mu.RUnlock()
			return nil, fmt.Errorf("%w: offset %d, log %s holds [%d, %d)", ErrOffsetOutOfRange, offset, l.tp, start, end)
		}
		if offset == l.leo || offset >= maxOffset {
			l.mu.RUnlock()
			return emptyRegion{}, nil
		}
		i := l.segmentIndexLocked(offset)
		s := l.segments[i]
		end, isLast := s.size, i == len(l.segments)-1
		f, err := l.cache.acquire(s.h)
		l.mu.RUnlock()
		if err != nil {
			return nil, err
		}
		if err := l.ensureLoaded(s, end); err != nil {
			l.cache.release(s.h)
			return nil, err
		}
		region, found, err := readRegion(f, s, end, offset, maxBytes, maxOffset)
		if err != nil || !found {
			l.cache.release(s.h)
			if err != nil {
				return nil, err
			}
			if isLast {
				return emptyRegion{}, nil
			}
			// offset is past this segment's last batch: it starts the next one.
			offset = max(offset, s.base)
			l.mu.RLock()
			if i+1 < len(l.segments) {
				offset = max(offset, l.segments[i+1].base)
			}
			l.mu.RUnlock()
			continue
		}
		if region.n == 0 {
			l.cache.release(s.h)
			return emptyRegion{}, nil
		}
		region.cache, region.h = l.cache, s.h
		return region, nil
	}
}

// readRegion finds the batches to return within one segment.
func readRegion(f vfs.File, s *segment, end, offset int64, maxBytes int, maxOffset int64) (*fileRegion, bool, error) {
	r := newHeaderReader(f, end)
	defer r.release()
	start, h, err := findBatch(r, s, offset)
	if err != nil {
		return nil, false, fmt.Errorf("log: read %s: %w", s.logPath(), err)
	}
	if start >= end {
		return nil, false, nil
	}
	pos, total := start, int64(0)
	first, last := h.BaseOffset, int64(-1)
	if h.lastOffset() < maxOffset {
		// Skip whole batches through the offset index: every batch before an
		// entry ends before the entry's offset.
		if base, at := s.lookupPosition(start+int64(maxBytes), maxOffset); at > start && at < end {
			if hh, err := r.header(at); err == nil && hh.BaseOffset == base {
				pos, total, h = at, at-start, hh
				last = base - 1 // the skipped batches end just before it
			}
		}
	}
	for {
		if h.lastOffset() >= maxOffset || (total > 0 && total+h.size() > int64(maxBytes)) {
			break
		}
		total += h.size()
		pos += h.size()
		last = h.lastOffset()
		if pos >= end {
			break
		}
		if h, err = r.header(pos); err != nil {
			return nil, false, fmt.Errorf("log: read %s: %w", s.logPath(), err)
		}
	}
	return &fileRegion{f: f, pos: start, n: total, base: first, last: last}, true, nil
}

// OffsetForTimestamp returns the offset and timestamp of the first record
// with a timestamp >= ts (at or after the log start), as Kafka's ListOffsets
// does: it finds the first batch whose max timestamp is >= ts through the
// time index, then walks that batch's records (decompressing it, bounded to
// 64 MiB). A batch whose records cannot be read is answered with its base
// offset and max timestamp; LogAppendTime batches with their first offset.
func (l *Log) OffsetForTimestamp(ts int64) (offset, timestamp int64, found bool, err error) {
	return l.OffsetForTimestampWithin(ts, nil)
}

// OffsetForTimestampWithin is OffsetForTimestamp decompressing at most what
// budget has left (and taking what it used from it); nil = no budget beyond
// the per-batch bound. A batch that cannot be searched within the budget is
// answered at batch granularity (its base offset and max timestamp).
func (l *Log) OffsetForTimestampWithin(ts int64, budget *DecompressBudget) (offset, timestamp int64, found bool, err error) {
	l.mu.RLock()
	if l.closed {
		l.mu.RUnlock()
		return 0, 0, false, ErrClosed
	}
	var s *segment
	for _, c := range l.segments {
		if err := l.ensureLoaded(c, c.size); err != nil {
			l.mu.RUnlock()
			return 0, 0, false, err
		}
		if c.maxTimestamp() >= ts {
			s = c
			break
		}
	}
	if s == nil {
		l.mu.RUnlock()
		return 0, 0, false, nil
	}
	logStart, end := l.logStart, s.size
	f, err := l.cache.acquire(s.h)
	l.mu.RUnlock()
	if err != nil {
		return 0, 0, false, err
	}
	defer l.cache.release(s.h)
	r := newHeaderReader(f, end)
	defer r.release()
	from := max(s.timeLookup(ts), logStart)
	pos, h, err := findBatch(r, s, from)
	for err == nil && pos < end {
		if h.MaxTimestamp >= ts && h.lastOffset() >= logStart {
			var whole []byte
			if whole, err = r.at(pos, int(h.size())); err != nil {
				break
			}
			off, rts := firstRecordAtOrAfter(whole, &h, ts, logStart, budget)
			return off, rts, true, nil
		}
		pos += h.size()
		if pos < end {
			h, err = r.header(pos)
		}
	}
	if err != nil {
		return 0, 0, false, fmt.Errorf("log: offset for timestamp: %w", err)
	}
	return 0, 0, false, nil // only batches below the log start reached ts
}
