// Package group is sluice's group coordinator for the classic consumer-group
// protocol (JoinGroup, SyncGroup, Heartbeat, LeaveGroup with client-side
// assignors), committed offsets and their storage in the compacted internal
// topic __consumer_offsets.
//
// # States
//
//	           join (new member)              all members joined, or
//	+-------+ -----------------> +-----------+ rebalance timeout    +-------------+
//	| Empty |                    | Preparing | -------------------> | Completing  |
//	+-------+ <----------------- | Rebalance |                      | Rebalance   |
//	    ^      nobody rejoined   +-----------+ <------------------- +-------------+
//	    |                          ^      ^    member joined/left/       | leader's
//	    | last member left         |      |    expired, sync timeout     | SyncGroup
//	    | or expired               |      +-------------------------+    v
//	    +--------------------------+-- member joined/left/expired --+ Stable
//
// A join phase (PreparingRebalance) ends when every member has rejoined and
// no member id handed out with MEMBER_ID_REQUIRED is still expected — but
// not before group.initial.rebalance.delay.ms after an Empty group's first
// join (each new member extends it, up to the rebalance timeout) — or when
// the largest rebalance timeout of the members has passed; members that did
// not rejoin are removed. The generation then increases, the leader (kept if
// it rejoined) receives every member's metadata, and the followers' SyncGroup
// waits until the leader's SyncGroup brings the assignment. Requests of an
// older generation get ILLEGAL_GENERATION, of an unknown member
// UNKNOWN_MEMBER_ID, of an old incarnation of a static member
// FENCED_INSTANCE_ID, and heartbeats during a join phase
// REBALANCE_IN_PROGRESS. A static member (group.instance.id) that restarts
// gets a new member id and, if the group is Stable and it was a follower with
// unchanged metadata, its old assignment without a rebalance.
//
// Time is an input: the coordinator reads Options.Clock and acts on time
// only in Tick (session expiry, join and sync deadlines, offset expiry),
// which the broker calls every 100 ms and tests call after advancing their
// clock.
//
// # Records of __consumer_offsets (Kafka's formats, so a Kafka tool can read them)
//
//	offset commit   key:   int16 version=1 | string group | string topic | int32 partition
//	                value: int16 version=3 | int64 offset | int32 leaderEpoch | string metadata | int64 commitTimestamp
//	group metadata  key:   int16 version=2 | string group
//	                value: GroupMetadataValue v3 (protocol type, generation, protocol, leader,
//	                       state timestamp, members with instance id, timeouts, subscription, assignment)
//	tombstone       same key, null value: the offset or the group was deleted or expired
//
// A group's records go to partition abs(javaHashCode(group)) % partitions,
// as on Kafka. Each commit is one uncompressed RecordBatch v2. The newest
// record of a key wins; the topic is cleanup.policy=compact. New replays
// every partition at start: committed offsets, and the last generation's
// members, whose sessions restart at the time of loading (so a broker
// restart does not force a rebalance). Offsets of a group that has been
// Empty for offsets.retention.minutes (for a group that never had members:
// each offset committed that long ago) are deleted with tombstones.
//
// # Concurrency
//
// One mutex, Coordinator.mu, guards every group and member. JoinGroup and a
// follower's SyncGroup wait on a per-member channel outside the lock. The
// coordinator calls Storage while holding Coordinator.mu (so the order of
// records in the log is the order of the in-memory changes); Storage never
// calls back. Lock order: Coordinator.mu -> the broker's registry and
// partition locks.
//
// # Usage
//
//	c, err := group.New(group.Options{Storage: st, Clock: clock})
//	resp := c.Join(ctx, joinRequest, group.Client{ID: clientID, Host: "/10.0.0.1:5555"})
//	...
//	c.Tick() // every 100 ms
package group
