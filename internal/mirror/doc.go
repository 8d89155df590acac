// Package mirror copies topics from one Kafka-protocol cluster to another
// (sluice or Apache Kafka on either side) exactly once, in the source's
// order per partition: `sluice mirror`, `sluice mirror translate` and
// `sluice mirror status` are its commands.
//
//	source cluster                         target cluster
//	┌──────────────┐  Fetch read_committed  ┌────────────────────────────────────────┐
//	│ topic/p ──────┼──────► copy loop ──────┼─► topic/p (same name and partition)    │
//	└──────────────┘   (one goroutine)      │   NAME.checkpoints (compacted, 1 part.) │
//	                        │  one transaction (transactional.id sluice-mirror.NAME):  │
//	                        └─► records + position records [+ checkpoint records]     │
//	                                         └────────────────────────────────────────┘
//
// # The choice: the position travels in the transaction, as records
//
// Each transaction on the target holds the copied records and, for every
// source partition it advanced, a position record in the target topic
// NAME.checkpoints: key "position/TOPIC/PARTITION", value JSON
// {"v":1,"s":next source offset,"t":target offset after the last copy,"at":ms,
// "id":source topic ID}.
// The data and the position commit or abort together, so the committed
// position is exactly the end of what the target holds. The alternative
// (the position as a consumer group's offsets on the target, through
// AddOffsetsToTxn / TxnOffsetCommit) is as atomic, but franz-go exposes it
// only for a group consumer on the same cluster as the producer, and
// records let one compacted topic carry both the position and the
// checkpoints, read with one read_committed scan. Topic names cannot hold
// '/', so keys are unambiguous; a record of another version or kind is
// refused (ErrBadState): the mirror never writes a topic it cannot read.
//
// Start of a session (and of every restart after an error):
//
//  1. InitProducerId with the transactional id: this fences an older
//     instance of the same name (its next request fails with
//     PRODUCER_FENCED; it exits with ErrFenced) and aborts its open
//     transaction before the call returns.
//  2. Read NAME.checkpoints with read_committed up to its last stable
//     offset: the latest position and checkpoints of each partition.
//  3. List the source topics matching --topics (internal `__*` and
//     `_schemas` only when named), create missing target topics with the
//     source's partition count and non-default topic configs
//     (DescribeConfigs; message.timestamp.type is not copied: the source
//     timestamp, CreateTime or LogAppendTime, becomes the copy's
//     CreateTime), grow target topics with fewer partitions
//     (CreatePartitions).
//  4. Consume each partition from its position (a new partition from its
//     log start, or its end with --start latest; the session's first
//     transaction commits that start as its position, copied or not),
//     read_committed, control records kept so that the position passes
//     the source's markers.
//
// Then, repeatedly: begin a transaction, copy for --commit-interval (or
// --max-txn-records) to the same topic and partition with key, value (null
// kept), headers and timestamp, flush, add the position records (and, every
// --checkpoint-interval, the checkpoint records), flush, EndTxn(commit).
// Every --refresh-interval the source is listed again for new topics and
// partitions, which start at their log start.
//
// # Failure cases
//
//   - Killed (kill -9) before EndTxn: the open transaction holds records and
//     a position nobody reads as committed; the next instance's
//     InitProducerId aborts it, and step 2 reads the previous position, so
//     the records are copied again, once.
//   - Killed after EndTxn(commit) was sent: the coordinator has the commit
//     decision (PrepareCommit) and completes it; the position read in step 2
//     includes that transaction, so nothing is copied twice.
//   - Target leader change or a broker gone: franz-go retries; an error
//     that escapes ends the session, the next session starts at step 1 (the
//     open transaction is aborted) after a backoff of 0.5 s doubling to 10 s.
//   - A second instance with the same --name: the older one is fenced and
//     stops (ErrFenced); two mirrors never write one target partition.
//   - Source truncated (retention or DeleteRecords passed the position):
//     refused with ErrSourceTruncated unless --on-out-of-range skip, which
//     resumes at the log start, logs the range and counts it in
//     sluice_mirror_skipped_offsets_total. A topic recreated under its
//     name is always refused: its topic ID differs from the one the
//     position records (key "id"), or, on a source without IDs, the
//     position is beyond its end.
//
// Consumers of the target must read with isolation level read_committed:
// a read_uncommitted consumer also sees the records of aborted
// transactions, i.e. the duplicates of killed instances.
//
// # Offset translation
//
// A checkpoint is a Mapping (source offset S, target offset T): the
// source records below S are in the target below T, those at or above S
// at or above T (one writer per target partition, in order). Key
// "checkpoints/TOPIC/PARTITION", value JSON {"v":1,"first":{"s","t"},
// "history":[{"s","t"},...],"at":ms}: the partition's origin (where the
// mirror began it: its start offset and the target's end then) and the
// last 256 checkpoints, one per --checkpoint-interval with progress.
// Translate takes the newest mapping at or below the group's committed
// source offset G (the history, the origin, and the position, itself a
// mapping) and commits its T on the target: a consumer resumes there and
// skips nothing. It rereads the records from that mapping's S to G: at
// most what the mirror copied in one checkpoint interval (plus the first
// transaction of a partition, for a G inside it) while G is within the
// kept history (256 intervals, about 21 minutes at 5 s); an older G falls
// back to the origin and rereads more, which the REREAD column shows. A G
// below the origin means those source records were never mirrored
// (REREAD negative).
//
// # Concurrency
//
// One goroutine owns a session's state (copySession); franz-go's produce
// promises write only the open transaction's txn fields, under txn.mu, and
// Flush orders them before commit reads them. The mirror tier's counter
// (Config.Audit, an audit.Mirror) is used by the copy loop's goroutine only.
//
// # The audit's mirror tier
//
// With Config.Audit (`sluice mirror --audit`) each transaction also holds,
// for every (topic, window of record time) it copied into, the mirror's new
// cumulative count as an _audit record on the target (tier "mirror",
// origin "NAME/SOURCE-CLUSTER-ID"). A session starts its counts from the
// target's committed _audit (read_committed, after InitProducerId aborted
// the last instance's open transaction), so the counts and the copies
// commit or abort together: a kill -9 at any moment neither loses nor
// double counts. _audit itself is never mirrored.
//
// Usage:
//
//	m, err := mirror.New(mirror.Config{From: "a:9092", To: "b:9092",
//		Selection: mirror.Selection{Topics: regexp.MustCompile(`pageviews.*`)}, Name: "dc1-dc2"})
//	if err == nil {
//		err = m.Run(ctx)
//	}
package mirror
