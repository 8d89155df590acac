package log

import (
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

const (
	logSuffix       = ".log"
	indexSuffix     = ".index"
	timeIndexSuffix = ".timeindex"
	indexEntrySize  = 8  // relative offset uint32, position uint32
	timeEntrySize   = 12 // max timestamp int64, relative offset uint32
)

func segmentName(dir string, base int64, suffix string) string {
	return path.Join(dir, fmt.Sprintf("%020d%s", base, suffix))
}

// indexEntry maps a batch's base offset (relative to the segment) to its file position.
type indexEntry struct{ rel, pos uint32 }

// timeEntry says: batches up to and including the one at relative offset rel
// have timestamps <= ts, and ts is the largest seen so far.
type timeEntry struct {
	ts  int64
	rel uint32
}

// segment is one log file and its two sparse indexes.
//
// Fields under "Log.mu" are written only with the log's write lock held and
// read with at least its read lock. The indexes are guarded by seg.mu, since
// readers load them lazily while holding only the log's read lock.
type segment struct {
	base int64
	dir  string
	h    *handle

	// Guarded by Log.mu.
	size            int64     // committed bytes: everything below is whole, valid batches
	flushedSize     int64     // bytes known to be synced
	bytesSinceIndex int64     // bytes appended since the last offset-index entry
	bytesSinceTime  int64     // bytes appended since the last time-index entry
	created         time.Time // clock time of creation or of the open that found it (segment.ms)

	mu           sync.Mutex // guards the fields below
	loaded       bool       // index and timeIndex reflect the files (or a scan)
	index        []indexEntry
	timeIndex    []timeEntry
	maxTs        int64  // largest batch maxTimestamp in the segment, -1 if none
	maxTsRel     uint32 // relative offset of the batch with maxTs
	indexWritten int    // entries of index already in the file
	timeWritten  int    // entries of timeIndex already in the file
	rewrite      bool   // the index files must be rewritten from scratch
	sealed       bool   // closed to appends: the index LRU may unload its indexes

	txn txnIndex // aborted transactions whose markers are in the segment (txn_index.go)
}

func newSegment(dir string, base int64, now time.Time) *segment {
	return &segment{
		base:    base,
		dir:     dir,
		h:       &handle{path: segmentName(dir, base, logSuffix)},
		created: now,
		maxTs:   -1,
	}
}

func (s *segment) logPath() string       { return segmentName(s.dir, s.base, logSuffix) }
func (s *segment) indexPath() string     { return segmentName(s.dir, s.base, indexSuffix) }
func (s *segment) timeIndexPath() string { return segmentName(s.dir, s.base, timeIndexSuffix) }

// readWhole reads a whole small file (an index, a checkpoint); a missing
// file reads as empty.
func readWhole(fsys vfs.FS, name string) ([]byte, error) {
	b, err := vfs.ReadFile(fsys, name)
	if vfs.IsNotExist(err) {
		return nil, nil
	}
	return b, err
}

// loadIndexesLocked reads the index files, keeping only the prefix of entries
// that is well-formed (monotonic, inside the committed size). s.mu is held.
// Entries are hints: a reader checks that an entry points at the batch it
// names before trusting it (see Log.position).
func (s *segment) loadIndexesLocked(fsys vfs.FS, size int64) error {
	if s.loaded {
		return nil
	}
	b, err := readWhole(fsys, s.indexPath())
	if err != nil {
		return fmt.Errorf("log: load offset index: %w", err)
	}
	s.index = s.index[:0]
	for i := 0; i+indexEntrySize <= len(b); i += indexEntrySize {
		e := indexEntry{binary.BigEndian.Uint32(b[i:]), binary.BigEndian.Uint32(b[i+4:])}
		if int64(e.pos) >= size || e.pos == 0 {
			break
		}
		if n := len(s.index); n > 0 && (e.rel <= s.index[n-1].rel || e.pos <= s.index[n-1].pos) {
			break
		}
		s.index = append(s.index, e)
	}
	indexBytes := len(b)
	b, err = readWhole(fsys, s.timeIndexPath())
	if err != nil {
		return fmt.Errorf("log: load time index: %w", err)
	}
	s.timeIndex = s.timeIndex[:0]
	for i := 0; i+timeEntrySize <= len(b); i += timeEntrySize {
		e := timeEntry{int64(binary.BigEndian.Uint64(b[i:])), binary.BigEndian.Uint32(b[i+8:])}
		if n := len(s.timeIndex); n > 0 && (e.ts <= s.timeIndex[n-1].ts || e.rel < s.timeIndex[n-1].rel) {
			break
		}
		s.timeIndex = append(s.timeIndex, e)
	}
	if len(s.timeIndex) == 0 && size > 0 {
		// Missing or empty indexes (lost files, an old crash): rebuild them
		// from the batch headers, so reads and time retention stay exact.
		return s.rebuildIndexesLocked(fsys, size)
	}
	s.indexWritten, s.timeWritten = len(s.index), len(s.timeIndex)
	// A file longer than its valid prefix is rewritten at the next persist.
	s.rewrite = len(s.index)*indexEntrySize != indexBytes || len(s.timeIndex)*timeEntrySize != len(b)
	if n := len(s.timeIndex); n > 0 {
		s.maxTs, s.maxTsRel = s.timeIndex[n-1].ts, s.timeIndex[n-1].rel
	}
	s.loaded = true
	return nil
}

// lookup returns the largest index entry with base offset <= offset (or the
// segment start).
func (s *segment) lookup(offset int64) (base int64, pos int64) {
	s.mu.Lock()
	idx := s.index
	s.mu.Unlock()
	rel := offset - s.base
	i := sort.Search(len(idx), func(i int) bool { return int64(idx[i].rel) > rel })
	if i == 0 {
		return s.base, 0
	}
	return s.base + int64(idx[i-1].rel), int64(idx[i-1].pos)
}

// lookupPosition returns the last index entry at or below position limit
// whose offset is at most maxOffset, as (offset, position); position 0 if none.
func (s *segment) lookupPosition(limit, maxOffset int64) (int64, int64) {
	s.mu.Lock()
	idx := s.index
	s.mu.Unlock()
	i := sort.Search(len(idx), func(i int) bool {
		return int64(idx[i].pos) > limit || s.base+int64(idx[i].rel) > maxOffset
	})
	if i == 0 {
		return s.base, 0
	}
	return s.base + int64(idx[i-1].rel), int64(idx[i-1].pos)
}

// timeLookup returns the largest time entry with ts < target as (offset) to
// start a scan from; every batch before it has a smaller timestamp.
func (s *segment) timeLookup(target int64) int64 {
	s.mu.Lock()
	ti := s.timeIndex
	s.mu.Unlock()
	i := sort.Search(len(ti), func(i int) bool { return ti[i].ts >= target })
	if i == 0 {
		return s.base
	}
	return s.base + int64(ti[i-1].rel)
}

// maxTimestamp returns the largest timestamp in the segment (-1 if none).
func (s *segment) maxTimestamp() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxTs
}

// onAppend records a batch appended at pos in the indexes. Log.mu is held for writing.
func (s *segment) onAppend(h *batchHeader, pos int64, interval int64) {
	rel := uint32(h.BaseOffset - s.base)
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.bytesSinceIndex > interval && pos > 0 {
		s.index = append(s.index, indexEntry{rel, uint32(pos)})
		s.bytesSinceIndex = 0
	}
	s.bytesSinceIndex += h.size()
	s.bytesSinceTime += h.size()
	if h.MaxTimestamp > s.maxTs {
		s.maxTs, s.maxTsRel = h.MaxTimestamp, rel
		if s.bytesSinceTime > interval {
			s.timeIndex = append(s.timeIndex, timeEntry{h.MaxTimestamp, rel})
			s.bytesSinceTime = 0
		}
	}
}

// indexFull reports whether the offset index reached segment.index.bytes.
func (s *segment) indexFull(maxIndexBytes int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return (len(s.index)+1)*indexEntrySize > maxIndexBytes || (len(s.timeIndex)+1)*timeEntrySize > maxIndexBytes
}

// sealTimeIndexLocked appends a time entry for the exact max timestamp if the
// sparse index does not have it yet, so a segment's last time entry is its max.
func (s *segment) sealTimeIndexLocked() {
	if s.maxTs < 0 {
		return
	}
	if n := len(s.timeIndex); n == 0 || s.timeIndex[n-1].ts < s.maxTs {
		s.timeIndex = append(s.timeIndex, timeEntry{s.maxTs, s.maxTsRel})
		s.bytesSinceTime = 0
	}
}

// persistIndexes writes the index entries not yet in the files, and syncs
// them if sync is set. Log.mu is held for writing (so no entry changes
// meanwhile); s.mu is held only to copy the entries, so readers looking up
// the index are not blocked by the file I/O.
func (s *segment) persistIndexes(fsys vfs.FS, sync bool) error {
	s.mu.Lock()
	if !s.loaded {
		s.mu.Unlock()
		return nil // nothing changed since the files were written
	}
	s.sealTimeIndexLocked()
	rewrite := s.rewrite
	iw, tw := s.indexWritten, s.timeWritten
	if rewrite {
		iw, tw = 0, 0
	}
	if !rewrite && iw == len(s.index) && tw == len(s.timeIndex) {
		s.mu.Unlock()
		return nil
	}
	ib := make([]byte, 0, (len(s.index)-iw)*indexEntrySize)
	for _, e := range s.index[iw:] {
		ib = binary.BigEndian.AppendUint32(ib, e.rel)
		ib = binary.BigEndian.AppendUint32(ib, e.pos)
	}
	tb := make([]byte, 0, (len(s.timeIndex)-tw)*timeEntrySize)
	for _, e := range s.timeIndex[tw:] {
		tb = binary.BigEndian.AppendUint64(tb, uint64(e.ts))
		tb = binary.BigEndian.AppendUint32(tb, e.rel)
	}
	ni, nt := len(s.index), len(s.timeIndex)
	s.mu.Unlock()

	if err := writeTail(fsys, s.indexPath(), ib, int64(iw)*indexEntrySize, rewrite, sync); err != nil {
		return fmt.Errorf("log: write offset index: %w", err)
	}
	if err := writeTail(fsys, s.timeIndexPath(), tb, int64(tw)*timeEntrySize, rewrite, sync); err != nil {
		return fmt.Errorf("log: write time index: %w", err)
	}
	s.mu.Lock()
	s.indexWritten, s.timeWritten, s.rewrite = ni, nt, false
	s.mu.Unlock()
	return nil
}

// writeTail writes b at off of name (created if missing), cutting the file at
// off+len(b), and syncs it if sync is set.
func writeTail(fsys vfs.FS, name string, b []byte, off int64, rewrite, sync bool) error {
	f, err := fsys.OpenReadWrite(name)
	if vfs.IsNotExist(err) || rewrite {
		if f != nil {
			f.Close()
		}
		f, err = fsys.Create(name)
		off = 0
	}
	if err != nil {
		return err
	}
	if len(b) > 0 {
		if _, err := f.WriteAt(b, off); err != nil {
			f.Close()
			return err
		}
	}
	if err := f.Truncate(off + int64(len(b))); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// truncateIndexesLocked drops index entries at or after relative offset rel / position pos.
func (s *segment) truncateIndexes(rel int64, pos int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.index), func(i int) bool { return int64(s.index[i].pos) >= pos })
	s.index = append([]indexEntry(nil), s.index[:i]...) // readers may hold the old slice
	j := sort.Search(len(s.timeIndex), func(j int) bool { return int64(s.timeIndex[j].rel) >= rel })
	s.timeIndex = append([]timeEntry(nil), s.timeIndex[:j]...)
	s.maxTs, s.maxTsRel = -1, 0
	if j > 0 {
		s.maxTs, s.maxTsRel = s.timeIndex[j-1].ts, s.timeIndex[j-1].rel
	}
	s.rewrite = true
	s.loaded = true
}

// rebuildIndexesLocked scans the batch headers of the segment's first size
// bytes and rebuilds both indexes in memory; they are written at the next
// checkpoint. s.mu is held.
func (s *segment) rebuildIndexesLocked(fsys vfs.FS, size int64) error {
	f, err := fsys.Open(s.logPath())
	if err != nil {
		return fmt.Errorf("log: rebuild index: %w", err)
	}
	defer f.Close()
	r := newFileReader(f, size)
	defer r.release()
	s.index, s.timeIndex, s.maxTs, s.maxTsRel = nil, nil, -1, 0
	var sinceIndex, sinceTime int64
	for pos := int64(0); pos < size; {
		h, err := r.header(pos)
		if err != nil || h.BaseOffset < s.base {
			break // the entries are hints; recovery or the reader validates the bytes
		}
		rel := uint32(h.BaseOffset - s.base)
		if sinceIndex > indexRebuildInterval && pos > 0 {
			s.index = append(s.index, indexEntry{rel, uint32(pos)})
			sinceIndex = 0
		}
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsRel = h.MaxTimestamp, rel
			if sinceTime > indexRebuildInterval {
				s.timeIndex = append(s.timeIndex, timeEntry{h.MaxTimestamp, rel})
				sinceTime = 0
			}
		}
		sinceIndex += h.size()
		sinceTime += h.size()
		pos += h.size()
	}
	s.sealTimeIndexLocked()
	s.rewrite, s.loaded = true, true
	s.indexWritten, s.timeWritten = 0, 0
	return nil
}

// indexRebuildInterval is the entry spacing of rebuilt indexes (the default
// index.interval.bytes; the segment does not know its log's config).
const indexRebuildInterval = 4096
