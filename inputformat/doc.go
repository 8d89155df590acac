// Package inputformat turns topic partitions into offset-range splits and
// reads exactly the records of one split over the Kafka protocol
// (franz-go), from a sluice broker or any Kafka cluster.
//
//	partition p of topic t
//	 log start      checkpoint (or start policy)          end (HW, or LSO when read committed)
//	     │                │                                  │
//	     ▼                ▼                                  ▼
//	 ────┬────────────────┬───────────┬───────────┬─────────┬──── offsets
//	     │   loaded       │ split 0   │ split 1   │ split 2 │
//	                       [s, s+max)  [s+max, …)  [ …, end)
//
// # Planning (Planner)
//
// For each partition of the job's topics, the range [start, end) where start
// is the partition's checkpoint (the end of its newest commit) or, for a
// partition never loaded, the log start offset (start: earliest) or the end
// (start: latest). end is read once at planning: the high watermark, or the
// last stable offset under read_committed, so no split ends inside an open
// transaction. The range is cut into splits of at most MaxRecordsPerTask
// offsets. The same inputs give the same splits, in (topic, partition,
// start) order.
//
// A checkpoint below the log start offset means records were deleted before
// they were loaded. That is never reset silently: OutOfRangeFail stops the
// plan with ErrOutOfRange; OutOfRangeSkip starts at the log start and
// records the lost range in the plan (and so in the run report).
//
// # Reading (Reader)
//
// A Reader sends Fetch requests to the partition leader for [start, end)
// and hands back the records whose offsets lie inside. It copes with
// batches that begin before start, gaps left by compaction, transaction
// control records and aborted transactions (skipped under read_committed),
// and an end inside a batch. Reached() is the offset up to which every
// offset was accounted for; a task commits only when Reached() == End.
package inputformat
