// Package replica replicates a broker's partitions as Kafka does: the leader
// tracks each follower's log end (its fetch offset), keeps the high
// watermark at the minimum log end over the ISR (never backwards), shrinks
// the ISR when a follower has not caught up for LagTimeMax and expands it
// when a follower reaches the high watermark and this leadership's first
// offset, each change written through Options.AlterISR conditionally on the
// state version (a refused write waits for the next Apply). Followers run one
// fetcher per leader (Fetch with replica_id), append with the leader's
// offsets and epochs, and cut their log where it diverges from the leader's
// by leader epoch (KIP-101), walking epochs back while the leader's answer
// is older (KIP-279), never to their own high watermark. A follower raises
// its log start to the fetch answer's log_start_offset (DeleteRecords or
// retention at the leader), at most to its high watermark; one whose log
// end fell below the leader's log start (it was away meanwhile) restarts
// its log there.
//
// A follower fetches (Fetch v12) naming its log's latest epoch as
// last_fetched_epoch; when its log diverged, the leader answers with the
// DivergingEpoch of KIP-320 (its end of that epoch) and no records, and the
// follower cuts its log there without an OffsetForLeaderEpoch round trip
// (which it still sends after OFFSET_OUT_OF_RANGE or a refused append). A
// partition-level fetch error delays that partition alone for FetchBackoff
// (Kafka's delayed partitions); a failed request backs the whole fetcher off.
//
// Replication throttles (throttle.go, KIP-73): a leader sends no records
// to an out-of-sync follower of a throttled replica while its
// leader.replication.throttled.rate is overdrawn, and a follower leaves its
// out-of-sync throttled replicas out of its fetches while its
// follower.replication.throttled.rate is; in-sync replicas and clients are
// never throttled.
//
// Lock order: Manager.applyMu -> partition.mu -> Manager.mu -> fetcher.mu;
// partition.mu before the partition log's locks.
//
// Followers name their log start in each fetch; the leader's low watermark
// (LowWatermark) is the smallest log start over it and its ISR, and
// DeleteRecords waits for it (WaitLowWatermark), as Kafka's delayed
// DeleteRecords does. Compared with Kafka: no follower fetching for
// clients; the low watermark spans the ISR rather than every live replica
// (an out-of-sync follower does not hold up a DeleteRecords).
package replica
