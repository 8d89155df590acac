package log

// Log compaction (cleanup.policy=compact).
//
// A pass maps every key of the closed segments (never the active one) to
// its newest offset, then rewrites each closed segment that holds a
// superseded record or a tombstone older than delete.retention.ms:
//
//	before  [0 k1=a][1 k2=b][2 k1=c][3 k2=∅]   (segment 0, closed)   [4 k1=d ...] (active)
//	after   [3 k2=∅]                         (k1's newest is in the active segment)
//
// Offsets never change: a rewritten batch keeps its base offset,
// lastOffsetDelta, timestamps and producer fields (new length, record count,
// CRC), so reads of a compacted log see holes, never renumbered records. An
// idempotent producer's last batch stays (possibly empty) so that the
// producer table rebuilt from the log keeps its sequence. A compressed batch
// is recompressed with its codec; one the cleaner cannot read (beyond 64 MiB
// decompressed, or malformed) is kept whole. Recovery of a compacting log
// accepts growing base offsets instead of contiguous ones.
// The swap of one segment is crash-safe (see swapCleaned): a crash at any
// step leaves the old or the new segment file, never neither.
//
// Transactions (compact_txn.go), as Apache Kafka's cleaner: only segments
// wholly below the first offset of the oldest open transaction are cleaned;
// the records of aborted transactions are removed (and supersede nothing);
// a COMMIT or ABORT marker is kept while any batch of its transaction is
// left, and after that until delete.retention.ms has passed since it was
// written, then removed (an ABORT's index entry first). A producer's last
// batch, marker or not, always stays.

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sync"
	"time"
)

// maxCompactKeyBytes bounds the key map of one cleaner pass (keys are held
// in full, so a hash collision can never drop a live record). A pass that
// reaches it cleans only the segments mapped so far.
var maxCompactKeyBytes = 64 << 20

// cleanerState is a log's compaction state.
type cleanerState struct {
	mu sync.Mutex // serialises passes; guards the fields below
	// closedBytes is the size of the closed segments after the last pass,
	// at is its time: a pass is due when segments were closed since, or
	// tombstones may have expired.
	closedBytes int64
	at          time.Time
}

// CompactResult describes one cleaner pass over a log.
type CompactResult struct {
	SegmentsCleaned int   // segments rewritten
	BytesBefore     int64 // their size before
	BytesAfter      int64 // and after
	RecordsRemoved  int64 // superseded records and expired tombstones dropped
}

// compactRecord is one record of a batch as the cleaner sees it.
type compactRecord struct {
	raw       []byte // the record with its length prefix, as stored
	offset    int64
	key       []byte // nil: no key
	value     []byte // nil: a tombstone
	tombstone bool
}

// parseRecords splits a batch's (decompressed) records area.
func parseRecords(recs []byte, h *batchHeader) ([]compactRecord, error) {
	out := make([]compactRecord, 0, h.RecordCount)
	for i := int32(0); i < h.RecordCount; i++ {
		length, n := binary.Varint(recs)
		if n <= 0 || length < 2 || length > int64(len(recs)-n) {
			return nil, fmt.Errorf("%w: record %d of batch %d: bad length", ErrCorruptBatch, i, h.BaseOffset)
		}
		raw := recs[:n+int(length)]
		rec := recs[n+1 : n+int(length)] // after the attributes byte
		recs = recs[n+int(length):]
		var vals [3]int64
		for j := range vals[:2] { // timestamp delta, offset delta
			v, m := binary.Varint(rec)
			if m <= 0 {
				return nil, fmt.Errorf("%w: record %d of batch %d: bad varint", ErrCorruptBatch, i, h.BaseOffset)
			}
			vals[j], rec = v, rec[m:]
		}
		r := compactRecord{raw: raw, offset: h.BaseOffset + vals[1]}
		keyLen, m := binary.Varint(rec)
		if m <= 0 || keyLen > int64(len(rec)-m) {
			return nil, fmt.Errorf("%w: record %d of batch %d: bad key", ErrCorruptBatch, i, h.BaseOffset)
		}
		rec = rec[m:]
		if keyLen >= 0 {
			r.key, rec = rec[:keyLen], rec[keyLen:]
		}
		valueLen, m := binary.Varint(rec)
		if m <= 0 {
			return nil, fmt.Errorf("%w: record %d of batch %d: bad value", ErrCorruptBatch, i, h.BaseOffset)
		}
		r.tombstone = valueLen < 0
		rec = rec[m:]
		if valueLen >= 0 {
			if valueLen > int64(len(rec)) {
				return nil, fmt.Errorf("%w: record %d of batch %d: bad value length", ErrCorruptBatch, i, h.BaseOffset)
			}
			r.value = rec[:valueLen]
		}
		out = append(out, r)
	}
	return out, nil
}

// cleanerSegment is a closed segment as the cleaner read it.
type cleanerSegment struct {
	seg  *segment
	size int64
}

// forEachBatch reads the batches of a closed segment (its bytes never
// change) and calls fn with each whole batch and its records.
func (l *Log) forEachBatch(cs cleanerSegment, fn func(b []byte, h *batchHeader, recs []compactRecord) error) error {
	f, err := l.cache.acquire(cs.seg.h)
	if err != nil {
		return err
	}
	defer l.cache.release(cs.seg.h)
	r := newFileReader(f, cs.size)
	defer r.release()
	for pos := int64(0); pos < cs.size; {
		h, err := r.header(pos)
		if err != nil {
			return fmt.Errorf("log: compact %s at %d: %w", cs.seg.logPath(), pos, err)
		}
		b, err := r.at(pos, int(h.size()))
		if err != nil {
			return fmt.Errorf("log: compact %s at %d: %w", cs.seg.logPath(), pos, err)
		}
		var recs []compactRecord
		if h.Attributes&attrControl == 0 {
			area, err := decompressRecords(h.Attributes&attrCompressionMask, b[batchHeaderSize:], maxDecompressed)
			if err == nil {
				recs, err = parseRecords(area, &h)
			}
			if err != nil {
				// Records the cleaner cannot read (larger than it decompresses,
				// or malformed) are kept as they are and supersede nothing.
				l.logger.Warn("compaction keeps a batch it cannot read", "segment", cs.seg.base, "batch", h.BaseOffset, "err", err)
				recs = nil
			}
		}
		if err := fn(b, &h, recs); err != nil {
			return err
		}
		pos += h.size()
	}
	return nil
}

// Compact runs one cleaner pass if the log's cleanup policy includes
// compact: in every closed segment (never the active one) it keeps, per key,
// only the newest record, drops tombstones older than delete.retention.ms
// and keeps every offset as it was. Each rewritten segment replaces the old
// one with an atomic rename, so a crash leaves either of them whole.
// Concurrent Compact calls on one log run one after the other.
func (l *Log) Compact() (CompactResult, error) {
	return l.compact(false)
}

// compact runs a pass; ifDue skips it when no segment was closed since the
// last pass and delete.retention.ms has not passed since.
func (l *Log) compact(ifDue bool) (CompactResult, error) {
	var res CompactResult
	l.cleaner.mu.Lock()
	defer l.cleaner.mu.Unlock()
	l.mu.RLock()
	if l.closed || !l.cfg.Compact || len(l.segments) < 2 {
		l.mu.RUnlock()
		return res, nil
	}
	cfg := l.cfg
	closed := make([]cleanerSegment, 0, len(l.segments)-1)
	unstable := l.firstUnstableLocked()
	for i, s := range l.segments[:len(l.segments)-1] {
		if l.segments[i+1].base > unstable {
			break // an open transaction's records are not cleaned (nor are later ones)
		}
		closed = append(closed, cleanerSegment{s, s.size})
	}
	aborted, err := l.abortedIndexLocked()
	if err != nil {
		l.mu.RUnlock()
		return res, err
	}
	now := l.clock.Now()
	var closedBytes int64
	for _, cs := range closed {
		closedBytes += cs.size
	}
	l.mu.RUnlock()
	if ifDue && closedBytes == l.cleaner.closedBytes && now.Sub(l.cleaner.at) < cfg.DeleteRetention {
		return res, nil
	}
	defer func() {
		l.cleaner.closedBytes, l.cleaner.at = closedBytes-res.BytesBefore+res.BytesAfter, now
	}()

	// 1. The newest offset of every key in the closed segments, and the
	// last batch of every producer (kept, maybe empty, so that the producer
	// table rebuilt from the log keeps its sequence).
	latest := map[string]int64{}
	lastOfProducer := map[int64]int64{}
	keyBytes, mapped := 0, 0
	for _, cs := range closed {
		err := l.forEachBatch(cs, func(_ []byte, h *batchHeader, recs []compactRecord) error {
			if h.ProducerID >= 0 {
				lastOfProducer[h.ProducerID] = h.BaseOffset
			}
			if aborted.holds(h) {
				return nil // aborted records supersede nothing
			}
			for _, r := range recs {
				if r.key == nil {
					continue
				}
				if _, ok := latest[string(r.key)]; !ok {
					keyBytes += len(r.key) + 32
				}
				latest[string(r.key)] = r.offset
			}
			return nil
		})
		if err != nil {
			return res, err
		}
		mapped++
		if keyBytes > maxCompactKeyBytes {
			l.logger.Warn("compaction key map full; cleaning the segments mapped so far", "segments", mapped, "key_bytes", keyBytes)
			break
		}
	}
	horizon := now.Add(-cfg.DeleteRetention).UnixMilli()

	// 2. Rewrite each mapped segment that loses something, and swap it in.
	txns := newTxnCleaner(aborted, lastOfProducer, horizon)
	for _, cs := range closed[:mapped] {
		out, removed, err := l.cleanSegment(cs, latest, txns, horizon)
		if err != nil {
			return res, err
		}
		if removed == 0 {
			continue
		}
		swapped, err := l.swapCleaned(cs, out, txns.takeDropped())
		if err != nil {
			return res, err
		}
		if swapped {
			res.SegmentsCleaned++
			res.BytesBefore += cs.size
			res.BytesAfter += int64(len(out))
			res.RecordsRemoved += removed
		}
	}
	if res.SegmentsCleaned > 0 {
		l.logger.Info("compacted", "segments", res.SegmentsCleaned, "bytes_before", res.BytesBefore,
			"bytes_after", res.BytesAfter, "records_removed", res.RecordsRemoved)
	}
	return res, nil
}

// cleanSegment returns the segment's content without superseded records
// and expired tombstones, and how many records it dropped.
func (l *Log) cleanSegment(cs cleanerSegment, latest map[string]int64, txns *txnCleaner, horizon int64) ([]byte, int64, error) {
	out := make([]byte, 0, cs.size)
	var removed int64
	lastOfProducer := txns.lastOfProducer
	txns.takeDropped()
	err := l.forEachBatch(cs, func(b []byte, h *batchHeader, recs []compactRecord) error {
		if h.Attributes&attrControl != 0 {
			if txns.dropMarker(h, b) {
				removed++
				return nil
			}
			out = append(out, b...)
			return nil
		}
		abortedTxn := txns.aborted.holds(h)
		keep := make([]compactRecord, 0, len(recs))
		for _, r := range recs {
			switch {
			case abortedTxn:
				// a record of an aborted transaction
			case r.key == nil:
				keep = append(keep, r)
			case latest[string(r.key)] > r.offset:
				// superseded by a newer record of the key
			case r.tombstone && h.MaxTimestamp < horizon:
				// the newest record of its key, a tombstone past delete.retention.ms
			default:
				keep = append(keep, r)
			}
		}
		removed += int64(len(recs) - len(keep))
		switch {
		case len(keep) == len(recs):
			txns.kept(h)
			out = append(out, b...)
		case len(keep) == 0 && !(h.ProducerID >= 0 && lastOfProducer[h.ProducerID] == h.BaseOffset):
			// the whole batch goes
		default:
			txns.kept(h)
			rebuilt, err := appendRebuiltBatch(out, b, keep)
			if err != nil {
				l.logger.Warn("compaction keeps a batch it cannot recompress", "segment", cs.seg.base, "batch", h.BaseOffset, "err", err)
				out = append(out, b...)
				removed -= int64(len(recs) - len(keep))
				return nil
			}
			out = rebuilt
		}
		return nil
	})
	return out, removed, err
}

// appendRebuiltBatch appends batch b with only the records keep, their
// raw bytes recompressed with the batch's codec: same base offset,
// lastOffsetDelta, timestamps and producer fields; new length, record count
// and CRC. A batch with no records left is written uncompressed.
func appendRebuiltBatch(out, b []byte, keep []compactRecord) ([]byte, error) {
	var raw []byte
	for _, r := range keep {
		raw = append(raw, r.raw...)
	}
	attrs := binary.BigEndian.Uint16(b[offAttributes:])
	codec := int16(attrs) & attrCompressionMask
	if len(keep) == 0 {
		attrs &^= attrCompressionMask
		codec = 0
	}
	area, err := compressRecords(codec, raw)
	if err != nil {
		return out, err
	}
	start := len(out)
	out = append(out, b[:batchHeaderSize]...)
	out = append(out, area...)
	nb := out[start:]
	binary.BigEndian.PutUint32(nb[offLength:], uint32(len(nb)-logOverhead))
	binary.BigEndian.PutUint16(nb[offAttributes:], attrs)
	binary.BigEndian.PutUint32(nb[offRecordCount:], uint32(len(keep)))
	binary.BigEndian.PutUint32(nb[offCRC:], crc32.Checksum(nb[offAttributes:], crcTable))
	return out, nil
}

// swapCleaned replaces the segment with its cleaned content:
//
//  1. write <base>.log.cleaned.tmp and fsync it (a crash: the old segment
//     stands, the .tmp is removed at the next open);
//  2. write the segment's transaction index without the entries of the
//     ABORT markers the cleaning removed (an entry without its marker would
//     hide a later transaction of its producer; a marker without its entry
//     is harmless), then remove the index files (hints; rebuilt from the new file);
//  3. rename the .tmp over <base>.log — atomic: old or new, never neither;
//  4. fsync the directory.
//
// It reports false if the segment changed meanwhile (retention deleted it).
func (l *Log) swapCleaned(cs cleanerSegment, content []byte, droppedAborts map[int64]bool) (bool, error) {
	tmp := segmentName(l.dir, cs.seg.base, logSuffix+".cleaned"+tmpSuffix)
	f, err := l.fs.Create(tmp)
	if err != nil {
		return false, fmt.Errorf("log: compact: create %s: %w", tmp, err)
	}
	_, werr := f.WriteAt(content, 0)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		_ = l.fs.Remove(tmp)
		return false, fmt.Errorf("log: compact: write %s: %w", tmp, werr)
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	j := -1
	for i, s := range l.segments[:len(l.segments)-1] {
		if s == cs.seg {
			j = i
		}
	}
	if l.closed || j < 0 || cs.seg.size != cs.size {
		_ = l.fs.Remove(tmp)
		return false, nil
	}
	if err := l.swapTxnIndexLocked(cs.seg, droppedAborts); err != nil {
		_ = l.fs.Remove(tmp)
		return false, err
	}
	for _, p := range []string{cs.seg.indexPath(), cs.seg.timeIndexPath()} {
		if err := l.fs.Remove(p); err != nil && !isNotExist(err) {
			_ = l.fs.Remove(tmp)
			return false, fmt.Errorf("log: compact: remove index %s: %w", p, err)
		}
	}
	cs.seg.mu.Lock()
	cs.seg.loaded = false // its index files are gone; reload (rebuild) on demand
	cs.seg.mu.Unlock()
	if err := l.fs.RenameReplace(tmp, cs.seg.logPath()); err != nil {
		_ = l.fs.Remove(tmp)
		return false, fmt.Errorf("log: compact: rename %s: %w", tmp, err)
	}
	// From here the live file is the cleaned one: the in-memory segment must
	// say so whatever happens next.
	ns := newSegment(l.dir, cs.seg.base, cs.seg.created)
	ns.size, ns.flushedSize = int64(len(content)), int64(len(content))
	l.segments[j] = ns
	l.cache.remove(cs.seg.h) // readers holding the old file finish on it
	if err := l.fs.SyncDir(l.dir); err != nil {
		return true, fmt.Errorf("log: compact: sync %s: %w", l.dir, err)
	}
	return true, nil
}

// RunCompaction runs a cleaner pass over every open log whose cleanup
// policy includes compact and that closed a segment since its last pass (or
// whose tombstones may have expired since).
func (m *Manager) RunCompaction() error {
	return forEachLog(m.openLogs(), func(l *Log) error {
		_, err := l.compact(true)
		return err
	})
}
