package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// Replay after a checkpoint with a changed mapper: rows after the
// checkpoint carry the new mapping, rows before are untouched, nothing is
// doubled, and the withdrawn files are kept aside.
func TestReplayWithChangedMapper(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "replay", 1000, 1, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "replay", 1, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "replay", b.Addr, "replay", 250, "schema_file: pageview.avsc", out))
	if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	before := map[string]time.Time{}
	files, _ := filepath.Glob(dataGlob(out, "parquet"))
	for _, f := range files {
		if info, err := os.Stat(f); err == nil && filepath.Base(f) < "replay+0+5" {
			before[f] = info.ModTime()
		}
	}
	if len(before) != 2 {
		t.Fatalf("files before the checkpoint: %v", files)
	}

	// The fix: keep four fields and call url "page".
	spec.Map = jobs.Map{Mapper: "select", Select: &jobs.Select{Keep: []string{"ts", "user_id", "url", "status"}, Rename: map[string]string{"url": "page"}}}
	l, err := jobs.Open(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cps, err := l.Checkpoints(ctx)
	if err != nil || len(cps) != 1 || cps[0].Offset != 1000 || cps[0].Commits != 4 || cps[0].Lag != 0 || cps[0].LastRecord.IsZero() {
		t.Fatalf("checkpoints %+v %v", cps, err)
	}
	d, err := l.CheckpointDetail("replay/0@500")
	if err != nil || d.Commit == nil || d.Commit.Start != 250 || d.Later != 2 || d.LaterRecords != 500 {
		t.Fatalf("detail %+v %v", d, err)
	}
	if _, err := l.CheckpointDetail("replay/0@499"); err == nil {
		t.Fatal("a checkpoint inside a commit accepted")
	}
	ids, err := l.RunIDs()
	if err != nil || len(ids) != 1 {
		t.Fatalf("run ids %v %v", ids, err)
	}
	if rd, err := l.CheckpointDetail(ids[0]); err != nil || rd.Run == nil || len(rd.Positions) != 1 || rd.Positions[0].Offset != 1000 || rd.Later != 0 {
		t.Fatalf("run checkpoint %+v %v", rd, err)
	}
	rep, err := l.Replay(ctx, "replay/0@500")
	if err != nil {
		t.Fatal(err)
	}
	if w := rep.Withdrawn[0]; w.Commits != 2 || w.Records != 500 || rep.Run.Totals.RowsOut != 500 {
		t.Fatalf("replay %+v, run %+v", rep.Withdrawn, rep.Run.Totals)
	}
	db := duck(t)
	glob := dataGlob(out, "parquet")
	var rows, distinct, oldRows, newRows, oldMin, oldMax, newMin, newMax int64
	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT _offset),
		count(url), count(page), min(_offset) FILTER (WHERE url IS NOT NULL), max(_offset) FILTER (WHERE url IS NOT NULL),
		min(_offset) FILTER (WHERE page IS NOT NULL), max(_offset) FILTER (WHERE page IS NOT NULL)
		FROM read_parquet('%s', union_by_name = true)`, glob)
	if err := db.QueryRow(q).Scan(&rows, &distinct, &oldRows, &newRows, &oldMin, &oldMax, &newMin, &newMax); err != nil {
		t.Fatal(err)
	}
	if rows != 1000 || distinct != 1000 || oldRows != 500 || newRows != 500 || oldMin != 0 || oldMax != 499 || newMin != 500 || newMax != 999 {
		t.Fatalf("rows %d distinct %d; old mapping %d rows [%d,%d], new %d rows [%d,%d]", rows, distinct, oldRows, oldMin, oldMax, newRows, newMin, newMax)
	}
	// The rows before the checkpoint are the very same files.
	for f, mt := range before {
		if info, err := os.Stat(f); err != nil || !info.ModTime().Equal(mt) {
			t.Fatalf("%s changed: %v", f, err)
		}
	}
	// The withdrawn files are kept aside, whole.
	var aside int64
	if err := db.QueryRow(fmt.Sprintf(`SELECT count(*) FROM read_parquet('%s')`,
		filepath.Join(out, rep.Withdrawn[0].MovedTo, "dt=*", "hr=*", "*.parquet"))).Scan(&aside); err != nil || aside != 500 {
		t.Fatalf("withdrawn rows %d %v", aside, err)
	}
	checkExactlyOnce(t, out, "replay", map[int32]int64{0: 1000}, true)
}

// Three runs of one job at once: the job lock lets one load at a time (the
// others are refused with ErrLocked, or step aside with ErrNotReady when
// one ends as another plans), and a last run completes the load exactly
// once.
func TestConcurrentRunsExactlyOnce(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "racing", 3000, 2, time.Hour, -1)
	counts := produceAll(t, ctx, b.Addr, "racing", 2, recs)
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	spec, _ := writeJob(t, dir, fmt.Sprintf(pageViewJob, "racing", b.Addr, "racing", 500, "schema_file: pageview.avsc", out))
	errs := make(chan error, 3)
	for i := 0; i < 3; i++ {
		go func() {
			_, err := jobs.Run(ctx, spec, jobs.Options{Workers: 2})
			errs <- err
		}()
	}
	for i := 0; i < 3; i++ {
		if err := <-errs; err != nil && !errors.Is(err, jobs.ErrNotReady) && !errors.Is(err, jobs.ErrLocked) {
			t.Fatalf("a racing run failed otherwise: %v", err)
		}
	}
	if _, err := jobs.Run(ctx, spec, jobs.Options{}); err != nil {
		t.Fatal(err)
	}
	checkExactlyOnce(t, out, "racing", counts, true)
}
