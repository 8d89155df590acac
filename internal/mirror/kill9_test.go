package mirror_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/mirror"
	"github.com/sluicehq/sluice/internal/mutate"
	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// mirrorProcess starts `sluice mirror` as a child process.
func mirrorProcess(t testing.TB, bin string, out *bytes.Buffer, args ...string) *exec.Cmd {
	t.Helper()
	return mirrorProcessEnv(t, bin, out, nil, args...)
}

// mirrorProcessEnv is mirrorProcess with env added to the environment.
func mirrorProcessEnv(t testing.TB, bin string, out *bytes.Buffer, env []string, args ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mirror", "--progress-interval", "0", "--log-level", "warn"}, args...)...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the mirror: %v", err)
	}
	return cmd
}

// TestMirrorKill9 kills the mirror process with SIGKILL twenty times (at
// random moments, seed logged; SLUICE_MIRROR_KILLS sets another count)
// while a producer streams into three partitions of the source; a last
// run catches up. The target then holds each committed source record
// exactly once, in the source's order per partition, compared record by
// record (key, value, headers, timestamp).
func TestMirrorKill9(t *testing.T) {
	kills := 20
	if s := os.Getenv("SLUICE_MIRROR_KILLS"); s != "" {
		kills, _ = strconv.Atoi(s)
	}
	bin := kafka.SluiceBinary(t)
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	const partitions = 3
	createTopic(t, a.Addr, "stream", partitions, nil)
	seed := time.Now().UnixNano()
	rng := rand.New(rand.NewSource(seed))
	t.Logf("seed %d", seed)

	ctx, stop := context.WithCancel(context.Background())
	var producer sync.WaitGroup
	var produced, failed int64
	var mu sync.Mutex
	producer.Add(1)
	go func() {
		defer producer.Done()
		cl, err := kgo.NewClient(kgo.SeedBrokers(a.Addr), kgo.DefaultProduceTopic("stream"), kgo.ProducerLinger(2*time.Millisecond))
		if err != nil {
			t.Error(err)
			return
		}
		defer cl.Close()
		base := time.Date(2026, 11, 3, 13, 0, 0, 0, time.UTC)
		for i := 0; ctx.Err() == nil; i++ {
			r := &kgo.Record{Key: []byte(fmt.Sprintf("user-%d", i%101)), Value: []byte(fmt.Sprintf("event-%08d", i)),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(i))}}, Timestamp: base.Add(time.Duration(i) * time.Millisecond)}
			cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					failed++
				} else {
					produced++
				}
			})
			if i%100 == 99 {
				time.Sleep(20 * time.Millisecond) // a steady stream, not a flood the mirror never catches
			}
		}
		cl.Flush(context.Background())
	}()
	defer func() { stop(); producer.Wait() }()

	args := []string{"--from", a.Addr, "--to", b.Addr, "--topics", "stream", "--name", "k9", "--tasks", "3",
		"--commit-interval", "30ms", "--checkpoint-interval", "200ms"}
	position := func() int64 {
		st, err := mirror.ReadState(context.Background(), []kgo.Opt{kgo.SeedBrokers(b.Addr)}, mirror.CheckpointTopic("k9"))
		if err != nil {
			t.Fatalf("read the mirror's position: %v", err)
		}
		var at int64
		for _, p := range st.Positions {
			at += p.Source
		}
		return at
	}
	var last int64
	progressed := 0
	for k := 0; k < kills; k++ {
		var out bytes.Buffer
		cmd := mirrorProcess(t, bin, &out, args...)
		if k%2 == 1 {
			// Half the kills hit a mirror known to be copying: wait for a
			// commit of this instance, then kill at a random moment after it.
			deadline := time.Now().Add(30 * time.Second)
			for position() <= last {
				if time.Now().After(deadline) {
					cmd.Process.Kill()
					cmd.Wait()
					t.Fatalf("kill %d: the mirror committed nothing in 30 s:\n%s", k, out.String())
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		time.Sleep(time.Duration(rng.Intn(400)) * time.Millisecond) // any moment: starting, copying, committing
		if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatalf("kill %d: %v", k, err)
		}
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("kill %d: the mirror ended before the kill (%v): %s", k, err, out.String())
		}
		if at := position(); at > last {
			progressed++
			last = at
		}
	}
	stop()
	producer.Wait()
	mu.Lock()
	t.Logf("%d kills, %d with progress since the previous; %d records produced (%d failed)", kills, progressed, produced, failed)
	mu.Unlock()
	if progressed < kills/2 {
		t.Fatalf("the mirror made progress before only %d of %d kills: the kills did not hit a working mirror", progressed, kills)
	}

	var out bytes.Buffer
	cmd := mirrorProcess(t, bin, &out, append(args, "--exit-when-caught-up")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the last mirror run: %v\n%s", err, out.String())
	}
	src, dst := readCommitted(t, a.Addr, "stream"), readCommitted(t, b.Addr, "stream")
	sameRecords(t, "stream", src, dst)
	n := 0
	for _, rs := range dst {
		n += len(rs)
	}
	t.Logf("%d records on both sides, each once and in order", n)
}

// crashRuns mirrors topic "crash" (three partitions, 600 records each and
// an aborted transaction, 100 records per mirror transaction) from a to b
// with the mirror killing itself at each crash point in turn (mirror.CrashEnv,
// the second transaction of each run), then once more until caught up, and
// returns how the target differs from the source ("" for not at all). env
// is added to every run's environment.
func crashRuns(t *testing.T, env ...string) string {
	bin := kafka.MutationSluiceBinary(t)
	a := sluice.StartBroker(t, sluice.BrokerOptions{})
	b := sluice.StartBroker(t, sluice.BrokerOptions{})
	createTopic(t, a.Addr, "crash", 3, nil)
	produceMixed(t, a.Addr, "crash", 3, 0, 600)
	args := []string{"--from", a.Addr, "--to", b.Addr, "--topics", "crash", "--name", "cp",
		"--max-txn-records", "100", "--commit-interval", "2s", "--checkpoint-interval", "1ms"}
	for _, stage := range []string{mirror.StageCopied, mirror.StagePositioned, mirror.StageCommitted} {
		var out bytes.Buffer
		cmd := mirrorProcessEnv(t, bin, &out, append([]string{mirror.CrashEnv + "=" + stage + ":2"}, env...), args...)
		err := cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() {
			t.Fatalf("crash at %s: the mirror did not kill itself (%v):\n%s", stage, err, out.String())
		}
	}
	var out bytes.Buffer
	cmd := mirrorProcessEnv(t, bin, &out, env, append(args, "--exit-when-caught-up")...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the last mirror run: %v\n%s", err, out.String())
	}
	return diffRecords("crash", readCommitted(t, a.Addr, "crash"), readCommitted(t, b.Addr, "crash"))
}

// TestMirrorCrashPoints kills the mirror at each point of a transaction
// where a crash could lose or duplicate records (after the copied records
// are flushed, after the position is, after the commit): the target then
// holds each source record once, in order. Unlike TestMirrorKill9's random
// kills, every point is hit on every run.
func TestMirrorCrashPoints(t *testing.T) {
	if d := crashRuns(t); d != "" {
		t.Fatal(d)
	}
}

// TestMutationMirrorPositionOutsideTxn: with the position written in a
// transaction of its own after the copied records committed
// (mutate.MirrorPosition), the crash after the copy duplicates records and
// TestMirrorCrashPoints' check says so.
func TestMutationMirrorPositionOutsideTxn(t *testing.T) {
	d := crashRuns(t, mutate.EnvVar+"="+mutate.MirrorPosition)
	if d == "" {
		t.Fatal("the mirror committed its records outside the position's transaction and the check found nothing")
	}
	t.Logf("caught: %s", d)
}
