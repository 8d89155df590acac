package log

import (
	"encoding/binary"
	"fmt"
	"path"
	"sort"
	"sync"

	"github.com/sluicehq/sluice/internal/vfs"
)

// The aborted-transactions index of a segment, <base>.txnindex, has Apache
// Kafka's layout (TransactionIndex / AbortedTxn), byte for byte: a
// concatenation of 34-byte big-endian entries, in the order their ABORT
// markers were appended (ascending LastOffset), one per marker in the
// segment:
//
//	| version int16 = 0 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64 |
//
// The file has no header and no checksum. Entries are appended to the file
// at each sync of the log (syncLocked, before the recovery point moves past
// their markers) and rewritten whole (vfs.WriteFileAtomic) when entries were
// dropped; recovery drops and recomputes every entry whose marker lies at or
// after the offset the producer table is replayed from.
const (
	txnIndexSuffix  = ".txnindex"
	txnEntrySize    = 34
	txnIndexVersion = 0
)

// AbortedTxn is one aborted transaction: producer ProducerID's records from
// FirstOffset up to its ABORT marker at LastOffset are aborted.
// LastStableOffset is the partition's last stable offset right after the
// abort, as Kafka computes it: the first offset of the oldest transaction
// still open, or LastOffset+1 when none is (the high watermark plays no
// part, so the value depends on the log alone).
type AbortedTxn struct {
	ProducerID       int64
	FirstOffset      int64
	LastOffset       int64
	LastStableOffset int64
}

// txnIndex is a segment's aborted-transactions index in memory, loaded
// from its file on first use. Its mutex is a leaf: it is taken with Log.mu
// held (for reading or writing) and no other lock taken under it.
// Entries change only with Log.mu held for writing; a reader holding
// Log.mu for reading may load them.
type txnIndex struct {
	mu      sync.Mutex
	loaded  bool
	entries []AbortedTxn // ascending LastOffset; replaced, never edited in place
	written int          // entries already in the file
	rewrite bool         // the file holds entries no longer valid: write it whole
	exists  bool         // the file exists
}

func (s *segment) txnIndexPath() string { return segmentName(s.dir, s.base, txnIndexSuffix) }

// loadLocked reads the file once. x.mu is held.
func (x *txnIndex) loadLocked(fsys vfs.FS, s *segment) error {
	if x.loaded {
		return nil
	}
	b, err := readWhole(fsys, s.txnIndexPath())
	if err != nil {
		return fmt.Errorf("log: load transaction index: %w", err)
	}
	x.entries, x.exists = decodeTxnIndex(b, s.base), len(b) > 0
	x.written = len(x.entries)
	x.rewrite = len(x.entries)*txnEntrySize != len(b) // a torn or bad tail
	x.loaded = true
	return nil
}

// decodeTxnIndex returns the longest well-formed prefix of a .txnindex file
// whose markers lie in a segment starting at base.
func decodeTxnIndex(b []byte, base int64) []AbortedTxn {
	var out []AbortedTxn
	for ; len(b) >= txnEntrySize; b = b[txnEntrySize:] {
		e := AbortedTxn{
			ProducerID:       int64(binary.BigEndian.Uint64(b[2:])),
			FirstOffset:      int64(binary.BigEndian.Uint64(b[10:])),
			LastOffset:       int64(binary.BigEndian.Uint64(b[18:])),
			LastStableOffset: int64(binary.BigEndian.Uint64(b[26:])),
		}
		if int16(binary.BigEndian.Uint16(b)) != txnIndexVersion || e.ProducerID < 0 || e.FirstOffset < 0 ||
			e.FirstOffset > e.LastOffset || e.LastOffset < base || e.LastStableOffset < 0 ||
			(len(out) > 0 && e.LastOffset <= out[len(out)-1].LastOffset) {
			break
		}
		out = append(out, e)
	}
	return out
}

func appendTxnEntries(dst []byte, es []AbortedTxn) []byte {
	for _, e := range es {
		dst = binary.BigEndian.AppendUint16(dst, txnIndexVersion)
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.ProducerID))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.FirstOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastOffset))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.LastStableOffset))
	}
	return dst
}

// isEmptyOnDisk is a cheap "nothing to drop" for a clean open: loaded with
// no entries. (Unloaded indexes must be loaded to know.)
func (x *txnIndex) isEmptyOnDisk() bool {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.loaded && len(x.entries) == 0
}

// aborted returns the segment's entries (a slice the caller must not modify).
func (s *segment) aborted(fsys vfs.FS) ([]AbortedTxn, error) {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err := s.txn.loadLocked(fsys, s); err != nil {
		return nil, err
	}
	return s.txn.entries, nil
}

// addAborted appends an entry (its marker is the segment's newest batch).
// Log.mu is held for writing.
func (s *segment) addAborted(fsys vfs.FS, e AbortedTxn) error {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err := s.txn.loadLocked(fsys, s); err != nil {
		return err
	}
	if n := len(s.txn.entries); n > 0 && s.txn.entries[n-1].LastOffset >= e.LastOffset {
		// Cannot happen: markers are appended in offset order. Keep the index sorted.
		return fmt.Errorf("log: transaction index of segment %d: marker %d after %d", s.base, e.LastOffset, s.txn.entries[n-1].LastOffset)
	}
	s.txn.entries = append(s.txn.entries, e)
	return nil
}

// dropAbortedFrom drops the entries whose marker is at or after offset.
// Log.mu is held for writing.
func (s *segment) dropAbortedFrom(fsys vfs.FS, offset int64) error {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if err := s.txn.loadLocked(fsys, s); err != nil {
		return err
	}
	es := s.txn.entries
	i := sort.Search(len(es), func(i int) bool { return es[i].LastOffset >= offset })
	if i == len(es) {
		return nil
	}
	s.txn.entries = append([]AbortedTxn(nil), es[:i]...) // readers may hold the old slice
	if i < s.txn.written {
		s.txn.written, s.txn.rewrite = 0, true
	}
	return nil
}

// replaceAborted sets the segment's entries and writes the file whole,
// durably (compaction, before it swaps the segment's data in).
func (s *segment) replaceAborted(fsys vfs.FS, es []AbortedTxn) error {
	s.txn.mu.Lock()
	defer s.txn.mu.Unlock()
	if len(es) == 0 {
		if err := fsys.Remove(s.txnIndexPath()); err != nil && !isNotExist(err) {
			return fmt.Errorf("log: remove transaction index: %w", err)
		}
	} else if err := vfs.WriteFileAtomic(fsys, s.dir, path.Base(s.txnIndexPath()), appendTxnEntries(nil, es)); err != nil {
		return fmt.Errorf("log: write transaction index: %w", err)
	}
	s.txn.entries, s.txn.written, s.txn.rewrite, s.txn.exists, s.txn.loaded = es, len(es), false, len(es) > 0, true
	return nil
}

// persistTxnIndex writes and syncs the entries not yet in the file. An
// append to an existing file leaves its older entries untouched; a rewrite
// replaces the file atomically. created reports a new file (its directory
// entry needs a SyncDir). Log.mu is held for writing.
func (s *segment) persistTxnIndex(fsys vfs.FS) (created bool, err error) {
	x := &s.txn
	x.mu.Lock()
	defer x.mu.Unlock()
	if !x.loaded || (!x.rewrite && x.written == len(x.entries)) {
		return false, nil
	}
	if x.rewrite {
		if len(x.entries) == 0 {
			if err := fsys.Remove(s.txnIndexPath()); err != nil && !isNotExist(err) {
				return false, fmt.Errorf("log: remove transaction index: %w", err)
			}
			x.exists = false
		} else {
			if err := vfs.WriteFileAtomic(fsys, s.dir, path.Base(s.txnIndexPath()), appendTxnEntries(nil, x.entries)); err != nil {
				return false, fmt.Errorf("log: write transaction index: %w", err)
			}
			x.exists = true
		}
		x.written, x.rewrite = len(x.entries), false
		return false, nil
	}
	created = !x.exists
	b := appendTxnEntries(nil, x.entries[x.written:])
	if err := writeTail(fsys, s.txnIndexPath(), b, int64(x.written)*txnEntrySize, false, true); err != nil {
		return false, fmt.Errorf("log: write transaction index: %w", err)
	}
	x.written, x.exists = len(x.entries), true
	return created, nil
}

// persistTxnIndexesLocked makes every segment's new index entries durable;
// syncLocked calls it before it moves the recovery point. Log.mu is held
// for writing.
func (l *Log) persistTxnIndexesLocked() error {
	for _, s := range l.segments {
		created, err := s.persistTxnIndex(l.fs)
		if err != nil {
			return err
		}
		if created {
			l.dirDirty = true
		}
	}
	return nil
}

// AbortedTransactions returns the aborted transactions that overlap the
// offsets [from, to): those whose first offset is below to and whose
// marker is at or after from, ordered by marker offset, as a read_committed
// Fetch answers them (Kafka's UnifiedLog.collectAbortedTransactions). It
// reads the segments from the one holding from and stops early once an
// entry's LastStableOffset reaches to (no transaction open before to can be
// aborted later).
func (l *Log) AbortedTransactions(from, to int64) ([]AbortedTxn, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if l.closed {
		return nil, ErrClosed
	}
	if to <= from {
		return nil, nil
	}
	var out []AbortedTxn
	for i := l.segmentIndexLocked(from); i < len(l.segments); i++ {
		es, err := l.segments[i].aborted(l.fs)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			if e.LastOffset >= from && e.FirstOffset < to {
				out = append(out, e)
			}
			if e.LastStableOffset >= to {
				return out, nil
			}
		}
	}
	return out, nil
}
