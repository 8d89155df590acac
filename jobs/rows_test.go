package jobs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/jobs"
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

// Loads of many rows per record killed with SIGKILL at random moments
// while records keep arriving, through a loader binary of its own
// (testdata/mapper-rows, jobcli.Main): first a custom mapper emitting three
// rows per record, then a replay from a checkpoint; then explode over
// nested order views (0 to 4 items each). Every (partition, offset, row)
// for the record's rows is in the output once, files rotated by
// max_file_records hold whole records, and _row is the mapper's own index
// of the row.
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

	// The custom mapper: three rows per record.
	out := filepath.Join(dir, "fanout")
	job := fmt.Sprintf(pageViewJob, "pv-fanout", b.Addr, "fanout", 150, "schema_file: pageview.avsc", "file://"+out)
	job = strings.Replace(job, "on_bad_record: fail", "map:\n  mapper: fanout\n  options: {rows: 3}\non_bad_record: fail", 1)
	job = strings.Replace(job, "metadata_columns: true", "metadata_columns: true\n  max_file_records: 100", 1)
	jobPath := filepath.Join(dir, "fanout.yaml")
	writeJobFile(t, dir, job)
	if err := os.Rename(filepath.Join(dir, "job.yaml"), jobPath); err != nil {
		t.Fatal(err)
	}
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
	three := func(int32, int64) int64 { return 3 }
	once := newOnceChecker(out, "fanout")
	once.rows = three
	kills, runs := killLoop(t, ctx, rng, bin, jobPath, out, 4, func() {
		once.check(t, counts, true)
		produce(300 + rng.Intn(500))
	}, func() {
		once.check(t, counts, false)
	})
	if b, err := exec.CommandContext(ctx, bin, "load", "run", jobPath, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, b)
	}
	once.check(t, counts, true)
	t.Logf("fanout: %d kills, %d completed runs, %d records, %d rows", kills, runs+1, sum(counts), 3*sum(counts))
	id := "fanout/1@150"
	if b, err := exec.CommandContext(ctx, bin, "replay", jobPath, "--from-checkpoint", id, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("replay: %v\n%s", err, b)
	}
	after := newOnceChecker(out, "fanout") // the replay moved files aside: read them all again
	after.rows = three
	after.check(t, counts, true)
	var rows, wrong int64
	q := fmt.Sprintf("SELECT count(*), count(*) FILTER (WHERE copy <> _row) FROM read_parquet('%s')", dataGlob(out, "parquet"))
	if err := duck(t).QueryRow(q).Scan(&rows, &wrong); err != nil {
		t.Fatal(err)
	}
	if rows != 3*sum(counts) || wrong != 0 {
		t.Fatalf("%d rows (want %d), %d whose _row is not the mapper's copy", rows, 3*sum(counts), wrong)
	}

	// explode: as many rows as the record has items.
	if err := os.WriteFile(filepath.Join(dir, "orderview.avsc"), []byte(orderViewSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	xout := filepath.Join(dir, "orders")
	xjob := filepath.Join(dir, "explode.yaml")
	if err := os.WriteFile(xjob, []byte(fmt.Sprintf(explodeJob, "killed", b.Addr, "orders", "file://"+xout)), 0o644); err != nil {
		t.Fatal(err)
	}
	xcounts := map[int32]int64{}
	items := map[int32][]int64{} // per partition, the items of each offset
	xbatch := 0
	produceOrders := func(n int) {
		recs, per := orderViews(t, "orders", n, 3, 100+xbatch)
		parts := int32(0)
		if xbatch == 0 {
			parts = 3
		}
		for p, c := range produceAll(t, ctx, b.Addr, "orders", parts, recs) {
			xcounts[p] += c
		}
		for i, r := range recs { // one producer, in order: each partition's offsets follow its records
			items[r.Partition] = append(items[r.Partition], per[i])
		}
		xbatch++
	}
	produceOrders(1200)
	xonce := newOnceChecker(xout, "orders")
	xonce.rows = func(p int32, o int64) int64 { return items[p][o] }
	kills, runs = killLoop(t, ctx, rng, bin, xjob, xout, 4, func() {
		xonce.check(t, xcounts, true)
		produceOrders(300 + rng.Intn(500))
	}, func() {
		xonce.check(t, xcounts, false)
	})
	if b, err := exec.CommandContext(ctx, bin, "load", "run", xjob, "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("final explode run: %v\n%s", err, b)
	}
	xonce.check(t, xcounts, true)
	t.Logf("explode: %d kills, %d completed runs, %d records, %d rows", kills, runs+1, sum(xcounts), len(xonce.holder))
}

// twiceMapper emits two rows per record, ignoring emit's errors, and
// fails a 404 after emitting them.
type twiceMapper struct{}

func (twiceMapper) Schema(in avro.Schema) (avro.Schema, error) {
	return jobs.ExtendSchema(in, [2]string{"copy", `"int"`})
}

func (twiceMapper) Map(rec *jobs.Record, emit func(map[string]any) error) error {
	for i := 0; i < 2; i++ {
		row := maps.Clone(rec.Value)
		row["copy"] = i
		_ = emit(row) // a careless mapper: the loader's refusal stands all the same
	}
	if rec.Value["status"] == 404 {
		return errors.New("no 404s")
	}
	return nil
}

// A record whose mapper fails after emitting rows, or one of whose rows a
// derived column fails on (the mapper ignoring emit's error), writes none
// of its rows: on_bad_record skips it whole.
func TestManyRowsBadRecordWritesNone(t *testing.T) {
	jobs.RegisterMapper("twice", func(jobs.MapperConfig) (jobs.Mapper, error) { return twiceMapper{}, nil })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := kafka.StartSluice(t)
	recs, _ := pageViews(t, "twice", 700, 2, time.Hour, -1)
	produceAll(t, ctx, b.Addr, "twice", 2, recs)
	s, _ := pageViewSchema(t)
	good := 0
	for _, r := range recs {
		var v map[string]any
		if err := avro.Unmarshal(s, r.Value, &v); err != nil {
			t.Fatal(err)
		}
		if st := v["status"].(int); st != 404 && st != 500 {
			good++
		}
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	job := fmt.Sprintf(pageViewJob, "twice", b.Addr, "twice", 200, "schema_file: pageview.avsc", out)
	job = strings.Replace(job, "on_bad_record: fail", `map:
  mapper: twice
  derive: {d: {expr: 'status == 500 ? int("x") : 1', type: long}}
on_bad_record: skip`, 1)
	spec, _ := writeJob(t, dir, job)
	rep, err := jobs.Run(ctx, spec, jobs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Totals.RowsOut != int64(2*good) || rep.Totals.Skipped != int64(700-good) {
		t.Fatalf("rows %d, skipped %d; want %d rows and %d skipped", rep.Totals.RowsOut, rep.Totals.Skipped, 2*good, 700-good)
	}
	var rows, keys, bad, wrong int64
	q := fmt.Sprintf(`SELECT count(*), count(DISTINCT (_partition, _offset, _row)), count(*) FILTER (WHERE status IN (404, 500)),
		count(*) FILTER (WHERE copy <> _row OR d <> 1) FROM read_parquet('%s')`, dataGlob(out, "parquet"))
	if err := duck(t).QueryRow(q).Scan(&rows, &keys, &bad, &wrong); err != nil {
		t.Fatal(err)
	}
	if rows != int64(2*good) || keys != rows || bad != 0 || wrong != 0 {
		t.Fatalf("%d rows, %d distinct keys, %d of bad records, %d wrong; want %d", rows, keys, bad, wrong, 2*good)
	}
}
