package log

// Starting on a full disk. After a kill -9, opening a log makes the recovered
// state durable (offset and time indexes, partition.checkpoint, the
// leader-epoch cache). When the file system is full those writes fail with
// ENOSPC (or EDQUOT); the log then opens anyway, serving reads from what
// recovery found, and refuses writes (ErrLogFailed, which the broker answers
// with KAFKA_STORAGE_ERROR). Each later write attempt (an append, a flush, a
// retention pass) first retries the deferred start-up writes; once they
// succeed, because space returned, the log takes writes again without a
// restart. An fsync that fails with ENOSPC is not retried (after a failed
// writeback the kernel may have dropped the data, and a later successful
// fsync would not say so): that log opens failed, serving reads and refusing
// writes until the broker restarts. Any other I/O error at open still fails
// the open.

import (
	"errors"
	"fmt"
	"syscall"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Start-up writes a log may have deferred (Log.deferred).
const (
	deferredCheckpoint = 1 << iota // checkpointLocked after recovery
	deferredEpochs                 // the trimmed leader-epoch cache
)

// IsNoSpace reports whether err means the file system is full.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// deferOnFullDisk records that start-up write what failed with err. It
// returns false (the open must fail) unless err is a full file system.
func (l *Log) deferOnFullDisk(err error, what int) bool {
	if !IsNoSpace(err) {
		return false
	}
	if l.failed == nil {
		l.failed = err
	}
	if !l.syncedLocked() {
		l.logger.Error("file system full and the data could not be synced: serving reads, refusing writes until a restart", "err", err)
		return true
	}
	l.deferred |= what
	l.logger.Warn("file system full: serving reads, refusing writes until space returns", "err", err)
	return true
}

// retryDeferredLocked retries the start-up writes deferred by a full disk;
// when they all succeed the log is writable again. Another error than a full
// disk leaves the log failed until it is reopened, as any write error does.
func (l *Log) retryDeferredLocked() {
	if l.deferred == 0 {
		return
	}
	err := l.redoDeferredLocked()
	switch {
	case err == nil:
		l.failed = nil
		l.logger.Info("space returned: the log takes writes again")
	case IsNoSpace(err) && l.syncedLocked():
		l.failed = err
	default:
		l.deferred = 0
		l.failed = err
		l.logger.Error("log failed; reopen to recover", "err", err)
	}
}

// redoDeferredLocked does the deferred writes (l.failed stays set meanwhile,
// so that a failure is not logged again at every attempt).
func (l *Log) redoDeferredLocked() error {
	if l.deferred&deferredEpochs != 0 {
		if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(l.epochs)); err != nil {
			return fmt.Errorf("log: write leader-epoch cache: %w", err)
		}
		l.deferred &^= deferredEpochs
	}
	if l.deferred&deferredCheckpoint != 0 {
		if err := l.checkpointLocked(); err != nil {
			return err
		}
		l.deferred &^= deferredCheckpoint
	}
	return nil
}

// syncedLocked reports whether every segment and the directory are synced:
// a checkpoint that failed after this failed in writing its files, not in
// an fsync of the data.
func (l *Log) syncedLocked() bool {
	for _, s := range l.segments {
		if s.flushedSize < s.size {
			return false
		}
	}
	return !l.dirDirty
}
