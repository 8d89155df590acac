package writers

import (
	"sort"
	"time"
)

// AuditWindow is the width of the windows a SplitWriter counts its records
// in, by record time, for the audit (internal/audit): one minute, so that
// any audit window of whole minutes is a sum of them.
const AuditWindow = time.Minute

// AuditCounts is what the records of one committed split were, counted per
// window of record time. It is part of the manifest (and of the commit
// intent before it), so a split's records are counted exactly when the
// split is committed and exactly once: a retried, lost or killed attempt's
// counts die with it.
type AuditCounts struct {
	// WindowMs is the windows' width in milliseconds (AuditWindow).
	WindowMs int64 `json:"window_ms"`
	// Windows, by ascending start.
	Windows []WindowCount `json:"windows"`
	// Lost counts the offsets of the split committed without their
	// records: deleted by retention before they were loaded (their times
	// are unknown).
	Lost int64 `json:"lost,omitempty"`
}

// WindowCount is one window's counts of the records of a split, each
// record (offset) counted once in exactly one of Loaded, Filtered,
// DeadLettered or Malformed.
type WindowCount struct {
	// Start is the window's start, Unix milliseconds; -1 holds the records
	// without a timestamp (-1 in the log).
	Start int64 `json:"start"`
	// Loaded records have rows in the split's files; Bytes are their key
	// and value bytes as read from the log.
	Loaded int64 `json:"loaded,omitempty"`
	Bytes  int64 `json:"bytes,omitempty"`
	// Filtered records were dropped by the job's where.
	Filtered int64 `json:"filtered,omitempty"`
	// DeadLettered records went to the dead-letter file.
	DeadLettered int64 `json:"dead_lettered,omitempty"`
	// Malformed records could not be loaded and were skipped
	// (on_bad_record: skip).
	Malformed int64 `json:"malformed,omitempty"`
}

// Outcome is what became of one record of a split, for Count.
type Outcome int

// Outcomes of a record.
const (
	Loaded Outcome = iota
	Filtered
	DeadLettered
	Malformed
)

// auditCounter counts a split's records per AuditWindow.
type auditCounter struct {
	windows map[int64]*WindowCount
	last    *WindowCount // the window of the last record: a partition's next is mostly in it
	lost    int64
}

// AuditStart returns the start (Unix ms) of the window of width windowMs
// holding a record of time ts: -1 for a record without a timestamp.
func AuditStart(ts time.Time, windowMs int64) int64 {
	ms := ts.UnixMilli()
	if ms < 0 || ts.IsZero() {
		return -1
	}
	return ms - ms%windowMs
}

// Count records what became of one record of the split (of log time ts and
// key + value size bytes); the counts go into the manifest at Commit. Call
// it once per record read, whether or not it was written.
func (w *SplitWriter) Count(ts time.Time, bytes int64, o Outcome) {
	start := AuditStart(ts, AuditWindow.Milliseconds())
	c := w.counts.last
	if c == nil || c.Start != start {
		if w.counts.windows == nil {
			w.counts.windows = map[int64]*WindowCount{}
		}
		if c = w.counts.windows[start]; c == nil {
			c = &WindowCount{Start: start}
			w.counts.windows[start] = c
		}
		w.counts.last = c
	}
	switch o {
	case Loaded:
		c.Loaded++
		c.Bytes += bytes
	case Filtered:
		c.Filtered++
	case DeadLettered:
		c.DeadLettered++
	case Malformed:
		c.Malformed++
	}
}

// CountLost records that n offsets of the split are committed without
// their records (deleted by retention before they were loaded).
func (w *SplitWriter) CountLost(n int64) { w.counts.lost += n }

// manifest returns the counts in their manifest form: always present, so
// that a manifest without them is known to come from before the audit.
func (c *auditCounter) manifest() *AuditCounts {
	a := &AuditCounts{WindowMs: AuditWindow.Milliseconds(), Windows: make([]WindowCount, 0, len(c.windows)), Lost: c.lost}
	for _, w := range c.windows {
		a.Windows = append(a.Windows, *w)
	}
	sort.Slice(a.Windows, func(i, j int) bool { return a.Windows[i].Start < a.Windows[j].Start })
	return a
}
