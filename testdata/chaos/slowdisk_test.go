package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// slowDiskIOPS is the slow disk's write operations a second: each append
// of flush.messages=1 waits for its fsync, so acknowledgements crawl.
const slowDiskIOPS = 20

// TestBrokerSlowDisk: the broker's data directory is an ext4 on a loop
// device whose writes, for the broker's process, are throttled to 20
// operations a second at times (a cgroup v1 blkio limit: fsync and
// write-through I/O wait for it), with flush.messages=1 so every append
// waits for its sync, while producers write with acks=all; the broker is
// also killed (kill -9) between the slow spells, so what was acknowledged
// under the slow disk must outlive a crash. Nothing acknowledged may be
// lost, nothing doubled; the throttle must have seen the broker's writes.
func TestBrokerSlowDisk(t *testing.T) {
	r := harness.NewRun(t, "broker-slow-disk", 8*time.Second)
	dir := r.WorkDir("broker")
	disk := r.LoopDisk(filepath.Join(dir, "data"), 64<<20)
	cfg := filepath.Join(dir, "server.properties")
	if err := os.WriteFile(cfg, []byte("num.partitions=3\nlog.flush.interval.messages=1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	b := r.Broker("broker", disk.Dir, "--config", cfg)
	if err := b.Start(); err != nil {
		t.Fatal(err)
	}
	sluice.CreateTopic(t, b.HostPort, "chaos", 3)
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	// slow spells with kills between them, scripted: the point is a crash
	// after writes acknowledged through a slow disk
	q := r.Duration / 8
	steps := []harness.Step{{At: q, Hold: 2 * q, Nemesis: "slow-disk", Target: "broker"},
		{At: 3*q + 100*time.Millisecond, Hold: q / 2, Nemesis: "kill", Target: "broker"},
		{At: 4 * q, Hold: 2 * q, Nemesis: "slow-disk", Target: "broker"},
		{At: 6*q + 100*time.Millisecond, Hold: q / 2, Nemesis: "kill", Target: "broker"}}
	if r.Long { // a long run: random spells of both
		steps = harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "slow-disk", "kill")
	}
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events, Steps: steps,
		Nemeses: []harness.Nemesis{&harness.SlowDisk{Disks: map[string]*harness.Disk{"broker": disk}, Nodes: []*harness.Node{b.Node}, IOPS: slowDiskIOPS},
			&harness.Kill{Nodes: []*harness.Node{b.Node}}}}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+30*time.Second)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 2, nil, 0)
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	finalRead(t, rec, b.HostPort, "chaos")
	st.close()
	closeHistory()
	writes, err := disk.ThrottledWrites()
	if err != nil {
		t.Error(err)
	}
	verdict(t, r, sched, rec.History(), st, harness.Report{History: historyPath(r),
		Notes: []string{fmt.Sprintf("ext4 on a loop device, the broker's writes throttled to %d/s in the slow spells; flush.messages=1, acks=all", slowDiskIOPS),
			fmt.Sprintf("%d write operations of the broker went through the throttle", writes)}})
	if writes == 0 {
		t.Errorf("no write of the broker went through the disk's throttle: the slow disk slowed nothing")
	}
}
