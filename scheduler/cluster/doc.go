// Package cluster runs the scheduler across machines through ZooKeeper:
// schedulers elect a leader, the leader publishes each run's tasks, and
// `sluice worker` processes claim and run them.
//
// # ZooKeeper layout (under the chroot of --zookeeper host:port/chroot)
//
//	/leader                          ephemeral  the leading scheduler's name
//	/workers/<worker>                ephemeral  a live worker
//	/runs/<run id>                   persistent a run in flight: record, spec, tasks
//	/queue/<run id>~<task id>~<n>    persistent attempt n of a task: job spec + range
//	/claims/<run id>~<task id>~<n>   ephemeral  the worker that owns the attempt
//	/results/<run id>~<task id>~<n>  persistent the attempt's outcome (report or error)
//
// Task ids are topic-partition-start; Kafka topic names cannot hold '~'.
//
// # Protocol
//
//  1. Schedulers race to create /leader; the winner runs the scheduler,
//     the others watch /leader and race again when it vanishes (the
//     leader's session ended). A leader whose session expires stops
//     scheduling at once and rejoins the race.
//  2. The leader writes /runs/<id> before dispatching (the plan is fixed
//     there), creates /queue/<attempt> for each attempt and waits for
//     /results/<attempt>. Dispatch is idempotent per attempt: a new leader
//     adopts every /runs/<id> it finds and dispatches again, which returns
//     results already written and waits for attempts still queued.
//  3. A worker claims an attempt by creating /claims/<attempt> (ephemeral),
//     runs it, creates /results/<attempt>, then deletes the queue node and
//     its own claim. When a worker dies its session expires, its claims
//     vanish, and the other workers (watching /claims) claim the attempt
//     again.
//  4. A zombie (a worker whose session expired but that still runs) may
//     finish an attempt someone else re-ran: both commit through the
//     writers' exclusive manifest, so exactly one range commit exists and
//     the other attempt reports that it lost. Results are created
//     exclusively too; the first one stands.
//  5. When a run ends the leader deletes its nodes.
//
// A worker parses a run's spec once and holds the job's loader (one source
// client, one output file system) for all the run's tasks it runs; it
// releases the hold when /runs/<id> is gone, or after
// WorkerOptions.HoldIdle of its clock with none of the run's tasks running
// (a leader that died before ending the run).
//
// A worker's clock (WorkerOptions.Clock) is its engine's too: the loader's
// attempt leases and commit times run on it, as a scheduler's clock is its
// LoaderEngine's (scheduler.ClockTaker).
//
// Leadership is not fenced in ZooKeeper: for up to a session timeout an
// old leader may still dispatch while a new one adopts. That can run a task
// twice, never commit it twice (point 4).
package cluster
