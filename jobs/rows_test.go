package jobs_test

import (
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// buildLoader builds a loader binary of a main package under testdata
// (its mappers registered, jobcli.Main for the commands).
func buildLoader(t *testing.T, ctx context.Context, pkg string) string {
	t.Helper()
	root, err := kafka.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), filepath.Base(pkg))
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.CommandContext(ctx, "go", append(args, pkg)...)
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building %s: %v\n%s", pkg, err, out)
	}
	return bin
}

// A custom mapper emitting three rows per record (testdata/mapper-rows,
// through jobcli.Main), its loads killed with SIGKILL at random moments
// while records keep arriving, then a replay: every (partition, offset,
// row) for row 0, 1, 2 is in the output once, files rotated by
// max_file_records (not a multiple of 3) hold whole records, and _row is
// the mapper's own index of the row.
func TestManyRowsKilledAndReplayedExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process kills")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := buildLoader(t, ctx, "./testdata/mapper-rows")
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	b := kafka.StartSluice(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "warehouse")
	job := fmt.Sprintf(pageViewJob, "pv-fanout", b.Addr, "fanout", 150, "schema_file: pageview.avsc", "file://"+out)
	job = strings.Replace(job, "on_bad_record: fail", "map:\n  mapper: fanout\n  options: {rows: 3}\non_bad_record: fail", 1)
	job = strings.Replace(job, "metadata_columns: true", "metadata_columns: true\n  max_file_records: 100", 1)
	jobPath := writeJobFile(t, dir, job)

	counts := map[int32]int64{}
	batch := 0
	produce := func(n int) {
		recs, _ := pageViews(t, "fanout", n, 3, time.Hour, -1)
		for _, r := range recs {
			r.Timestamp = r.Timestamp.Add(time.Duration(batch) * time.Minute)
		}
		parts := int32(0)
		if batch == 0 {
			parts = 3
		}
		for p, c := range produceAll(t, ctx, b.Addr, "fanout", parts, recs) {
			counts[p] += c
		}
		batch++
	}
	produce(1500)
	once := newOnceChecker(out, "fanout")
	once.rows = 3
	kills, runs := killLoop(t, ctx, rng, bin, jobPath, out, 8, func() {
		once.check(t, counts, true)
		produce(300 + rng.Intn(500))
	}, func() {
		once.check(t, counts, false)
	})
	if b, err := exec.CommandContext(ctx, bin, "load", "run", jobPath, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, b)
	}
	once.check(t, counts, true)
	t.Logf("%d kills, %d completed runs, %d records, %d rows", kills, runs+1, sum(counts), 3*sum(counts))

	id := "fanout/1@150"
	if b, err := exec.CommandContext(ctx, bin, "replay", jobPath, "--from-checkpoint", id, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, b)
	}
	after := newOnceChecker(out, "fanout") // the replay moved files aside: read them all again
	after.rows = 3
	after.check(t, counts, true)

	var rows, wrong int64
	q := fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE copy <> _row) FROM read_parquet('%s')", dataGlob(out, "parquet"))
	if err := duck(t).QueryRow(q).Scan(&rows, &wrong); err != nil {
		t.Fatal(err)
	}
	if rows != 3*sum(counts) || wrong != 0 {
		t.Fatalf("%d rows (want %d), %d whose _row is not the mapper's copy", rows, 3*sum(counts), wrong)
	}
}
