package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/sluice"
	zkharness "github.com/sluicehq/sluice/testdata/harness/zk"
)

func TestSchedulerCommandsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"scheduler"},
		{"scheduler", "--jobs", filepath.Join(t.TempDir(), "missing")},
		{"scheduler", "--jobs", t.TempDir(), "--log-level", "loud"},
		{"scheduler", "--jobs", t.TempDir(), "--zookeeper", "127.0.0.1:2181/"},
		{"worker"},
		{"runs", "list", filepath.Join(t.TempDir(), "missing.yaml")},
		{"runs", "list"},
	} {
		root := newRootCommand()
		root.SetArgs(args)
		root.SetOut(&bytes.Buffer{})
		root.SetErr(&bytes.Buffer{})
		if err := root.Execute(); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

// loaderFixture is a broker in this process with a topic of n JSON records
// per partition, and a job spec loading them every second.
func loaderFixture(t *testing.T, n int) (jobsDir, spec string) {
	t.Helper()
	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr
	cl, err := kgo.NewClient(kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := kadm.NewClient(cl).CreateTopics(ctx, 2, 1, nil, "clicks"); err != nil {
		t.Fatal(err)
	}
	var recs []*kgo.Record
	at := time.Now().Add(-2 * time.Hour)
	for p := int32(0); p < 2; p++ {
		for i := 0; i < n; i++ {
			v, _ := json.Marshal(map[string]any{"id": fmt.Sprintf("%d-%d", p, i), "n": i})
			recs = append(recs, &kgo.Record{Topic: "clicks", Partition: p, Value: v, Timestamp: at.Add(time.Duration(i) * time.Second)})
		}
	}
	if err := cl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	jobsDir = t.TempDir()
	spec = filepath.Join(jobsDir, "clicks.yaml")
	body := fmt.Sprintf("name: clicks\nsource:\n  bootstrap: [%s]\n  topics: [clicks]\n  max_records_per_task: 100\n"+
		"decode: {format: json}\noutput: {uri: \"file://%s\", format: jsonl}\nschedule: \"* * * * * *\"\n", addr, t.TempDir())
	if err := os.WriteFile(spec, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return jobsDir, spec
}

// runUntilLoaded runs the commands in-process until `runs list` shows a
// succeeded run of all want records, then stops them (context cancel, as
// SIGTERM does).
func runUntilLoaded(t *testing.T, spec string, want int, commands ...[]string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errs := make(chan error, len(commands))
	for _, args := range commands {
		root := newRootCommand()
		root.SetArgs(args)
		root.SetOut(io.Discard)
		root.SetErr(io.Discard)
		go func() { errs <- root.ExecuteContext(ctx) }()
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		out, err := runCLI(t, "runs", "list", "--json", spec)
		if err == nil && strings.Contains(out, fmt.Sprintf(`"records": %d,`, want)) && strings.Contains(out, `"state": "succeeded"`) {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("no succeeded run of %d records in 90s: %v\n%s", want, err, out)
		}
		time.Sleep(50 * time.Millisecond) // polling the run history
	}
	cancel()
	for range commands {
		if err := <-errs; err != nil {
			t.Errorf("command stopped with %v", err)
		}
	}
	out, err := runCLI(t, "runs", "list", spec)
	if err != nil || !strings.Contains(out, "succeeded") || !strings.Contains(out, "RECORDS") {
		t.Fatalf("runs list: %v\n%s", err, out)
	}
}

// TestSchedulerCommandEmbedded: `sluice scheduler --jobs DIR` runs a loader
// job on its schedule with in-process workers.
func TestSchedulerCommandEmbedded(t *testing.T) {
	jobs, spec := loaderFixture(t, 300)
	runUntilLoaded(t, spec, 600, []string{"scheduler", "--jobs", jobs, "--workers", "2", "--scan-interval", "200ms", "--min-interval", "1s", "--log-level", "warn"})
}

// TestSchedulerCommandZooKeeper: `sluice scheduler --zookeeper` and two
// `sluice worker --zookeeper` run the loader job through a real ZooKeeper.
func TestSchedulerCommandZooKeeper(t *testing.T) {
	zk := zkharness.Start(t)
	jobs, spec := loaderFixture(t, 300)
	connect := zk.Connect("/sluice-cmd")
	runUntilLoaded(t, spec, 600,
		[]string{"scheduler", "--jobs", jobs, "--zookeeper", connect, "--session-timeout", "2s", "--min-interval", "1s", "--log-level", "warn", "--name", "s1"},
		[]string{"worker", "--zookeeper", connect, "--session-timeout", "2s", "--log-level", "warn", "--name", "w1"},
		[]string{"worker", "--zookeeper", connect, "--session-timeout", "2s", "--log-level", "warn", "--name", "w2", "--tasks", "2"})
}

func runCLI(t *testing.T, args ...string) (string, error) {
	t.Helper()
	var buf bytes.Buffer
	root := newRootCommand()
	root.SetArgs(args)
	root.SetOut(&buf)
	root.SetErr(&buf)
	err := root.Execute()
	return buf.String(), err
}
