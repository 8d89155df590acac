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
// clock. Tick looks only at groups with something due (schedule.go): the
// groups with members, pending member ids or a join or sync phase sit in a
// queue by their earliest deadline; Empty groups sit in a second queue by
// when their offsets expire, looked at every
// offsets.retention.check.interval.ms. A group that only holds offsets
// costs nothing at rest (Stats.TickVisits counts the groups looked at).
//
// # Bounds
//
// What one client can make the coordinator hold is counted in bytes
// (memory.go) and bounded; a request past a bound is answered with a
// non-retriable error, so the client reports it instead of retrying:
//
//	JoinGroup  members + pending ids past group.max.size        GROUP_MAX_SIZE_REACHED
//	           a group's member metadata past
//	           group.max.metadata.bytes (4 MiB)                MESSAGE_TOO_LARGE
//	           all groups' bytes past group.coordinator.max.bytes
//	           (256 MiB: members, offsets, ids)                 MESSAGE_TOO_LARGE
//	           the group record past the offsets topic's
//	           max.message.bytes                                MESSAGE_TOO_LARGE
//	           over 64 protocols, a protocol type or name
//	           over 255 bytes                                   INCONSISTENT_GROUP_PROTOCOL
//	SyncGroup  the assignment past any of the byte bounds       MESSAGE_TOO_LARGE, to the
//	                                                            leader and every follower;
//	                                                            the group rebalances
//	OffsetCommit metadata past offset.metadata.max.bytes        OFFSET_METADATA_TOO_LARGE
//	           records past one batch of the offsets topic,
//	           or past group.coordinator.max.bytes              INVALID_COMMIT_OFFSET_SIZE
//
// The codes: GROUP_MAX_SIZE_REACHED is Kafka's; Java's consumer throws it
// from poll. For a byte bound Kafka has no join-time check (a group record
// too large fails the leader's SyncGroup with UNKNOWN_SERVER_ERROR, and the
// group rebalances again and again); sluice answers the join (or the sync)
// MESSAGE_TOO_LARGE, non-retriable in every client: franz-go returns it
// from PollFetches (ErrGroupSession), Java's consumer throws it from poll.
// A member refused at a rejoin leaves the group. INVALID_COMMIT_OFFSET_SIZE
// is Kafka's answer to a commit the log refuses for its size. The broker
// logs which bound was hit, with the sizes. A member leaving or expiring
// releases its bytes; an Empty group holds only its id and offsets.
// Answers assembled from what is held (ListGroups, DescribeGroups,
// OffsetFetch, whose repeated names are answered once) are bounded by the
// bytes held and the request's own size.
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
// as on Kafka. Each commit is one uncompressed RecordBatch v2 (refused when
// larger than the topic's max.message.bytes); the tombstones of a delete or
// an expiry are split over as many batches as that limit needs. The newest
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
