package log

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
)

// TopicPartition names a partition.
type TopicPartition struct {
	Topic     string
	Partition int32
}

func (tp TopicPartition) dirName() string { return fmt.Sprintf("%s-%d", tp.Topic, tp.Partition) }

// String returns "topic-partition".
func (tp TopicPartition) String() string { return tp.dirName() }

// AppendOptions qualify an Append.
type AppendOptions struct {
	LeaderEpoch   int32 // stamped into each batch's PartitionLeaderEpoch field (leader appends)
	AssignOffsets bool  // true on a leader; false = follower replication (keep offsets as in the bytes)
	// Transactional admits transactional batches on a leader (the caller
	// verified the producer's transaction); without it they are ErrInvalidRecord.
	Transactional bool
	// FromCoordinator marks a coordinator's own transactional records (the
	// offsets of TxnOffsetCommit in __consumer_offsets): they carry the
	// producer's id and epoch but no sequence, which is not checked.
	FromCoordinator bool
	marker          bool // a control batch from AppendMarker (txn.go)
}

// CoordinatorAppend returns the options with which a coordinator appends
// one of its own batches to its internal topic on a leader: a batch with
// the transactional bit set (TxnOffsetCommit's offsets) is admitted as
// such, without a sequence check.
func CoordinatorAppend(batch []byte) AppendOptions {
	opts := AppendOptions{AssignOffsets: true}
	if len(batch) >= batchHeaderSize && binary.BigEndian.Uint16(batch[offAttributes:])&attrTransactional != 0 {
		opts.Transactional, opts.FromCoordinator = true, true
	}
	return opts
}

// AppendResult describes an append.
type AppendResult struct {
	BaseOffset, LastOffset int64 // offsets assigned (or, for a duplicate, those of the original append)
	LogAppendTime          int64 // ms, -1 unless the topic uses LogAppendTime
	LogStartOffset         int64
	Duplicate              bool // idempotent retry of a batch already in the log: nothing appended
}

// Log is the append-only log of one partition: a directory of segments.
// All methods are safe for concurrent use; appends are serialised, reads run
// in parallel with each other and with appends.
type Log struct {
	tp      TopicPartition
	dir     string
	fs      vfs.FS
	cache   *fileCache
	clock   clock.Clock
	logger  *slog.Logger
	metrics *counters
	indexes *indexLRU // bounds the loaded indexes of sealed segments; nil = no bound
	mgr     *Manager  // nil when opened outside a manager (tests)

	cleaner cleanerState // compaction's own state; cleaner.mu is taken before mu

	mu sync.RWMutex
	// Guarded by mu.
	cfg           Config
	segments      []*segment // ascending base offsets; the last one is active
	leo           int64
	logStart      int64
	hw            int64
	recovery      partitionCheckpoint // recovery point fields only: data below is synced
	checkpointed  partitionCheckpoint // last written partition.checkpoint
	epochs        []epochEntry
	epochsDirty   bool // epochs differ from leader-epoch-checkpoint (rebuilt by recovery, trimmed by retention)
	producers     *producerState
	snapshots     []int64 // offsets of producer snapshot files on disk, ascending
	unflushedMsgs int64
	lastFlush     time.Time
	dirDirty      bool  // directory entries created since the last SyncDir
	failed        error // set by an I/O error that left the files uncertain
	deferred      int   // start-up writes a full disk deferred (diskfull.go); failed is set meanwhile
	closed        bool
	changed       chan struct{}
}

func (l *Log) active() *segment { return l.segments[len(l.segments)-1] }

// TopicPartition returns the partition this log stores.
func (l *Log) TopicPartition() TopicPartition { return l.tp }

// Config returns the log's configuration.
func (l *Log) Config() Config {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.cfg
}

// SetConfig changes the configuration; zero fields take defaults.
func (l *Log) SetConfig(cfg Config) error {
	cfg, err := cfg.normalize()
	if err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cfg = cfg
	return nil
}

// LogStartOffset returns the first offset that may be read.
func (l *Log) LogStartOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.logStart
}

// LogEndOffset returns the offset the next appended record will get.
func (l *Log) LogEndOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.leo
}

// HighWatermark returns the high watermark set by the log's owner.
func (l *Log) HighWatermark() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.hw
}

// SetHighWatermark sets the high watermark (clamped to [LogStartOffset,
// LogEndOffset]). It is written to partition.checkpoint at the next
// checkpoint (Flush, a Manager.RunRetention pass, Close).
func (l *Log) SetHighWatermark(offset int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return ErrClosed
	}
	if offset > l.leo || offset < 0 {
		return fmt.Errorf("%w: high watermark %d beyond log end %d", ErrOffsetOutOfRange, offset, l.leo)
	}
	offset = max(offset, l.logStart)
	if offset != l.hw {
		l.hw = offset
		l.notifyLocked()
	}
	return nil
}

// Changed returns a channel closed at the next append or high-watermark change.
func (l *Log) Changed() <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.changed = make(chan struct{})
		if l.closed {
			close(l.changed) // nothing will change any more
		}
	}
	return l.changed
}

// segmentIndexLocked returns the index of the segment that holds offset: the
// last one whose base offset is at or below it (0 when offset precedes them all).
func (l *Log) segmentIndexLocked(offset int64) int {
	return max(sort.Search(len(l.segments), func(i int) bool { return l.segments[i].base > offset })-1, 0)
}

func (l *Log) notifyLocked() {
	if l.changed != nil {
		close(l.changed)
		l.changed = nil
	}
}

// LatestEpoch returns the newest leader epoch in the epoch cache, -1 if none.
func (l *Log) LatestEpoch() int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if len(l.epochs) == 0 {
		return -1
	}
	return l.epochs[len(l.epochs)-1].Epoch
}

// EpochAt returns the leader epoch of the record at offset: that of the
// epoch-cache entry with the largest start offset <= offset, -1 if none (an
// offset before the first entry, or an empty cache). ListOffsets answers
// it beside an offset, as Kafka does, so that a client validating its
// position later (KIP-320) asks about the right epoch.
func (l *Log) EpochAt(offset int64) int32 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].StartOffset > offset })
	if i == 0 {
		return -1
	}
	return l.epochs[i-1].Epoch
}

// EndOffsetForEpoch answers OffsetForLeaderEpoch as Kafka does: the end
// offset of the largest epoch <= epoch (the start of the next epoch, or the
// log end for the latest), and that epoch. (-1, -1) if unknown.
func (l *Log) EndOffsetForEpoch(epoch int32) (int64, int32) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if epoch < 0 || len(l.epochs) == 0 {
		return -1, -1
	}
	if l.epochs[len(l.epochs)-1].Epoch == epoch {
		return l.leo, epoch
	}
	i := sort.Search(len(l.epochs), func(i int) bool { return l.epochs[i].Epoch > epoch })
	if i == len(l.epochs) {
		return -1, -1
	}
	if i == 0 {
		return l.epochs[0].StartOffset, epoch
	}
	return l.epochs[i].StartOffset, l.epochs[i-1].Epoch
}

// Size returns the bytes of all segment files.
func (l *Log) Size() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	var n int64
	for _, s := range l.segments {
		n += s.size
	}
	return n
}

func (l *Log) checkWritable() error {
	if l.closed {
		return ErrClosed
	}
	l.retryDeferredLocked()
	if l.failed != nil {
		return fmt.Errorf("%w: %s: %w", ErrLogFailed, l.tp, l.failed)
	}
	return nil
}

// fail records an I/O error after which the in-memory state may not match the
// files; the log accepts no more writes until it is reopened.
func (l *Log) fail(err error) error {
	if l.failed == nil {
		l.failed = err
		l.logger.Error("log failed; reopen to recover", "partition", l.tp.String(), "err", err)
	}
	return err
}

// Append validates and appends one or more concatenated RecordBatch v2, as a
// Produce request carries them. It is all-or-nothing. On a leader
// (AssignOffsets) it rewrites each batch's baseOffset and
// partitionLeaderEpoch in place in the caller's buffer (and, for
// LogAppendTime topics, maxTimestamp and the CRC); a leader's compressed
// batches are decompressed as a stream to be checked (validate.go), never
// rewritten. Idempotent batches (producerId >= 0) must come one per call.
//
// The phases, in order: validate (without the lock), answer an idempotent
// retry, check a follower's offsets, roll the segment, stamp offsets and
// epoch, write, apply to the in-memory state, flush.
func (l *Log) Append(batches []byte, opts AppendOptions) (AppendResult, error) {
	res := AppendResult{BaseOffset: -1, LastOffset: -1, LogAppendTime: -1}
	l.mu.RLock()
	cfg := l.cfg
	l.mu.RUnlock()
	var hdrBuf [4]batchHeader
	a, err := validateAppend(batches, cfg.MaxMessageBytes, opts, hdrBuf[:0])
	if err != nil {
		return res, err
	}

	l.mu.Lock()
	defer l.mu.Unlock()
	if err := l.checkWritable(); err != nil {
		return res, err
	}
	res.LogStartOffset = l.logStart
	if dup, err := l.answerDuplicateLocked(&a, opts, &cfg, &res); dup || err != nil {
		return res, err
	}
	if err := l.checkReplicaContinuesLocked(&a, opts); err != nil {
		return res, err
	}
	if err := l.maybeRollLocked(int64(len(batches)), l.appendLastOffsetLocked(&a, opts)); err != nil {
		return res, err
	}
	now, err := l.stampLocked(batches, &a, opts, &cfg)
	if err != nil {
		return res, err
	}
	if err := l.writeLocked(batches); err != nil {
		return res, err
	}
	l.applyAppendLocked(batches, &a, &cfg)
	res.BaseOffset = a.hdrs[0].BaseOffset
	res.LastOffset = a.hdrs[len(a.hdrs)-1].lastOffset()
	res.LogAppendTime = now
	return res, l.maybeFlushLocked(&cfg)
}

// appending is what validateAppend learnt of one Append's batches. The
// batches themselves are passed beside it (a leader rewrites them in place):
// holding them here too would move the headers, which Append keeps on its
// stack, to the heap.
type appending struct {
	hdrs       []batchHeader // one per batch, in order
	records    int           // records in all the batches
	idempotent bool          // a batch carries a producer id
}

// validateAppend is Append's first phase, run without the lock: it splits
// batches into validated batches (as a client's on a leader, as a replica's
// on a follower) and refuses a leader append holding an idempotent batch
// among others.
func validateAppend(batches []byte, maxBytes int, opts AppendOptions, buf []batchHeader) (appending, error) {
	hdrs, records, err := splitBatches(batches, maxBytes, opts.AssignOffsets, buf)
	if err != nil {
		return appending{}, err
	}
	if err := opts.checkKinds(hdrs); err != nil {
		return appending{}, err
	}
	a := appending{hdrs: hdrs, records: records}
	for i := range hdrs {
		if hdrs[i].ProducerID >= 0 {
			a.idempotent = true
		}
	}
	if a.idempotent && len(hdrs) > 1 && opts.AssignOffsets {
		return appending{}, fmt.Errorf("%w: an idempotent producer's batch must be the only one in its append", ErrInvalidRecord)
	}
	return a, nil
}

// answerDuplicateLocked checks a leader's idempotent batch against the
// producer table. A retry of a batch already in the log is answered in res
// with the original append's offsets, and it returns true: nothing is to be
// appended. A batch out of sequence or from a fenced epoch is an error.
func (l *Log) answerDuplicateLocked(a *appending, opts AppendOptions, cfg *Config, res *AppendResult) (bool, error) {
	if !opts.AssignOffsets || !a.idempotent || opts.FromCoordinator {
		return false, nil
	}
	dup, err := l.producers.check(&a.hdrs[0])
	if err != nil || dup == nil {
		return false, err
	}
	res.BaseOffset, res.LastOffset, res.Duplicate = dup.BaseOffset, dup.LastOffset, true
	if cfg.TimestampType == LogAppendTime {
		res.LogAppendTime = l.clock.Now().UnixMilli()
	}
	return true, nil
}

// checkReplicaContinuesLocked checks that a follower's batches (which keep
// the leader's offsets) start at the log end and follow each other without a
// gap. A leader's batches get their offsets from stampLocked instead.
func (l *Log) checkReplicaContinuesLocked(a *appending, opts AppendOptions) error {
	if opts.AssignOffsets {
		return nil
	}
	next := l.leo
	for i := range a.hdrs {
		if a.hdrs[i].BaseOffset != next {
			return fmt.Errorf("%w: replicated batch has base offset %d, log end is %d", ErrOffsetOutOfRange, a.hdrs[i].BaseOffset, next)
		}
		next = a.hdrs[i].lastOffset() + 1
	}
	return nil
}

// appendLastOffsetLocked returns the offset the append's last record will
// have, which decides (with its size) whether the active segment must roll.
func (l *Log) appendLastOffsetLocked(a *appending, opts AppendOptions) int64 {
	if !opts.AssignOffsets {
		return a.hdrs[len(a.hdrs)-1].lastOffset()
	}
	return l.leo + int64(a.records) - 1
}

// stampLocked gives the batches their place in the log and returns the
// append time (-1 unless the topic uses LogAppendTime on a leader). On a
// leader, opts.LeaderEpoch starts at the log end if it is new, and each
// batch's fields outside the CRC are rewritten: base offset and leader epoch
// (and, for LogAppendTime, its max timestamp, which moves the CRC). On a
// follower the batches are kept as they are and their leader epochs enter
// the epoch cache.
func (l *Log) stampLocked(batches []byte, a *appending, opts AppendOptions, cfg *Config) (int64, error) {
	if !opts.AssignOffsets {
		for i := range a.hdrs {
			if err := l.assignEpochLocked(a.hdrs[i].LeaderEpoch, a.hdrs[i].BaseOffset); err != nil {
				return -1, err
			}
		}
		return -1, nil
	}
	epoch := opts.LeaderEpoch
	if epoch >= 0 {
		if err := l.assignEpochLocked(epoch, l.leo); err != nil {
			return -1, err
		}
	}
	now := int64(-1)
	if cfg.TimestampType == LogAppendTime {
		now = l.clock.Now().UnixMilli()
	}
	next, pos := l.leo, 0
	for i := range a.hdrs {
		h := &a.hdrs[i]
		b := batches[pos : pos+int(h.size())]
		setBaseOffset(b, next)
		setLeaderEpoch(b, epoch)
		h.BaseOffset, h.LeaderEpoch = next, epoch
		if now >= 0 {
			setLogAppendTime(b, now)
			h.MaxTimestamp = now
		}
		next = h.lastOffset() + 1
		pos += int(h.size())
	}
	return now, nil
}

// writeLocked writes batches at the end of the active segment. Whatever part
// of a failed write reached the file is cut, so neither readers nor recovery
// see it; if even that cut fails, the file is uncertain and the log fails.
func (l *Log) writeLocked(batches []byte) error {
	seg := l.active()
	f, err := l.cache.acquire(seg.h)
	if err != nil {
		return err
	}
	_, werr := f.WriteAt(batches, seg.size)
	if werr != nil {
		if terr := f.Truncate(seg.size); terr != nil {
			l.fail(errors.Join(werr, terr))
		}
		l.cache.release(seg.h)
		return fmt.Errorf("log: append to %s: %w", seg.logPath(), werr)
	}
	l.cache.release(seg.h)
	return nil
}

// applyAppendLocked makes written batches part of the log: the active
// segment indexes them and grows, the producer table learns them, the log end
// moves past them and Changed's waiters wake.
func (l *Log) applyAppendLocked(batches []byte, a *appending, cfg *Config) {
	seg := l.active()
	pos := seg.size
	interval := int64(cfg.IndexIntervalBytes)
	for i := range a.hdrs {
		n := a.hdrs[i].size()
		seg.onAppend(&a.hdrs[i], pos, interval)
		l.trackBatchLocked(&a.hdrs[i], batches[pos-seg.size:][:n])
		pos += n
	}
	if a.idempotent {
		l.producers.touch(a.hdrs[0].ProducerID, l.clock.Now())
	}
	seg.size = pos
	l.leo = a.hdrs[len(a.hdrs)-1].lastOffset() + 1
	l.unflushedMsgs += int64(a.records)
	l.notifyLocked()
}

// maybeFlushLocked syncs the log once flush.messages records wait for a
// sync (0 leaves it to the page cache and flush.ms).
func (l *Log) maybeFlushLocked(cfg *Config) error {
	if cfg.FlushMessages > 0 && l.unflushedMsgs >= cfg.FlushMessages {
		return l.syncLocked()
	}
	return nil
}

// splitBatches validates the concatenated batches and returns their headers
// and total record count.
func splitBatches(b []byte, maxBytes int, fromClient bool, hdrs []batchHeader) ([]batchHeader, int, error) {
	if len(b) == 0 {
		return nil, 0, fmt.Errorf("%w: no record batch", ErrCorruptBatch)
	}
	records := 0
	for pos := 0; pos < len(b); {
		if len(b)-pos < batchHeaderSize {
			return nil, 0, fmt.Errorf("%w: %d trailing bytes at %d are not a batch", ErrCorruptBatch, len(b)-pos, pos)
		}
		length := int64(int32(uint32(b[pos+offLength])<<24 | uint32(b[pos+offLength+1])<<16 | uint32(b[pos+offLength+2])<<8 | uint32(b[pos+offLength+3])))
		size := logOverhead + length
		if length < batchHeaderSize-logOverhead || size > int64(len(b)-pos) {
			return nil, 0, fmt.Errorf("%w: batch at byte %d has length %d, %d bytes remain", ErrCorruptBatch, pos, length, len(b)-pos-logOverhead)
		}
		one := b[pos : pos+int(size)]
		var h batchHeader
		var err error
		if fromClient {
			h, err = validateClientBatch(one, maxBytes)
		} else {
			h, err = validateReplicaBatch(one)
		}
		if err != nil {
			return nil, 0, fmt.Errorf("batch at byte %d: %w", pos, err)
		}
		hdrs = append(hdrs, h)
		records += int(h.LastOffsetDelta) + 1
		pos += int(size)
	}
	return hdrs, records, nil
}

// validateReplicaBatch checks a batch copied from a leader: framing, CRC, codec.
func validateReplicaBatch(b []byte) (batchHeader, error) {
	h := parseHeader(b)
	if err := checkFrame(&h, int64(len(b))); err != nil {
		return h, err
	}
	if err := checkCRC(b, &h); err != nil {
		return h, err
	}
	if codec := h.Attributes & attrCompressionMask; codec > 4 {
		return h, fmt.Errorf("%w: codec %d", ErrUnsupportedCompression, codec)
	}
	return h, nil
}

// assignEpochLocked records that epoch starts at offset if it is newer than
// the latest, and persists the cache.
func (l *Log) assignEpochLocked(epoch int32, offset int64) error {
	if epoch < 0 || (len(l.epochs) > 0 && l.epochs[len(l.epochs)-1].Epoch >= epoch) {
		return nil
	}
	next := append(l.epochs[:len(l.epochs):len(l.epochs)], epochEntry{epoch, offset})
	if err := vfs.WriteFileAtomic(l.fs, l.dir, epochFile, encodeEpochs(next)); err != nil {
		return fmt.Errorf("log: write leader-epoch cache: %w", err)
	}
	l.epochs = next
	return nil
}

// maybeRollLocked starts a new segment if the next append of n bytes ending
// at lastOffset should not go into the active one.
func (l *Log) maybeRollLocked(n int64, lastOffset int64) error {
	seg := l.active()
	if seg.size == 0 {
		return nil
	}
	switch {
	case seg.size+n > l.cfg.SegmentBytes:
	case l.clock.Now().Sub(seg.created) >= l.cfg.SegmentMs:
	case lastOffset-seg.base > math.MaxInt32:
	case seg.indexFull(l.cfg.SegmentIndexBytes):
	default:
		return nil
	}
	return l.rollLocked()
}

// rollLocked closes the active segment (syncing it and its indexes) and
// starts a new one at the log end.
func (l *Log) rollLocked() error {
	old := l.active()
	if err := l.syncLocked(); err != nil {
		return err
	}
	if err := old.persistIndexes(l.fs, true); err != nil {
		return l.fail(err)
	}
	seg := newSegment(l.dir, l.leo, l.clock.Now())
	seg.loaded = true
	f, err := l.fs.Create(seg.logPath())
	if err != nil {
		return fmt.Errorf("log: roll: %w", err)
	}
	old.seal()
	l.indexes.touch(old)
	l.cache.adopt(seg.h, f)
	l.cache.release(seg.h)
	l.segments = append(l.segments, seg)
	l.dirDirty = true
	l.metrics.SegmentsRolled.Add(1)
	// Make the new file durable and move the recovery point to it.
	if err := l.checkpointLocked(); err != nil {
		return err
	}
	return nil
}
