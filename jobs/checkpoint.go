package jobs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sluicehq/sluice/inputformat"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
)

// ErrCheckpoint reports a checkpoint ID that is malformed or names no
// checkpoint of the job.
var ErrCheckpoint = errors.New("jobs: checkpoint")

// A checkpoint is a position a job's output can be rewound to. Its ID is
// either
//
//	TOPIC/PARTITION@OFFSET   one partition, after the commit ending at OFFSET
//	RUN-ID                   every partition, where that run left it (_sluice/runs/RUN-ID.json)
//
// The manifests are the checkpoint history of a partition: each commit's
// end is a checkpoint, and so is the first commit's start.

// PartitionCheckpoint describes a partition's current position.
type PartitionCheckpoint struct {
	Topic     string    `json:"topic"`
	Partition int32     `json:"partition"`
	ID        string    `json:"id"`
	Offset    int64     `json:"offset"`  // the next offset to load
	Commits   int       `json:"commits"` // manifests in the history
	Records   int64     `json:"records"` // rows committed in all of them
	Committed time.Time `json:"committed,omitempty"`
	// LastRecord is the log time of the newest record loaded (from the run
	// reports; zero when unknown).
	LastRecord time.Time `json:"last_record,omitempty"`
	// End is the partition's end offset now, and Lag = End - Offset (both
	// -1 when the source could not be asked).
	End int64 `json:"end"`
	Lag int64 `json:"lag"`
}

// PartitionID names a partition checkpoint.
func PartitionID(topic string, partition int32, offset int64) string {
	return fmt.Sprintf("%s/%d@%d", topic, partition, offset)
}

func parsePartitionID(id string) (string, int32, int64, bool) {
	at := strings.LastIndexByte(id, '@')
	sl := strings.LastIndexByte(id, '/')
	if at < 0 || sl < 0 || sl > at {
		return "", 0, 0, false
	}
	p, err1 := strconv.ParseInt(id[sl+1:at], 10, 32)
	off, err2 := strconv.ParseInt(id[at+1:], 10, 64)
	if err1 != nil || err2 != nil || p < 0 || off < 0 || sl == 0 {
		return "", 0, 0, false
	}
	return id[:sl], int32(p), off, true
}

// Checkpoints lists the job's partitions with their current checkpoint,
// the time of the newest loaded record and the lag (asked of the source;
// when it cannot be reached End and Lag are -1).
func (l *Loader) Checkpoints(ctx context.Context) ([]PartitionCheckpoint, error) {
	parts, lerr := inputformat.ListOffsets(ctx, l.adm, l.spec.Topics(), l.opts.Reader.ReadCommitted)
	ends := map[string]int64{}
	var tps [][2]any
	if lerr == nil {
		for _, p := range parts {
			ends[tpKey(p.Topic, p.Partition)] = p.End
			tps = append(tps, [2]any{p.Topic, p.Partition})
		}
	} else {
		l.log.Warn("checkpoints: source unreachable, lag unknown", "err", lerr)
		for _, t := range l.spec.Topics() {
			ents, err := l.fs.List(path.Join(writers.SluiceDir, "commits", t))
			if err != nil && !errors.Is(err, vfs.ErrNotExist) {
				return nil, err
			}
			for _, e := range ents {
				if p, err := strconv.ParseInt(e.Name, 10, 32); err == nil {
					tps = append(tps, [2]any{t, int32(p)})
				}
			}
		}
	}
	sort.Slice(tps, func(i, j int) bool {
		if tps[i][0].(string) != tps[j][0].(string) {
			return tps[i][0].(string) < tps[j][0].(string)
		}
		return tps[i][1].(int32) < tps[j][1].(int32)
	})
	var out []PartitionCheckpoint
	for _, tp := range tps {
		t, p := tp[0].(string), tp[1].(int32)
		ms, err := l.store.Commits(t, p)
		if err != nil {
			return nil, err
		}
		pc := PartitionCheckpoint{Topic: t, Partition: p, End: -1, Lag: -1, Commits: len(ms), Offset: -1}
		if len(ms) > 0 {
			last := ms[len(ms)-1]
			pc.Offset, pc.Committed = last.End, last.Committed
			for _, m := range ms {
				pc.Records += m.Records
			}
			pc.ID = PartitionID(t, p, last.End)
		}
		if e, ok := ends[tpKey(t, p)]; ok {
			pc.End = e
			if pc.Offset >= 0 {
				pc.Lag = e - pc.Offset
			}
		}
		out = append(out, pc)
	}
	l.fillLastRecord(out)
	return out, lerr
}

// fillLastRecord finds each partition's newest loaded record time in the
// run reports, newest first.
func (l *Loader) fillLastRecord(cps []PartitionCheckpoint) {
	ids, err := l.RunIDs()
	if err != nil {
		return
	}
	missing := len(cps)
	for i := len(ids) - 1; i >= 0 && missing > 0 && i >= len(ids)-500; i-- {
		rep, err := l.RunReport(ids[i])
		if err != nil {
			continue
		}
		for _, pr := range rep.Partitions {
			for j := range cps {
				c := &cps[j]
				if c.Topic == pr.Topic && c.Partition == pr.Partition && c.LastRecord.IsZero() && !pr.LastRecord.IsZero() && pr.To <= c.Offset {
					c.LastRecord = pr.LastRecord
					missing--
				}
			}
		}
	}
}

// RunIDs lists the stored run reports, oldest first.
func (l *Loader) RunIDs() ([]string, error) {
	ents, err := l.fs.List(RunsDir)
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var ids []string
	for _, e := range ents {
		if !e.IsDir && strings.HasSuffix(e.Name, ".json") { // a folder is a scheduled job's (scheduler.History)
			ids = append(ids, strings.TrimSuffix(e.Name, ".json"))
		}
	}
	sort.Strings(ids)
	return ids, nil
}

// RunReport reads a stored run report.
func (l *Loader) RunReport(id string) (*RunReport, error) {
	if strings.ContainsAny(id, "/\\") || id == "" || strings.HasPrefix(id, ".") {
		return nil, fmt.Errorf("%w: %q is not a run id", ErrCheckpoint, id)
	}
	b, err := vfs.ReadFile(l.fs, path.Join(RunsDir, id+".json"))
	if err != nil {
		if errors.Is(err, vfs.ErrNotExist) {
			return nil, fmt.Errorf("%w: no run %q in %s (see sluice checkpoints list)", ErrCheckpoint, id, RunsDir)
		}
		return nil, err
	}
	var r RunReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("jobs: run report %s: %w", id, err)
	}
	return &r, nil
}

// CheckpointDetail is what `sluice checkpoints show` prints.
type CheckpointDetail struct {
	ID string `json:"id"`
	// Positions are the partition offsets the checkpoint stands for.
	Positions []Position `json:"positions"`
	// Commit is the commit ending at a partition checkpoint (nil for the
	// origin of a partition, or a run checkpoint).
	Commit *writers.Manifest `json:"commit,omitempty"`
	// DeadLetters is the commit's dead-letter file, if any.
	DeadLetters string `json:"dead_letters,omitempty"`
	// Run is the run report of a run checkpoint.
	Run *RunReport `json:"run,omitempty"`
	// Later counts the commits after the checkpoint (what a replay withdraws).
	Later        int   `json:"later_commits"`
	LaterRecords int64 `json:"later_records"`
}

// Position is a partition offset.
type Position struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// CheckpointDetail resolves a checkpoint ID against the job's history.
func (l *Loader) CheckpointDetail(id string) (*CheckpointDetail, error) {
	d := &CheckpointDetail{ID: id}
	if t, p, off, ok := parsePartitionID(id); ok {
		if !l.hasTopic(t) {
			return nil, fmt.Errorf("%w: %q: topic %q is not one of the job's topics", ErrCheckpoint, id, t)
		}
		d.Positions = []Position{{Topic: t, Partition: p, Offset: off}}
	} else if strings.Contains(id, "@") || strings.Contains(id, "/") {
		return nil, fmt.Errorf("%w: %q: want TOPIC/PARTITION@OFFSET or a run id", ErrCheckpoint, id)
	} else {
		run, err := l.RunReport(id)
		if err != nil {
			return nil, err
		}
		d.Run = run
		for _, pr := range run.Partitions {
			d.Positions = append(d.Positions, Position{Topic: pr.Topic, Partition: pr.Partition, Offset: pr.To})
		}
	}
	for _, pos := range d.Positions {
		ms, err := l.store.Commits(pos.Topic, pos.Partition)
		if err != nil {
			return nil, err
		}
		// A run checkpoint of a partition it never committed stands as is.
		found := d.Run != nil && len(ms) == 0 || len(ms) > 0 && ms[0].Start == pos.Offset
		for _, m := range ms {
			if m.End == pos.Offset {
				found = true
				if d.Run == nil {
					d.Commit = m
					dl := DeadLetterPath(m.Topic, m.Partition, m.Start, m.Attempt)
					if ok, _ := vfs.Exists(l.fs, dl); ok {
						d.DeadLetters = dl
					}
				}
			}
			if m.Start >= pos.Offset {
				d.Later++
				d.LaterRecords += m.Records
			}
		}
		if !found {
			return nil, fmt.Errorf("%w: %s/%d has no checkpoint at offset %d (a commit's end or the first commit's start; see sluice checkpoints list)",
				ErrCheckpoint, pos.Topic, pos.Partition, pos.Offset)
		}
	}
	return d, nil
}

func (l *Loader) hasTopic(t string) bool {
	for _, x := range l.spec.Source.Topics {
		if x == t {
			return true
		}
	}
	return false
}

// Withdrawal is what a replay took back from one partition.
type Withdrawal struct {
	Topic     string   `json:"topic"`
	Partition int32    `json:"partition"`
	From      int64    `json:"from"`
	Commits   int      `json:"commits"`
	Records   int64    `json:"records"`
	Files     []string `json:"files"`
	MovedTo   string   `json:"moved_to"`
}

// ReplayReport says what a replay withdrew and what the reload did.
type ReplayReport struct {
	Checkpoint string       `json:"checkpoint"`
	Withdrawn  []Withdrawal `json:"withdrawn"`
	Run        *RunReport   `json:"run,omitempty"`
}

// Replay rewinds the job to a checkpoint and reloads from it: every commit
// after it is withdrawn (its files and manifest moved under
// _sluice/withdrawn/, never deleted) and the job runs again. No other run
// of the job may run meanwhile.
func (l *Loader) Replay(ctx context.Context, id string) (*ReplayReport, error) {
	rep := &ReplayReport{Checkpoint: id}
	err := l.withLock(LockReplay, func() error {
		d, err := l.CheckpointDetail(id)
		if err != nil {
			return err
		}
		// Attempts of a run that held the lock before see this one at their
		// commit and abort; wait until none is left before withdrawing.
		if err := l.waitForOtherAttempts(ctx, d.Positions, l.otherAttemptsWait()); err != nil {
			return err
		}
		return l.replay(ctx, d, rep)
	})
	return rep, err
}

func (l *Loader) replay(ctx context.Context, d *CheckpointDetail, rep *ReplayReport) (err error) {
	for _, pos := range d.Positions {
		// Compacted files holding rows of the commits withdrawn keep only
		// the rows before the checkpoint (compact.go).
		if err := l.trimCompactions(ctx, pos.Topic, pos.Partition, pos.Offset); err != nil {
			return fmt.Errorf("jobs: trimming the compacted files of %s/%d from %d: %w", pos.Topic, pos.Partition, pos.Offset, err)
		}
		ms, dest, err := l.store.Withdraw(pos.Topic, pos.Partition, pos.Offset)
		w := Withdrawal{Topic: pos.Topic, Partition: pos.Partition, From: pos.Offset, Commits: len(ms), MovedTo: dest}
		for _, m := range ms {
			w.Records += m.Records
			for _, f := range m.Files {
				w.Files = append(w.Files, f.Final)
			}
		}
		rep.Withdrawn = append(rep.Withdrawn, w)
		if err != nil {
			return fmt.Errorf("jobs: withdrawing %s/%d from %d: %w", pos.Topic, pos.Partition, pos.Offset, err)
		}
		l.log.Info("replay withdrew commits", "topic", pos.Topic, "partition", pos.Partition, "from", pos.Offset, "commits", len(ms), "to", dest)
	}
	rep.Run, err = l.Run(ctx)
	return err
}
