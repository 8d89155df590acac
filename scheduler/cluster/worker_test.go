package cluster_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/scheduler/cluster"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	zkharness "github.com/sluicehq/sluice/testdata/harness/zk"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// holdCounter is the loader's engine with its holds counted: each release
// reports the job's name on released.
type holdCounter struct {
	*scheduler.LoaderEngine
	holds    atomic.Int64
	released chan string
}

func (e *holdCounter) HoldJob(ctx context.Context, job scheduler.Job) (func(), error) {
	release, err := e.LoaderEngine.HoldJob(ctx, job)
	if err != nil {
		return nil, err
	}
	e.holds.Add(1)
	return func() { release(); e.released <- job.Name }, nil
}

// TestWorkerHoldsOneLoaderPerRun: the tasks of one run on a worker share
// one parsed job and one loader (one source client, one output file
// system): the worker's source connections are fewer than the run's
// tasks, and it takes one hold for them. The hold lasts until the run
// ends (the leader deletes /runs/<id>), or, for a run not seen to end,
// until HoldIdle passes on the worker's clock. The worker's clock is its
// engine's: the run's commits are stamped with the manual clock's time (a
// day before the wall clock's), not the wall clock's.
func TestWorkerHoldsOneLoaderPerRun(t *testing.T) {
	connect := zkharness.Start(t).Connect("/sluice-hold")
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	sluice.CreateTopic(t, addr, "pv", 2)
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	sluice.Produce(t, addr, "pv", 2, 0, 60, t0, time.Second) // 3 tasks of 20 records per partition
	out := t.TempDir()
	path := filepath.Join(t.TempDir(), "pv.yaml")
	spec := fmt.Sprintf("name: pv\nsource:\n  bootstrap: [%s]\n  topics: [pv]\n  max_records_per_task: 20\n"+
		"decode: {format: json}\npartition: {by: hour, time_field: \"@timestamp\"}\noutput: {uri: \"file://%s\", format: jsonl}\n"+
		"schedule: \"@every 2s\"\n", addr, out)
	if err := os.WriteFile(path, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}

	planner := &scheduler.LoaderEngine{}
	job, err := planner.ParseJob(path, []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	plan, err := planner.Plan(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Tasks) != 6 {
		t.Fatalf("%d tasks planned, want 6", len(plan.Tasks))
	}

	var dials atomic.Int64
	d := &net.Dialer{Timeout: 10 * time.Second}
	engine := &holdCounter{LoaderEngine: &scheduler.LoaderEngine{}, released: make(chan string, 4)}
	engine.Options.KafkaOptions = []kgo.Opt{kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, host)
	})}
	clk := clock.NewManual(time.Now().Add(-24 * time.Hour).Truncate(time.Second))
	const idle = time.Minute
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	stopped := make(chan error, 1)
	go func() {
		stopped <- cluster.RunWorker(ctx, cluster.WorkerOptions{Connect: connect, SessionTimeout: 5 * time.Second,
			Name: "worker-1", Engine: engine, Tasks: 2, Logger: log, HoldIdle: idle, Clock: clk})
	}()
	defer func() {
		cancel()
		if err := <-stopped; err != nil {
			t.Error(err)
		}
	}()

	c, err := cluster.Dial(connect, 5*time.Second, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	coord := cluster.NewCoordinator(c)
	dispatch := func(run string, tasks []scheduler.Task, attempt int) {
		t.Helper()
		rec := scheduler.RunRecord{ID: run, Job: job.Name, Started: time.Now()}
		if err := coord.Begin(ctx, rec, job, scheduler.Plan{Tasks: tasks}); err != nil {
			t.Fatal(err)
		}
		for _, task := range tasks { // in order: a partition's tasks commit in turn
			if _, err := coord.Dispatch(ctx, scheduler.RunRef{ID: run, Job: job.Name}, job, task, attempt); err != nil {
				t.Fatalf("run %s, task %s: %v", run, task, err)
			}
		}
	}
	waitReleased := func(what string) {
		t.Helper()
		select {
		case <-engine.released:
		case <-time.After(60 * time.Second):
			t.Fatalf("the worker did not release the run's hold after %s", what)
		}
	}

	dispatch("run-1", plan.Tasks, 1)
	if n := dials.Load(); n >= int64(len(plan.Tasks)) {
		t.Errorf("%d source connections for %d tasks of one run: the run's tasks did not share one loader", n, len(plan.Tasks))
	}
	if n := engine.holds.Load(); n != 1 {
		t.Errorf("%d holds for one run, want 1", n)
	}
	checkStamps(t, out, clk.Now())
	select {
	case <-engine.released:
		t.Fatal("the run's hold was released while the run was still in flight")
	default:
	}
	if err := coord.End(ctx, "run-1"); err != nil {
		t.Fatal(err)
	}
	waitReleased("the run ended")

	// A run the worker does not see end: its hold goes after HoldIdle.
	dispatch("run-2", plan.Tasks[:1], 1) // committed by run-1 already: the attempt reports it lost
	if n := engine.holds.Load(); n != 2 {
		t.Errorf("%d holds after a second run, want 2", n)
	}
	waitFor(t, "the hold of run-2 to wait for its idle timeout", 30*time.Second, func() bool { return clk.Waiters() > 0 })
	select {
	case <-engine.released:
		t.Fatal("the hold of run-2 was released before its idle timeout")
	default:
	}
	clk.Advance(idle)
	waitReleased("its idle timeout")
}

// checkStamps checks that every commit of topic pv in the output dir was
// stamped at want (the worker's clock), and that there are some.
func checkStamps(t *testing.T, dir string, want time.Time) {
	t.Helper()
	fs, err := filesystem.Open("file://" + dir)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	store := writers.NewStore(fs, writers.StoreOptions{})
	n := 0
	for p := int32(0); p < 2; p++ {
		ms, err := store.Commits("pv", p)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			n++
			if !m.Committed.Equal(want) {
				t.Errorf("commit pv/%d@%d stamped %v, want the worker's clock's %v (wall clock %v)",
					m.Partition, m.Start, m.Committed, want, time.Now())
			}
		}
	}
	if n == 0 {
		t.Fatal("no commits")
	}
}
