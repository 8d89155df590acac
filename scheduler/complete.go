package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/writers"
)

// Completeness markers.
//
// A time directory (dt=YYYY-MM-DD/hr=HH, or dt=YYYY-MM-DD by day) is
// complete when every partition's loaded position has passed the
// directory's end plus the job's allowed lateness. A partition's position
// is a time:
//
//   - the planning time of the run, when the run loaded the partition up
//     to the high watermark it read then (nothing older is left to load);
//   - otherwise the start of the newest time directory the partition's
//     committed files went to (a lower bound of the newest record time).
//
// Record counts come from the commit manifests, read incrementally from a
// per-partition cursor. The state is kept under
// _sluice/completeness/<job>/<seq %020d>.json, each version created
// exclusively (a crash leaves the previous one readable). A complete
// directory gets _SUCCESS.json ({"records": n, ...}) and then an empty
// _SUCCESS (the Hadoop convention); every directory from the first one
// loaded onwards is marked, an empty hour included (created with records
// 0), so that downstream jobs waiting for an hour never wait forever.
//
// complete_when: audit adds a condition: a directory past that rule is
// marked only when, for every topic of the job, the load tier's count of
// the directory's time range (from the committed manifests: loaded plus
// filtered by where, audit.LoadCounts) equals the producer tier's count in
// _audit (AuditSource.ProducerCounts), summing the windows inside the
// range; a window that straddles the range's edge (10-minute windows and a
// zone of +05:45, 1-hour windows and +05:30) widens the range compared to
// take it whole, so the directory is decided once the part of that window
// outside it is loaded too. Until then the directory is held (completeState.Held) and
// checked again at every run, while the directories after it are decided
// on their own. Both tiers count by record timestamp: with a
// partition.time_field other than @timestamp, the range compared is the
// directory's time range by record timestamp. Each check reads the _audit
// records published since the engine's last read (an audit.Reader per
// cluster) and the manifests committed since its last check (an
// audit.LoadReader per job, kept by the Scheduler; after a restart the
// first check reads them all).

const (
	// SuccessMarker is the Hadoop convention's marker file name (empty).
	SuccessMarker = "_SUCCESS"
	// SuccessInfo is the JSON beside it with the directory's record count.
	SuccessInfo = "_SUCCESS.json"
	// maxMarksPerCheck bounds the directories one check may mark.
	maxMarksPerCheck = 24 * 62
	// maxHeld bounds the directories held for the audit: at it, no later
	// directory is decided until a held one balances.
	maxHeld = 24 * 62
	// auditTimeout bounds one check's read of the _audit topic.
	auditTimeout = time.Minute
)

// completeState is the persisted completeness state of one job.
type completeState struct {
	Version int   `json:"version"`
	Seq     int64 `json:"seq"`
	// Cursors: per "topic/partition", the end of the last manifest counted.
	Cursors map[string]int64 `json:"cursors"`
	// Newest: per "topic/partition", the start of the newest directory
	// its committed files went to.
	Newest map[string]time.Time `json:"newest"`
	// Pending: records per time directory not yet marked.
	Pending map[string]int64 `json:"pending"`
	// MarkedThrough is the end of the last directory decided: marked, or
	// held for the audit (zero: none).
	MarkedThrough time.Time `json:"marked_through,omitzero"`
	// Held are the directories past the loaded rule that wait for the
	// audit to balance (complete_when: audit), oldest first.
	Held []string `json:"held,omitempty"`
	// Late counts records that arrived for directories already marked.
	Late int64 `json:"late,omitempty"`
}

// SuccessRecord is the content of _SUCCESS.json.
type SuccessRecord struct {
	Job       string    `json:"job"`
	Directory string    `json:"directory"`
	Start     time.Time `json:"start"`
	End       time.Time `json:"end"`
	Records   int64     `json:"records"`
	Marked    time.Time `json:"marked"`
	Run       string    `json:"run,omitempty"`
}

func completeDir(job string) string { return path.Join("_sluice", "completeness", job) }

// completeness marks the complete time directories of one job's output.
type completeness struct {
	fs    vfs.FS
	store *writers.Store // the job's commits on fs
	job   Job
	log   *slog.Logger
	// audit reads the producer tier (complete_when: audit; nil otherwise).
	audit AuditSource
	// loads reads the load tier, from where the last check got to (nil: a
	// read of every manifest).
	loads *audit.LoadReader
	// report is the last check's audit balanced per window (for the
	// metrics; nil when the job does not wait for the audit).
	report *audit.Report
}

// auditBooks are the two tiers a complete_when: audit check compares.
type auditBooks struct {
	topics   []string
	producer []audit.Count
	load     audit.Load
}

// readBooks reads the producer tier from _audit and the load tier from the
// job's committed manifests.
func (c *completeness) readBooks(ctx context.Context, topics []string) (*auditBooks, error) {
	if c.audit == nil {
		return nil, fmt.Errorf("%w: %s: complete_when: audit, but the engine cannot read the audit", ErrJob, c.job.Name)
	}
	ctx, cancel := context.WithTimeout(ctx, auditTimeout)
	defer cancel()
	producer, err := c.audit.ProducerCounts(ctx, c.job)
	if err != nil {
		return nil, err
	}
	loads := c.loads
	if loads == nil {
		loads = new(audit.LoadReader)
	}
	load, err := loads.Read(c.store, c.job.Name, topics)
	if err != nil {
		return nil, err
	}
	return &auditBooks{topics: topics, producer: producer, load: load}, nil
}

// maxCoverPasses bounds the widenings of a range by the windows that cross
// its edges (windows of widths that do not divide each other chain).
const maxCoverPasses = 64

// cover widens [s, e) (Unix ms) until no window of either tier crosses its
// edges; ok false: it did not settle within maxCoverPasses.
func (b *auditBooks) cover(s, e int64) (int64, int64, bool) {
	for range maxCoverPasses {
		grown := false
		for _, cs := range [][]audit.Count{b.producer, b.load.Counts} {
			for _, c := range cs {
				if c.WindowStart < 0 || c.WindowStart >= e || c.WindowStart+c.WindowMs <= s {
					continue // untimestamped, or outside the range
				}
				if c.WindowStart < s {
					s, grown = c.WindowStart, true
				}
				if end := c.WindowStart + c.WindowMs; end > e {
					e, grown = end, true
				}
			}
		}
		if !grown {
			return s, e, true
		}
	}
	return s, e, false
}

// balanced reports whether every topic's load tier holds the producer
// tier's count of [start, end), widened to the windows crossing its edges
// (cover), and the two totals.
func (b *auditBooks) balanced(start, end time.Time) (produced, loaded int64, ok bool) {
	s, e, ok := b.cover(start.UnixMilli(), end.UnixMilli())
	sum := func(cs []audit.Count, n func(audit.Count) int64) map[string]int64 {
		out := map[string]int64{}
		for _, c := range cs {
			if c.WindowStart >= s && c.WindowStart+c.WindowMs <= e {
				out[c.Topic] += n(c)
			}
		}
		return out
	}
	p := sum(b.producer, func(c audit.Count) int64 { return c.Messages })
	l := sum(b.load.Counts, audit.Count.Accounted)
	for _, t := range b.topics {
		produced += p[t]
		loaded += l[t]
		if p[t] != l[t] {
			ok = false
		}
	}
	return produced, loaded, ok
}

// balance is the books per window, as `sluice audit` shows them, in
// windows of the widest width counted.
func (b *auditBooks) balance(lateness time.Duration, now time.Time) (*audit.Report, error) {
	var widest int64
	for _, cs := range [][]audit.Count{b.producer, b.load.Counts} {
		for _, c := range cs {
			widest = max(widest, c.WindowMs)
		}
	}
	window := audit.DefaultWindow
	if widest > 0 {
		window = time.Duration(widest) * time.Millisecond
	}
	return audit.Balance(b.producer, &b.load, audit.Options{Window: window, Lateness: lateness, Now: now})
}

func (c *completeness) load() (*completeState, error) {
	dir := completeDir(c.job.Name)
	st := &completeState{Version: 1, Cursors: map[string]int64{}, Newest: map[string]time.Time{}, Pending: map[string]int64{}}
	ents, err := c.fs.List(dir)
	if errors.Is(err, vfs.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	for i := len(ents) - 1; i >= 0; i-- { // newest readable version wins
		b, err := vfs.ReadFile(c.fs, path.Join(dir, ents[i].Name))
		if err != nil {
			continue
		}
		var s completeState
		if json.Unmarshal(b, &s) == nil && s.Cursors != nil {
			if s.Newest == nil {
				s.Newest = map[string]time.Time{}
			}
			if s.Pending == nil {
				s.Pending = map[string]int64{}
			}
			return &s, nil
		}
	}
	return st, nil
}

func (c *completeness) save(st *completeState) error {
	dir := completeDir(c.job.Name)
	if err := c.fs.MkdirAll(dir); err != nil {
		return err
	}
	st.Seq++
	b, err := json.Marshal(st)
	if err != nil {
		return err
	}
	if err := c.fs.WriteExclusive(path.Join(dir, fmt.Sprintf("%020d.json", st.Seq)), b); err != nil {
		return err
	}
	if ents, err := c.fs.List(dir); err == nil { // keep the two newest
		for i := 0; i < len(ents)-2; i++ {
			c.fs.Remove(path.Join(dir, ents[i].Name))
		}
	}
	return nil
}

// dirRange parses a time directory into its [start, end).
func (c *completeness) dirRange(dir string) (time.Time, time.Time, bool) {
	loc := c.job.Partition.Location
	if loc == nil {
		loc = time.UTC
	}
	switch c.job.Partition.By {
	case "hour", "":
		t, err := time.ParseInLocation("dt=2006-01-02/hr=15", dir, loc)
		return t, t.Add(time.Hour), err == nil
	case "day":
		t, err := time.ParseInLocation("dt=2006-01-02", dir, loc)
		return t, t.AddDate(0, 0, 1), err == nil
	}
	return time.Time{}, time.Time{}, false
}

func (c *completeness) dirName(t time.Time) string {
	loc := c.job.Partition.Location
	if loc == nil {
		loc = time.UTC
	}
	if c.job.Partition.By == "day" {
		return t.In(loc).Format("dt=2006-01-02")
	}
	return t.In(loc).Format("dt=2006-01-02/hr=15")
}

// count reads the manifests committed since the partition's cursor (named
// key), through the writers' store (the commit protocol's own reader).
func (c *completeness) count(st *completeState, key, topic string, partition int32) error {
	cursor, seen := st.Cursors[key]
	from := int64(math.MinInt64)
	if seen {
		from = cursor
	}
	commits, err := c.store.CommitsFrom(topic, partition, from)
	if err != nil {
		return err // a torn manifest: its writer may be finishing; count it next time
	}
	for _, m := range commits {
		for _, f := range m.Files {
			d := path.Dir(f.Final)
			start, _, ok := c.dirRange(d)
			if !ok {
				continue
			}
			st.Pending[d] += f.Records
			if start.After(st.Newest[key]) {
				st.Newest[key] = start
			}
		}
		cursor, seen = m.End, true
	}
	if seen {
		st.Cursors[key] = cursor
	}
	return nil
}

// check counts what was committed since the last check and marks the
// directories that became complete. positions are those the run planned
// with, plannedAt its planning time, succeeded whether every task of the
// run committed. It returns the directories marked.
func (c *completeness) check(ctx context.Context, positions []PartitionPosition, plannedAt time.Time, succeeded map[string]bool, run string, now time.Time) ([]string, error) {
	if c.job.Partition.By == "none" || len(positions) == 0 {
		return nil, nil
	}
	st, err := c.load()
	if err != nil {
		return nil, err
	}
	var boundary time.Time
	incarnations := map[string]int{} // by topic: read once per check
	for i, p := range positions {
		key, err := c.cursorKey(incarnations, p.Topic, p.Partition)
		if err == nil {
			err = c.count(st, key, p.Topic, p.Partition)
		}
		if err != nil {
			return nil, fmt.Errorf("scheduler: completeness of %s: %w", c.job.Name, err)
		}
		pos := st.Newest[key]
		if cur, ok := st.Cursors[key]; (ok && cur >= p.HighWatermark) || (!ok && p.HighWatermark <= p.Loaded) || succeeded[p.Topic+"/"+strconv.Itoa(int(p.Partition))] {
			pos = plannedAt // loaded all it could see at planning
		}
		if i == 0 || pos.Before(boundary) {
			boundary = pos
		}
	}
	boundary = boundary.Add(-c.job.AllowedLateness)
	var books *auditBooks
	if c.job.CompleteWhen == jobs.CompleteAudit {
		var topics []string
		for _, p := range positions {
			if !slices.Contains(topics, p.Topic) {
				topics = append(topics, p.Topic)
			}
		}
		if books, err = c.readBooks(ctx, topics); err != nil {
			return nil, fmt.Errorf("scheduler: completeness of %s: the audit: %w", c.job.Name, err)
		}
		if c.report, err = books.balance(c.job.AllowedLateness, now); err != nil {
			c.log.Warn("the audit's windows do not balance as one book; no audit metrics", "job", c.job.Name, "err", err)
		}
	}

	// The first directory to consider: after the last marked one, or the
	// oldest pending one.
	from := st.MarkedThrough
	var dirs []string
	for d := range st.Pending {
		dirs = append(dirs, d)
	}
	sort.Strings(dirs)
	held := map[string]bool{}
	for _, d := range st.Held {
		held[d] = true
	}
	for _, d := range dirs {
		if held[d] {
			continue // decided, waiting for the audit: its records still count
		}
		s, _, _ := c.dirRange(d)
		if !st.MarkedThrough.IsZero() && s.Before(st.MarkedThrough) {
			c.log.Warn("late records for a directory already marked complete", "job", c.job.Name, "dir", d, "records", st.Pending[d])
			st.Late += st.Pending[d]
			delete(st.Pending, d)
			continue
		}
		if from.IsZero() || s.Before(from) {
			from = s
		}
	}
	var marked []string
	// The directories held for the audit first (all of them, when the job
	// no longer waits for it).
	var still []string
	for _, d := range st.Held {
		s, end, ok := c.dirRange(d)
		if !ok {
			continue
		}
		if books != nil {
			if _, _, balanced := books.balanced(s, end); !balanced || len(marked) >= maxMarksPerCheck {
				still = append(still, d)
				continue
			}
		}
		if err := c.mark(d, s, end, st.Pending[d], run, now); err != nil {
			return marked, err
		}
		delete(st.Pending, d)
		marked = append(marked, d)
	}
	st.Held = still
	for t := from; !t.IsZero() && len(marked) < maxMarksPerCheck; {
		d := c.dirName(t)
		s, end, ok := c.dirRange(d)
		if !ok || end.After(boundary) {
			break
		}
		if books != nil {
			if produced, loaded, balanced := books.balanced(s, end); !balanced {
				if len(st.Held) >= maxHeld {
					c.log.Warn("too many directories wait for the audit; later ones wait to be decided", "job", c.job.Name, "held", len(st.Held), "dir", d)
					break
				}
				c.log.Info("directory loaded but not balanced by the audit: _SUCCESS waits", "job", c.job.Name, "dir", d,
					"produced", produced, "loaded", loaded)
				st.Held = append(st.Held, d)
				st.MarkedThrough = end
				t = end
				continue
			}
		}
		if err := c.mark(d, s, end, st.Pending[d], run, now); err != nil {
			return marked, err
		}
		delete(st.Pending, d)
		st.MarkedThrough = end
		marked = append(marked, d)
		t = end
	}
	return marked, c.save(st)
}

func (c *completeness) mark(dir string, start, end time.Time, records int64, run string, now time.Time) error {
	b, err := json.Marshal(SuccessRecord{Job: c.job.Name, Directory: dir, Start: start, End: end, Records: records, Marked: now.UTC(), Run: run})
	if err != nil {
		return err
	}
	if err := c.fs.MkdirAll(dir); err != nil {
		return err
	}
	for _, f := range []struct {
		name string
		data []byte
	}{{SuccessInfo, b}, {SuccessMarker, nil}} {
		if err := c.fs.WriteExclusive(path.Join(dir, f.name), f.data); err != nil && !errors.Is(err, vfs.ErrExist) {
			return fmt.Errorf("scheduler: marking %s complete: %w", dir, err)
		}
	}
	c.log.Info("directory complete", "job", c.job.Name, "run", run, "dir", dir, "records", records)
	return nil
}

// cursorKey names a partition's cursor: "topic/partition", and
// "topic/partition#n" once the loader started the topic over n times (its
// manifests then begin again at the new topic's first offsets).
// incarnations caches each topic's incarnation for one check.
func (c *completeness) cursorKey(incarnations map[string]int, topic string, partition int32) (string, error) {
	key := topic + "/" + strconv.Itoa(int(partition))
	inc, ok := incarnations[topic]
	if !ok {
		var err error
		if inc, err = jobs.TopicIncarnation(c.fs, topic); err != nil {
			return "", err
		}
		incarnations[topic] = inc
	}
	if inc > 0 {
		key += "#" + strconv.Itoa(inc)
	}
	return key, nil
}
