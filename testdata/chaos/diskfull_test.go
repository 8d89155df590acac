package chaos

import (
	"context"
	"fmt"
	"io/fs"
	"math/rand"
	"path/filepath"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/jobs"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// minAckedBeforeFault is how many acknowledged produces a disk-full
// scenario waits for before it fills the disk, so the check has writes from
// before the fault to find lost, not only the ones the full disk refused.
const minAckedBeforeFault = 50

// waitAcked waits until rec holds n ok produces, for at most a minute.
func waitAcked(t *testing.T, rec *history.Recorder, n int) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if got := count(rec.History(), history.Produce, history.OK); got >= n {
			return
		} else if time.Now().After(deadline) {
			t.Fatalf("only %d produces acknowledged after a minute, want %d before the fault", got, n)
		}
		time.Sleep(50 * time.Millisecond) // polling the workload's history
	}
}

// count is the operations of kind (and outcome, "" any) in h.
func count(h history.History, kind history.Kind, outcome history.Outcome) int {
	n := 0
	for _, op := range h {
		if op.Kind == kind && (outcome == "" || op.Outcome == outcome) {
			n++
		}
	}
	return n
}

// watched is a nemesis that says whether its fault is in force: on from
// the moment Start has made it until Heal begins to undo it.
type watched struct {
	harness.Nemesis
	on atomic.Bool
}

func (w *watched) Start(rng *rand.Rand, target string) (string, error) {
	what, err := w.Nemesis.Start(rng, target)
	w.on.Store(err == nil)
	return what, err
}

func (w *watched) Heal() error {
	w.on.Store(false)
	return w.Nemesis.Heal()
}

// loadAttempt is one load run and what its report says.
type loadAttempt struct {
	rep        *jobs.RunReport
	err        error
	duringFull bool // the disk was full from before it began until it ended
}

// TestLoaderDiskFull: the loader's warehouse is a small tmpfs that fills up
// while records stream in, after the first loads (and at least 50
// acknowledged records): the load runs while it is full must fail and their
// run reports must say so (status failed, the error named); once it is
// freed the loads catch up to the final read. Read back with DuckDB, every
// acknowledged record is loaded exactly once (load-duplicate, load-lost,
// and load-incomplete for one the loads were waited for and never
// committed).
func TestLoaderDiskFull(t *testing.T) {
	r := harness.NewRun(t, "loader-disk-full", 4*time.Second)
	b := startBroker(t, r, "broker", "num.partitions=3\n")
	sluice.CreateTopic(t, b.HostPort, "chaos", 3)
	// The filler takes whatever is free, so the size only has to hold what the
	// run produces: about 160 bytes a record loaded in 100-record tasks, at the
	// producer's 200 records a second, is 2 MiB a minute (a 3-minute run
	// outgrew a fixed 4 MiB after the heal, and the catch-up loads then failed
	// for want of room, not of recovery).
	wh := r.Disk(r.WorkDir("warehouse"), warehouseDiskSize(r.Duration))
	spec, err := workload.LoadSpec(r.WorkDir("jobs"), workload.LoadConfig{Name: "chaos-disk-full", Bootstrap: []string{b.HostPort},
		Topic: "chaos", Warehouse: wh.Dir, MaxRecordsPerTask: 100})
	if err != nil {
		t.Fatal(err)
	}
	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	full := &watched{Nemesis: &harness.Full{Disks: map[string]*harness.Disk{"warehouse": wh}}}
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps:   []harness.Step{{At: 0, Hold: r.Duration, Nemesis: "disk-full", Target: "warehouse"}},
		Nemeses: []harness.Nemesis{full}}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+2*time.Minute)
	defer cancel()
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 1, nil, 5*time.Millisecond)
	waitAcked(t, rec, minAckedBeforeFault)

	var attempts []loadAttempt
	runLoad := func() loadAttempt {
		before := full.on.Load()
		rep, err := workload.RunLoad(ctx, rec, 10, spec, jobs.Options{})
		a := loadAttempt{rep: rep, err: err, duringFull: before && full.on.Load()}
		attempts = append(attempts, a)
		return a
	}
	if a := runLoad(); a.err != nil {
		t.Fatalf("the load before the fault failed: %v", a.err)
	}
	played := make(chan error, 1)
	go func() { played <- sched.Play(ctx) }()
	var playErr error
	for done := false; !done; {
		select {
		case playErr = <-played:
			done = true
		case <-time.After(300 * time.Millisecond): // between two load runs, as a schedule would space them
			if full.on.Load() {
				runLoad() // each run is waited for to its end before the next
			}
		}
	}
	if playErr != nil {
		t.Error(playErr)
	}
	load.stop()
	final := finalRead(t, rec, b.HostPort, "chaos")
	ends := map[int32]int64{}
	for _, rg := range final.Ranges {
		ends[rg.Partition] = rg.End
	}
	r.Note("loader", "catching up", fmt.Sprintf("to high watermarks %v", ends))
	for i := 0; ; i++ { // the loads after the heal, each to its end, until they reach the final read
		a := runLoad()
		got, merr := manifestEnds(wh.Dir) // the chaos topic's loadPartitions (3)
		caught := merr == nil
		for p, end := range ends {
			caught = caught && got[p] >= end
		}
		if caught {
			break
		}
		if i == 20 {
			t.Errorf("20 loads after the disk was freed did not reach %v: at %v (last run: %v); the warehouse holds %s", ends, got, a.err, diskUsage(wh.Dir))
			break
		}
	}
	usage := diskUsage(wh.Dir)
	r.Note("warehouse", "after the catch-up", usage)
	t.Logf("warehouse (%d bytes) after the catch-up: %s", wh.Size, usage)
	if _, err := workload.ReadWarehouse(ctx, rec, 11, wh.Dir, "chaos", []int32{0, 1, 2}, final.Ranges); err != nil {
		t.Error(err)
	}
	st.close()
	closeHistory()
	h := rec.History()
	failed, reported := 0, 0
	var bad []string
	for _, a := range attempts {
		if !a.duringFull {
			continue
		}
		if a.err == nil {
			bad = append(bad, fmt.Sprintf("run %s succeeded on a full disk", runID(a.rep)))
			continue
		}
		failed++
		switch {
		case a.rep == nil:
			bad = append(bad, fmt.Sprintf("a run on the full disk failed (%v) without a report", a.err))
		case a.rep.Status != "failed" || len(a.rep.Errors) == 0:
			bad = append(bad, fmt.Sprintf("run %s failed (%v) but its report says status %q, errors %q", a.rep.ID, a.err, a.rep.Status, a.rep.Errors))
		default:
			reported++
		}
	}
	res := history.Check(h)
	for _, msg := range bad {
		res.Anomalies = append(res.Anomalies, history.Anomaly{Kind: "run-report", Detail: msg})
	}
	report(t, r, sched, h, res, st, harness.Report{History: historyPath(r), Notes: []string{
		"warehouse on a 4 MiB tmpfs, filled after the first load and freed; loads run against it while full, then catch up",
		fmt.Sprintf("%d load runs, %d while the disk was full: %d failed, %d of them with a report saying so", len(attempts), countDuring(attempts), failed, reported)}})
	if failed == 0 {
		t.Errorf("no load ran (and failed) while the disk was full: the fault went unchecked")
	}
}

func runID(rep *jobs.RunReport) string {
	if rep == nil {
		return "(no report)"
	}
	return rep.ID
}

func countDuring(as []loadAttempt) int {
	n := 0
	for _, a := range as {
		if a.duringFull {
			n++
		}
	}
	return n
}

// warehouseDiskSize is the warehouse tmpfs of a run of d: 4 MiB and 4 MiB
// more a minute (twice what the loads write).
func warehouseDiskSize(d time.Duration) int64 {
	return 4<<20 + int64(d/time.Second)*(4<<20)/60
}

// diskUsage says how the bytes under dir are spread over its directories
// two levels down (the biggest first), for a failure's report.
func diskUsage(dir string) string {
	type use struct {
		bytes int64
		files int
	}
	by := map[string]*use{}
	filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil || e.IsDir() {
			return nil
		}
		info, err := e.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(dir, filepath.Dir(p))
		if parts := strings.Split(rel, string(filepath.Separator)); len(parts) > 2 {
			rel = filepath.Join(parts[:2]...)
		}
		u := by[rel]
		if u == nil {
			u = &use{}
			by[rel] = u
		}
		u.bytes += info.Size()
		u.files++
		return nil
	})
	keys := make([]string, 0, len(by))
	for k := range by {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return by[keys[i]].bytes > by[keys[j]].bytes })
	var b strings.Builder
	for i, k := range keys {
		if i == 12 {
			break
		}
		fmt.Fprintf(&b, "%s: %d bytes in %d files; ", k, by[k].bytes, by[k].files)
	}
	return b.String()
}
