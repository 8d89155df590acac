// Package log is sluice's partition log: an append-only sequence of Kafka
// RecordBatch v2, stored exactly as producers sent them, in segment files with
// sparse offset and time indexes, recovered after a crash by scanning only
// what was not known to be flushed.
//
// # On-disk layout
//
//	<data dir>/
//	  .clean-shutdown                 written by Manager.Close; consumed by OpenManager
//	  <topic>-<partition>/            one directory per partition
//	    00000000000000000000.log        segment: batches, base offsets 0 ..
//	    00000000000000000000.index      sparse offset index of that segment
//	    00000000000000000000.timeindex  sparse time index of that segment
//	    00000000000000000000.txnindex   aborted transactions whose ABORT markers are in that segment (if any)
//	    00000000000000368769.log        next segment: first offset 368769
//	    00000000000000368769.index
//	    00000000000000368769.timeindex
//	    00000000000000368900.snapshot   idempotent-producer table as of offset 368900
//	    partition.checkpoint            recovery point, log start offset, high watermark
//	    leader-epoch-checkpoint         leader epoch -> first offset
//	  <dir>-delete/                   a deleted partition, removed at the next open
//
// A segment file is a concatenation of RecordBatch v2, byte for byte as the
// producer sent them except the fields outside the CRC: baseOffset
// (assigned by the log) and partitionLeaderEpoch; for LogAppendTime topics
// also maxTimestamp, the timestamp-type bit and the CRC. Batches are never
// rewritten; a producer's compressed batch is decompressed as a stream only
// to check its records against its header (validate.go). The file name is the
// base offset of its first batch.
//
//	RecordBatch v2, big-endian; byte offsets on the left
//	 0 baseOffset       int64  outside the CRC, assigned by the log
//	 8 length           int32  outside the CRC, bytes after this field
//	12 leaderEpoch      int32  outside the CRC, stamped by the log
//	16 magic            int8   = 2
//	17 crc              uint32 CRC32C (Castagnoli) of bytes 21..end
//	21 attributes       int16  codec (bits 0-2), timestamp type (3), transactional (4), control (5)
//	23 lastOffsetDelta  int32
//	27 firstTimestamp   int64
//	35 maxTimestamp     int64  (LogAppendTime: rewritten, CRC recomputed)
//	43 producerId       int64
//	51 producerEpoch    int16
//	53 baseSequence     int32
//	57 recordCount      int32
//	61 records ...             compressed as a whole if codec != 0
//
// The offset index holds an 8-byte entry every index.interval.bytes of
// batches: (base offset - segment base) uint32, file position uint32. The
// time index holds a 12-byte entry (max timestamp so far int64, relative
// offset uint32) whenever the max timestamp grew and index.interval.bytes
// passed, plus one at each checkpoint and roll, so its last entry is the
// segment's largest timestamp. Both are hints: an entry is checked against the
// batch header it points to before it is trusted, and a bad index falls
// back to a scan.
//
//	.index:      | rel uint32 | pos uint32 | rel | pos | ...
//	.timeindex:  | ts int64 | rel uint32 | ts | rel | ...
//	.txnindex:   | version int16 = 0 | producerId int64 | firstOffset int64 | lastOffset int64 | lastStableOffset int64 | ...
//
// # Transactions
//
// Transactional batches (attribute bit 4, appended with
// AppendOptions.Transactional) open a transaction of their producer; a
// COMMIT or ABORT control batch (bits 4 and 5, written by
// Log.AppendMarker, never accepted from a client) ends it. The producer
// table keeps each open transaction's first offset (snapshot format
// version 2; version 1 snapshots are still read). The last stable offset
// (Log.LastStableOffset) is min(high watermark, max(log start, first offset
// of the oldest open transaction)); read_committed reads stop there. Each
// ABORT adds an entry to the .txnindex of the segment it lands in: Apache
// Kafka's TransactionIndex layout, byte-compatible (34-byte entries, no
// header), lastStableOffset being the first offset of the oldest other
// open transaction or the marker's offset + 1. Log.AbortedTransactions(from,
// to) answers a Fetch's range. New entries reach their file at each sync,
// before the recovery point passes their markers; recovery drops the
// entries at or after the offset it replays the producer table from and
// recomputes them from the markers, so a reopened log equals a replay of
// its batches (txn_test.go's crash loop checks it). Retention and
// truncation delete a segment's .txnindex with it (first, so no orphan is
// left). The cleaner (compact.go) removes aborted records, keeps markers
// while their transactions have data and for delete.retention.ms after,
// and cleans nothing at or after the oldest open transaction.
//
// The small metadata files (checkpoint, epoch cache, producer snapshot) are
// framed as magic(4) version(1) payload crc32c(4) and replaced atomically
// with vfs.WriteFileAtomic: write <name>.tmp, fsync, rename, fsync the
// directory. A <name>.tmp left by a crash is removed when the partition opens.
// The leader-epoch cache is written when an epoch starts, and also when
// recovery rebuilt it from the scanned batches or retention trimmed it (at
// the next checkpoint), so a clean reopen knows what recovery found.
//
// # Durability and recovery
//
// An append is in the page cache when Append returns. It is durable after
// Flush, after a flush.messages / flush.ms flush, or after the segment rolls
// (a roll syncs the old segment). The recovery point in partition.checkpoint
// is (offset, segment, byte position): everything before it was synced,
// together with the index files. It is written at rolls, Flush,
// Manager.RunRetention, truncation and Close.
//
//	segment 0             segment 100                     segment 250 (active)
//	[#################]   [#################]   [###########|..........]
//	 trusted, not read     trusted, not read     trusted    ^ scanned: CRC,
//	                                                        | offsets, framing
//	                                              recovery point
//
// Opening a partition after an unclean stop validates every batch after the
// recovery point and cuts the file at the first bad one, telling apart a
// torn tail (the last batch is incomplete), a zeroed tail (zero bytes where a
// batch should start) and a corrupt batch (bad magic, length, CRC or offset);
// segments after the cut are deleted and the scanned segment's indexes
// rebuilt. The producer table is rebuilt from the newest snapshot plus the
// batch headers after it, the epoch cache is cut at the log end. Restart time
// therefore depends on the unflushed tail, not on the size of the log. After
// Manager.Close the marker file tells the next OpenManager that every
// checkpoint is exact: nothing is scanned.
//
// A log with nothing appended (one empty segment) needs no scan and no
// checkpoint: reopening 65,536 empty partitions writes no file, and opening
// a new one writes only its empty first segment.
// Manager.OpenMany and DeleteMany create or remove many partition directories
// with one sync of the data directory (not one per partition) and work on
// several partitions at once.
//
// TruncateTo first lowers the recovery point durably, then deletes later
// segments, cuts and syncs the file, so truncated data never comes back.
// Retention follows Apache Kafka's UnifiedLog.deleteOldSegments: oldest
// segments first, only below the high watermark, by retention.ms (newest
// timestamp older than now - retention.ms) or retention.bytes (while the log
// without the segment is still at least that big); a negative limit is off,
// 0 deletes every segment it may, the active one too after a roll.
// Retention writes the new log start offset before it deletes segments;
// segments left below the log start by a crash are deleted at the next open.
// An fsync error is not retried: the log refuses further writes
// (ErrLogFailed) until it is reopened, which runs recovery. The exception is
// opening on a full file system (diskfull.go): the recovered state cannot be
// made durable, so the log serves reads, refuses writes, and retries those
// writes at each write attempt until space returns.
//
// # Concurrency and lock order
//
// Appends to one log are serialised; reads run in parallel with each other
// and with appends, and return a Region that pins the segment file, so
// retention or a cache eviction never closes a file under a reader.
//
//	cleanerState.mu   ->  Log.mu       (a compaction pass, compact.go)
//	Log.mu (RWMutex)  ->  segment.mu
//	Log.mu (RWMutex)  ->  fileCache.mu
//	Log.mu (RWMutex)  ->  indexLRU.mu  (segment.mu and indexLRU.mu never together)
//	Log.mu (RWMutex)  ->  txnIndex.mu  (a leaf: a segment's aborted-transactions index)
//	Manager.mu            (never held together with any other lock)
//
// A goroutine holding a lock on the right never takes one on its left;
// segment.mu and fileCache.mu are never held together. Manager.mu guards the
// partition maps only: Manager methods release it before they call into a
// Log, and Log.Close unregisters itself after releasing Log.mu. Log.mu guards the segment list, offsets, epoch cache, producer
// table and each segment's size; appends hold it for writing, reads hold it
// for reading only while they pick a segment and its committed size, then
// read without it (bytes below a committed size never change except by
// TruncateTo). segment.mu guards the in-memory indexes, which readers load
// lazily. fileCache.mu guards the open-file LRU and every handle's state.
//
// # Open files
//
// Segment files are opened through the Manager's file cache, which keeps at
// most ManagerOptions.MaxOpenFiles (default 1024, at most half of
// RLIMIT_NOFILE) open and closes the least recently used idle one; a segment
// is reopened on demand. Index files are opened only while they are loaded or
// written. 10,000 active partitions therefore hold 1,024 descriptors, not
// 30,000.
//
// The in-memory indexes of sealed (closed) segments, loaded by a read, a
// time lookup or a retention pass, are bounded the same way: the Manager's
// index LRU keeps at most ManagerOptions.MaxLoadedIndexes (default 1024) and
// drops the least recently used whose entries are all in the files; the next
// use reads them back. Active segments keep theirs (appends add to them).
//
// Counters and gauges are owned by the Manager: Manager.Stats returns a
// snapshot, Manager.Collector exports them to Prometheus (MetricNames).
//
// # Limits
//
//   - Compaction (compact.go) keeps whole a batch it cannot decompress
//     within 64 MiB; recovery accepts offset holes only in compacting logs.
//   - Transactional batches without AppendOptions.Transactional, and control
//     batches from anyone but AppendMarker, are rejected on a leader
//     (ErrInvalidRecord); followers copy both.
//   - When retention or DeleteRecords removes the start of a transaction
//     still open, its first offset survives only in the producer snapshot;
//     a rebuild without one (all snapshots unreadable) starts it at its
//     first batch left. After compaction removed an aborted transaction's
//     data, a replay gives its (kept) marker an index entry starting at the
//     marker, not the original first offset: both hide nothing committed.
//   - A segment's aborted-transactions index stays in memory once loaded
//     (34 bytes an abort; the index LRU does not unload it).
//   - Idempotent producers idle for producer.id.expiration.ms are forgotten
//     at a retention pass; the idle time is not in snapshots, so after a
//     restart it counts from the first pass.
//   - A segment file closed by the file cache while it has unsynced data is
//     synced later through a new descriptor; Linux reports a writeback error
//     that happened in between only to descriptors open at the time, so such
//     an error can go unnoticed. Use flush.messages / flush.ms (or a cache as
//     large as the number of active partitions) where that matters.
//   - OffsetForTimestamp decompresses at most 64 MiB of one batch (and what
//     its caller's DecompressBudget allows); beyond that it answers with the
//     batch's base offset. Appends refuse a batch expanding beyond 64 MiB.
//
// # Usage
//
//	m, err := log.OpenManager(log.ManagerOptions{FS: vfs.OS{}, Dir: "/var/lib/sluice"})
//	l, err := m.Open(log.TopicPartition{Topic: "pageviews", Partition: 0}, log.DefaultConfig())
//	res, err := l.Append(recordsFromProduce, log.AppendOptions{AssignOffsets: true, LeaderEpoch: 0})
//	l.SetHighWatermark(l.LogEndOffset())
//	r, err := l.Read(offset, 1<<20, l.HighWatermark())
//	defer r.Close()
//	r.WriteTo(conn) // sendfile(2)
//	...
//	m.RunRetention() // on a timer
//	reg.MustRegister(m.Collector())
//	m.Close()
//
// All file access goes through internal/vfs's FS, with explicit durability
// (File.Sync, SyncDir) and the replacing rename (RenameReplace): vfs.OS{} in
// production, vfs.NewMem in tests (Crash drops what was not synced) and
// vfs.NewFaulty to fail the i-th operation.
package log
