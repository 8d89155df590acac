package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/jobs/query"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// compactAnswer is the query whose answer compaction must not change: per
// partition and hour, the rows, distinct offsets and checksums of offsets
// and values.
const compactAnswer = `SELECT _partition, dt, hr, count(*), count(DISTINCT _offset), sum(_offset), sum(user_id),
	sum(hash(url)), sum(hash(coalesce(referrer, ''))), sum(duration_ms), min(ts), max(ts)
	FROM %s GROUP BY ALL ORDER BY ALL`

// sluiceQuery runs compactAnswer through `sluice query`'s engine (a fresh
// one, as each command is) over the dataset dir and returns the answer.
func sluiceQuery(t testing.TB, ctx context.Context, dir string) (string, error) {
	t.Helper()
	e, err := query.Open(ctx, dir, query.Options{CacheDir: filepath.Join(dir, "..", "qcache"), Threads: 1})
	if err != nil {
		return "", err
	}
	defer e.Close()
	rows, _, err := e.Query(ctx, fmt.Sprintf(compactAnswer, filepath.Base(dir)))
	if err != nil {
		return "", err
	}
	defer rows.Close()
	var buf bytes.Buffer
	if _, err := query.Write(&buf, rows, query.Output{Format: query.FormatCSV, Location: e.Location()}); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// dataFiles lists the data files under a local output (not _sluice).
func dataFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() && rel == "_sluice" {
			return filepath.SkipDir
		}
		if !d.IsDir() {
			out = append(out, filepath.ToSlash(rel))
		}
		return nil
	})
	sort.Strings(out)
	return out
}

// checkCompacted is the invariant after a finished compaction: the data
// files on disk are exactly the committed ones (no old file left, no new
// one missing), no temporary is left, DuckDB reading every file by glob
// (not through sluice) finds each (partition, offset) of counts once.
func checkCompacted(t testing.TB, dir, topic string, counts map[int32]int64) {
	t.Helper()
	fs, err := filesystem.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	st := writers.NewStore(fs, writers.StoreOptions{})
	var committed []string
	for p := range counts {
		ms, err := st.Commits(topic, p)
		if err != nil {
			t.Fatal(err)
		}
		files, err := st.CommittedFiles(topic, p, ms)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			committed = append(committed, f.Final)
		}
		if ents, _ := os.ReadDir(filepath.Join(dir, "_sluice", "compactions", topic, fmt.Sprint(p), "tmp")); len(ents) > 0 {
			t.Fatalf("invariant: compaction temporaries left: %v", ents)
		}
	}
	sort.Strings(committed)
	if got := dataFiles(t, dir); strings.Join(got, "\n") != strings.Join(committed, "\n") {
		t.Fatalf("invariant: data files on disk\n%s\nwant the committed ones\n%s", strings.Join(got, "\n"), strings.Join(committed, "\n"))
	}
	db := duck(t)
	for p, n := range counts {
		var rows, distinct, lo, hi int64
		q := fmt.Sprintf(`SELECT count(*), count(DISTINCT _offset), coalesce(min(_offset), -1), coalesce(max(_offset), -1) FROM read_parquet('%s') WHERE _partition = %d`,
			dataGlob(dir, "parquet"), p)
		if err := db.QueryRow(q).Scan(&rows, &distinct, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if rows != n || distinct != n || lo != 0 || hi != n-1 {
			t.Fatalf("exactly once: partition %d holds %d rows, %d distinct offsets in [%d, %d]; want each of [0, %d) once", p, rows, distinct, lo, hi, n)
		}
	}
}

// loadSmallFiles loads n page views over 3 hours into 2 partitions in
// splits of 100 records: many small files per hour.
func loadSmallFiles(t *testing.T, ctx context.Context, b *kafka.Sluice, topic string, n int) (*jobs.Spec, string, map[int32]int64) {
	t.Helper()
	recs, _ := pageViews(t, topic, n, 2, 3*time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, topic, 2, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, topic, b.Addr, topic, 100, "schema_file: pageview.avsc", out)+
		"compact: {after: 1h, target_file_bytes: 64MiB}\n")
	if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	return spec, out, counts
}

// Compaction of a loaded topic, with queries running through it: every
// answer (sluice query's engine) equals the one before, the files drop to
// one per partition and hour, DuckDB by glob finds each offset once, the
// checkpoints are those before; a second compaction finds nothing to do;
// a replay from a checkpoint inside the compacted hours withdraws and
// reloads to the same answer, exactly once.
func TestCompactLoadedTopic(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	spec, out, counts := loadSmallFiles(t, ctx, b, "compact", 3000)
	before, err := sluiceQuery(t, ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	filesBefore := dataFiles(t, out)
	l, err := jobs.Open(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cpsBefore, err := l.Checkpoints(ctx)
	if err != nil {
		t.Fatal(err)
	}
	dry, err := l.Compact(ctx, jobs.CompactOptions{DryRun: true})
	if err != nil || dry.FilesBefore != len(filesBefore) || dry.FilesAfter != 2*3 {
		t.Fatalf("dry run %+v %v (files %d)", dry, err, len(filesBefore))
	}
	if got := dataFiles(t, out); len(got) != len(filesBefore) {
		t.Fatalf("a dry run changed the files: %d → %d", len(filesBefore), len(got))
	}

	// Queries run while compaction runs; each must answer as before.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var answers int
	var bad []string
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := sluiceQuery(t, ctx, out)
			mu.Lock()
			answers++
			if err != nil || got != before {
				bad = append(bad, fmt.Sprintf("%v\n%s", err, got))
			}
			mu.Unlock()
		}
	}()
	rep, err := l.Compact(ctx, jobs.CompactOptions{})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 {
		t.Fatalf("%d of %d queries during compaction answered otherwise; first:\n%s\nwant\n%s", len(bad), answers, bad[0], before)
	}
	t.Logf("compacted %d files into %d (%d rows); %d queries ran meanwhile", rep.FilesBefore, rep.FilesAfter, rep.Rows, answers)
	if rep.FilesBefore != len(filesBefore) || rep.FilesAfter != 6 || rep.Rows != sum(counts) || len(dataFiles(t, out)) != 6 {
		t.Fatalf("report %+v; files now %v", rep, dataFiles(t, out))
	}
	if got, err := sluiceQuery(t, ctx, out); err != nil || got != before {
		t.Fatalf("after compaction: %v\n%s\nwant\n%s", err, got, before)
	}
	checkCompacted(t, out, "compact", counts)
	cpsAfter, err := l.Checkpoints(ctx)
	if err != nil || fmt.Sprint(cpsAfter) != fmt.Sprint(cpsBefore) {
		t.Fatalf("checkpoints changed:\n%v\n%v (%v)", cpsBefore, cpsAfter, err)
	}
	again, err := l.Compact(ctx, jobs.CompactOptions{})
	if err != nil || len(again.Dirs) != 0 {
		t.Fatalf("second compaction %+v %v", again, err)
	}

	// A replay from a checkpoint inside the compacted hours.
	rp, err := l.Replay(ctx, "compact/0@500")
	if err != nil {
		t.Fatal(err)
	}
	if rp.Withdrawn[0].Records != counts[0]-500 {
		t.Fatalf("replay withdrew %+v", rp.Withdrawn)
	}
	if got, err := sluiceQuery(t, ctx, out); err != nil || got != before {
		t.Fatalf("after the replay: %v\n%s\nwant\n%s", err, got, before)
	}
	checkCompacted(t, out, "compact", counts)
	// The compacted file of the replayed hours is kept aside.
	if ents, _ := filepath.Glob(filepath.Join(out, "_sluice", "withdrawn", "compact", "0", "compaction-*", "dt=*", "hr=*", "*.parquet")); len(ents) == 0 {
		t.Fatal("the trimmed compacted files were not kept under _sluice/withdrawn")
	}
	// And compaction after the replay merges the reloaded files again.
	rep, err = l.Compact(ctx, jobs.CompactOptions{})
	if err != nil || rep.FilesAfter >= rep.FilesBefore {
		t.Fatalf("compaction after the replay %+v %v", rep, err)
	}
	if got, err := sluiceQuery(t, ctx, out); err != nil || got != before {
		t.Fatalf("after compacting the replay: %v\n%s\nwant\n%s", err, got, before)
	}
	checkCompacted(t, out, "compact", counts)
}

// crashAt fails the i-th file-system change (create, write-exclusive,
// rename, remove, mkdir, sync, close) and every operation after it: the
// process died there.
type crashAt struct {
	mu      sync.Mutex
	i, n    int
	crashed bool
}

func (c *crashAt) MaybeError(op faults.Op, p string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.crashed {
		return fmt.Errorf("%w: after the crash (%s %s)", faults.ErrInjected, op, p)
	}
	switch op {
	case faults.Create, faults.WriteExclusive, faults.Rename, faults.Remove, faults.RemoveAll,
		faults.Mkdir, faults.SyncDir, faults.Sync, faults.Close:
	default:
		return nil
	}
	c.n++
	if c.n == c.i {
		c.crashed = true
		return fmt.Errorf("%w: crash at change %d (%s %s)", faults.ErrInjected, c.i, op, p)
	}
	return nil
}

// Every crash point of a compaction: for i = 1, 2, … the i-th file-system
// change of the compaction fails and so does everything after (the
// process died); then a query answers as before compaction, and a rerun of
// sluice compact completes: the answer is still the one before, the files
// are the committed ones and DuckDB finds each offset once. Until a run
// with no crash.
func TestCompactCrashPoints(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	spec, out, counts := loadSmallFiles(t, ctx, b, "compactcrash", 800)
	before, err := sluiceQuery(t, ctx, out)
	if err != nil {
		t.Fatal(err)
	}
	pristine := out + ".pristine"
	if err := exec.Command("cp", "-a", out, pristine).Run(); err != nil {
		t.Fatal(err)
	}
	clk := clock.NewManual(time.Now())
	for i := 1; ; i++ {
		os.RemoveAll(out)
		if err := exec.Command("cp", "-a", pristine, out).Run(); err != nil {
			t.Fatal(err)
		}
		local, err := filesystem.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		inj := &crashAt{i: i}
		l, err := jobs.Open(ctx, spec, jobs.Options{FS: vfs.NewFaulty(local, inj), Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		_, cerr := l.Compact(ctx, jobs.CompactOptions{})
		l.Close()
		local.Close()
		if !inj.crashed {
			if cerr != nil {
				t.Fatalf("run %d: no crash, yet %v", i, cerr)
			}
			checkCompacted(t, out, "compactcrash", counts)
			t.Logf("%d crash points, each followed by a query and a rerun", i-1)
			return
		}
		if cerr == nil {
			t.Logf("crash at change %d came after the compaction's last step that matters", i)
		}
		if got, err := sluiceQuery(t, ctx, out); err != nil || got != before {
			t.Fatalf("crash at change %d: the query answers\n%v\n%s\nwant\n%s", i, err, got, before)
		}
		// The dead run's job lock expires; the rerun completes.
		clk.Advance(2 * time.Minute)
		l, err = jobs.Open(ctx, spec, jobs.Options{Clock: clk})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := l.Compact(ctx, jobs.CompactOptions{})
		l.Close()
		if err != nil {
			t.Fatalf("crash at change %d: the rerun: %v", i, err)
		}
		if got, err := sluiceQuery(t, ctx, out); err != nil || got != before {
			t.Fatalf("crash at change %d, rerun %+v: the query answers\n%v\n%s\nwant\n%s", i, rep, err, got, before)
		}
		checkCompacted(t, out, "compactcrash", counts)
		if n := len(dataFiles(t, out)); n != 6 {
			t.Fatalf("crash at change %d: %d files after the rerun, want 6", i, n)
		}
	}
}
