package jobs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"sort"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers"
)

// Compaction (sluice compact, and the scheduler after a run when the spec
// has compact:): the files of a complete time directory of one partition
// are rewritten into as few files of about compact.target_file_bytes as
// possible, committed by one compaction record of the writers
// (writers/compaction.go) under the job lock:
//
//	for each topic partition of the job:
//	    RecoverCompactions (finish or drop an interrupted rewrite)
//	    Commits + Compactions ─► the committed files, by directory
//	    a directory whose end + allowed_lateness + older-than has passed, with > 1 file:
//	        files in offset order, packed greedily into runs of ≤ target bytes
//	        (a run never mixes schemas); each run of ≥ 2 files ─► one new file
//	        rows written == rows of the sources, or nothing is committed
//	        fence (the job lock still ours) ─► the record: old files out, new in
//
// The split manifests are never changed: checkpoints, the chain, NextStart
// and the audit see what they saw. A replay first trims the compacted files
// that hold rows of the commits it withdraws (trimCompactions).

// LockCompact is the job lock's kind for sluice compact.
const LockCompact = "compact"

// CompactOptions tune a compaction; zero values take the spec's compact:
// block (or its defaults).
type CompactOptions struct {
	// OlderThan: a directory is compacted once its end plus
	// allowed_lateness is this old (default compact.after, else 2h).
	OlderThan time.Duration
	// TargetBytes is the size of the files written (default
	// compact.target_file_bytes, else 256 MiB).
	TargetBytes int64
	// DryRun plans and reports, and writes nothing.
	DryRun bool
	// Progress receives a progress bar of the bytes rewritten (nil: none).
	Progress io.Writer
}

// CompactReport says what a compaction did (or, dry, would do).
type CompactReport struct {
	Job      string       `json:"job"`
	DryRun   bool         `json:"dry_run"`
	Started  time.Time    `json:"started"`
	Finished time.Time    `json:"finished"`
	Dirs     []CompactDir `json:"dirs"`
	// Recovered lists the interrupted rewrites this run finished.
	Recovered   []string `json:"recovered,omitempty"`
	FilesBefore int      `json:"files_before"`
	FilesAfter  int      `json:"files_after"`
	BytesIn     int64    `json:"bytes_in"`
	BytesOut    int64    `json:"bytes_out"`
	Rows        int64    `json:"rows"`
	// Skipped says why partitions were left alone (a torn manifest).
	Skipped []string `json:"skipped,omitempty"`
}

// CompactDir is one directory of one partition rewritten.
type CompactDir struct {
	Topic       string `json:"topic"`
	Partition   int32  `json:"partition"`
	Dir         string `json:"dir"`
	Seq         int64  `json:"seq,omitempty"` // the compaction record (0: dry run)
	FilesBefore int    `json:"files_before"`
	FilesAfter  int    `json:"files_after"`
	BytesIn     int64  `json:"bytes_in"`
	BytesOut    int64  `json:"bytes_out"`
	Rows        int64  `json:"rows"`
}

// Compact rewrites the small files of the job's complete directories
// under the job lock (a load of the job waits for it, and it for a load).
func (l *Loader) Compact(ctx context.Context, opts CompactOptions) (*CompactReport, error) {
	if l.spec.Partition.By == "none" {
		return nil, fmt.Errorf("%w: partition.by is none: compaction rewrites complete time directories (hour or day)", ErrSpec)
	}
	if opts.OlderThan <= 0 {
		opts.OlderThan = l.spec.Compact.AfterDuration()
	}
	if opts.TargetBytes <= 0 {
		opts.TargetBytes = l.spec.Compact.TargetBytes()
	}
	rep := &CompactReport{Job: l.spec.Name, DryRun: opts.DryRun, Started: l.opts.Clock.Now().UTC()}
	err := l.withLock(LockCompact, func() error { return l.compact(ctx, opts, rep) })
	rep.Finished = l.opts.Clock.Now().UTC()
	return rep, err
}

// compactPlan is one directory's rewrite: runs of files, each of ≥ 2 files
// becoming one.
type compactPlan struct {
	topic     string
	partition int32
	dir       string
	files     int // the directory's files before
	runs      [][]writers.ViewFile
}

func (l *Loader) compact(ctx context.Context, opts CompactOptions, rep *CompactReport) error {
	var plans []compactPlan
	var total int64
	for _, topic := range l.spec.Topics() {
		parts, err := l.committedPartitions(topic)
		if err != nil {
			return err
		}
		for _, p := range parts {
			if !opts.DryRun {
				done, err := l.store.RecoverCompactions(topic, p)
				if err != nil {
					return fmt.Errorf("jobs: compact %s/%d: %w", topic, p, err)
				}
				for _, s := range done {
					rep.Recovered = append(rep.Recovered, fmt.Sprintf("%s/%d#%d", topic, p, s))
				}
			}
			ms, err := l.store.Commits(topic, p)
			if errors.Is(err, writers.ErrTornManifest) {
				rep.Skipped = append(rep.Skipped, fmt.Sprintf("%s/%d: %v (a load recovers it)", topic, p, err))
				continue
			}
			if err != nil {
				return fmt.Errorf("jobs: compact %s/%d: %w", topic, p, err)
			}
			files, err := l.store.CommittedFiles(topic, p, ms)
			if err != nil {
				return fmt.Errorf("jobs: compact %s/%d: %w", topic, p, err)
			}
			ps, err := l.planCompaction(topic, p, files, opts)
			if err != nil {
				return err
			}
			for _, pl := range ps {
				for _, r := range pl.runs {
					for _, f := range r {
						total += f.Bytes
					}
				}
			}
			plans = append(plans, ps...)
		}
	}
	if opts.DryRun {
		for _, pl := range plans {
			d := CompactDir{Topic: pl.topic, Partition: pl.partition, Dir: pl.dir, FilesBefore: pl.files, FilesAfter: pl.files}
			for _, r := range pl.runs {
				d.FilesAfter -= len(r) - 1
				for _, f := range r {
					d.BytesIn += f.Bytes
					d.Rows += f.Records
				}
			}
			rep.add(d)
		}
		return nil
	}
	var bar *progressbar.ProgressBar
	if opts.Progress != nil && len(plans) > 0 {
		bar = progressbar.NewOptions64(total, progressbar.OptionSetWriter(opts.Progress),
			progressbar.OptionSetDescription(fmt.Sprintf("compact %s: %d directories", l.spec.Name, len(plans))),
			progressbar.OptionShowBytes(true), progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionClearOnFinish())
		defer bar.Finish()
	}
	for _, pl := range plans {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := l.rewriteDir(ctx, pl, bar)
		if err != nil {
			return fmt.Errorf("jobs: compact %s/%d %s: %w", pl.topic, pl.partition, pl.dir, err)
		}
		rep.add(d)
		l.log.Info("compacted", "topic", pl.topic, "partition", pl.partition, "dir", pl.dir,
			"files_before", d.FilesBefore, "files_after", d.FilesAfter, "rows", d.Rows, "seq", d.Seq)
	}
	return nil
}

func (r *CompactReport) add(d CompactDir) {
	r.Dirs = append(r.Dirs, d)
	r.FilesBefore += d.FilesBefore
	r.FilesAfter += d.FilesAfter
	r.BytesIn += d.BytesIn
	r.BytesOut += d.BytesOut
	r.Rows += d.Rows
}

// committedPartitions lists the partitions of topic that have commits.
func (l *Loader) committedPartitions(topic string) ([]int32, error) {
	ents, err := l.fs.List(path.Join(writers.SluiceDir, "commits", topic))
	if errors.Is(err, vfs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("jobs: listing the commits of %s: %w", topic, err)
	}
	var out []int32
	for _, e := range ents {
		if n, err := strconv.ParseInt(e.Name, 10, 32); err == nil && e.IsDir && n >= 0 {
			out = append(out, int32(n))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out, nil
}

// dirEnd returns the end of a time directory (dt=…/hr=… or dt=…).
func (l *Loader) dirEnd(dir string) (time.Time, bool) {
	loc, err := time.LoadLocation(l.spec.Partition.Timezone)
	if err != nil {
		loc = time.UTC
	}
	switch l.spec.Partition.By {
	case "day":
		t, err := time.ParseInLocation("dt=2006-01-02", dir, loc)
		return t.AddDate(0, 0, 1), err == nil
	default:
		t, err := time.ParseInLocation("dt=2006-01-02/hr=15", dir, loc)
		return t.Add(time.Hour), err == nil
	}
}

// planCompaction picks the directories of one partition to rewrite and
// packs their files into runs.
func (l *Loader) planCompaction(topic string, p int32, files []writers.ViewFile, opts CompactOptions) ([]compactPlan, error) {
	byDir := map[string][]writers.ViewFile{}
	var dirs []string
	for _, f := range files {
		d := path.Dir(f.Final)
		if _, ok := byDir[d]; !ok {
			dirs = append(dirs, d)
		}
		byDir[d] = append(byDir[d], f)
	}
	sort.Strings(dirs)
	bound := l.opts.Clock.Now().Add(-opts.OlderThan - l.spec.Lateness())
	var out []compactPlan
	for _, d := range dirs {
		fs := byDir[d]
		end, ok := l.dirEnd(d)
		if !ok || end.After(bound) || len(fs) < 2 {
			continue
		}
		pl := compactPlan{topic: topic, partition: p, dir: d, files: len(fs)}
		var run []writers.ViewFile
		var runBytes int64
		var runKey string
		flush := func() {
			if len(run) > 1 {
				pl.runs = append(pl.runs, run)
			}
			run, runBytes = nil, 0
		}
		for _, f := range fs {
			key, err := l.schemaKey(f)
			if err != nil {
				return nil, fmt.Errorf("jobs: compact %s/%d: %s: %w", topic, p, f.Final, err)
			}
			if len(run) > 0 && (key != runKey || runBytes+f.Bytes > opts.TargetBytes) {
				flush()
			}
			run, runKey = append(run, f), key
			runBytes += f.Bytes
		}
		flush()
		if len(pl.runs) > 0 {
			out = append(out, pl)
		}
	}
	return out, nil
}

// schemaKey names a file's format and schema: files of one run share it.
func (l *Loader) schemaKey(f writers.ViewFile) (string, error) {
	_, ext, ok := fileKind(f.Final)
	if !ok {
		return "", fmt.Errorf("%w: unknown file format (want .parquet, .avro, .jsonl[.gz|.zst])", writers.ErrCompaction)
	}
	// The writer schema the manifest names (a file keeps it when compacted:
	// files of two writer schemas never become one).
	key := ext
	if s := f.Schema; s != nil {
		key = fmt.Sprintf("%s %s/%d/%d/%s", ext, s.Subject, s.Version, s.ID, s.Fingerprint)
	}
	if ext != "parquet" {
		return key, nil // Avro files carry their schema; a sink refuses a mix
	}
	r, err := l.openCommitted(f.File)
	if err != nil {
		return "", err
	}
	defer r.Close()
	size, err := r.Size()
	if err != nil {
		return "", err
	}
	ps, err := parquetSchema(r, size)
	return key + " " + ps, err
}

// openCommitted opens a committed file at its final path, or at its
// temporary one while its commit rolls forward.
func (l *Loader) openCommitted(f writers.File) (vfs.File, error) {
	r, err := l.fs.Open(f.Final)
	if errors.Is(err, vfs.ErrNotExist) && f.Temp != "" {
		if r2, err2 := l.fs.Open(f.Temp); err2 == nil {
			return r2, nil
		}
	}
	return r, err
}

// rewriteDir writes and commits one directory's rewrite.
func (l *Loader) rewriteDir(ctx context.Context, pl compactPlan, bar *progressbar.ProgressBar) (CompactDir, error) {
	d := CompactDir{Topic: pl.topic, Partition: pl.partition, Dir: pl.dir, FilesBefore: pl.files, FilesAfter: pl.files}
	a, err := l.store.NewCompaction(pl.topic, pl.partition)
	if err != nil {
		return d, err
	}
	rec := &writers.Compaction{Reason: "compact"}
	for _, run := range pl.runs {
		srcs := make([]compactSource, len(run))
		for i, f := range run {
			srcs[i] = compactSource{file: f}
		}
		cf, err := l.writeCompacted(ctx, a, pl.dir, srcs)
		if err != nil {
			a.Abort()
			return d, err
		}
		for _, f := range run {
			rec.Replaced = append(rec.Replaced, writers.Replaced{Final: f.Final, Commit: f.Commit})
			d.BytesIn += f.Bytes
			if bar != nil {
				bar.Add64(f.Bytes)
			}
		}
		rec.Files = append(rec.Files, *cf)
		d.FilesAfter -= len(run) - 1
		d.BytesOut += cf.Bytes
		d.Rows += cf.Records
	}
	if err := l.fence(); err != nil {
		a.Abort()
		return d, err
	}
	if _, err := a.Commit(rec); err != nil {
		return d, err
	}
	d.Seq = a.Seq()
	return d, nil
}

// compactSource is a file to copy, whole (keep nil) or in row ranges
// (with the sources those rows belong to).
type compactSource struct {
	file    writers.ViewFile
	keep    []rowRange
	sources []writers.Source // the sources kept (nil: all of file's)
}

// writeCompacted copies srcs into one new file of dir and checks that it
// holds exactly their rows.
func (l *Loader) writeCompacted(ctx context.Context, a *writers.CompactionAttempt, dir string, srcs []compactSource) (*writers.CompactedFile, error) {
	_, ext, _ := fileKind(srcs[0].file.Final)
	cf := &writers.CompactedFile{}
	first, last := int64(-1), int64(-1)
	var want int64
	for _, s := range srcs {
		keep := s.sources
		if keep == nil {
			keep = s.file.Sources
		}
		for _, src := range keep {
			want += src.Records
			if first < 0 || src.First < first {
				first = src.First
			}
			last = max(last, src.Last)
		}
		cf.Sources = append(cf.Sources, keep...)
	}
	cf.First, cf.Last, cf.Records = first, last, want
	cf.Schema = srcs[0].file.Schema // the run's files share it (schemaKey)
	cf.Final = path.Join(dir, writers.CompactedName(a.Topic(), a.Partition(), first, last+1, a.Seq(), ext))
	out, temp, err := a.Create(cf.Final)
	if err != nil {
		return nil, err
	}
	cw := &countWriter{w: out}
	sk, err := newSink(ext, cw, l.spec.Output.Compression)
	if err != nil {
		out.Close()
		return nil, err
	}
	var rows int64
	for _, s := range srcs {
		r, err := l.openCommitted(s.file.File)
		if err != nil {
			out.Close()
			return nil, err
		}
		size, err := r.Size()
		if err == nil {
			var n int64
			n, err = sk.add(ctx, r, size, s.keep)
			rows += n
		}
		r.Close()
		if err != nil {
			out.Close()
			return nil, fmt.Errorf("%s: %w", s.file.Final, err)
		}
	}
	if err := sk.close(); err != nil {
		out.Close()
		return nil, err
	}
	if err := out.Close(); err != nil {
		return nil, err
	}
	if rows != want {
		return nil, fmt.Errorf("%w: wrote %d rows into %s, its sources hold %d", writers.ErrCompaction, rows, cf.Final, want)
	}
	cf.Temp, cf.Bytes = temp, cw.n
	return cf, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(b []byte) (int, error) {
	n, err := c.w.Write(b)
	c.n += int64(n)
	return n, err
}

// trimCompactions prepares a replay from offset from of one partition:
// every compacted file holding rows of a commit at or after from is
// rewritten to the rows of the commits before it (or dropped when none is
// left), in one compaction record; the files replaced are moved under
// _sluice/withdrawn/, not removed. Then Withdraw takes the commits back
// and the reload writes their rows again. Idempotent.
func (l *Loader) trimCompactions(ctx context.Context, topic string, p int32, from int64) error {
	if _, err := l.store.RecoverCompactions(topic, p); err != nil {
		return err
	}
	ms, err := l.store.Commits(topic, p)
	if err != nil {
		return err
	}
	files, err := l.store.CommittedFiles(topic, p, ms)
	if err != nil {
		return err
	}
	var a *writers.CompactionAttempt
	rec := &writers.Compaction{Reason: fmt.Sprintf("replay from %d", from)}
	for _, f := range files {
		if f.Compaction == 0 {
			continue
		}
		var keep []rowRange
		var kept []writers.Source
		var at int64
		trimmed := false
		for _, s := range f.Sources {
			if s.Start < from {
				keep = append(keep, rowRange{at, at + s.Records})
				kept = append(kept, s)
			} else {
				trimmed = true
			}
			at += s.Records
		}
		if !trimmed {
			continue
		}
		if a == nil {
			if a, err = l.store.NewCompaction(topic, p); err != nil {
				return err
			}
			rec.MovedTo = path.Join(writers.SluiceDir, "withdrawn", topic, strconv.Itoa(int(p)), fmt.Sprintf("compaction-%020d", a.Seq()))
		}
		rec.Replaced = append(rec.Replaced, writers.Replaced{Final: f.Final, Commit: f.Commit})
		if len(kept) == 0 {
			continue
		}
		cf, err := l.writeCompacted(ctx, a, path.Dir(f.Final), []compactSource{{file: f, keep: keep, sources: kept}})
		if err != nil {
			a.Abort()
			return err
		}
		rec.Files = append(rec.Files, *cf)
	}
	if a == nil {
		return nil
	}
	if err := l.fence(); err != nil {
		a.Abort()
		return err
	}
	_, err = a.Commit(rec)
	return err
}

// WriteText prints the report as a table.
func (r *CompactReport) WriteText(w io.Writer) {
	verb := "compacted"
	if r.DryRun {
		verb = "would compact"
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "topic\tpartition\tdirectory\tfiles before\tafter\trows\tbytes in\tbytes out\trecord\n")
	for _, d := range r.Dirs {
		rec := "-"
		if d.Seq > 0 {
			rec = fmt.Sprintf("#%d", d.Seq)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", d.Topic, d.Partition, d.Dir, d.FilesBefore, d.FilesAfter, d.Rows, d.BytesIn, d.BytesOut, rec)
	}
	tw.Flush()
	for _, s := range r.Recovered {
		fmt.Fprintf(w, "finished the interrupted compaction %s\n", s)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "skipped %s\n", s)
	}
	fmt.Fprintf(w, "%s %s: %d directories, %d files into %d, %d rows, %d bytes in %.1fs\n", verb, r.Job, len(r.Dirs),
		r.FilesBefore, r.FilesAfter, r.Rows, r.BytesIn, r.Finished.Sub(r.Started).Seconds())
}
