package main

import (
	"bytes"
	"context"
	"github.com/twmb/franz-go/pkg/kgo"
	"math/rand"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// `sluice load run` killed with -9 at random moments, again and again,
// with records arriving between runs: after every kill the load tier
// (counted from the committed manifests) never holds more in a window than
// the producers acknowledged, and once a run completes it holds exactly
// their count in every window.
func TestAuditLoadTierExactThroughKills(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	bin := kafka.SluiceBinary(t)
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	sluice.CreateTopic(t, b.Addr, "kill", 3)
	dir := t.TempDir()
	job := writeAuditJob(t, dir, "kill-load", b.Addr, "kill", ", max_records_per_task: 150")
	spec, err := jobs.LoadSpec(job)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-6 * time.Hour).Truncate(time.Hour)
	produced := 0
	produce := func(n int) {
		hookProduce(t, b.Addr, "kill", n, at.Add(time.Duration(produced)*time.Second*7), 7*time.Second)
		produced += n
	}
	books := func() *audit.Report {
		t.Helper()
		counts, err := audit.ReadCounts(ctx, []kgo.Opt{kgo.SeedBrokers(b.Addr)})
		if err != nil {
			t.Fatal(err)
		}
		load, err := jobLoadTier(spec)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := audit.Balance(counts.Counts, &load, audit.Options{Now: time.Now(), Topic: "kill"})
		if err != nil {
			t.Fatal(err)
		}
		return rep
	}
	produce(2000)
	kills := 0
	lastRun := time.Second
	for kills < 10 {
		if ctx.Err() != nil {
			t.Fatalf("out of time after %d kills", kills)
		}
		cmd := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet", "--workers", "2")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		delay := 20*time.Millisecond + time.Duration(rng.Int63n(int64(max(lastRun, 200*time.Millisecond))))
		began := time.Now()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("run failed: %v\n%s", err, stderr.String())
			}
			lastRun = time.Since(began)
			produce(300) // more to load: the next run is killed in the middle
		case <-time.After(delay):
			cmd.Process.Signal(syscall.SIGKILL)
			<-done
			kills++
		}
		for _, w := range books().Windows {
			if d := w.Diff[audit.TierLoad]; d > 0 {
				t.Fatalf("after kill %d: window %s counted %d more than produced (counted twice)", kills, w.Start, d)
			}
		}
	}
	out, err := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet").CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	rep := books()
	var loaded int64
	for _, w := range rep.Windows {
		loaded += w.Tiers[audit.TierLoad].Messages
		if w.State != audit.StateBalanced {
			t.Errorf("window %s: %s, load diff %d", w.Start, w.State, w.Diff[audit.TierLoad])
		}
	}
	if loaded != int64(produced) || rep.Unbalanced != 0 {
		t.Fatalf("load tier %d of %d produced, %d unbalanced windows", loaded, produced, rep.Unbalanced)
	}
	t.Logf("%d kills, %d records in %d windows, all balanced", kills, produced, len(rep.Windows))
}
