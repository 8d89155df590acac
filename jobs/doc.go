// Package jobs runs load jobs: a YAML job spec (Spec), decoders (Avro with
// the Confluent framing and a schema registry, Avro with a schema file,
// JSON typed by a schema or inferred, string, bytes), mappers (the Mapper
// interface, a registry of named mappers, identity / select / where /
// explode; a mapper may emit many rows per record) and computed columns
// (map.derive, derive.go), the
// runner (RunTasks, the one of `sluice load run` and of the scheduler;
// Loader.Run: plan → RunTasks on a pool of workers → run report),
// checkpoints and replay.
//
//	JOB.yaml ─► LoadSpec ─► Open ─► Loader
//	                                  │ Plan = Recover each partition (writers)
//	                                  │        + Preview (inputformat.Cut over ListOffsets; read only)
//	                                  │        + Prepare (start records, skip commits)
//	                                  ▼
//	            splits ─► RunTasks ─► runTask: Reader [start, end) ─► Decoder ─► where ─► Mapper ─► derive
//	                                  ─► the record's rows (held until the mapper returns; _row 0 … n-1)
//	                                  ─► writers.SplitWriter (files under _sluice/tmp)
//	                                  ─► wait for the partition's turn ─► Commit(reached)
//	                                  ▼
//	            RunReport ─► stdout and _sluice/runs/<run id>.json
//
// # What jobs keeps in the output (beside the writers' commits)
//
//	_sluice/runs/<run id>.json                      run reports (a run id is also a checkpoint)
//	_sluice/runs/<job>/<run id>[.running].json      the scheduler's runs of the job (scheduler.History)
//	_sluice/start/<topic>/<partition>               where a partition never loaded starts (created once, exclusively)
//	_sluice/schemas/<job>.avsc                      the JSON schema inferred once and then held
//	_sluice/dead-letter/<t>/<p>/<start>.<attempt>.jsonl   dead letters; only the committed attempt's count
//	_sluice/topics/<topic>/<incarnation>.json      each topic's identity, recorded once (identity.go)
//	_sluice/retired/<topic>/<incarnation>/         checkpoints of a topic started over (on_topic_recreated: restart)
//	_sluice/lock/<seq>.holder|.lease-<ms>|.released   the job lock (lock.go): one run of the job at a time
//
// # Exactly once
//
// A task commits only when its reader reached the split's end, and only as
// the next link of its partition's chain (the writers enforce both). Within
// a run the splits of a partition are read in parallel and commit in offset
// order (turns); across processes a split that does not continue the chain
// fails with ErrNotReady and nothing of it is committed. A bad record under
// on_bad_record: fail aborts its attempt: nothing of the split is committed.
//
// # Changes of the world
//
// A topic recreated under its name is found by its identity record (topic
// id, else log starts and leader epochs, and the partitions loaded) and
// is an explicit decision, on_topic_recreated; a partition added after the
// job's first run starts at its log start. Both are in the run report.
// Only one run of a job loads at a time (the job lock); every commit
// checks that lock's fence first.
//
// # Concurrency
//
// A Loader is safe for concurrent use; its decoder caches registry schemas
// under a mutex, and each task makes its own mapper, reader and writer. The
// turns of a run are guarded by one mutex; a waiting task renews its
// attempt's lease. No lock is held across I/O.
//
// RunTasks: the caller's goroutine owns the queues of the tasks not yet
// handed out and hands them to Workers goroutines over a channel; a task's
// outcome is written only by the worker running it, and read by the owner
// after that worker reported it done.
//
// # Runs
//
// RunTasks decides, for both its callers, how many tasks run at once, how
// a failed task is retried (RetryPolicy, backoffs on the clock), the order
// within a partition, cancellation and the per-task record (TaskOutcome):
//
//	                 workers      retries              within a partition        at a failure
//	sluice load run  Workers (2)  none (one attempt)   read at once, commit in   the run stops
//	                                                   turn (TurnFunc)
//	scheduler        one per      retry: (3, 1s … 1m)  one after the other       the other partitions
//	                 partition                         (Ordered: remote workers) go on
package jobs
