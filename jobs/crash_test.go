package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// kill -9 of `sluice load run` at random moments, at least 20 times, with
// new records arriving between runs: after every kill the visible output
// holds no offset twice and only committed files; once a run completes,
// every produced offset is there exactly once.
func TestKilledLoadRunsExactlyOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("process kills")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	b := kafka.StartSluice(t)
	bin := kafka.SluiceBinary(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "warehouse")
	_, job := writeJob(t, dir, fmt.Sprintf(pageViewJob, "pv-crash", b.Addr, "crash", 150, "schema_file: pageview.avsc", "file://"+out))

	counts := map[int32]int64{}
	batch := 0
	produce := func(n int) {
		recs, _ := pageViews(t, "crash", n, 4, time.Hour, -1)
		for _, r := range recs { // distinct values per batch, same partitions
			r.Timestamp = r.Timestamp.Add(time.Duration(batch) * time.Minute)
		}
		parts := int32(0)
		if batch == 0 {
			parts = 4
		}
		for p, c := range produceAll(t, ctx, b.Addr, "crash", parts, recs) {
			counts[p] += c
		}
		batch++
	}
	produce(3000)
	once := newOnceChecker(out, "crash")
	kills, runs := killLoop(t, ctx, rng, bin, job, out, 20, func() {
		once.check(t, counts, true)
		produce(500 + rng.Intn(1000))
	}, func() {
		once.check(t, counts, false)
	})
	// Run to completion (no more kills).
	cmd := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("final run: %v\n%s", err, b)
	}
	checkExactlyOnce(t, out, "crash", counts, true)
	t.Logf("%d kills, %d completed runs, %d records", kills, runs+1, sum(counts))

	// The checkpoint commands on what the killed runs left, then a replay.
	list, err := exec.CommandContext(ctx, bin, "checkpoints", "list", job).CombinedOutput()
	if err != nil || !strings.Contains(string(list), fmt.Sprintf("crash/2@%d", counts[2])) {
		t.Fatalf("checkpoints list: %v\n%s", err, list)
	}
	id := fmt.Sprintf("crash/2@%d", 150) // the end of partition 2's first commit
	show, err := exec.CommandContext(ctx, bin, "checkpoints", "show", job, id).CombinedOutput()
	if err != nil || !strings.Contains(string(show), "made by the commit of [0, 150)") {
		t.Fatalf("checkpoints show: %v\n%s", err, show)
	}
	replay, err := exec.CommandContext(ctx, bin, "replay", job, "--from-checkpoint", id, "--quiet").CombinedOutput()
	if err != nil || !strings.Contains(string(replay), "withdrew crash/2 from 150: ") ||
		!strings.Contains(string(replay), fmt.Sprintf(" commits, %d records", counts[2]-150)) {
		t.Fatalf("replay: %v\n%s", err, replay)
	}
	checkExactlyOnce(t, out, "crash", counts, true)
	if b, err := exec.CommandContext(ctx, bin, "replay", job, "--from-checkpoint", "crash/2@151").CombinedOutput(); err == nil {
		t.Fatalf("replay from a non-checkpoint succeeded:\n%s", b)
	}
}

// killLoop runs `bin load run job` until it was killed (SIGKILL) kills
// times at random moments within a run; after a run that completed it
// calls completed, after a kill killed (out is the job's local output). It returns the kills and the
// completed runs.
func killLoop(t *testing.T, ctx context.Context, rng *rand.Rand, bin, job, out string, kills int, completed, killed func()) (int, int) {
	t.Helper()
	k, runs := 0, 0
	lastRun := time.Second
	for k < kills {
		if ctx.Err() != nil {
			t.Fatalf("out of time after %d kills", k)
		}
		cmd := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet", "--workers", fmt.Sprint(1+rng.Intn(3)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		// A moment within the run: up to the length of the last completed
		// run (a load that finishes first just loads more next time).
		delay := 20*time.Millisecond + time.Duration(rng.Int63n(int64(max(lastRun, 200*time.Millisecond))))
		began := time.Now()
		select {
		case err := <-done:
			runs++
			lastRun = time.Since(began)
			if err != nil {
				t.Fatalf("run %d failed: %v\n%s", runs, err, stderr.String())
			}
			completed()
		case <-time.After(delay):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			k++
			killed()
			m, _ := filepath.Glob(filepath.Join(out, "_sluice", "commits", "*", "*", "*.json"))
			t.Logf("kill %d after %s: %d commits", k, delay, len(m))
		}
	}
	return k, runs
}

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}

// onceChecker is checkExactlyOnce made incremental for the crash loop, whose
// warehouse grows by hundreds of files a round: committed files and
// manifests never change while the loop runs, so each check reads only the
// new ones (DuckDB reads the new files' offsets), and a (partition, offset)
// held by two files anywhere is caught the moment the second appears.
type onceChecker struct {
	dir, topic string
	manifests  map[string]bool     // manifest paths read
	listed     map[string]bool     // files the manifests name
	seen       map[string]bool     // data files read
	holder     map[[3]int64]string // (partition, offset, row) → the file holding it
	// rows gives the rows of each record (nil: 1, and no _row column):
	// each (partition, offset, row) for row < rows(partition, offset) is
	// held once.
	rows func(p int32, o int64) int64
}

// rowsOf is the rows of record (p, o).
func (c *onceChecker) rowsOf(p int32, o int64) int64 {
	if c.rows == nil {
		return 1
	}
	return c.rows(p, o)
}

func newOnceChecker(dir, topic string) *onceChecker {
	return &onceChecker{dir: dir, topic: topic, manifests: map[string]bool{}, listed: map[string]bool{},
		seen: map[string]bool{}, holder: map[[3]int64]string{}}
}

func (c *onceChecker) check(t testing.TB, counts map[int32]int64, complete bool) {
	t.Helper()
	fs, err := filesystem.Open(c.dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	for p := range counts {
		rel := path.Join("_sluice/commits", c.topic, fmt.Sprint(p))
		ents, _ := os.ReadDir(filepath.Join(c.dir, filepath.FromSlash(rel)))
		for _, e := range ents {
			mp := path.Join(rel, e.Name())
			if !strings.HasSuffix(e.Name(), ".json") || c.manifests[mp] {
				continue
			}
			b, err := vfs.ReadFile(fs, mp)
			if err != nil {
				t.Fatal(err)
			}
			m, err := writers.DecodeManifest(b)
			if err != nil {
				t.Fatal(err)
			}
			c.manifests[mp] = true
			for _, f := range m.Files {
				c.listed[f.Final] = true
			}
		}
	}
	var fresh []string
	filepath.WalkDir(c.dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.dir, p)
		if d.IsDir() && rel == "_sluice" {
			return filepath.SkipDir
		}
		rel = filepath.ToSlash(rel)
		if !d.IsDir() && !c.seen[rel] {
			if !c.listed[rel] {
				t.Fatalf("invariant: %s is visible but no manifest lists it", rel)
			}
			fresh = append(fresh, rel)
		}
		return nil
	})
	if len(fresh) > 0 {
		quoted := make([]string, len(fresh))
		for i, f := range fresh {
			quoted[i] = "'" + filepath.Join(c.dir, filepath.FromSlash(f)) + "'"
		}
		db := duck(t)
		row := "0"
		if c.rows != nil {
			row = "_row"
		}
		rows, err := db.Query(fmt.Sprintf(`SELECT _partition, _offset, %s, filename FROM read_parquet([%s], filename = true)`, row, strings.Join(quoted, ",")))
		if err != nil {
			t.Fatal(err)
		}
		for rows.Next() {
			var p, o, r int64
			var file string
			if err := rows.Scan(&p, &o, &r, &file); err != nil {
				t.Fatal(err)
			}
			if other, ok := c.holder[[3]int64{p, o, r}]; ok {
				t.Fatalf("invariant: partition %d offset %d row %d is in %s and in %s", p, o, r, other, file)
			}
			if n := c.rowsOf(int32(p), o); r < 0 || r >= n {
				t.Fatalf("invariant: partition %d offset %d has row %d (in %s); the record has %d rows", p, o, r, file, n)
			}
			c.holder[[3]int64{p, o, r}] = file
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		rows.Close()
		for _, f := range fresh {
			c.seen[f] = true
		}
	}
	if !complete {
		return
	}
	var held int64
	for p, n := range counts {
		for o := int64(0); o < n; o++ {
			rows := c.rowsOf(p, o)
			held += rows
			for r := int64(0); r < rows; r++ {
				if _, ok := c.holder[[3]int64{int64(p), o, r}]; !ok {
					t.Fatalf("invariant: partition %d offset %d row %d is missing after a completed run (%d produced)", p, o, r, n)
				}
			}
		}
	}
	if int64(len(c.holder)) != held {
		t.Fatalf("invariant: %d (partition, offset, row) held, %d produced", len(c.holder), held)
	}
}
