package jobs

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"slices"
	"sync"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sluicehq/sluice/inputformat"
)

// ErrPredecessorFailed reports a task not committed because an earlier
// split of its partition failed in the same run.
var ErrPredecessorFailed = errors.New("jobs: an earlier split of the partition failed")

// RunsDir is the one run-record folder of an output: the reports of the
// loader's runs as _sluice/runs/<run id>.json, and the scheduler's run
// history of each job in a folder of it, _sluice/runs/<job>/ (see
// scheduler.History and the package doc).
const RunsDir = "_sluice/runs"

// Run plans the job and runs its tasks on a pool of Workers goroutines.
// Splits of one partition are read and written in parallel but commit in
// offset order. The first failing task stops the run (tasks already
// committed stay committed). The report is stored under _sluice/runs/
// and returned, also when the run fails.
func (l *Loader) Run(ctx context.Context) (rep *RunReport, err error) {
	rep = l.newRunReport()
	err = l.withLock(LockLoad, func() error {
		rep, err = l.run(ctx, rep)
		return err
	})
	if err != nil && rep.Finished.IsZero() { // the lock not taken (held, or its file not written: a full disk)
		return rep, l.finish(rep, err)
	}
	return rep, err
}

func (l *Loader) run(ctx context.Context, rep *RunReport) (*RunReport, error) {
	plan, err := l.recoverAndPreview(ctx)
	if err != nil {
		return rep, l.finish(rep, err)
	}
	rep.Plan, rep.Topics = plan.Partitions, plan.Topics
	if err := l.checkEvolution(ctx); err != nil { // before the run's first write (evolve.go)
		return rep, l.finish(rep, err)
	}
	if err := l.Prepare(ctx, plan); err != nil {
		return rep, l.finish(rep, err)
	}
	var bar *progressbar.ProgressBar
	if l.opts.Progress != nil {
		bar = progressbar.NewOptions64(plan.Records(),
			progressbar.OptionSetWriter(l.opts.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("load %s: %d tasks", l.spec.Name, len(plan.Splits))),
			progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("rec"),
			progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
	}
	progress := func(n int64) {
		if bar != nil {
			bar.Add64(n)
		}
	}
	// One attempt per task, the splits of a partition at once (each waits
	// for its turn to commit), and the first failure stops the run: it is
	// the run's error (the tasks it cancelled report their own).
	var mu sync.Mutex // guards firstErr
	var firstErr error
	results := RunTasks(ctx, plan.Splits, func(ctx context.Context, s Task, _ int, turn TurnFunc) (TaskReport, error) {
		return l.runTask(ctx, s, turn, progress)
	}, RunnerOptions[TaskReport]{Workers: l.opts.Workers, Clock: l.opts.Clock, StopOnFailure: true, Logger: l.log,
		OnTaskEnd: func(o TaskResult[TaskReport]) {
			mu.Lock()
			defer mu.Unlock()
			if o.Err != nil && firstErr == nil && !errors.Is(o.Err, ErrPredecessorFailed) {
				firstErr = o.Err
			}
		}})
	if bar != nil {
		bar.Finish()
	}
	for _, r := range results {
		if r.State != TaskNotRun { // the run stopped before a task not run: not in the report
			rep.Tasks = append(rep.Tasks, r.Report)
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return rep, l.finish(rep, firstErr)
}

// turns sequences the commits of each partition within a run.
type turns struct {
	mu     sync.Mutex
	next   map[string]int64 // guarded by mu: the next start allowed to commit
	failed map[string]bool  // guarded by mu
	// done holds splits finished ahead of their turn (found already
	// committed): start → end, per partition (guarded by mu).
	done    map[string]map[int64]int64
	changed chan struct{} // guarded by mu: closed and replaced on every change
}

func tpKey(topic string, p int32) string { return fmt.Sprintf("%s/%d", topic, p) }

func newTurns(parts []inputformat.PartitionPlan) *turns {
	t := &turns{next: map[string]int64{}, failed: map[string]bool{}, done: map[string]map[int64]int64{}, changed: make(chan struct{})}
	for _, p := range parts {
		t.next[tpKey(p.Topic, p.Partition)] = p.Start
	}
	return t
}

// turnsOf returns the turns of a run's tasks: each partition's first
// turn is its lowest start.
func turnsOf(tasks []Task) *turns {
	t := newTurns(nil)
	for _, s := range tasks {
		k := tpKey(s.Topic, s.Partition)
		if next, ok := t.next[k]; !ok || s.Start < next {
			t.next[k] = s.Start
		}
	}
	return t
}

func (t *turns) wait(ctx context.Context, s inputformat.Split) error {
	k := tpKey(s.Topic, s.Partition)
	for {
		t.mu.Lock()
		next, failed, ch := t.next[k], t.failed[k], t.changed
		t.mu.Unlock()
		switch {
		case failed:
			return fmt.Errorf("%w: %s not committed", ErrPredecessorFailed, s)
		case next == s.Start:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// finish records the end of a task. Splits may finish out of order (one
// found already committed returns at once), so the partition's next start
// advances over every contiguous finished split.
func (t *turns) finish(s inputformat.Split, err error) {
	k := tpKey(s.Topic, s.Partition)
	t.mu.Lock()
	defer t.mu.Unlock()
	if err != nil {
		t.failed[k] = true
	} else {
		if t.done[k] == nil {
			t.done[k] = map[int64]int64{}
		}
		t.done[k][s.Start] = s.End
		for {
			end, ok := t.done[k][t.next[k]]
			if !ok {
				break
			}
			delete(t.done[k], t.next[k])
			t.next[k] = end
		}
	}
	close(t.changed)
	t.changed = make(chan struct{})
}

// RunReport says what one run did; it is stored as JSON under _sluice/runs/.
type RunReport struct {
	ID       string    `json:"id"`
	Job      string    `json:"job"`
	Status   string    `json:"status"` // ok | failed
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Duration Duration  `json:"duration"`
	// Plan is what planning saw and decided per partition (lost ranges
	// under on_offset_out_of_range: skip are in its Skipped fields).
	Plan []inputformat.PartitionPlan `json:"plan"`
	// Topics is what planning found of each topic's identity: a topic
	// started over because it was recreated, partitions added since the
	// job's first run (they load from their log start).
	Topics     []inputformat.TopicPlan `json:"topics,omitempty"`
	Partitions []PartitionReport       `json:"partitions"`
	Tasks      []TaskReport            `json:"tasks"`
	Totals     Totals                  `json:"totals"`
	// RecordsPerSecond and InputMBPerSecond are over the run's duration.
	RecordsPerSecond float64  `json:"records_per_second"`
	InputMBPerSecond float64  `json:"input_mb_per_second"`
	Errors           []string `json:"errors,omitempty"`
}

// Totals are the sums of what a run (or one partition of it) committed:
// a task that another run committed first, or that failed, adds nothing
// but its count in TakenByOthers or Failed.
type Totals struct {
	// Tasks counts the tasks this run committed.
	Tasks int `json:"tasks"`
	// TakenByOthers counts the splits another run (or an earlier attempt)
	// had committed: their records are that run's.
	TakenByOthers int `json:"taken_by_others"`
	// Failed counts the tasks that committed nothing.
	Failed       int   `json:"failed"`
	RecordsIn    int64 `json:"records_in"`
	BytesIn      int64 `json:"bytes_in"`
	RowsOut      int64 `json:"rows_out"`
	BytesOut     int64 `json:"bytes_out"`
	Files        int   `json:"files"`
	Filtered     int64 `json:"filtered"`
	Skipped      int64 `json:"skipped"`
	DeadLettered int64 `json:"dead_lettered"`
}

func (t *Totals) add(r TaskReport) {
	switch {
	case r.Won: // committed (a roll-forward error after it is recovery's to finish)
	case r.AlreadyCommitted:
		t.TakenByOthers++
		return
	default:
		t.Failed++
		return
	}
	t.Tasks++
	t.RecordsIn += r.RecordsIn
	t.BytesIn += r.BytesIn
	t.RowsOut += r.RowsOut
	t.BytesOut += r.BytesOut
	t.Files += len(r.Files)
	t.Filtered += r.Filtered
	t.Skipped += r.Skipped
	t.DeadLettered += r.DeadLettered
}

// PartitionReport is one partition's part of a run.
type PartitionReport struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// From is where the run started; To is the partition's committed
	// position when the run ended.
	From       int64     `json:"from"`
	To         int64     `json:"to"`
	LastRecord time.Time `json:"last_record,omitempty"`
	Totals
	// LostToRetention is the range skipped under on_offset_out_of_range: skip.
	LostToRetention *inputformat.Range `json:"lost_to_retention,omitempty"`
}

func (l *Loader) newRunReport() *RunReport {
	now := l.opts.Clock.Now().UTC()
	var b [3]byte
	rand.Read(b[:])
	return &RunReport{ID: now.Format("20060102T150405.000Z") + "-" + hex.EncodeToString(b[:]), Job: l.spec.Name, Started: now}
}

// finish sums the report, stores it and returns err (or the store error).
func (l *Loader) finish(rep *RunReport, err error) error {
	rep.Finished = l.opts.Clock.Now().UTC()
	rep.Duration = Duration(rep.Finished.Sub(rep.Started))
	rep.Status = "ok"
	if err != nil {
		rep.Status = "failed"
		rep.Errors = append(rep.Errors, err.Error())
	}
	slices.SortFunc(rep.Tasks, func(a, b TaskReport) int { return compareTasks(a.Split, b.Split) })
	idx := map[string]int{}
	for _, p := range rep.Plan {
		idx[tpKey(p.Topic, p.Partition)] = len(rep.Partitions)
		rep.Partitions = append(rep.Partitions, PartitionReport{Topic: p.Topic, Partition: p.Partition, From: p.Start, To: p.Start,
			LostToRetention: p.Skipped})
	}
	for _, t := range rep.Tasks {
		rep.Totals.add(t)
		i, ok := idx[tpKey(t.Split.Topic, t.Split.Partition)]
		if !ok {
			continue
		}
		pr := &rep.Partitions[i]
		pr.Totals.add(t)
		if t.LastRecord.After(pr.LastRecord) {
			pr.LastRecord = t.LastRecord
		}
		if t.Error == "" && (t.Won || t.AlreadyCommitted) && pr.To == t.Split.Start {
			pr.To = t.Split.End
		}
	}
	if secs := time.Duration(rep.Duration).Seconds(); secs > 0 {
		rep.RecordsPerSecond = float64(rep.Totals.RecordsIn) / secs
		rep.InputMBPerSecond = float64(rep.Totals.BytesIn) / secs / 1e6
	}
	b, merr := json.MarshalIndent(rep, "", "  ")
	if merr == nil {
		p := path.Join(RunsDir, rep.ID+".json")
		if merr = l.fs.MkdirAll(RunsDir); merr == nil {
			merr = l.fs.WriteExclusive(p, b)
		}
	}
	if merr != nil {
		merr = fmt.Errorf("jobs: storing the run report: %w", merr)
		if err == nil {
			return merr
		}
		l.log.Warn("storing the run report", "err", merr)
	}
	return err
}
