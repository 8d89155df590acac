package log

import (
	"fmt"
	"github.com/sluicehq/sluice/internal/vfs"
	"sort"
)

// TruncateTo removes every batch at or after offset (a follower diverging
// from its leader). If offset falls inside a batch, that whole batch goes,
// so the new log end is that batch's base offset. An offset below the log
// start empties the log and restarts it at offset.
func (l *Log) TruncateTo(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: truncate to %d", ErrOffsetOutOfRange, offset)
	}
	if offset >= l.leo {
		return nil
	}
	if offset < l.logStart {
		return l.truncateFullyLocked(offset)
	}
	k := l.segmentIndexLocked(offset)
	s := l.segments[k]
	if err := l.ensureLoaded(s, s.size); err != nil {
		return err
	}
	f, err := l.cache.acquire(s.h)
	if err != nil {
		return err
	}
	r := newHeaderReader(f, s.size)
	pos, h, err := findBatch(r, s, offset)
	r.release()
	l.cache.release(s.h)
	if err != nil {
		return fmt.Errorf("log: truncate: %w", err)
	}
	newEnd := offset
	if pos < s.size {
		newEnd = min(offset, h.BaseOffset)
	}
	if newEnd < l.logStart {
		// The batch holding offset starts below the log start: nothing readable remains.
		return l.truncateFullyLocked(offset)
	}
	// The recovery point must never lie beyond what the cut leaves.
	if err := l.lowerRecoveryPointLocked(newEnd, s.base, pos, newEnd); err != nil {
		return err
	}
	if err := l.removeSnapshotsAboveLocked(newEnd); err != nil {
		return l.fail(err)
	}
	// Later segments first, then the cut: a crash in between leaves a log
	// that recovery reads as ending at or after newEnd, never a hole.
	for _, gone := range l.segments[k+1:] {
		l.cache.remove(gone.h)
		l.indexes.remove(gone)
		if err := removeSegmentFiles(l.fs, gone); err != nil {
			return l.fail(err)
		}
		l.metrics.SegmentsDeleted.Add(1)
	}
	l.segments = l.segments[:k+1]
	s.mu.Lock()
	s.sealed = false // active again: appends add to its indexes
	s.mu.Unlock()
	l.indexes.remove(s)
	if f, err = l.cache.acquire(s.h); err != nil {
		return l.fail(err)
	}
	defer l.cache.release(s.h)
	if err := f.Truncate(pos); err != nil {
		return l.fail(fmt.Errorf("log: truncate %s: %w", s.logPath(), err))
	}
	if err := f.Sync(); err != nil {
		return l.fail(fmt.Errorf("log: sync %s: %w", s.logPath(), err))
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return l.fail(fmt.Errorf("log: sync dir: %w", err))
	}
	s.truncateIndexes(newEnd-s.base, pos)
	s.size, s.flushedSize = pos, pos
	if err := l.rescanMaxTimestampLocked(s); err != nil {
		return l.fail(err)
	}
	l.leo = newEnd
	return l.afterTruncateLocked()
}

// lowerRecoveryPointLocked durably moves the recovery point down to (offset,
// segment, pos) if it is above, before a truncation makes it point at bytes
// that will change. newEnd is the log end the truncation leaves.
func (l *Log) lowerRecoveryPointLocked(offset, segment, pos, newEnd int64) error {
	if l.checkpointed.RecoveryOffset < offset || (l.checkpointed.RecoveryOffset == offset && l.checkpointed.RecoverySegment == segment && l.checkpointed.RecoveryPosition <= pos) {
		return nil
	}
	c := l.checkpointed
	c.RecoveryOffset, c.RecoverySegment, c.RecoveryPosition = offset, segment, pos
	// "The table at ProducersAt equals the newest snapshot" still holds lower
	// down only while that snapshot is at or below the new point.
	if n := len(l.snapshots); n > 0 && l.snapshots[n-1] > offset {
		c.ProducersAt = -1
	} else {
		c.ProducersAt = min(c.ProducersAt, offset)
	}
	c.LogStartOffset = min(c.LogStartOffset, newEnd)
	c.HighWatermark = min(c.HighWatermark, newEnd)
	if err := vfs.WriteFileAtomic(l.fs, l.dir, checkpointFile, c.encode()); err != nil {
		return l.fail(fmt.Errorf("log: write %s: %w", checkpointFile, err))
	}
	l.checkpointed = c
	return nil
}

// rescanMaxTimestampLocked recomputes the exact max timestamp of s from its
// last time-index entry on, and the bytes since the last index entries.
func (l *Log) rescanMaxTimestampLocked(s *segment) error {
	s.mu.Lock()
	from := s.base
	if n := len(s.timeIndex); n > 0 {
		from = s.base + int64(s.timeIndex[n-1].rel)
	}
	s.mu.Unlock()
	f, err := l.cache.acquire(s.h)
	if err != nil {
		return err
	}
	defer l.cache.release(s.h)
	r := newHeaderReader(f, s.size)
	defer r.release()
	pos, h, err := findBatch(r, s, from)
	for err == nil && pos < s.size {
		s.mu.Lock()
		if h.MaxTimestamp > s.maxTs {
			s.maxTs, s.maxTsRel = h.MaxTimestamp, uint32(h.BaseOffset-s.base)
		}
		s.mu.Unlock()
		pos += h.size()
		if pos < s.size {
			h, err = r.header(pos)
		}
	}
	s.mu.Lock()
	s.bytesSinceIndex, s.bytesSinceTime = s.size, 0
	if n := len(s.index); n > 0 {
		s.bytesSinceIndex = s.size - int64(s.index[n-1].pos)
	}
	s.mu.Unlock()
	return err
}

// TruncateFullyAndStartAt empties the log, its leader-epoch cache
// included, and restarts it at offset, which may lie past the log end (as
// Kafka's truncateFullyAndStartAt: a follower whose log end fell below its
// leader's log start holds nothing the leader still has).
func (l *Log) TruncateFullyAndStartAt(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if offset < 0 {
		return fmt.Errorf("%w: restart at %d", ErrOffsetOutOfRange, offset)
	}
	// The epochs first: a crash between the two writes leaves the old
	// records without epochs, which a follower's next fetch (no last fetched
	// epoch, an out-of-range offset) restarts again.
	if len(l.epochs) > 0 {
		l.epochs = nil
		if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(nil)); err != nil {
			return l.fail(fmt.Errorf("log: write leader-epoch cache: %w", err))
		}
	}
	return l.truncateFullyLocked(offset)
}

// truncateFullyLocked deletes every segment and restarts the log at offset.
func (l *Log) truncateFullyLocked(offset int64) error {
	first := l.segments[0]
	if err := l.lowerRecoveryPointLocked(first.base, first.base, 0, offset); err != nil {
		return err
	}
	if err := l.removeSnapshotsAboveLocked(min(offset, first.base)); err != nil {
		return l.fail(err)
	}
	for _, gone := range l.segments {
		l.cache.remove(gone.h)
		l.indexes.remove(gone)
		if err := removeSegmentFiles(l.fs, gone); err != nil {
			return l.fail(err)
		}
		l.metrics.SegmentsDeleted.Add(1)
	}
	l.segments = nil
	s := newSegment(l.dir, offset, l.clock.Now())
	s.loaded = true
	f, err := l.fs.Create(s.logPath())
	if err != nil {
		return l.fail(fmt.Errorf("log: create segment: %w", err))
	}
	l.cache.adopt(s.h, f)
	l.cache.release(s.h)
	l.segments = []*segment{s}
	l.dirDirty = true
	l.leo, l.logStart = offset, offset
	return l.afterTruncateLocked()
}

// afterTruncateLocked brings the metadata in line with a lower log end.
func (l *Log) afterTruncateLocked() error {
	l.hw = min(max(l.hw, l.logStart), l.leo)
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].StartOffset >= l.leo })
	if i < len(l.epochs) {
		l.epochs = l.epochs[:i:i]
		if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(l.epochs)); err != nil {
			return l.fail(fmt.Errorf("log: write leader-epoch cache: %w", err))
		}
	}
	if err := l.rebuildProducersLocked(); err != nil {
		return l.fail(err)
	}
	l.producers.dirty = true
	act := l.active()
	l.recovery.RecoveryOffset, l.recovery.RecoverySegment, l.recovery.RecoveryPosition = l.leo, act.base, act.size
	l.notifyLocked()
	if err := l.checkpointLocked(); err != nil {
		return err
	}
	return nil
}

// Close flushes the log, writes its indexes, producer snapshot and
// checkpoint, and releases its files. Outstanding Regions stay readable
// until closed.
func (l *Log) Close() error {
	err := l.closeLocked()
	if l.mgr != nil {
		l.mgr.forget(l) // after l.mu is released: Manager.mu is never taken under a Log.mu
	}
	return err
}

func (l *Log) closeLocked() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	var err error
	l.retryDeferredLocked() // space may have returned since a full-disk start
	if l.failed == nil {
		err = l.checkpointLocked()
	} else {
		err = fmt.Errorf("%w: %s: %w", ErrLogFailed, l.tp, l.failed)
	}
	for _, s := range l.segments {
		l.cache.remove(s.h)
	}
	l.closed = true
	l.notifyLocked()
	return err
}
