package scheduler

import (
	"context"
	"errors"
	"time"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
)

// Scheduler errors.
var (
	// ErrJob reports a job spec the scheduler cannot use (bad schedule, bad
	// retry policy, missing name or output).
	ErrJob = errors.New("scheduler: job")
	// ErrRunFailed reports a run in which some task failed every attempt.
	ErrRunFailed = errors.New("scheduler: run failed")
	// ErrNotLeader reports work refused because this scheduler lost (or
	// never had) the leadership.
	ErrNotLeader = errors.New("scheduler: not the leader")
)

// Job is what the scheduler knows of one job spec: its identity, when to
// run it, how to retry it, where its output lives, and the spec's bytes
// (which the Engine parses again on a worker).
type Job struct {
	// Name is unique in a jobs directory and names the run history.
	Name string
	// Path is the spec file the job came from ("" when not from a file).
	Path string
	// Spec is the spec file's content; workers parse it with Engine.ParseJob.
	Spec []byte
	// Schedule is the cron expression (five fields, optional seconds,
	// @hourly, @every 10m, CRON_TZ=...).
	Schedule string
	// Retry says how often and how fast failed tasks are retried.
	Retry RetryPolicy
	// Output is the output URI (file:///... or hdfs://...): the run history
	// and completeness markers live under it.
	Output string
	// OpenOutput opens Output with the job's own options (a loader job's
	// output.kerberos); nil: filesystem.Open(Output). Options.OpenFS,
	// when given, takes precedence.
	OpenOutput func() (vfs.FS, error)
	// Partition describes the output's time directories, for completeness.
	Partition TimePartition
	// AllowedLateness is how long after an hour's end records of that hour
	// may still arrive; _SUCCESS waits for it.
	AllowedLateness time.Duration
	// CompleteWhen is jobs.CompleteLoaded (the default, "") or
	// jobs.CompleteAudit: a directory is marked only when its loaded count
	// also balances the producer tier's (the Engine must be an AuditSource).
	CompleteWhen string
	// Engine holds the engine's own parsed form of the spec.
	Engine any
}

// TimePartition is the output's Hive-style time layout.
type TimePartition struct {
	// By is "hour", "day" or "none" (no completeness markers).
	By string
	// Location is the time zone the directories are named in (nil: UTC).
	Location *time.Location
}

// RetryPolicy bounds the attempts of one task: the loader runner's
// (jobs.RunTasks), with the scheduler's defaults (withRetryDefaults: 3
// attempts, 1s doubling up to 1m).
type RetryPolicy = jobs.RetryPolicy

func withRetryDefaults(p RetryPolicy) RetryPolicy {
	if p.MaxAttempts <= 0 {
		p.MaxAttempts = 3
	}
	if p.Backoff <= 0 {
		p.Backoff = time.Second
	}
	if p.MaxBackoff <= 0 {
		p.MaxBackoff = time.Minute
	}
	return p
}

// Task is the unit a worker runs: one split of the loader's plan, the
// offset range [Start, End) of one topic partition. It is the planner's
// type itself (no copy): what a dispatch needs beside it (run, job,
// attempt) travels as arguments of Dispatcher.Dispatch and RunTask.
type Task = inputformat.Split

// PartitionPosition is where a job stands on one partition at planning.
type PartitionPosition struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Loaded is the job's checkpoint: the end of its last committed range.
	Loaded int64 `json:"loaded"`
	// HighWatermark is the partition's high watermark read at planning.
	HighWatermark int64 `json:"high_watermark"`
}

// Plan is the outcome of planning one run: the tasks and the positions.
type Plan struct {
	Tasks      []Task
	Partitions []PartitionPosition
	// Notes are things the run report must carry (e.g. a skipped range).
	Notes []string
}

// TaskReport is what one successful task attempt did.
type TaskReport struct {
	// Records and Bytes written by the committed attempt (0 when another
	// attempt had committed the range first).
	Records int64 `json:"records"`
	Bytes   int64 `json:"bytes"`
	// Committed is true when this attempt's commit is the range's commit;
	// false when an earlier attempt (e.g. a zombie) had committed it.
	Committed bool `json:"committed"`
}

// Engine is what the scheduler needs from the loader. Implementations must
// be safe for concurrent use.
type Engine interface {
	// ParseJob parses a job spec (path names it in messages).
	ParseJob(path string, spec []byte) (Job, error)
	// Plan turns a job into the tasks of one run, starting at its checkpoint.
	Plan(ctx context.Context, job Job) (Plan, error)
	// RunTask runs one task and commits its output exactly once.
	RunTask(ctx context.Context, job Job, task Task) (TaskReport, error)
}

// A Locker is an Engine that holds a job's lock for the length of a run, so
// that no other run of the job (a `sluice replay`, a `sluice load run`)
// loads meanwhile. LoaderEngine is one: the lock is the loader's job lock
// in the output (jobs.Loader.AcquireLock). A run whose lock is held by
// another live run fails with the holder named, and the next tick tries
// again.
type Locker interface {
	LockJob(ctx context.Context, job Job) (release func(), err error)
}

// A RunHolder is an Engine that can keep what a job's tasks share (for the
// loader: the source client and the output file system) open for the
// length of a run, so that the run's Plan, LockJob and in-process RunTask
// calls reuse it instead of opening their own. The scheduler holds it
// from the start of a run to its end, a cluster worker from the run's
// first task on it to the run's end (or an idle timeout); a hold that
// fails is not an error of the run (each call then opens its own and
// reports what fails).
type RunHolder interface {
	HoldJob(ctx context.Context, job Job) (release func(), err error)
}

// An AuditSource is an Engine that reads the producer tier's counts of a
// job's source cluster from its _audit topic (with the client settings the
// job reads its topics with), for jobs with complete_when: audit.
// LoaderEngine is one.
type AuditSource interface {
	ProducerCounts(ctx context.Context, job Job) ([]audit.Count, error)
}

// A ClockTaker is an Engine whose time can be the scheduler's: New hands
// it Options.Clock (and a cluster worker its WorkerOptions.Clock), so that
// a scheduler or worker on a clock.Manual drives the loader's time too
// (attempt ids and leases, commit times, the job lock's lease).
// LoaderEngine is one.
type ClockTaker interface {
	// TakeClock makes c the engine's clock, unless its own options name one.
	TakeClock(c clock.Clock)
}
