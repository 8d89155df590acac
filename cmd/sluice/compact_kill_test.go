package main

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/duckdb/duckdb-go/v2"
	"github.com/hamba/avro/v2"

	"github.com/sluicehq/sluice/testdata/fixtures"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// compactKillAnswer is the answer compaction must not change: per
// partition and hour, the rows, distinct offsets and checksums of offsets
// and values.
const compactKillAnswer = `SELECT _partition, dt, hr, count(*), count(DISTINCT _offset), sum(_offset), sum(user_id),
	sum(bytes_sent), sum(hash(url)), min(ts), max(ts) FROM pageviews GROUP BY ALL ORDER BY ALL`

// `sluice compact` killed with -9 after a random short delay, again and
// again, while another goroutine runs `sluice query` the whole time: every
// answer (from the goroutine and after each kill) equals the answer before
// compaction, and no query fails. A final run then completes: fewer files,
// the same answer, no temporary left, and DuckDB reading every data file by
// glob finds each (partition, offset) once.
func TestCompactKill9WhileQuerying(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	bin := kafka.SluiceBinary(t)

	// 3 partitions, each loaded by 12 runs of 48 records spread over 24
	// hours: 864 small files in 72 partition-hours.
	const partitions, runs, perRun, hours = 3, 12, 48, 24
	schema, err := avro.Parse(fixtures.WritersPageView())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := filepath.Join(dir, "pageviews")
	fs, err := filesystem.NewLocalNoSync(out)
	if err != nil {
		t.Fatal(err)
	}
	part, _ := writers.NewPartitioner(writers.ByHour, "ts", "UTC")
	store := writers.NewStore(fs, writers.StoreOptions{})
	counts := map[int32]int64{}
	for p := int32(0); p < partitions; p++ {
		for r := int64(0); r < runs; r++ {
			split := writers.Split{Topic: "pageviews", Partition: p, Start: r * perRun, End: r*perRun + perRun}
			w, err := writers.NewSplitWriter(store, split, writers.Config{Format: format.Options{Kind: format.Parquet, MetadataColumns: true}, Partitioner: part})
			if err != nil {
				t.Fatal(err)
			}
			for off := split.Start; off < split.End; off++ {
				ts := time.Date(2024, 5, 1, int(off%hours), int(off%60), int(p), 0, time.UTC)
				v := map[string]any{"ts": ts, "user_id": off*7 + int64(p), "session_id": "s", "url": fmt.Sprintf("/p/%d", off%13), "referrer": nil,
					"status": int32(200), "latency_ms": 1.5, "country": "DE", "device": "mobile", "user_agent": "ua", "bytes_sent": off * int64(p+1), "is_bot": false}
				if err := w.Write(schema, v, format.Meta{Offset: off, Timestamp: ts}); err != nil {
					t.Fatal(err)
				}
			}
			if res, err := w.Commit(split.End); err != nil || !res.Won {
				t.Fatalf("commit: %v %v", res.Won, err)
			}
			counts[p] = split.End
		}
	}
	fs.Close()
	job := filepath.Join(dir, "job.yaml")
	if err := os.WriteFile(job, []byte("name: pageviews\nsource: {topics: [pageviews]}\ndecode: {format: string}\n"+
		"partition: {by: hour, time_field: ts}\noutput: {uri: "+out+", format: parquet, metadata_columns: true}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	files := func() int {
		m, _ := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", "*.parquet"))
		return len(m)
	}
	query := func() (string, error) {
		cmd := exec.CommandContext(ctx, bin, "query", "--warehouse", "file://"+dir, "--cache-dir", filepath.Join(dir, "qcache"), "--format", "csv", compactKillAnswer)
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			return "", fmt.Errorf("sluice query: %v: %s", err, strings.TrimSpace(stderr.String()))
		}
		return stdout.String(), nil
	}
	began := time.Now()
	before, err := query()
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("a sluice query takes %v", time.Since(began))
	if n := strings.Count(before, "\n"); n != 1+partitions*hours {
		t.Fatalf("answer before compaction has %d lines, want a header and %d groups:\n%s", n, partitions*hours, before)
	}
	filesBefore := files()
	if filesBefore != partitions*runs*hours {
		t.Fatalf("%d files before compaction, want %d", filesBefore, partitions*runs*hours)
	}

	// The querying goroutine: every answer must equal before.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var queries int
	var qerr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			got, err := query()
			mu.Lock()
			queries++
			if err == nil && got != before {
				err = fmt.Errorf("answer differs from the one before compaction:\n%s\nwant\n%s", got, before)
			}
			if err != nil && qerr == nil {
				qerr = fmt.Errorf("query %d: %w", queries, err)
			}
			mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	stopQueries := func() {
		close(stop)
		wg.Wait()
		mu.Lock()
		defer mu.Unlock()
		if qerr != nil {
			t.Fatalf("concurrent sluice query: %v", qerr)
		}
	}
	failed := func() error {
		mu.Lock()
		defer mu.Unlock()
		return qerr
	}

	// How long a whole compaction takes here, measured on a copy: the
	// kills come within a fraction of it, so most land mid-run.
	calib := filepath.Join(t.TempDir(), "copy")
	if b, err := exec.Command("cp", "-a", dir, calib).CombinedOutput(); err != nil {
		t.Fatalf("copy for calibration: %v\n%s", err, b)
	}
	calibJob := filepath.Join(calib, "job.yaml")
	if err := os.WriteFile(calibJob, []byte(strings.ReplaceAll(mustRead(t, job), out, filepath.Join(calib, "pageviews"))), 0o644); err != nil {
		t.Fatal(err)
	}
	began = time.Now()
	if b, err := exec.CommandContext(ctx, bin, "compact", calibJob, "--older-than", "0s", "--quiet").CombinedOutput(); err != nil {
		t.Fatalf("calibration compact: %v\n%s", err, b)
	}
	whole := time.Since(began)
	t.Logf("a whole compaction takes %v", whole)

	// A run that finishes before its kill (nothing much left to do)
	// bounds the next delays, so that later runs are killed too.
	bound := whole / 4
	kills, completed, progressed := 0, 0, 0
	for attempt := 0; kills < 10; attempt++ {
		if ctx.Err() != nil || attempt > 40 {
			stopQueries()
			t.Fatalf("gave up after %d attempts, %d kills", attempt, kills)
		}
		if err := failed(); err != nil {
			stopQueries()
		}
		delay := 5*time.Millisecond + time.Duration(rng.Int63n(int64(bound)))
		n0 := files()
		started := time.Now()
		cmd := exec.CommandContext(ctx, bin, "compact", job, "--older-than", "0s", "--quiet")
		var stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stderr, &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				stopQueries()
				t.Fatalf("compact run %d failed: %v\n%s", attempt, err, stderr.String())
			}
			completed++
			bound = max(min(bound, time.Since(started)), 10*time.Millisecond)
			t.Logf("attempt %d: compact finished before the kill at %v (%d files)", attempt, delay, files())
		case <-time.After(delay):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
			n1 := files()
			if n1 != n0 {
				progressed++
			}
			t.Logf("kill %d after %v: %d -> %d files", kills, delay, n0, n1)
		}
		got, err := query()
		if err != nil || got != before {
			stopQueries()
			t.Fatalf("after attempt %d (%d kills): %v\n%s\nwant\n%s", attempt, kills, err, got, before)
		}
	}
	final, err := exec.CommandContext(ctx, bin, "compact", job, "--older-than", "0s", "--quiet").CombinedOutput()
	if err != nil {
		stopQueries()
		t.Fatalf("final compact: %v\n%s", err, final)
	}
	// Two more goroutine queries, the last begun after the final run.
	mu.Lock()
	q := queries
	mu.Unlock()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline) && failed() == nil; {
		mu.Lock()
		n := queries
		mu.Unlock()
		if n >= q+2 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stopQueries()
	after, err := query()
	if err != nil || after != before {
		t.Fatalf("query after the final compaction: %v\n%s\nwant\n%s", err, after, before)
	}
	filesAfter := files()
	if filesAfter >= filesBefore || filesAfter > partitions*hours {
		t.Fatalf("%d files after compaction, from %d: want at most one per partition-hour (%d)", filesAfter, filesBefore, partitions*hours)
	}
	for p := int32(0); p < partitions; p++ {
		if ents, _ := os.ReadDir(filepath.Join(out, "_sluice", "compactions", "pageviews", fmt.Sprint(p), "tmp")); len(ents) > 0 {
			t.Fatalf("compaction temporaries left in partition %d: %v", p, ents)
		}
	}
	db, err := sql.Open("duckdb", "")
	if err != nil {
		t.Fatalf("duckdb: %v", err)
	}
	defer db.Close()
	glob := filepath.ToSlash(filepath.Join(out, "dt=*", "hr=*", "*.parquet"))
	for p, n := range counts {
		var rows, distinct, lo, hi int64
		q := fmt.Sprintf(`SELECT count(*), count(DISTINCT _offset), coalesce(min(_offset), -1), coalesce(max(_offset), -1) FROM read_parquet('%s') WHERE _partition = %d`, glob, p)
		if err := db.QueryRow(q).Scan(&rows, &distinct, &lo, &hi); err != nil {
			t.Fatal(err)
		}
		if rows != n || distinct != n || lo != 0 || hi != n-1 {
			t.Fatalf("exactly once: partition %d holds %d rows, %d distinct offsets in [%d, %d]; want each of [0, %d) once", p, rows, distinct, lo, hi, n)
		}
	}
	t.Logf("%d kills (%d changed the files), %d runs finished before their kill, %d concurrent queries, all equal; %d files -> %d",
		kills, progressed, completed, queries, filesBefore, filesAfter)
}

func mustRead(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
