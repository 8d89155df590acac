package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
)

// TestLoaderEngine: the scheduler drives sluice's loader (package jobs):
// JSON page views into Parquet, with retry and allowed_lateness read from
// the loader's spec, and _SUCCESS counts taken from its manifests.
func TestLoaderEngine(t *testing.T) {
	h := newHarness(t)
	h.engine.Engine = &scheduler.LoaderEngine{}
	t0 := h.clock.Now()
	sluice.Produce(t, h.addr, "pv", 2, 0, 40, t0.Add(-2*time.Hour), time.Minute)
	spec := fmt.Sprintf(`name: pv-loader
source:
  bootstrap: [%s]
  topics: [pv]
  max_records_per_task: 30
decode:
  format: json
partition:
  by: hour
  time_field: "@timestamp"
output:
  uri: file://%s
  format: parquet
  metadata_columns: true
schedule: "@every 1m"
retry:
  max_attempts: 2
  backoff: 1s
allowed_lateness: 30s
`, h.addr, h.out)
	if err := os.WriteFile(filepath.Join(h.jobs, "pv.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	h.engine.set(func(f *faultEngine) { f.failFirst = 1 })
	h.start()
	h.clock.Advance(time.Minute)
	var runs []scheduler.RunRecord
	waitFor(t, "a run of the loader", func() bool {
		h.nudge(t0.Add(90 * time.Second))
		runs = h.runs("pv-loader")
		return len(runs) == 1 && runs[0].State != scheduler.StateRunning
	})
	h.stop()
	r := runs[0]
	if r.State != scheduler.StateSucceeded || r.Records != 80 || len(r.Tasks) != 4 || r.Tasks[0].Attempts != 2 {
		t.Fatalf("run: %+v", r)
	}
	// 08:00-08:39 in hour 08; planned at 10:01, lateness 30s: 08 and 09
	// (empty) are complete, 10 is not.
	if s, ok := h.success("dt=2026-12-01/hr=08"); !ok || s.Records != 80 {
		t.Fatalf("hour 08: %v %+v", ok, s)
	}
	if s, ok := h.success("dt=2026-12-01/hr=09"); !ok || s.Records != 0 {
		t.Fatalf("hour 09 (no records): %v %+v", ok, s)
	}
	if _, ok := h.success("dt=2026-12-01/hr=10"); ok {
		t.Fatal("hour 10 marked complete at 10:01")
	}
	files, _ := filepath.Glob(filepath.Join(h.out, "dt=2026-12-01", "hr=08", "*.parquet"))
	if len(files) == 0 {
		t.Fatal("no parquet files in hour 08")
	}
}

// countDials makes e's source clients count the connections they open.
func countDials(e *scheduler.LoaderEngine) *atomic.Int64 {
	dials := new(atomic.Int64)
	d := &net.Dialer{Timeout: 10 * time.Second}
	e.Options.KafkaOptions = append(e.Options.KafkaOptions, kgo.Dialer(func(ctx context.Context, network, host string) (net.Conn, error) {
		dials.Add(1)
		return d.DialContext(ctx, network, host)
	}))
	return dials
}

// loaderJob writes a JSON-to-JSONL job of topic with tasks of 10 records
// and returns it parsed by e; dials counts the connections its source
// clients open.
func loaderJob(t testing.TB, e *scheduler.LoaderEngine, addr, topic string) (scheduler.Job, *atomic.Int64) {
	t.Helper()
	dials := countDials(e)
	spec := fmt.Sprintf(`name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 10
decode:
  format: json
partition:
  by: hour
  time_field: "@timestamp"
output:
  uri: file://%s
  format: jsonl
schedule: "@every 1m"
`, topic, addr, topic, t.TempDir())
	job, err := e.ParseJob("", []byte(spec))
	if err != nil {
		t.Fatal(err)
	}
	return job, dials
}

// runPlanned plans one run of job and runs its tasks in order.
func runPlanned(t testing.TB, e *scheduler.LoaderEngine, job scheduler.Job) int64 {
	t.Helper()
	ctx := context.Background()
	plan, err := e.Plan(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	var records int64
	for _, task := range plan.Tasks {
		rep, err := e.RunTask(ctx, job, task)
		if err != nil {
			t.Fatal(err)
		}
		records += rep.Records
	}
	return records
}

// TestLoaderEngineHoldsTheLoaderForARun: within a hold (a run) the plan
// and the tasks share one source client; without one each opens its own.
func TestLoaderEngineHoldsTheLoaderForARun(t *testing.T) {
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	for _, topic := range []string{"held", "unheld"} {
		sluice.CreateTopic(t, addr, topic, 2)
		sluice.Produce(t, addr, topic, 2, 0, 50, start, time.Second)
	}
	const tasks = 10 // 2 partitions × 50 records in tasks of 10

	e := &scheduler.LoaderEngine{}
	job, dials := loaderJob(t, e, addr, "held")
	release, err := e.HoldJob(context.Background(), job)
	if err != nil {
		t.Fatal(err)
	}
	if n := runPlanned(t, e, job); n != 100 {
		t.Fatalf("held: %d records loaded, want 100", n)
	}
	release()
	release() // a second call does nothing
	if n := dials.Load(); n >= tasks {
		t.Fatalf("held: %d connections for a plan and %d tasks: the loader was not shared", n, tasks)
	}

	e = &scheduler.LoaderEngine{}
	job, dials = loaderJob(t, e, addr, "unheld")
	if n := runPlanned(t, e, job); n != 100 {
		t.Fatalf("unheld: %d records loaded, want 100", n)
	}
	if n := dials.Load(); n < tasks+1 {
		t.Fatalf("unheld: %d connections for a plan and %d tasks, want one client each", n, tasks)
	}
}

// BenchmarkLoaderEngineRun: one run of 10 small tasks with the job's
// loader held for the run (as the scheduler does) and opened per call.
func BenchmarkLoaderEngineRun(b *testing.B) {
	addr := sluice.StartBroker(b, sluice.BrokerOptions{}).Addr
	start := time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)
	seq := 0 // topic names are unique across the benchmark's rounds
	for _, held := range []bool{true, false} {
		name := map[bool]string{true: "held", false: "per-task"}[held]
		b.Run(name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				seq++
				topic := fmt.Sprintf("bench-%s-%d", name, seq)
				sluice.CreateTopic(b, addr, topic, 2)
				sluice.Produce(b, addr, topic, 2, 0, 50, start, time.Second)
				e := &scheduler.LoaderEngine{}
				job, _ := loaderJob(b, e, addr, topic)
				b.StartTimer()
				release := func() {}
				if held {
					var err error
					if release, err = e.HoldJob(context.Background(), job); err != nil {
						b.Fatal(err)
					}
				}
				runPlanned(b, e, job)
				release()
			}
		})
	}
}

// silentNameNode listens on a loopback port, accepts connections and never
// answers: an HDFS client's first request on it blocks until unblock closes
// them. accepted receives each connection as it is taken.
func silentNameNode(t *testing.T) (addr string, accepted <-chan struct{}, unblock func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	acc := make(chan struct{}, 16)
	conns := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns <- c
			acc <- struct{}{}
		}
	}()
	var once sync.Once
	unblock = func() {
		once.Do(func() {
			ln.Close()
			for {
				select {
				case c := <-conns:
					c.Close()
				default:
					return
				}
			}
		})
	}
	t.Cleanup(unblock)
	return ln.Addr().String(), acc, unblock
}

// TestLoaderEngineHoldOpensOutsideTheEngineLock: one job's loader that
// cannot open (its output's NameNode never answers) stalls neither another
// job's hold and plan nor a canceled second hold of the same job; the
// job's holds share one open.
func TestLoaderEngineHoldOpensOutsideTheEngineLock(t *testing.T) {
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	sluice.CreateTopic(t, addr, "free", 1)
	sluice.Produce(t, addr, "free", 1, 0, 10, time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC), time.Second)
	nn, accepted, unblock := silentNameNode(t)

	e := &scheduler.LoaderEngine{}
	free, _ := loaderJob(t, e, addr, "free")
	stuck, err := e.ParseJob("", []byte(fmt.Sprintf(`name: stuck
source:
  bootstrap: [%s]
  topics: [stuck]
decode:
  format: json
partition:
  by: hour
  time_field: "@timestamp"
output:
  uri: hdfs://%s/out
  format: jsonl
schedule: "@every 1m"
`, addr, nn)))
	if err != nil {
		t.Fatal(err)
	}
	holds := make(chan error, 2)
	go func() {
		_, err := e.HoldJob(context.Background(), stuck)
		holds <- err
	}()
	<-accepted // the stuck job's open is under way

	// Fails the test (instead of hanging it) if another job waits for the
	// stuck open: unblocking lets it through late.
	deadline := time.AfterFunc(30*time.Second, unblock)
	defer deadline.Stop()

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := e.HoldJob(ctx, stuck); !errors.Is(err, context.Canceled) {
		t.Errorf("a canceled second hold of the stuck job: %v, want context.Canceled", err)
	}
	release, err := e.HoldJob(context.Background(), free)
	if err != nil {
		t.Fatal(err)
	}
	n := runPlanned(t, e, free)
	release()
	select {
	case err := <-holds:
		t.Fatalf("the stuck job's hold returned (%v) before its NameNode was unblocked: another job waited for it", err)
	default:
	}
	if n != 10 {
		t.Fatalf("free: %d records loaded, want 10", n)
	}

	unblock()
	if err := <-holds; err == nil {
		t.Fatal("the stuck job's hold succeeded against a NameNode that never answered")
	}
	select {
	case <-accepted:
		t.Fatal("the stuck job's loader was opened twice")
	default:
	}
}
