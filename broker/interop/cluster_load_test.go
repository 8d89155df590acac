package interop

import (
	"bytes"
	"context"
	"encoding/csv"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// clusterLoadJob is a load of string records from a cluster (a bootstrap
// list of every broker) into a local warehouse, many small tasks so a run
// lasts long enough to be killed in the middle.
const clusterLoadJob = `
name: cluster-load
source:
  bootstrap: [%s]
  topics: [%s]
  start: earliest
  max_records_per_task: 250
decode:
  format: string
on_bad_record: fail
partition:
  by: none
output:
  uri: %s
  format: parquet
  metadata_columns: true
`

// TestClusterLoadThroughFailover: `sluice load run` of an RF3,
// min.insync.replicas=2 topic from a three-broker bootstrap has the leader
// of partition 0 killed -9 in the middle of its run, goes on until a task of
// partition 0 commits after that kill (it may have fetched it before), and
// is killed -9 itself; more records are produced to the new leader; a
// rerun (with that broker still dead) completes, and DuckDB (`sluice query`) reads every produced record
// from the warehouse exactly once: each (_partition, _offset) of [0, high
// watermark) once, with the value produced there.
func TestClusterLoadThroughFailover(t *testing.T) {
	c := startBrokerCluster(t, 3)
	topic := newTopicName("load-failover")
	const partitions = 2
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	two := "2"
	if resp, err := kadm.NewClient(c.client()).CreateTopic(ctx, partitions, 3, map[string]*string{"min.insync.replicas": &two}, topic); err != nil || resp.Err != nil {
		t.Fatalf("create %s: %v %v", topic, err, resp.Err)
	}
	before := c.waitLeaders(topic, partitions, c.ids()...)
	produced := map[[2]int64]string{} // (partition, offset) -> value
	produce := func(cl *kgo.Client, batch string, n int) {
		t.Helper()
		var recs []*kgo.Record
		for i := 0; i < n; i++ {
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(i % partitions), Value: []byte(fmt.Sprintf("%s-%06d", batch, i))})
		}
		res := cl.ProduceSync(ctx, recs...)
		if err := res.FirstErr(); err != nil {
			t.Fatalf("produce %s: %v", batch, err)
		}
		for _, r := range res {
			produced[[2]int64{int64(r.Record.Partition), r.Record.Offset}] = string(r.Record.Value)
		}
	}
	cl := c.client(kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.RequiredAcks(kgo.AllISRAcks()),
		kgo.ProducerLinger(5*time.Millisecond), kgo.RecordDeliveryTimeout(30*time.Second))
	produce(cl, "a", 20000)

	dir := t.TempDir()
	wh := filepath.Join(dir, "warehouse")
	job := filepath.Join(dir, "job.yaml")
	spec := fmt.Sprintf(clusterLoadJob, strings.Join(c.bootstrap(), ", "), topic, "file://"+filepath.Join(wh, "pv"))
	if err := os.WriteFile(job, []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := kafka.SluiceBinary(t)
	commitsOf := func(p string) int {
		m, _ := filepath.Glob(filepath.Join(wh, "pv", "_sluice", "commits", topic, p, "*.json"))
		return len(m)
	}
	commits := func() int { return commitsOf("*") }

	// The first run: the leader of partition 0 is killed once the load has
	// committed some tasks; the load goes on (a task of partition 0
	// commits) and is killed in turn.
	load := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet", "--workers", "2")
	var stderr bytes.Buffer
	load.Stderr = &stderr
	load.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- load.Wait() }()
	deadline := time.Now().Add(30 * time.Second)
	for commits() < 3 {
		select {
		case err := <-done:
			t.Fatalf("the load ended (%v) before it could be killed mid-run (%d commits):\n%s", err, commits(), stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load committed %d tasks in 30 s:\n%s", commits(), stderr.String())
		}
	}
	leader := before[0].Leader
	c.brokers[leader].Kill()
	atLeaderKill, p0 := commits(), commitsOf("0")
	deadline = time.Now().Add(30 * time.Second)
	for commitsOf("0") == p0 {
		select {
		case err := <-done:
			t.Fatalf("the load ended (%v) before it committed a task of partition 0 after the leader's kill:\n%s", err, stderr.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("the load committed no task of partition 0 in 30 s after its leader's kill:\n%s", stderr.String())
		}
	}
	_ = load.Process.Signal(syscall.SIGKILL)
	if err := <-done; err == nil {
		t.Fatalf("the load finished before the kill; make its run longer")
	}
	killedAt := commits()
	t.Logf("killed broker %d (leader of partition 0, epoch %d) after %d commits, the load after %d (partition 0: %d then %d)",
		leader, before[0].Epoch, atLeaderKill, killedAt, p0, commitsOf("0"))

	var live []int32
	for _, id := range c.ids() {
		if id != leader {
			live = append(live, id)
		}
	}
	after := c.waitLeaders(topic, partitions, live...)
	produce(cl, "b", 2000)

	// The rerun, to completion, with the old leader still dead.
	rerun := exec.CommandContext(ctx, bin, "load", "run", job, "--quiet")
	rerun.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if out, err := rerun.CombinedOutput(); err != nil {
		t.Fatalf("the rerun: %v\n%s", err, out)
	}

	// DuckDB reads the warehouse back through its manifests.
	query := func(sql string) [][]string {
		t.Helper()
		out, err := exec.CommandContext(ctx, bin, "query", "--warehouse", "file://"+wh, "--format", "csv", sql).Output()
		if err != nil {
			t.Fatalf("sluice query %q: %v", sql, err)
		}
		rows, err := csv.NewReader(bytes.NewReader(out)).ReadAll()
		if err != nil || len(rows) == 0 {
			t.Fatalf("sluice query %q: %v\n%s", sql, err, out)
		}
		return rows[1:] // the header
	}
	rows := query(`SELECT _partition, _offset, value FROM pv ORDER BY 1, 2`)
	seen := map[[2]int64]int{}
	wrong := 0
	for _, r := range rows {
		p, _ := strconv.ParseInt(r[0], 10, 64)
		o, _ := strconv.ParseInt(r[1], 10, 64)
		k := [2]int64{p, o}
		seen[k]++
		if want, ok := produced[k]; !ok || want != r[2] {
			if wrong++; wrong <= 5 {
				t.Errorf("the warehouse holds %q at %d/%d, %q was produced there", r[2], p, o, want)
			}
		}
	}
	missing, twice := 0, 0
	for k := range produced {
		switch seen[k] {
		case 0:
			if missing++; missing <= 5 {
				t.Errorf("record %v (%q) is not in the warehouse", k, produced[k])
			}
		case 1:
		default:
			if twice++; twice <= 5 {
				t.Errorf("record %v is in the warehouse %d times", k, seen[k])
			}
		}
	}
	if len(rows) != len(produced) || missing+twice+wrong > 0 {
		t.Fatalf("the warehouse holds %d rows for %d produced records: %d missing, %d more than once, %d wrong", len(rows), len(produced), missing, twice, wrong)
	}
	t.Logf("%d records loaded exactly once (%d commits at the kill, %d after the rerun); partition 0 leader %d -> %d",
		len(rows), killedAt, commits(), leader, after[0].Leader)
}
