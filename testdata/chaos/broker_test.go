package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// startBroker makes and starts a broker node with the given properties (a
// --config file) and returns it.
func startBroker(t *testing.T, r *harness.Run, name string, props string) *harness.Broker {
	t.Helper()
	dir := r.WorkDir(name)
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte(props), 0o644); err != nil {
		t.Fatal(err)
	}
	b := r.Broker(name, filepath.Join(dir, "data"), "--config", cfg)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBrokerKillPause: one broker killed (kill -9) and paused (SIGSTOP)
// while producers write unique values with acks=all or acks=1, with
// flush.messages=1 or the default (page cache). A process kill loses
// nothing acknowledged in every variant: the page cache outlives the
// process. The final read after the faults must hold every acknowledged
// value at its acknowledged offset, and once, except that an acks=1 (not
// idempotent) producer's value sent more than once (a retry after a kill
// took its answer) may stand once per send, as in Kafka
// (history.Stats.RetryDuplicates).
func TestBrokerKillPause(t *testing.T) {
	for _, v := range []struct {
		acks  string
		flush string
	}{{"all", "1"}, {"all", "default"}, {"1", "1"}, {"1", "default"}} {
		acks := workload.AcksAll
		if v.acks == "1" {
			acks = workload.AcksLeader
		}
		name := fmt.Sprintf("broker-kill-pause-acks-%s-flush-%s", v.acks, v.flush)
		t.Run(name, func(t *testing.T) {
			r := harness.NewRun(t, name, 6*time.Second)
			props := "num.partitions=3\n"
			if v.flush == "1" {
				props += "log.flush.interval.messages=1\n"
			}
			b := startBroker(t, r, "broker", props)
			sluice.CreateTopic(t, b.HostPort, "chaos", 3)
			rec, closeHistory := newHistory(t, r)
			st := newStamps(rec)

			sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
				Steps:   harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "kill", "pause"),
				Nemeses: []harness.Nemesis{&harness.Kill{Nodes: []*harness.Node{b.Node}}, &harness.Pause{Nodes: []*harness.Node{b.Node}}}}
			ctx, cancel := context.WithTimeout(context.Background(), r.Duration+30*time.Second)
			defer cancel()
			load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, acks, 1, 2, nil, 0)
			if err := sched.Play(ctx); err != nil {
				t.Error(err)
			}
			load.stop()
			finalRead(t, rec, b.HostPort, "chaos")
			st.close()
			closeHistory()
			verdict(t, r, sched, rec.History(), st, harness.Report{History: historyPath(r),
				Notes: []string{"acks=" + v.acks + ", flush.messages=" + v.flush, "a process kill must lose nothing acknowledged"}})
		})
	}
}

// TestBrokerDiskFull: the broker's data directory is a small tmpfs that
// fills up during produce (appends fail with ENOSPC and the partitions
// refuse writes) and is freed again; a restart (kill -9, as an operator
// would) brings the refused partitions back. A scripted schedule, begun
// once 50 writes are acknowledged: full, then the restart. Nothing
// acknowledged may be lost, nothing doubled, some write must have been
// refused (or left unanswered) while full, and the broker must take writes
// again at the end.
func TestBrokerDiskFull(t *testing.T) {
	r := harness.NewRun(t, "broker-disk-full", 6*time.Second)
	dir := r.WorkDir("broker")
	// The log grows about 16 MiB a minute on this machine before the fault,
	// so the tmpfs grows with the run: were the log alone to fill it, freeing
	// the ballast would free nothing (a 3m run found exactly that).
	size := int64(16<<20) + int64(r.Duration.Minutes()*32)<<20
	disk := r.Disk(filepath.Join(dir, "data"), size)
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte("num.partitions=3\nlog.segment.bytes=1048576\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := r.Broker("broker", disk.Dir, "--config", cfg)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	sluice.CreateTopic(t, b.HostPort, "chaos", 3)
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	third := r.Duration / 3
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps: []harness.Step{{At: third, Hold: third, Nemesis: "disk-full", Target: "broker"},
			{At: 2*third + 200*time.Millisecond, Hold: 500 * time.Millisecond, Nemesis: "kill", Target: "broker"}},
		Nemeses: []harness.Nemesis{&harness.Full{Disks: map[string]*harness.Disk{"broker": disk}},
			&harness.Kill{Nodes: []*harness.Node{b.Node}}}}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+30*time.Second)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 2, nil, 0)
	waitAcked(t, rec, minAckedBeforeFault) // acknowledged writes from before the fault for the check to find
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	// the broker takes writes again once space is back
	after := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 3, 1, nil, 0)
	time.Sleep(time.Second) // a second of produce after the faults, the workload's length
	after.stop()
	finalRead(t, rec, b.HostPort, "chaos")
	st.close()
	closeHistory()
	h := rec.History()
	okAfter := 0
	for _, op := range h {
		if op.Kind == history.Produce && op.Process == 3 && op.Outcome == history.OK {
			okAfter++
		}
	}
	verdict(t, r, sched, h, st, harness.Report{History: historyPath(r),
		Notes: []string{fmt.Sprintf("tmpfs of %d MiB on the data directory, filled and freed, then a restart", size>>20)}})
	if okAfter == 0 {
		t.Errorf("no produce succeeded after the disk was freed and the broker restarted")
	}
	if count(h, history.Produce, history.Fail)+count(h, history.Produce, history.Unknown) == 0 {
		t.Errorf("no produce was refused or left unanswered while the disk was full: the fault went unchecked")
	}
}
