// Package cluster runs sluice brokers as a cluster through ZooKeeper, the
// way Kafka 2.x did: brokers register, one of them is elected controller,
// the controller decides who leads each partition and writes it to
// ZooKeeper, and each broker watches the states of its own partitions.
// It decides WHO leads; broker/replica does what a role says (fetching,
// the high watermark, acks=all). The two meet in the server's adapter.
//
// # ZooKeeper layout (under the chroot of --zookeeper host:port/chroot)
//
//	/brokers/ids/<id>                          ephemeral  {"version":5,"host","port","endpoints":["REPLICATION://h:p"],"rack",...}
//	/brokers/topics/<t>                        persistent {"version":3,"partitions":{"0":[1,2,3]},"topic_id":"<base64 uuid>","adding_replicas":{},"removing_replicas":{}}
//	/brokers/topics/<t>/partitions/<p>/state   persistent {"version":1,"leader":1,"leader_epoch":4,"isr":[1,3],"controller_epoch":7}
//	/config/topics/<t>                         persistent {"version":1,"config":{"retention.ms":"..."}}
//	/config/brokers/<id>                       persistent {"version":1,"config":{"leader.replication.throttled.rate":"..."}} (dynamic broker configs)
//	/controller                                ephemeral  {"version":1,"brokerid":2,"timestamp":"..."}
//	/controller_epoch                          persistent "7"
//	/isr_change_notification/isr_change_<seq>  persistent {"version":1,"partitions":[{"topic","partition"}]}
//	/admin/preferred_replica_election          persistent the partitions to give back to their preferred leader
//	/admin/controlled_shutdown/<id>            ephemeral  broker <id> is stopping
//	/latest_producer_id_block                  persistent {"version":1,"broker":1,"block_start":"0","block_end":"999"}
//
// The JSON is Kafka's (field names and versions), so Kafka's tools can read
// it. A replica list is in preference order: its first broker is the
// preferred leader.
//
// # Protocol
//
//  1. Registration. A broker creates /brokers/ids/<id> under its session.
//     If the node exists under another session it waits (up to
//     RegisterWait, about one session timeout: a previous run of this
//     broker whose session has not expired) and then refuses to start with
//     ErrBrokerIDInUse.
//  2. Election. Brokers race to create /controller; the create and the
//     increment of /controller_epoch are one multi, conditional on the
//     epoch's znode version, so each epoch has one winner. The others watch
//     /controller and race again when it vanishes.
//  3. Fencing. Every state write of a controller is a multi whose first op
//     checks that /controller_epoch still has the version its own increment
//     made, and whose second op is conditional on the state znode's
//     version. A controller stops the moment its session ends; a write it
//     still sends (over the client's next session) fails the check
//     (ErrFenced), since the next controller incremented the epoch.
//  4. Decisions (decide in election.go). The controller watches
//     /brokers/ids, /brokers/topics (and each topic), the ISR change
//     notifications, the shutdown requests and the preferred-election
//     request; on any change it reads everything and writes what changed:
//     a new partition's first state; for a dead leader the first live ISR
//     member in assignment order; dead brokers out of the ISR; no live ISR
//     member leaves the partition offline (leader -1), its ISR kept as it
//     was so the last ISR member may lead again when it returns, unless
//     unclean.leader.election.enable (a topic config, else the broker's
//     default) lets a live out-of-sync replica lead alone; a broker shutting
//     down hands its leaderships to other ISR members and leaves the ISRs;
//     on request (ElectPreferred) the preferred replica leads again once
//     it is back in the ISR; with auto.leader.rebalance.enable the
//     controller also checks every leader.imbalance.check.interval.seconds
//     (rebalance.go) and gives a broker back the partitions it prefers
//     when more than leader.imbalance.per.broker.percentage of them are led
//     elsewhere, as Kafka's controller does. Each change of leader bumps the
//     leader epoch by one.
//  5. Roles. Brokers learn their roles by watching ZooKeeper, not by a push
//     from the controller: each broker watches every state znode (its
//     metadata cache, Partitions) and delivers the changed states of the
//     partitions with a replica on it (OnStates) with the znode version.
//     ZooKeeper orders the writes of one znode, so a broker sees a
//     partition's states in version order.
//  6. ISR changes. The leader changes its ISR itself (AlterISR): a setData
//     conditional on the version it was given, refused (ErrStaleState) when
//     the version, the leader or the leader epoch moved. Then it creates an
//     /isr_change_notification node; the controller reacts to it (e.g. a
//     returning preferred replica is back in the ISR) and deletes it.
//  7. Controlled shutdown. A stopping broker creates
//     /admin/controlled_shutdown/<id> and waits until it leads no partition
//     another live ISR member could lead, and is in no ISR of another
//     leader; then it stops.
//  8. Replica moves (KIP-455, reassign.go). AlterPartitionReassignments
//     on any broker writes the move into the topic's assignment znode,
//     conditionally on its version: replicas = target ++ (origin - target),
//     adding_replicas = target - origin, removing_replicas = origin - target
//     (a cancel writes the origin back, replicas less adding). The new
//     replicas see themselves in the assignment, open an empty log and
//     fetch; the leader tracks them and adds each to the ISR once it
//     reaches the high watermark (6). When every target replica is in the
//     ISR the controller (a) moves the leadership to the first live target
//     replica if the leader is leaving (a new leader epoch) and takes the
//     leaving replicas out of the ISR, one conditional state write, then
//     (b) writes the assignment = target with no adding/removing, a multi
//     checking its controller epoch. A broker that is neither in the
//     assignment nor in the state any more stops replicating the partition
//     and deletes its log. No preferred election runs on a moving partition.
//  9. Metadata. Store (metadata.Store) keeps topics in /brokers/topics and
//     /config/topics and producer-id blocks in /latest_producer_id_block,
//     every write conditional. Creating a topic writes its assignment; the
//     controller sees it and creates the partition states. Each broker
//     watches every /config/topics/<t> too (ConfigGeneration), so a changed
//     override (a replication throttle) reaches every broker at once rather
//     than at its next periodic read. A broker's own dynamic configs (the
//     replication throttles) are in /config/brokers/<id>, written by that
//     broker only (UpdateBrokerConfig) and read at its start.
//
// # Failure cases
//
//   - A controller paused past its session (GC, SIGSTOP, a partition from
//     ZooKeeper): /controller vanishes, another broker wins epoch e+1. When
//     the old one resumes, its session is expired: it stops at once, and a
//     write it had in flight fails the epoch check. It then campaigns again
//     like any broker.
//
//   - A leader paused past its session: its registration vanishes, the
//     controller elects another ISR member with a higher leader epoch and
//     removes the paused broker from the ISR. When it resumes it may still
//     believe it leads; its next AlterISR fails with ErrStaleState (the
//     version moved), and its followers have moved to the new leader, so
//     acks=all writes it accepts cannot gather its old ISR; it stops leading
//     when told the new state (or its AlterISR fails), and truncates by
//     leader epoch as a follower (broker/replica).
//
//   - An ISR write racing a leader election: both are conditional on the
//     same version; one lands. If the controller loses it re-reads and
//     decides again from the new ISR; if AlterISR loses it is ErrStaleState
//     and the leader waits for the new state.
//
//   - ZooKeeper unreachable: reads and writes fail and are retried; nothing
//     is decided meanwhile. A session that survives (reconnect within the
//     session timeout) goes on; an expired one makes the broker register
//     again, re-read every state and campaign again.
//
//   - A broker restarting with the same id: a clean stop closes its session
//     and frees the id at once; after kill -9 the new process waits for the
//     old session to expire (RegisterWait), then registers; meanwhile the
//     controller has treated it as dead.
//
//   - Two brokers given the same id: the second is refused
//     (ErrBrokerIDInUse) and does not start.
//
//   - A controller failing during a move: the move lives in ZooKeeper
//     only, so the next controller resumes it from the znode; between (a)
//     and (b) it finds the ISR already within the target and writes (b).
//
//   - A move replaced or cancelled while the leader adds a replica to the
//     ISR: AlterISR may land an ISR member the assignment no longer has;
//     the controller drops ISR members (and a leader) outside the
//     assignment. A target replica that never catches up leaves the move
//     in progress until it is cancelled or replaced.
//
// # Concurrency
//
// A Node runs, per session, two goroutines: the controller candidacy
// (campaign, and controller.run while elected) and the role watch
// (watchStates, the only caller of OnStates). Node.mu guards the current
// session, the broker and controller view and the change channel; it is
// never held across a ZooKeeper call. The controller is one goroutine that
// owns its decisions; every write it makes is conditional, so it needs no
// lock against the leaders' AlterISR calls.
//
// # Deviations from Kafka
//
// The controller re-reads all partition states on each event instead of
// caching them (simple and always fresh; O(partitions) reads per event).
// Brokers watch their state znodes instead of receiving LeaderAndIsr
// requests. Controlled shutdown is requested through a znode, not an RPC
// to the controller. A new partition gets its state only once one of its
// replicas is live.
package cluster
