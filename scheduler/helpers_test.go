package scheduler_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/server"
	"github.com/sluicehq/sluice/scheduler"
)

// startBroker runs a real sluice broker in the test process.
func startBroker(t *testing.T) string {
	t.Helper()
	srv, err := server.New(server.Options{DataDir: t.TempDir(), Config: config.Default(),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
	})
	return ln.Addr().String()
}

func createTopic(t *testing.T, addr, topic string, partitions int32) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := kadm.NewClient(cl).CreateTopics(ctx, partitions, 1, nil, topic)
	if err == nil {
		err = res.Error()
	}
	if err != nil {
		t.Fatalf("create topic %s: %v", topic, err)
	}
}

// produce writes n records per partition with log timestamps at, at+step, ...
// Each value is {"id": "<partition>-<seq>"}; seq continues from first.
func produce(t *testing.T, addr, topic string, partitions int32, first, n int, at time.Time, step time.Duration) {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var recs []*kgo.Record
	for p := int32(0); p < partitions; p++ {
		for i := 0; i < n; i++ {
			v, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%d-%d", p, first+i)})
			recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Value: v, Timestamp: at.Add(time.Duration(i) * step)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatalf("produce: %v", err)
	}
}

// writeSpec writes a job spec into dir.
func writeSpec(t *testing.T, dir, name, addr, topic, out, schedule, extra string) string {
	t.Helper()
	spec := fmt.Sprintf(`name: %s
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 50
partition:
  by: hour
  time_field: "@timestamp"
  timezone: UTC
output:
  uri: file://%s
  format: jsonl
schedule: %q
allowed_lateness: 10m
%s`, name, addr, topic, out, schedule, extra)
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitFor polls cond until it holds or 60 s pass.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond) // polling, not waiting for time to pass
	}
}

// readOutput returns every loaded record id with how often it appears.
func readOutput(t *testing.T, out string) map[string]int {
	t.Helper()
	seen := map[string]int{}
	filepath.Walk(out, func(p string, info os.FileInfo, err error) error {
		if err != nil || info.IsDir() || !strings.HasSuffix(p, ".jsonl") || strings.Contains(p, "_sluice") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var v map[string]any
			if err := json.Unmarshal([]byte(line), &v); err != nil {
				t.Fatalf("%s: %v", p, err)
			}
			seen[fmt.Sprint(v["id"])]++
		}
		return nil
	})
	return seen
}

// faultEngine wraps a real engine to fail or hold task attempts.
type faultEngine struct {
	scheduler.Engine
	mu        sync.Mutex
	failFirst int                 // fail the first n attempts of every task
	failAll   bool                // fail every attempt
	gate      chan struct{}       // when set, RunTask waits for it to close
	calls     map[string]int      // attempts per task
	entered   chan scheduler.Task // receives each task entering RunTask, when set
}

func (f *faultEngine) RunTask(ctx context.Context, job scheduler.Job, task scheduler.Task) (scheduler.TaskReport, error) {
	f.mu.Lock()
	if f.calls == nil {
		f.calls = map[string]int{}
	}
	f.calls[task.ID()]++
	n, gate, entered, failAll, failFirst := f.calls[task.ID()], f.gate, f.entered, f.failAll, f.failFirst
	f.mu.Unlock()
	if entered != nil {
		entered <- task
	}
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return scheduler.TaskReport{}, ctx.Err()
		}
	}
	if failAll || n <= failFirst {
		return scheduler.TaskReport{}, fmt.Errorf("injected failure of attempt %d of %s", n, task)
	}
	return f.Engine.RunTask(ctx, job, task)
}

func (f *faultEngine) set(fn func(f *faultEngine)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(f)
}
