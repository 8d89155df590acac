package scheduler

import (
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
)

// Run states (a task's are the runner's: succeeded, failed, not-run).
const (
	StateRunning   = "running"
	StateSucceeded = jobs.TaskSucceeded
	StateFailed    = jobs.TaskFailed
	// StateAbandoned marks a run whose scheduler died before it ended and
	// that no scheduler adopted; its committed tasks stand (the next run
	// resumes from the checkpoint).
	StateAbandoned = "abandoned"
)

// HistoryVersion is the version of the run records written.
const HistoryVersion = 1

// RunRecord is one run of a job, as kept in the run history.
type RunRecord struct {
	Version   int       `json:"version"`
	ID        string    `json:"id"`
	Job       string    `json:"job"`
	Scheduled time.Time `json:"scheduled"`
	Started   time.Time `json:"started"`
	Ended     time.Time `json:"ended,omitzero"`
	State     string    `json:"state"`
	// Error is why the run failed (the plan's error, or a summary of the
	// failed tasks; each task carries its own reason).
	Error   string `json:"error,omitempty"`
	Records int64  `json:"records"`
	Bytes   int64  `json:"bytes"`
	// Lag is how many records the job was behind when the run planned
	// (sum over partitions of high watermark - checkpoint).
	Lag int64 `json:"lag"`
	// SkippedTicks counts the ticks that found the previous run still going.
	SkippedTicks int                 `json:"skipped_ticks,omitempty"`
	Partitions   []PartitionPosition `json:"partitions,omitempty"`
	Tasks        []TaskRecord        `json:"tasks,omitempty"`
	// Complete lists the time directories marked _SUCCESS after this run.
	Complete []string `json:"complete,omitempty"`
	Notes    []string `json:"notes,omitempty"`
	// Scheduler names the process that ran it (host/pid or ZooKeeper id).
	Scheduler string `json:"scheduler,omitempty"`
}

// TaskRecord is one task of a run.
type TaskRecord struct {
	Task
	State    string `json:"state"` // succeeded, failed, not-run
	Attempts int    `json:"attempts"`
	Error    string `json:"error,omitempty"`
	TaskReport
	Millis int64 `json:"millis"`
}

// Task states besides the run states.
const (
	TaskNotRun = jobs.TaskNotRun // an earlier range of its partition failed (or the run stopped first)
)

// runsDir is where a job's scheduled runs live under its output root: a
// folder, named for the job, of the one run-record folder (jobs.RunsDir),
// beside the reports of `sluice load run` (see the package doc).
func runsDir(job string) string { return path.Join(jobs.RunsDir, job) }

// legacyHistoryDir is where versions before the one run-record folder kept
// a job's scheduled runs: read (so their runs still list), never written.
func legacyHistoryDir(job string) string { return path.Join(writers.SluiceDir, "history", job) }

// History is the run history of one job on its output file system:
//
//	_sluice/runs/<job>/<run id>.running.json   written when the run starts
//	_sluice/runs/<job>/<run id>.json           written when it ends (then the
//	                                         .running file is removed)
//
// Run ids start with the scheduled time (20060102T150405Z), so names sort
// by schedule. Both files are created exclusively and never rewritten, so
// a crash leaves either the start record or the end record readable. The
// records an earlier version wrote under _sluice/history/<job>/ (same
// names, same format) are read too; a run of theirs that ends now (adopted
// or abandoned) ends in _sluice/runs/<job>/.
type History struct {
	fs  vfs.FS
	job string
}

// NewHistory returns the history of job on fs.
func NewHistory(fs vfs.FS, job string) *History { return &History{fs: fs, job: job} }

func (h *History) write(name string, r RunRecord) error {
	r.Version = HistoryVersion
	b, err := json.MarshalIndent(&r, "", "  ")
	if err != nil {
		return err
	}
	dir := runsDir(h.job)
	if err := h.fs.MkdirAll(dir); err != nil {
		return fmt.Errorf("scheduler: run history of %s: %w", h.job, err)
	}
	if err := h.fs.WriteExclusive(path.Join(dir, name), b); err != nil && !errors.Is(err, vfs.ErrExist) {
		return fmt.Errorf("scheduler: run history of %s: %w", h.job, err)
	}
	return nil
}

// Start records a run as running.
func (h *History) Start(r RunRecord) error { return h.write(r.ID+".running.json", r) }

// Finish records a run's end and drops its running record (in either
// folder).
func (h *History) Finish(r RunRecord) error {
	if err := h.write(r.ID+".json", r); err != nil {
		return err
	}
	for _, dir := range []string{runsDir(h.job), legacyHistoryDir(h.job)} {
		if err := h.fs.Remove(path.Join(dir, r.ID+".running.json")); err != nil && !errors.Is(err, vfs.ErrNotExist) {
			return fmt.Errorf("scheduler: run history of %s: %w", h.job, err)
		}
	}
	return nil
}

// recordFile is one run's record file found by List.
type recordFile struct {
	dir     string
	running bool // <id>.running.json
}

// List returns the job's runs, oldest first; a run with only a start record
// is listed with its recorded state (running). Of the records of one run,
// an end record wins over a start record, and the current folder's over
// the legacy one's.
func (h *History) List() ([]RunRecord, error) {
	files := map[string]recordFile{} // by run id: the record to read
	for _, dir := range []string{legacyHistoryDir(h.job), runsDir(h.job)} {
		ents, err := h.fs.List(dir)
		if errors.Is(err, vfs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("scheduler: run history of %s: %w", h.job, err)
		}
		for _, e := range ents {
			if e.IsDir || !strings.HasSuffix(e.Name, ".json") {
				continue
			}
			id, running := strings.CutSuffix(e.Name, ".running.json")
			if !running {
				id = strings.TrimSuffix(e.Name, ".json")
			}
			if cur, ok := files[id]; ok && running && !cur.running {
				continue // ended already
			}
			files[id] = recordFile{dir: dir, running: running}
		}
	}
	var out []RunRecord
	for id, f := range files {
		r, ok, err := h.read(id, f)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// read reads one run's record; ok is false for a record gone or torn.
func (h *History) read(id string, f recordFile) (RunRecord, bool, error) {
	name := id + ".json"
	if f.running {
		name = id + ".running.json"
	}
	b, err := vfs.ReadFile(h.fs, path.Join(f.dir, name))
	if f.running && errors.Is(err, vfs.ErrNotExist) {
		// The run ended since the listing: its end record exists now.
		b, err = vfs.ReadFile(h.fs, path.Join(runsDir(h.job), id+".json"))
		if errors.Is(err, vfs.ErrNotExist) && f.dir != runsDir(h.job) {
			b, err = vfs.ReadFile(h.fs, path.Join(f.dir, id+".json")) // ended by a previous version
		}
	}
	if errors.Is(err, vfs.ErrNotExist) {
		return RunRecord{}, false, nil
	}
	if err != nil {
		return RunRecord{}, false, fmt.Errorf("scheduler: run history of %s: %w", h.job, err)
	}
	var r RunRecord
	if err := json.Unmarshal(b, &r); err != nil {
		// A record torn by a crash while it was written: skip it, the
		// other records still tell the story.
		return RunRecord{}, false, nil
	}
	return r, true, nil
}

// Last returns the newest run (ok false when there is none).
func (h *History) Last() (RunRecord, bool, error) {
	runs, err := h.List()
	if err != nil || len(runs) == 0 {
		return RunRecord{}, false, err
	}
	return runs[len(runs)-1], true, nil
}

// Abandon ends every run recorded as running except those in keep, as
// abandoned (their scheduler died).
func (h *History) Abandon(keep map[string]bool, now time.Time) error {
	runs, err := h.List()
	if err != nil {
		return err
	}
	for _, r := range runs {
		if r.State != StateRunning || keep[r.ID] {
			continue
		}
		r.State, r.Ended = StateAbandoned, now
		r.Error = "its scheduler stopped before the run ended; committed ranges stand and the next run resumes from the checkpoint"
		if err := h.Finish(r); err != nil {
			return err
		}
	}
	return nil
}
