// Package scheduler runs load jobs on their cron schedules: it reads the
// job specs of a directory (and picks up added, changed and removed ones
// without a restart), starts one run of a job per tick, dispatches the
// run's tasks to workers with retries, records each run in the job's
// history, and marks complete time directories with _SUCCESS.
//
// The loader is reached through the narrow Engine interface (ParseJob,
// Plan, RunTask); LoaderEngine adapts package jobs, whose splits are the
// tasks (Task is inputformat.Split). An Engine that is a RunHolder
// (LoaderEngine) keeps the job's loader, with its source client and output
// file system, open for the length of a run: the run's plan, lock and
// in-process tasks share it. All the loaders of one LoaderEngine share one
// writers.MemoryBudget, so the rows a process buffers for its open files
// are bounded once, however many jobs and tasks it runs. Task attempts go
// through a Dispatcher: LocalPool runs them in this process (embedded
// mode); package cluster queues them in ZooKeeper for `sluice worker`
// processes and elects one leading scheduler.
//
// # A run
//
//	tick ──► running already? ── yes ──► skipped (logged, counted, recorded in that run)
//	  │ no
//	  ▼
//	history: <id>.running.json ──► Engine.Plan ──► [Tracker.Begin] ──► tasks
//	                                                                    │
//	  jobs.RunTasks (the loader's runner), ordered:                     ▼
//	  partitions in parallel, the ranges of one partition in order,   Dispatch
//	  attempt 1..retry.max_attempts, backoff doubling (clock timers)
//	                                                                    │
//	  completeness check ◄──────────────────────────────────────────────┘
//	  history: <id>.json (state, records, lag, per-task reasons) ──► [Tracker.End]
//
// Ticks: the next tick is always computed from now, so ticks missed while
// the scheduler was busy or down collapse into one run. A job added at
// start whose last recorded run is older than one period runs at once
// (one catch-up run). A run cut short by a stop stays "running" in the
// history: a standby scheduler adopts it (cluster mode) or the next start
// marks it abandoned. Either way the next run resumes from the checkpoint,
// which is the loader's commit manifests, never the history. A spec whose
// schedule never fires or can fire sooner than Options.MinInterval (1m) after
// its previous firing is refused at the scan (jobs.ParseSchedule); behind
// that, a tick is never at or before now nor sooner than MinInterval after
// the job's previous tick, and a schedule with no next firing never ticks.
//
// # Files under the job's output
//
//	_sluice/runs/<job>/<run id>.running.json      a run in flight (created exclusively)
//	_sluice/runs/<job>/<run id>.json              an ended run (then .running is removed)
//	_sluice/completeness/<job>/<seq %020d>.json   completeness state: manifest cursors,
//	                                              pending counts, last decided directory,
//	                                              directories held for the audit
//	dt=YYYY-MM-DD/hr=HH/_SUCCESS.json             {"records": n, "start", "end", "run", ...}
//	dt=YYYY-MM-DD/hr=HH/_SUCCESS                  empty (the Hadoop convention); written after it
//
// Run ids are "<scheduled time 20060102T150405Z>-<6 hex>", so they sort by
// schedule. History and marker files are created exclusively and never
// rewritten, through writers/filesystem, so they work on HDFS too.
//
// _sluice/runs is the output's one run-record folder: `sluice load run`
// stores its reports there as _sluice/runs/<run id>.json (jobs.RunsDir),
// the scheduler its history in the job's folder of it. Versions before
// this layout kept the history in _sluice/history/<job>/ (same file names
// and format): it is still read, so their runs list (`sluice runs list`)
// and a run they left running is adopted or abandoned, but never written;
// a run that ends is recorded under _sluice/runs/<job>/.
//
// # Completeness
//
// A directory [start, end) is complete when min over the job's partitions
// of their position time >= end + allowed_lateness. A partition loaded up
// to the high watermark read when the run planned is at the planning time;
// otherwise it is at the start of the newest directory its committed files
// reached. Every directory from the first one loaded onwards is marked,
// empty ones included. Record counts are summed from the commit manifests,
// read through the writers' store from a per-partition cursor
// (writers.Store.CommitsFrom), never by listing the warehouse.
//
// A job with complete_when: audit also waits for the audit: a directory
// past the rule above is marked only when its load tier's count (the
// manifests' audit counts, audit.LoadCounts) equals the producer tier's in
// _audit (read by the Engine, an AuditSource, with the job's client
// settings); until then it is held in the state and checked again at each
// run, and the directories after it are decided on their own. Such jobs
// export sluice_audit_latest_balanced_window_seconds and
// sluice_audit_unbalanced_windows per job and topic (audit.Balance of the
// two tiers, by window).
//
// # Time
//
// All waits (ticks, rescans, backoffs) go through Options.Clock
// (internal/clock); tests drive a clock.Manual. The clock may be stepped
// (the wall clock set forward or back while a wait runs): the loop never
// waits longer than ScanInterval, so it sees a step within one; a tick a
// step forward passed runs at once (the ticks it passed collapse into
// one); a step back rescans at once, moves @every jobs' next runs back by
// the step (they keep their interval) and leaves wall-clock ticks where
// they are (an hourly job runs at the hour the clock shows, no tick twice).
// TestSchedulerSurvivesClockSteps steps a clock.Manual (Step) both ways.
//
// # Concurrency
//
// Scheduler.Run's goroutine owns the tick loop; each run is a goroutine,
// which hands its tasks to jobs.RunTasks's workers, one per partition of
// the run (LocalPool then bounds the attempts a process runs at once,
// across runs). Scheduler.mu guards the job table, the running and skipped
// maps and the open outputs; it is never held across an Engine, Dispatcher
// or file-system call except for opening an output. LoaderEngine.mu guards
// its table of held loaders (and the clock it took) and is never held
// across an open, a plan or a task: a job's first hold opens its loader
// outside the lock (one job's unreachable output stalls only that job) and
// the job's other holds and calls wait for that open.
package scheduler
