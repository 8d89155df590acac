package log

import (
	"encoding/binary"
	"fmt"
	"log/slog"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// tailKind classifies why recovery stopped before the end of a segment file.
type tailKind int

const (
	tailNone    tailKind = iota
	tailTorn             // the last batch is incomplete: a write cut short by the crash
	tailZeroed           // zero bytes where a batch should start: preallocated or lost pages
	tailCorrupt          // a complete batch with a bad magic, length, CRC or offset
)

func (k tailKind) String() string {
	return [...]string{"none", "torn", "zeroed", "corrupt"}[k]
}

// recoverResult is the outcome of scanning one segment file.
type recoverResult struct {
	end     int64    // position after the last valid batch
	next    int64    // offset after the last valid batch
	batches int      // valid batches scanned
	tail    tailKind // why the scan stopped before size, if it did
	reason  string
}

// recoverSegment validates the batches of a segment file from pos to size,
// expecting the first to start at offset next, and calls fn for each valid
// one. It stops at the first invalid batch; an error is an I/O error only.
// Memory is bounded by the largest batch (never more than size - pos).
func recoverSegment(f vfs.File, size, pos, next int64, fn func(h *batchHeader, pos int64)) (recoverResult, error) {
	return recoverSegmentGaps(f, size, pos, next, false, fn)
}

// recoverSegmentGaps is recoverSegment; with gaps, base offsets need only
// grow (a compacted segment has holes where records were removed).
func recoverSegmentGaps(f vfs.File, size, pos, next int64, gaps bool, fn func(h *batchHeader, pos int64)) (recoverResult, error) {
	r := newFileReader(f, size)
	defer r.release()
	res := recoverResult{end: pos, next: next}
	stop := func(k tailKind, format string, args ...any) (recoverResult, error) {
		res.tail, res.reason = k, fmt.Sprintf(format, args...)
		return res, nil
	}
	for pos < size {
		remaining := size - pos
		n := int(min(remaining, batchHeaderSize))
		b, err := r.at(pos, n)
		if err != nil {
			return res, fmt.Errorf("log: recovery read at %d: %w", pos, err)
		}
		if allZero(b) {
			return stop(tailZeroed, "%d zero bytes at position %d", remaining, pos)
		}
		if n < batchHeaderSize {
			return stop(tailTorn, "%d bytes at position %d, shorter than a batch header", remaining, pos)
		}
		h := parseHeader(b)
		if h.Magic != 2 || h.Length < batchHeaderSize-logOverhead || h.BaseOffset < 0 {
			return stop(tailCorrupt, "bad header at position %d (magic %d, length %d)", pos, h.Magic, h.Length)
		}
		if h.size() > remaining {
			return stop(tailTorn, "batch at position %d needs %d bytes, %d remain", pos, h.size(), remaining)
		}
		whole, err := r.at(pos, int(h.size()))
		if err != nil {
			return res, fmt.Errorf("log: recovery read at %d: %w", pos, err)
		}
		if err := checkCRC(whole, &h); err != nil {
			return stop(tailCorrupt, "batch at position %d: %v", pos, err)
		}
		if h.LastOffsetDelta < 0 || h.RecordCount < 0 {
			return stop(tailCorrupt, "batch at position %d: lastOffsetDelta %d", pos, h.LastOffsetDelta)
		}
		if h.BaseOffset != next && !(gaps && h.BaseOffset > next) {
			return stop(tailCorrupt, "batch at position %d has base offset %d, want %d", pos, h.BaseOffset, next)
		}
		if fn != nil {
			fn(&h, pos)
		}
		pos += h.size()
		next = h.lastOffset() + 1
		res.end, res.next = pos, next
		res.batches++
	}
	return res, nil
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func isNotExist(err error) bool { return vfs.IsNotExist(err) }

// openParams are what a Manager hands to openLog.
type openParams struct {
	fs      vfs.FS
	dir     string
	tp      TopicPartition
	cfg     Config
	clock   clock.Clock
	logger  *slog.Logger
	cache   *fileCache
	metrics *counters
	indexes *indexLRU
	clean   bool // the data directory was shut down cleanly: trust the checkpoint
	fresh   bool // the directory was just created: it is empty
	mgr     *Manager
}

// openLog opens (creating if empty) and recovers the log in p.dir.
//
// The phases, in order: list the directory (clearing leftovers), read the
// partition checkpoint and the leader-epoch cache, drop segments below the
// log start, size the segments, recover the tail past the recovery point
// (or trust a clean checkpoint), seal the segments before the active one,
// cut epochs past the log end, rebuild the producer table and the
// watermarks, and make what recovery found durable.
func openLog(p openParams) (*Log, error) {
	l := &Log{
		tp: p.tp, dir: p.dir, fs: p.fs, cache: p.cache, clock: p.clock, metrics: p.metrics, indexes: p.indexes, mgr: p.mgr,
		logger: p.logger.With("partition", p.tp.String()), cfg: p.cfg, producers: newProducerState(),
	}
	l.lastFlush = l.clock.Now()
	if p.fresh {
		return l, l.createFirstSegment(0)
	}
	bases, err := l.listDir()
	if err != nil {
		return nil, err
	}
	ckpt, haveCkpt := l.readCheckpoint()
	if err := l.readEpochs(); err != nil {
		return nil, err
	}
	if haveCkpt {
		l.logStart = ckpt.LogStartOffset
	} else if len(bases) > 0 {
		l.logStart = bases[0]
	}
	if len(bases) == 0 {
		return l, l.createFirstSegment(l.logStart)
	}
	if bases, err = l.removeSegmentsBelowStart(bases); err != nil {
		return nil, err
	}
	if err := l.statSegments(bases); err != nil {
		return nil, err
	}
	ckpt, recovered, err := l.recoverTail(ckpt, haveCkpt, p.clean)
	if err != nil {
		return nil, err
	}
	if err := l.sealSegments(); err != nil {
		return nil, err
	}
	if err := l.cutEpochsPastEnd(); err != nil {
		return nil, err
	}
	if err := l.restoreState(ckpt, haveCkpt); err != nil {
		return nil, err
	}
	if recovered {
		// Everything scanned is valid now; make it durable (after a process
		// kill it may still be only in the page cache) and move the recovery point.
		l.dirDirty = true
		if err := l.checkpointLocked(); err != nil && !l.deferOnFullDisk(err, deferredCheckpoint) {
			return nil, err
		}
	}
	return l, nil
}

// listDir reads the log's directory: it removes leftover temporary files and
// indexes without their log file, records the producer snapshots it finds in
// l.snapshots and returns the segments' base offsets, both ascending.
func (l *Log) listDir() ([]int64, error) {
	names, err := vfs.ListNames(l.fs, l.dir)
	if err != nil {
		return nil, fmt.Errorf("log: list %s: %w", l.dir, err)
	}
	var bases []int64
	logs := map[int64]bool{}
	var indexFiles []string
	for _, name := range names {
		full := path.Join(l.dir, name)
		switch {
		case strings.HasSuffix(name, tmpSuffix):
			if err := l.fs.Remove(full); err != nil {
				return nil, fmt.Errorf("log: remove leftover %s: %w", full, err)
			}
		case strings.HasSuffix(name, logSuffix):
			if base, ok := parseBase(name, logSuffix); ok {
				bases = append(bases, base)
				logs[base] = true
			}
		case strings.HasSuffix(name, snapshotSuffix):
			if off, ok := parseBase(name, snapshotSuffix); ok {
				l.snapshots = append(l.snapshots, off)
			}
		case strings.HasSuffix(name, indexSuffix), strings.HasSuffix(name, timeIndexSuffix):
			indexFiles = append(indexFiles, name)
		}
	}
	sort.Slice(bases, func(i, j int) bool { return bases[i] < bases[j] })
	sort.Slice(l.snapshots, func(i, j int) bool { return l.snapshots[i] < l.snapshots[j] })
	for _, name := range indexFiles { // indexes without their log file
		base, ok := parseBase(strings.TrimSuffix(strings.TrimSuffix(name, timeIndexSuffix), indexSuffix)+logSuffix, logSuffix)
		if ok && !logs[base] {
			if err := l.fs.Remove(path.Join(l.dir, name)); err != nil {
				return nil, fmt.Errorf("log: remove orphan index: %w", err)
			}
		}
	}
	return bases, nil
}

// readEpochs loads the leader-epoch cache. An unreadable cache is not an
// error: it is left empty, and the recovery scan rebuilds it from the batches
// it reads.
func (l *Log) readEpochs() error {
	b, err := readWhole(l.fs, path.Join(l.dir, epochFile))
	if err != nil {
		return fmt.Errorf("log: read leader-epoch cache: %w", err)
	}
	if len(b) > 0 {
		if l.epochs, err = decodeEpochs(b); err != nil {
			l.logger.Warn("leader-epoch cache unreadable; rebuilding from the scanned tail", "err", err)
			l.epochs = nil
		}
	}
	return nil
}

// removeSegmentsBelowStart removes the segments wholly below the log start,
// left over from an interrupted deletion, and returns the bases kept (never
// none); the log start moves up to the first of them if it is below.
func (l *Log) removeSegmentsBelowStart(bases []int64) ([]int64, error) {
	for len(bases) > 1 && bases[1] <= l.logStart {
		if err := removeSegmentFiles(l.fs, &segment{base: bases[0], dir: l.dir}); err != nil {
			return nil, err
		}
		bases = bases[1:]
	}
	l.logStart = max(l.logStart, bases[0])
	return bases, nil
}

// statSegments sets l.segments to one segment per base, sized from its file
// (all of it taken as flushed until recovery says otherwise).
func (l *Log) statSegments(bases []int64) error {
	now := l.clock.Now()
	for _, base := range bases {
		s := newSegment(l.dir, base, now)
		st, err := l.fs.Stat(s.logPath())
		if err != nil {
			return fmt.Errorf("log: stat %s: %w", s.logPath(), err)
		}
		size := st.Size
		s.size, s.flushedSize = size, size
		l.segments = append(l.segments, s)
	}
	return nil
}

// recoverTail sets the log end. A clean shutdown whose checkpoint ends where
// the active segment ends, or a log never appended to, is trusted; otherwise
// everything past the recovery point is scanned and an invalid tail cut
// (recoverLocked), and recovered is true. It returns the checkpoint the rest
// of the opening works from (made up for a never-used log that has none).
func (l *Log) recoverTail(ckpt partitionCheckpoint, haveCkpt, clean bool) (_ partitionCheckpoint, recovered bool, _ error) {
	last := l.active()
	emptyLog := len(l.segments) == 1 && last.size == 0
	switch {
	case clean && haveCkpt && ckpt.RecoverySegment == last.base && ckpt.RecoveryPosition == last.size:
		l.leo = ckpt.RecoveryOffset
		l.metrics.CleanOpens.Add(1)
	case emptyLog && (!haveCkpt || ckpt.RecoverySegment == last.base && ckpt.RecoveryPosition == 0):
		// Nothing was ever appended (a log gets no checkpoint before its
		// first one): there is nothing to scan, clean stop or not.
		l.leo = last.base
		if !haveCkpt {
			ckpt = partitionCheckpoint{LogStartOffset: l.logStart, RecoveryOffset: l.leo, RecoverySegment: l.leo}
		}
		l.metrics.CleanOpens.Add(1)
	default:
		l.metrics.RecoveryOpens.Add(1)
		return ckpt, true, l.recoverLocked(ckpt, haveCkpt)
	}
	return ckpt, false, nil
}

// sealSegments seals every segment before the active one (counting those
// the recovery scan loaded against the index bound) and loads the active
// segment's indexes, ready for appends.
func (l *Log) sealSegments() error {
	for _, s := range l.segments[:len(l.segments)-1] {
		s.seal()
		if s.loaded { // by the recovery scan: count it against the bound
			l.indexes.touch(s)
		}
	}
	act := l.active()
	if err := l.ensureLoaded(act, act.size); err != nil {
		return err
	}
	act.bytesSinceIndex = act.size
	if n := len(act.index); n > 0 {
		act.bytesSinceIndex = act.size - int64(act.index[n-1].pos)
	}
	return nil
}

// cutEpochsPastEnd drops the epochs that start at or beyond the log end
// (they belong to a cut tail) and, if that or the recovery scan changed the
// cache, persists it, so that a clean reopen finds what recovery found.
func (l *Log) cutEpochsPastEnd() error {
	epochsBefore := len(l.epochs)
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].StartOffset >= l.leo })
	l.epochs = l.epochs[:i]
	if len(l.epochs) != epochsBefore || l.epochsDirty {
		if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(l.epochs)); err != nil && !l.deferOnFullDisk(err, deferredEpochs) {
			return fmt.Errorf("log: write leader-epoch cache: %w", err)
		}
		l.epochsDirty = false
	}
	return nil
}

// restoreState rebuilds what the log keeps beside its segments from the
// checkpoint: the producer table (from its snapshots and the batches after
// them), the high watermark (within the log) and the recovery point.
func (l *Log) restoreState(ckpt partitionCheckpoint, haveCkpt bool) error {
	if haveCkpt {
		l.checkpointed = ckpt
	}
	if err := l.rebuildProducersLocked(); err != nil {
		return err
	}
	l.hw = min(max(ckpt.HighWatermark, l.logStart), l.leo)
	l.recovery = partitionCheckpoint{RecoveryOffset: ckpt.RecoveryOffset, RecoverySegment: ckpt.RecoverySegment, RecoveryPosition: ckpt.RecoveryPosition}
	return nil
}

func parseBase(name, suffix string) (int64, bool) {
	s := strings.TrimSuffix(name, suffix)
	if len(s) != 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(s, 10, 64)
	return v, err == nil && v >= 0
}

func (l *Log) readCheckpoint() (partitionCheckpoint, bool) {
	b, err := readWhole(l.fs, path.Join(l.dir, checkpointFile))
	if err != nil || len(b) == 0 {
		if err != nil {
			l.logger.Warn("partition checkpoint unreadable; recovering from the first segment", "err", err)
		}
		return partitionCheckpoint{}, false
	}
	c, err := decodeCheckpoint(b)
	if err != nil {
		l.logger.Warn("partition checkpoint corrupt; recovering from the first segment", "err", err)
		return partitionCheckpoint{}, false
	}
	return c, true
}

func (l *Log) createFirstSegment(base int64) error {
	s := newSegment(l.dir, base, l.clock.Now())
	s.loaded = true
	f, err := l.fs.Create(s.logPath())
	if err != nil {
		return fmt.Errorf("log: create segment: %w", err)
	}
	l.cache.adopt(s.h, f)
	l.cache.release(s.h)
	l.segments = []*segment{s}
	l.leo, l.logStart, l.hw = base, base, base
	l.recovery = partitionCheckpoint{RecoveryOffset: base, RecoverySegment: base}
	// No checkpoint yet: a log without one is recovered from its first
	// segment, which is all it has until its first roll (which checkpoints).
	l.dirDirty = true
	return nil
}

// recoverLocked scans everything past the recovery point, cuts the first
// invalid tail and drops any segment after it.
func (l *Log) recoverLocked(ckpt partitionCheckpoint, haveCkpt bool) error {
	k, pos, next := 0, int64(0), l.segments[0].base
	if haveCkpt {
		k = l.segmentIndexLocked(ckpt.RecoveryOffset)
		if s := l.segments[k]; s.base == ckpt.RecoverySegment && ckpt.RecoveryPosition <= s.size && ckpt.RecoveryOffset >= s.base {
			pos, next = ckpt.RecoveryPosition, ckpt.RecoveryOffset
			if !l.batchStartsAt(s, pos, next) {
				l.logger.Warn("recovery point does not match the segment; scanning the whole segment", "segment", s.base, "position", pos)
				pos, next = 0, s.base
			}
		} else {
			next = s.base
		}
	}
	interval := int64(l.cfg.IndexIntervalBytes)
	for i := k; i < len(l.segments); i++ {
		s := l.segments[i]
		if i > k {
			pos = 0
		}
		if pos == 0 && (s.base < next || (s.base > next && !l.cfg.Compact)) {
			// A gap between segments: the rest cannot be trusted.
			l.logger.Warn("segment does not continue the log; dropping it and what follows", "segment", s.base, "want", next)
			l.metrics.RecoveredCorrupt.Add(1)
			l.leo = next
			return l.dropSegmentsFromLocked(i)
		}
		if pos > 0 {
			if err := l.ensureLoaded(s, s.size); err != nil {
				return err
			}
			s.truncateIndexes(next-s.base, pos)
		} else {
			s.mu.Lock()
			s.index, s.timeIndex, s.maxTs, s.loaded, s.rewrite = nil, nil, -1, true, true
			s.mu.Unlock()
		}
		s.bytesSinceIndex, s.bytesSinceTime = interval+1, interval+1
		s.flushedSize = pos
		f, err := l.cache.acquire(s.h)
		if err != nil {
			return err
		}
		res, err := recoverSegmentGaps(f, s.size, pos, next, l.cfg.Compact, func(h *batchHeader, at int64) {
			s.onAppend(h, at, interval)
			if h.LeaderEpoch >= 0 && (len(l.epochs) == 0 || l.epochs[len(l.epochs)-1].Epoch < h.LeaderEpoch) {
				l.epochs = append(l.epochs, epochEntry{h.LeaderEpoch, h.BaseOffset})
				l.epochsDirty = true
			}
		})
		l.metrics.RecoveryBytesScanned.Add(res.end - pos)
		l.metrics.RecoveryBatchesScanned.Add(int64(res.batches))
		if err != nil {
			l.cache.release(s.h)
			return err
		}
		next = res.next
		if res.tail != tailNone {
			switch res.tail {
			case tailTorn:
				l.metrics.RecoveredTorn.Add(1)
			case tailZeroed:
				l.metrics.RecoveredZeroed.Add(1)
			case tailCorrupt:
				l.metrics.RecoveredCorrupt.Add(1)
			}
			l.logger.Warn("recovery cut the log", "kind", res.tail.String(), "segment", s.base,
				"position", res.end, "bytes_cut", s.size-res.end, "reason", res.reason)
			if err := truncateAndSync(f, res.end); err != nil {
				l.cache.release(s.h)
				return fmt.Errorf("log: recovery truncate %s: %w", s.logPath(), err)
			}
			l.metrics.RecoveryBytesCut.Add(s.size - res.end)
			s.size = res.end
			l.cache.release(s.h)
			l.leo = next
			return l.dropSegmentsFromLocked(i + 1)
		}
		l.cache.release(s.h)
	}
	l.leo = next
	return nil
}

// batchStartsAt reports whether a batch with base offset next starts at pos
// (or pos is the end of the file), a sanity check of the recovery point.
func (l *Log) batchStartsAt(s *segment, pos, next int64) bool {
	if pos == 0 {
		return next == s.base
	}
	if pos == s.size {
		return true
	}
	f, err := l.cache.acquire(s.h)
	if err != nil {
		return false
	}
	defer l.cache.release(s.h)
	var b [8]byte
	if _, err := f.ReadAt(b[:], pos); err != nil {
		return false
	}
	return int64(binary.BigEndian.Uint64(b[:])) == next
}

// dropSegmentsFromLocked deletes segments i and later (recovery found them
// unusable); an empty log keeps one empty segment at the log end.
func (l *Log) dropSegmentsFromLocked(i int) error {
	if i == 0 {
		i = 1
		s := l.segments[0]
		f, err := l.cache.acquire(s.h)
		if err != nil {
			return err
		}
		err = truncateAndSync(f, 0)
		l.cache.release(s.h)
		if err != nil {
			return fmt.Errorf("log: recovery truncate: %w", err)
		}
		s.size = 0
		s.truncateIndexes(0, 0)
		l.leo = s.base
	}
	if i >= len(l.segments) {
		return nil
	}
	if err := l.removeSnapshotsAboveLocked(l.segments[i].base); err != nil {
		return err
	}
	for _, s := range l.segments[i:] {
		l.cache.remove(s.h)
		l.indexes.remove(s)
		if err := removeSegmentFiles(l.fs, s); err != nil {
			return err
		}
	}
	l.segments = l.segments[:i]
	l.dirDirty = true
	return nil
}

// rebuildProducersLocked loads the newest usable producer snapshot at or
// below the log end and replays the batch headers after it.
func (l *Log) rebuildProducersLocked() error {
	var kept []int64
	for _, off := range l.snapshots {
		if off > l.leo {
			if err := l.fs.Remove(path.Join(l.dir, snapshotName(off))); err != nil && !isNotExist(err) {
				return fmt.Errorf("log: remove producer snapshot: %w", err)
			}
			continue
		}
		kept = append(kept, off)
	}
	l.snapshots = kept
	ps, from := newProducerState(), l.segments[0].base
	newest := true
	for i := len(l.snapshots) - 1; i >= 0; i-- {
		b, err := readWhole(l.fs, path.Join(l.dir, snapshotName(l.snapshots[i])))
		if err != nil {
			return fmt.Errorf("log: read producer snapshot: %w", err)
		}
		if s, err := decodeProducerState(b); err == nil {
			ps, from = s, max(l.snapshots[i], from)
			break
		} else {
			newest = false
			l.logger.Warn("producer snapshot unreadable; trying an older one", "offset", l.snapshots[i], "err", err)
		}
	}
	// The checkpoint may say the table did not change after that snapshot.
	if at := l.checkpointed.ProducersAt; newest && at >= from && at <= l.leo {
		from = at
	}
	n, err := l.replayProducersLocked(ps, from)
	if err != nil {
		return err
	}
	ps.dirty = n > 0
	l.producers = ps
	l.metrics.ProducerBatchesReplayed.Add(int64(n))
	return nil
}

// scanHeadersLocked calls fn with the header of every batch from the one
// holding offset from to the log end, its segment, and a reader of the
// segment file positioned for it (the batch starts at pos); an error from fn stops the scan.
func (l *Log) scanHeadersLocked(from int64, fn func(h *batchHeader, s *segment, r *fileReader, pos int64) error) error {
	if from >= l.leo {
		return nil
	}
	i := l.segmentIndexLocked(from)
	for ; i < len(l.segments); i++ {
		s := l.segments[i]
		if err := l.ensureLoaded(s, s.size); err != nil {
			return err
		}
		f, err := l.cache.acquire(s.h)
		if err != nil {
			return err
		}
		r := newHeaderReader(f, s.size)
		pos, _, err := findBatch(r, s, from)
		for err == nil && pos < s.size {
			var h batchHeader
			if h, err = r.header(pos); err == nil {
				if err = fn(&h, s, r, pos); err == nil {
					pos += h.size()
				}
			}
		}
		r.release()
		l.cache.release(s.h)
		if err != nil {
			return fmt.Errorf("log: scan %s: %w", s.logPath(), err)
		}
	}
	return nil
}

// findBatch returns the position of the first batch in s whose last offset is
// >= offset (s.size if none). Index entries are checked before being trusted.
func findBatch(r *fileReader, s *segment, offset int64) (int64, batchHeader, error) {
	base, pos := s.lookup(offset)
	if pos > 0 {
		if b, err := r.at(pos, batchHeaderSize); err != nil || parseHeader(b).BaseOffset != base {
			pos = 0 // a stale index entry: fall back to a scan from the start
		}
	}
	for pos < r.end {
		h, err := r.header(pos)
		if err != nil {
			return pos, h, err
		}
		if h.lastOffset() >= offset {
			return pos, h, nil
		}
		pos += h.size()
	}
	return pos, batchHeader{}, nil
}

func truncateAndSync(f vfs.File, size int64) error {
	if err := f.Truncate(size); err != nil {
		return err
	}
	return f.Sync()
}
