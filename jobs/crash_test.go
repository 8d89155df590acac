package jobs_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
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
	kills, runs := 0, 0
	for kills < 20 {
		if ctx.Err() != nil {
			t.Fatalf("out of time after %d kills", kills)
		}
		cmd := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet", "--workers", fmt.Sprint(1+rng.Intn(3)))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		delay := time.Duration(50+rng.Intn(1500)) * time.Millisecond
		select {
		case err := <-done:
			runs++
			if err != nil {
				t.Fatalf("run %d failed: %v\n%s", runs, err, stderr.String())
			}
			checkExactlyOnce(t, out, "crash", counts, true)
			produce(500 + rng.Intn(1000))
		case <-time.After(delay):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
			checkExactlyOnce(t, out, "crash", counts, false)
			m, _ := filepath.Glob(filepath.Join(out, "_sluice", "commits", "crash", "*", "*.json"))
			t.Logf("kill %d after %s: %d commits", kills, delay, len(m))
		}
	}
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

func sum(m map[int32]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
