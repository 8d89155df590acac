package log

import (
	"errors"
	"fmt"
	"github.com/sluicehq/sluice/internal/vfs"
	"path"
	"sort"
)

// syncLocked makes every appended byte durable and advances the in-memory
// recovery point to the log end. An fsync error is not retried (the kernel
// may have dropped the dirty pages): the log fails.
func (l *Log) syncLocked() error {
	for _, s := range l.segments {
		if s.flushedSize >= s.size {
			continue
		}
		f, err := l.cache.acquire(s.h)
		if err != nil {
			return err
		}
		err = f.Sync()
		l.cache.release(s.h)
		if err != nil {
			return l.fail(fmt.Errorf("log: sync %s: %w", s.logPath(), err))
		}
		s.flushedSize = s.size
	}
	if err := l.persistTxnIndexesLocked(); err != nil {
		return l.fail(err)
	}
	if l.dirDirty {
		if err := l.fs.SyncDir(l.dir); err != nil {
			return l.fail(fmt.Errorf("log: sync dir %s: %w", l.dir, err))
		}
		l.dirDirty = false
	}
	act := l.active()
	l.recovery.RecoveryOffset, l.recovery.RecoverySegment, l.recovery.RecoveryPosition = l.leo, act.base, act.size
	l.unflushedMsgs = 0
	l.lastFlush = l.clock.Now()
	l.metrics.Flushes.Add(1)
	return nil
}

// checkpointLocked syncs the data, then writes what depends on it: the index
// files, a producer snapshot and partition.checkpoint (recovery point, log
// start offset, high watermark), in that order.
func (l *Log) checkpointLocked() error {
	if err := l.syncLocked(); err != nil {
		return err
	}
	for _, s := range l.segments {
		if err := s.persistIndexes(l.fs, true); err != nil {
			return l.fail(err)
		}
	}
	if l.producers.dirty {
		if err := l.writeSnapshotLocked(); err != nil {
			return err
		}
	}
	if l.epochsDirty {
		if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(l.epochs)); err != nil {
			return l.fail(fmt.Errorf("log: write leader-epoch cache: %w", err))
		}
		l.epochsDirty = false
	}
	c := l.recovery
	c.LogStartOffset, c.HighWatermark, c.ProducersAt = l.logStart, l.hw, l.leo
	if c == l.checkpointed {
		return nil
	}
	if err := vfs.WriteFileAtomic(l.fs, l.dir, checkpointFile, c.encode()); err != nil {
		return l.fail(fmt.Errorf("log: write %s: %w", checkpointFile, err))
	}
	l.checkpointed = c
	return nil
}

func snapshotName(offset int64) string { return fmt.Sprintf("%020d%s", offset, snapshotSuffix) }

// removeSnapshotsAboveLocked durably removes the producer snapshots above
// offset, before segments holding batches at or after offset are removed. A
// snapshot at X says the aborted-transactions entries of every marker below
// X are durable in the segments' .txnindex files; removeSegmentFiles deletes
// a segment's index first, so a removal cut short by a failure or a crash
// would leave a segment whose entries recovery never recomputes (it replays
// from the snapshot, past them). With the snapshot gone first, recovery
// replays from below the segment and recomputes them.
func (l *Log) removeSnapshotsAboveLocked(offset int64) error {
	removed := false
	for i := len(l.snapshots) - 1; i >= 0 && l.snapshots[i] > offset; i-- {
		if err := l.fs.Remove(path.Join(l.dir, snapshotName(l.snapshots[i]))); err != nil && !isNotExist(err) {
			return fmt.Errorf("log: remove producer snapshot: %w", err)
		}
		l.snapshots, removed = l.snapshots[:i], true
	}
	if !removed {
		return nil
	}
	if err := l.fs.SyncDir(l.dir); err != nil {
		return fmt.Errorf("log: sync dir: %w", err)
	}
	return nil
}

// writeSnapshotLocked writes the producer table as of the log end and keeps
// the two newest snapshots.
func (l *Log) writeSnapshotLocked() error {
	if len(l.producers.m) == 0 {
		// An empty table needs no file: ProducersAt in the checkpoint says so.
		for _, off := range l.snapshots {
			if err := l.fs.Remove(path.Join(l.dir, snapshotName(off))); err != nil && !isNotExist(err) {
				return l.fail(fmt.Errorf("log: remove producer snapshot: %w", err))
			}
		}
		l.snapshots, l.producers.dirty = nil, false
		return nil
	}
	if err := vfs.WriteFileAtomic(l.fs, l.dir, snapshotName(l.leo), l.producers.encode()); err != nil {
		return l.fail(fmt.Errorf("log: write producer snapshot: %w", err))
	}
	l.producers.dirty = false
	if n := len(l.snapshots); n == 0 || l.snapshots[n-1] != l.leo {
		l.snapshots = append(l.snapshots, l.leo)
	}
	for len(l.snapshots) > 2 {
		if err := l.fs.Remove(path.Join(l.dir, snapshotName(l.snapshots[0]))); err != nil && !isNotExist(err) {
			// Housekeeping only: an old snapshot is harmless, retry next time.
			l.logger.Warn("cannot remove an old producer snapshot", "err", err)
			break
		}
		l.snapshots = l.snapshots[1:]
	}
	return nil
}

// Flush makes everything appended so far durable and writes the checkpoint.
func (l *Log) Flush() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	return l.checkpointLocked()
}

// maintain is one pass of the periodic work: flush.ms, retention, checkpoint.
func (l *Log) maintain() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		if errors.Is(err, ErrClosed) {
			return nil
		}
		return err
	}
	now := l.clock.Now()
	if l.cfg.FlushMs > 0 && l.unflushedMsgs > 0 && now.Sub(l.lastFlush) >= l.cfg.FlushMs {
		if err := l.syncLocked(); err != nil {
			return err
		}
	}
	if err := l.retentionLocked(); err != nil {
		return err
	}
	l.expireProducersLocked(now)
	// The periodic checkpoint only records what is already synced.
	if !l.checkpointNeededLocked() {
		return nil
	}
	return l.checkpointLocked()
}

func (l *Log) checkpointNeededLocked() bool {
	c := l.recovery
	c.LogStartOffset, c.HighWatermark, c.ProducersAt = l.logStart, l.hw, l.leo
	return c != l.checkpointed || l.producers.dirty || l.epochsDirty
}

// retentionLocked deletes whole segments, oldest first, past retention.ms
// (newest timestamp older than now - retention.ms) or while the log stays at
// or above retention.bytes without them, as Apache Kafka's
// UnifiedLog.deleteOldSegments does: < 0 disables a limit, 0 deletes every
// segment it may. Only data below the high watermark is deleted, and never
// an empty active segment; when every segment goes, a new active one is
// rolled first.
func (l *Log) retentionLocked() error {
	now := l.clock.Now().UnixMilli()
	var total int64
	for _, s := range l.segments {
		total += s.size
	}
	bySize := l.cfg.RetentionBytes >= 0 && total >= l.cfg.RetentionBytes
	if l.cfg.RetentionMs < 0 && !bySize {
		return nil
	}
	n := 0
	for i, s := range l.segments {
		last := i == len(l.segments)-1
		upper := l.leo
		if !last {
			upper = l.segments[i+1].base
		}
		if l.hw < upper || (last && s.size == 0) {
			break
		}
		expired := bySize && total-s.size >= l.cfg.RetentionBytes
		if !expired && l.cfg.RetentionMs >= 0 {
			if err := l.ensureLoaded(s, s.size); err != nil {
				return err
			}
			if ts := s.maxTimestamp(); ts >= 0 && now-ts > l.cfg.RetentionMs.Milliseconds() {
				expired = true
			}
		}
		if !expired {
			break
		}
		total -= s.size
		n++
	}
	if n == 0 {
		return nil
	}
	if n == len(l.segments) {
		if err := l.rollLocked(); err != nil {
			return err
		}
	}
	return l.deleteSegmentsLocked(n, l.segments[n].base)
}

// deleteSegmentsLocked removes the n oldest segments and raises the log start
// offset to at least start. The checkpoint with the new log start is written
// first, so a crash between the two leaves segments that the next open
// recognises as deleted.
func (l *Log) deleteSegmentsLocked(n int, start int64) error {
	oldStart, oldHW := l.logStart, l.hw
	l.logStart = max(l.logStart, start)
	l.hw = max(l.hw, l.logStart)
	if err := l.checkpointLocked(); err != nil {
		l.logStart, l.hw = oldStart, oldHW
		return err
	}
	gone := l.segments[:n]
	l.segments = append([]*segment(nil), l.segments[n:]...)
	for _, s := range gone {
		l.cache.remove(s.h)
		l.indexes.remove(s)
		if err := removeSegmentFiles(l.fs, s); err != nil {
			return err
		}
		l.metrics.SegmentsDeleted.Add(1)
	}
	l.truncateEpochsFromStartLocked()
	return nil
}

func removeSegmentFiles(fsys interface{ Remove(string) error }, s *segment) error {
	// The transaction index goes first: a crash after it leaves a segment
	// that recovery rescans (its entries are recomputed), never an index
	// without its segment that a later segment at the same base would adopt.
	if err := fsys.Remove(s.txnIndexPath()); err != nil && !isNotExist(err) {
		return fmt.Errorf("log: remove segment %d: %w", s.base, err)
	}
	var errs []error
	for _, p := range []string{s.logPath(), s.indexPath(), s.timeIndexPath()} {
		if err := fsys.Remove(p); err != nil && !isNotExist(err) {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("log: remove segment %d: %w", s.base, err)
	}
	return nil
}

// truncateEpochsFromStartLocked drops epochs that ended before the log start.
func (l *Log) truncateEpochsFromStartLocked() {
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].StartOffset > l.logStart })
	if i > 1 {
		l.epochs = append([]epochEntry(nil), l.epochs[i-1:]...)
		l.epochsDirty = true // written at the next checkpoint
	}
}

// DeleteRecordsBefore raises the log start offset to offset (as Kafka's
// DeleteRecords) and deletes the segments wholly below it. offset may not
// exceed the high watermark.
func (l *Log) DeleteRecordsBefore(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return err
	}
	if offset > l.hw || offset < 0 {
		return fmt.Errorf("%w: delete-records offset %d is beyond the high watermark %d", ErrOffsetOutOfRange, offset, l.hw)
	}
	if offset <= l.logStart {
		return nil
	}
	n := 0
	for n < len(l.segments)-1 && l.segments[n+1].base <= offset {
		n++
	}
	if n == 0 {
		old := l.logStart
		l.logStart = offset
		if err := l.checkpointLocked(); err != nil {
			l.logStart = old
			return err
		}
		return nil
	}
	return l.deleteSegmentsLocked(n, offset)
}
