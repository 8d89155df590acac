// Package replica replicates a broker's partitions as Kafka does: the leader
// tracks each follower's log end (its fetch offset), keeps the high
// watermark at the minimum log end over the ISR (never backwards), shrinks
// the ISR when a follower has not caught up for LagTimeMax and expands it
// when a follower reaches the high watermark and this leadership's first
// offset, each change written through Options.AlterISR conditionally on the
// state version (a refused write waits for the next Apply). Followers run one
// fetcher per leader (Fetch with replica_id), append with the leader's
// offsets and epochs, and on a new role truncate by OffsetForLeaderEpoch
// (KIP-101), walking epochs back while the leader's answer is older
// (KIP-279), never to their own high watermark.
//
// Lock order: Manager.applyMu -> partition.mu -> Manager.mu -> fetcher.mu;
// partition.mu before the partition log's locks.
//
// Compared with Kafka: no KIP-320 diverging-epoch in Fetch answers (a
// follower re-truncates on OFFSET_OUT_OF_RANGE or a refused append); a
// partition-level fetch error backs off the whole fetcher; followers do not
// follow the leader's log start offset; no follower fetching for clients.
package replica
