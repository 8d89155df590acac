package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/history"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/scheduler/cluster"
	"github.com/sluicehq/sluice/testdata/chaos/harness"
	"github.com/sluicehq/sluice/testdata/chaos/workload"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// TestLoaderClockJumps: the distributed loader — two schedulers (a leader
// and a standby), three workers, ZooKeeper — while the leading scheduler's
// clock is stepped back an hour and forward an hour (and put right at each
// heal: a second jump the other way). The schedulers run in the test
// process on harness.Stepped clocks (libfaketime cannot move a Go
// binary's clock), the workers and ZooKeeper are processes. The leader's
// clock is its loader's too: run records, the job lock's lease, attempt
// leases and recovery at planning, the completeness markers. Afterwards
// every acknowledged record must be loaded exactly once (load-lost,
// load-duplicate, load-incomplete), and no hour may carry _SUCCESS without
// a record of it acknowledged before the run that marked it began (that
// run's start read on the wall clock, from the stepped reading).
func TestLoaderClockJumps(t *testing.T) {
	r := harness.NewRun(t, "loader-clock-jumps", 8*time.Second)
	b := startBroker(t, r, "broker", fmt.Sprintf("num.partitions=%d\n", loadPartitions))
	sluice.CreateTopic(t, b.HostPort, "chaos", loadPartitions)
	zk := r.ZooKeeper("zk", r.WorkDir("zk"))
	if err := zk.Start(); err != nil {
		t.Fatal(err)
	}
	out := r.WorkDir("warehouse")
	jobsDir := r.WorkDir("jobs")
	spec := fmt.Sprintf("name: %s\nsource:\n  bootstrap: [%s]\n  topics: [chaos]\n  start: earliest\n  max_records_per_task: 300\n"+
		"decode: {format: json}\npartition: {by: hour, time_field: ts, timezone: UTC}\n"+
		"output: {uri: \"file://%s\", format: jsonl, metadata_columns: true}\nschedule: \"* * * * * *\"\n", loadJob, b.HostPort, out)
	if err := os.WriteFile(filepath.Join(jobsDir, loadJob+".yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	connect := zk.Connect("/sluice-chaos")
	for _, name := range []string{"w1", "w2", "w3"} {
		w := r.Sluice(name, "sluice worker taking tasks", "worker", "--zookeeper", connect, "--session-timeout", "2s", "--name", name)
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
	}
	clocks := map[string]*harness.Stepped{"s1": harness.NewStepped(), "s2": harness.NewStepped()}
	ctx, cancel := context.WithTimeout(context.Background(), r.Duration+3*time.Minute)
	defer cancel()
	stopSchedulers := startClockedSchedulers(ctx, t, r, clocks, connect, jobsDir)
	defer func() { stopSchedulers() }()

	rec, closeHistory := newHistory(t, r)
	st := newStamps(rec)
	events := newEventClock(time.Now())
	leader := leaderOf(zk.HostPort, "/sluice-chaos")
	sched := &harness.Schedule{Rand: r.Rand, Events: r.Events,
		Steps: harness.RandomSchedule(r.Rand, r.Duration, 2*time.Second, "clock-back", "clock-forward"),
		Nemeses: []harness.Nemesis{
			&harness.ClockStep{As: "clock-back", By: -time.Hour, Clocks: clocks, Target: leader},
			&harness.ClockStep{As: "clock-forward", By: time.Hour, Clocks: clocks, Target: leader}}}
	load := produceUnique(ctx, t, rec, b.HostPort, "chaos", 3, workload.AcksAll, 1, 2, events.encode, 20*time.Millisecond)
	if err := sched.Play(ctx); err != nil {
		t.Error(err)
	}
	load.stop()
	final := finalRead(t, rec, b.HostPort, "chaos")
	ends := map[int32]int64{}
	for _, rg := range final.Ranges {
		ends[rg.Partition] = rg.End
	}
	r.Note("loader", "catching up", fmt.Sprintf("to high watermarks %v", ends))
	// Once the clocks are put right the leader must go on loading: a cron
	// tick taken while its clock was ahead is taken afresh when the clock
	// steps back (scheduler.steppedBack). Before that, a step forward and
	// back stalled the loads for the length of the step.
	const catchUp = 20 * time.Second
	wctx, wcancel := context.WithTimeout(ctx, catchUp)
	stalled := waitLoaded(wctx, out, ends)
	wcancel()
	if stalled != nil {
		r.Note("loader", "stalled", fmt.Sprintf("loads did not catch up within %s of the clocks being put right (%v)", catchUp, stalled))
		t.Errorf("loads stalled after the clocks were put right: not caught up within %s: %v", catchUp, stalled)
	}
	stopSchedulers()
	op := rec.Invoke(0, history.LoadRead)
	loaded, err := readWarehouse(out)
	if err != nil {
		op.Complete(history.Op{Outcome: history.Fail, Error: err.Error()})
		t.Fatal(err)
	}
	op.Complete(history.Op{Outcome: history.OK, Records: loaded.records, Ranges: loaded.ranges, Want: final.Ranges})
	st.close()
	closeHistory()
	h := rec.History()
	res := history.Check(h)
	wall := func(name string, reading time.Time) time.Time {
		var earliest time.Time
		for n, clk := range clocks {
			if name != "" && n != name {
				continue
			}
			if w, ok := clk.Earliest(reading); ok && (earliest.IsZero() || w.Before(earliest)) {
				earliest = w
			}
		}
		if earliest.IsZero() { // a reading no clock took: count it as early as any could be
			earliest = reading.Add(-time.Hour)
		}
		return earliest
	}
	incomplete, marked, err := checkSuccess(out, h, st, events, loaded, wall)
	if err != nil {
		t.Error(err)
	}
	for _, msg := range incomplete {
		res.Anomalies = append(res.Anomalies, history.Anomaly{Kind: "success-incomplete", Detail: msg})
	}
	steps := 0
	for _, e := range r.Events.List() {
		if e.What == "fault" {
			steps++
		}
	}
	notes := []string{
		"2 schedulers in process on stepped clocks (logs/s1.log, logs/s2.log), 3 worker processes, ZooKeeper; the leader's clock stepped ±1h and back",
		fmt.Sprintf("%d clock steps (and as many steps back), %d hours marked _SUCCESS, %d records loaded", steps, marked, len(loaded.records))}
	early, err := markedBeforeEnd(out, wall)
	if err != nil {
		t.Error(err)
	}
	for _, msg := range early {
		// Not an anomaly of this scenario: its records' event times run hours
		// behind the wall clock, so no record of such an hour ever comes. In
		// a deployment whose event time is the wall clock it would be a
		// _SUCCESS on an hour still filling: completeness takes a run's
		// planning time as the loaded position, read on the leader's clock.
		notes = append(notes, "observed: "+msg)
		t.Logf("observed: %s", msg)
	}
	if stalled != nil {
		notes = append(notes, fmt.Sprintf("liveness: the loads stalled after the clock steps (not caught up %s after the faults)", catchUp))
	}
	report(t, r, sched, h, res, st, harness.Report{History: historyPath(r), Notes: notes})
	if marked == 0 {
		t.Errorf("no hour was marked _SUCCESS: the completeness check had nothing to check")
	}
}

// startClockedSchedulers runs two schedulers, s1 and s2, in the test
// process through ZooKeeper at connect, each on its clock of clocks and
// logging to logs/<name>.log (appended to across restarts). The returned
// func stops them and waits until they have stopped.
func startClockedSchedulers(ctx context.Context, t *testing.T, r *harness.Run, clocks map[string]*harness.Stepped, connect, jobsDir string) func() {
	t.Helper()
	sctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, name := range []string{"s1", "s2"} {
		clk := clocks[name]
		logf, err := os.OpenFile(filepath.Join(r.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		log := slog.New(slog.NewTextHandler(logf, &slog.HandlerOptions{Level: slog.LevelDebug}))
		opts := cluster.SchedulerOptions{Connect: connect, SessionTimeout: 2 * time.Second, Name: name, Logger: log,
			OnLeader: func() { r.Note(name, "leads", fmt.Sprintf("its clock %+v off", clk.Offset())) },
			Scheduler: scheduler.Options{Engine: &scheduler.LoaderEngine{}, JobsDir: jobsDir, ScanInterval: time.Second,
				MinInterval: time.Second, Logger: log, Clock: clk}}
		r.Note(name, "started", "in process")
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer logf.Close()
			if err := cluster.RunScheduler(sctx, opts); err != nil {
				t.Errorf("scheduler %s: %v", name, err)
			}
		}()
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			wg.Wait()
			for _, name := range []string{"s1", "s2"} {
				r.Note(name, "stopped", "in process")
			}
		})
	}
}

// markedBeforeEnd lists the hours marked _SUCCESS before they ended on the
// wall clock: the mark's time (read on the clock of the scheduler whose run
// marked it) mapped back through wall.
func markedBeforeEnd(out string, wall func(scheduler string, reading time.Time) time.Time) ([]string, error) {
	fsys, err := filesystem.NewLocal(out)
	if err != nil {
		return nil, err
	}
	runs, err := scheduler.NewHistory(fsys, loadJob).List()
	if err != nil {
		return nil, err
	}
	by := map[string]scheduler.RunRecord{}
	for _, run := range runs {
		by[run.ID] = run
	}
	markers, err := filepath.Glob(filepath.Join(out, "dt=*", "hr=*", scheduler.SuccessInfo))
	if err != nil {
		return nil, err
	}
	var early []string
	for _, mk := range markers {
		b, err := os.ReadFile(mk)
		if err != nil {
			return nil, err
		}
		var sr scheduler.SuccessRecord
		if err := json.Unmarshal(b, &sr); err != nil {
			return nil, fmt.Errorf("%s: %w", mk, err)
		}
		run := by[sr.Run]
		if at := wall(run.Scheduler, sr.Marked); at.Before(sr.End) {
			early = append(early, fmt.Sprintf("%s marked _SUCCESS at %s on the wall clock, before the hour ended at %s, by run %s of scheduler %q, which started at %s on its clock (%s on the wall clock)",
				sr.Directory, at.UTC().Format(time.TimeOnly), sr.End.UTC().Format(time.TimeOnly), sr.Run, run.Scheduler,
				run.Started.UTC().Format(time.TimeOnly), wall(run.Scheduler, run.Started).UTC().Format(time.TimeOnly)))
		}
	}
	return early, nil
}
