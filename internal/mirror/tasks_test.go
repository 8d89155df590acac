package mirror_test

import (
	"bytes"
	"context"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/mirror"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// TestMirrorTasksChange restarts the mirror process with a different
// --tasks each time (3, 2, 5, 1, 3), killing each run with SIGKILL once it
// has committed, so that the run's transactions are open or half done under
// ids the next run does not use; a last run (--tasks 4) catches up. The
// target holds each committed source record exactly once, in order per
// partition, compared record by record, and the checkpoint topic records
// the last task count: a changed count is safe, not refused.
func TestMirrorTasksChange(t *testing.T) {
	bin := kafka.SluiceBinary(t)
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	const partitions = 6
	createTopic(t, a.Addr, "retask", partitions, nil)
	args := []string{"--from", a.Addr, "--to", b.Addr, "--topics", "retask", "--name", "rt",
		"--commit-interval", "20ms", "--max-txn-records", "200"}
	state := func() *mirror.State {
		st, err := mirror.ReadState(context.Background(), []kgo.Opt{kgo.SeedBrokers(b.Addr)}, mirror.CheckpointTopic("rt"))
		if err != nil {
			t.Fatalf("read the mirror's state: %v", err)
		}
		return st
	}
	position := func() (at int64) {
		for _, p := range state().Positions {
			at += p.Source
		}
		return at
	}
	var last int64
	first := 0
	for _, tasks := range []int{3, 2, 5, 1, 3} {
		produceMixed(t, a.Addr, "retask", partitions, first, 4000)
		first += 4000
		var out bytes.Buffer
		cmd := mirrorProcess(t, bin, &out, append(args, "--tasks", strconv.Itoa(tasks))...)
		deadline := time.Now().Add(30 * time.Second)
		for position() <= last {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("--tasks %d: the mirror committed nothing in 30 s:\n%s", tasks, out.String())
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("--tasks %d: the mirror ended before the kill (%v): %s", tasks, err, out.String())
		}
		if got := state().Tasks; got != tasks {
			t.Fatalf("--tasks %d: the checkpoint topic records %d tasks", tasks, got)
		}
		last = position()
		t.Logf("--tasks %d killed at source position %d", tasks, last)
	}
	var out bytes.Buffer
	cmd := mirrorProcess(t, bin, &out, append(args, "--tasks", "4", "--exit-when-caught-up")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the last mirror run: %v\n%s", err, out.String())
	}
	if got := state().Tasks; got != 4 {
		t.Fatalf("the checkpoint topic records %d tasks after --tasks 4", got)
	}
	src, dst := readCommitted(t, a.Addr, "retask"), readCommitted(t, b.Addr, "retask")
	sameRecords(t, "retask", src, dst)
}
