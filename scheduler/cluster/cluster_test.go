package cluster_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/sluicehq/sluice/scheduler"
	"github.com/sluicehq/sluice/scheduler/cluster"
	"github.com/sluicehq/sluice/testdata/harness/sluice"
	zkharness "github.com/sluicehq/sluice/testdata/harness/zk"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// TestMain lets the test binary act as a `sluice scheduler --zookeeper`
// or `sluice worker` process (with sluice's loader, as the commands run
// it) when re-executed with SLUICE_CLUSTER_ROLE set, so the test can
// kill -9 real processes.
func TestMain(m *testing.M) {
	if role := os.Getenv("SLUICE_CLUSTER_ROLE"); role != "" {
		os.Exit(runRole(role))
	}
	os.Exit(m.Run())
}

func runRole(role string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	name := os.Getenv("SLUICE_NAME")
	engine := &scheduler.LoaderEngine{}
	var err error
	switch role {
	case "worker":
		err = cluster.RunWorker(ctx, cluster.WorkerOptions{Connect: os.Getenv("SLUICE_ZK"), SessionTimeout: 2 * time.Second,
			Name: name, Engine: engine, Logger: log})
	case "scheduler":
		err = cluster.RunScheduler(ctx, cluster.SchedulerOptions{Connect: os.Getenv("SLUICE_ZK"), SessionTimeout: 2 * time.Second,
			Name: name, Logger: log, Scheduler: scheduler.Options{Engine: engine, JobsDir: os.Getenv("SLUICE_JOBS"),
				ScanInterval: time.Second, MinInterval: time.Second, Logger: log}})
	default:
		err = fmt.Errorf("unknown role %q", role)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startRole(t *testing.T, role, name string, env ...string) *proc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), append(env, "SLUICE_CLUSTER_ROLE="+role, "SLUICE_NAME="+name)...)
	p := &proc{name: name, cmd: cmd, out: &syncBuffer{}, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(20 * time.Second):
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("--- %s output:\n%s", p.name, p.out.String())
		}
	})
	return p
}

func (p *proc) kill9() {
	p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}

func waitFor(t *testing.T, what string, limit time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", limit, what)
		}
		time.Sleep(20 * time.Millisecond) // polling
	}
}

// TestCluster: one scheduler leader and a standby, three workers running
// sluice's loader (JSON lines through the writers' commit protocol), a real
// ZooKeeper and broker. A run of many small tasks starts; the worker of the
// first claimed task is killed with SIGKILL while it holds the claim, then
// the leader: the standby adopts the run, the other workers re-run the dead
// worker's task, the run completes and every record is loaded exactly once.
func TestCluster(t *testing.T) {
	zks := zkharness.Start(t)
	connect := zks.Connect("/sluice-test")

	addr := sluice.StartBroker(t, sluice.BrokerOptions{}).Addr

	const partitions, perPartition = 3, 240 // 12 tasks of 20 records per partition
	sluice.CreateTopic(t, addr, "pv", partitions)
	t0 := time.Now().Add(-3 * time.Hour).Truncate(time.Hour)
	sluice.Produce(t, addr, "pv", partitions, 0, perPartition, t0, 30*time.Second)

	jobs, out := t.TempDir(), t.TempDir()
	spec := fmt.Sprintf("name: pv\nsource:\n  bootstrap: [%s]\n  topics: [pv]\n  max_records_per_task: 20\n"+
		"decode: {format: json}\npartition: {by: hour, time_field: \"@timestamp\"}\noutput: {uri: \"file://%s\", format: jsonl}\nschedule: \"@every 2s\"\n"+
		"retry: {max_attempts: 5, backoff: 200ms}\n", addr, out)
	if err := os.WriteFile(filepath.Join(jobs, "pv.yaml"), []byte(spec), 0o644); err != nil {
		t.Fatal(err)
	}
	env := []string{"SLUICE_ZK=" + connect, "SLUICE_JOBS=" + jobs}
	procs := map[string]*proc{}
	for _, n := range []string{"sched-a", "sched-b"} {
		procs[n] = startRole(t, "scheduler", n, env...)
	}
	for _, n := range []string{"worker-1", "worker-2", "worker-3"} {
		procs[n] = startRole(t, "worker", n, env...)
	}

	servers, chroot, _ := cluster.ParseConnect(connect)
	zc, _, err := zk.Connect(servers, 5*time.Second, zk.WithLogInfo(false), zk.WithLogger(quiet{}))
	if err != nil {
		t.Fatal(err)
	}
	defer zc.Close()
	owner := func(dir string) (string, string) { // first child and its data
		names, _, err := zc.Children(chroot + dir)
		if err != nil || len(names) == 0 {
			return "", ""
		}
		b, _, err := zc.Get(chroot + dir + "/" + names[0])
		if err != nil {
			return "", ""
		}
		return names[0], string(b)
	}
	// Kill the worker of the first claimed task, mid-task.
	var claimed, victim string
	waitFor(t, "a claimed task", 90*time.Second, func() bool { claimed, victim = owner("/claims"); return victim != "" })
	t.Logf("killing %s while it holds the claim of %s", victim, claimed)
	procs[victim].kill9()
	if strings.Contains(procs[victim].out.String(), `msg="task done"`) {
		t.Logf("%s had finished its task before the kill; its claim was still held", victim)
	}
	// Then the leader, while the run is in flight.
	var leader string
	waitFor(t, "a leader", 30*time.Second, func() bool { leader, _ = leaderName(zc, chroot); return leader != "" })
	waitFor(t, "a run in flight", 30*time.Second, func() bool { n, _ := owner("/runs"); return n != "" })
	t.Logf("killing the leader %s", leader)
	procs[leader].kill9()

	// The standby takes over, adopts the run, and the run completes.
	fs, err := filesystem.Open("file://" + out)
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	hist := scheduler.NewHistory(fs, "pv")
	var adopted scheduler.RunRecord
	waitFor(t, "an adopted run to succeed and every record to be loaded", 150*time.Second, func() bool {
		runs, _ := hist.List()
		for _, r := range runs {
			if r.State == scheduler.StateSucceeded && strings.Contains(strings.Join(r.Notes, " "), "adopted") {
				adopted = r
			}
		}
		return adopted.ID != "" && len(sluice.LoadedIDs(out)) == partitions*perPartition
	})
	if newLeader, _ := leaderName(zc, chroot); newLeader == leader || newLeader == "" {
		t.Fatalf("leader after the kill: %q (killed %q)", newLeader, leader)
	}
	t.Logf("adopted run %s: %d tasks, %d records", adopted.ID, len(adopted.Tasks), adopted.Records)
	runs, _ := hist.List()
	var total int64
	for _, r := range runs {
		total += r.Records
	}
	if total != partitions*perPartition {
		t.Errorf("the runs report %d records committed, want %d", total, partitions*perPartition)
	}
	for id, n := range sluice.LoadedIDs(out) {
		if n != 1 {
			t.Errorf("record %s loaded %d times", id, n)
		}
	}

	// A zombie: stop (SIGSTOP) the worker of a claimed task of the next run
	// until its session expires and another worker re-runs the task, then let
	// it go on. Its late commit loses to the manifest already created.
	sluice.Produce(t, addr, "pv", partitions, perPartition, 160, t0.Add(2*time.Hour), time.Second)
	waitFor(t, "a task of the next run started by its worker", 90*time.Second, func() bool {
		claimed, victim = owner("/claims")
		if victim == "" || procs[victim] == nil || procs[victim].exited() {
			return false
		}
		task := strings.Split(claimed, "~")[1]
		return strings.Contains(procs[victim].out.String(), `msg="task claimed" worker=`+victim+` job=pv run=`+strings.Split(claimed, "~")[0]+` task=`+task+` `)
	})
	zombie := procs[victim]
	t.Logf("stopping %s while it runs %s", victim, claimed)
	zombie.cmd.Process.Signal(syscall.SIGSTOP)
	waitFor(t, "the other worker to load everything", 90*time.Second, func() bool {
		return len(sluice.LoadedIDs(out)) == partitions*(perPartition+160)
	})
	zombie.cmd.Process.Signal(syscall.SIGCONT)
	task := strings.Split(claimed, "~")[1]
	var done string
	// Its attempt ends as done (committed=false: the range was committed
	// when it looked; committed=true: it had committed before it was
	// stopped) or failed (the loader refuses to commit a range its
	// partition's checkpoint has moved past).
	waitFor(t, "the zombie to finish its attempt of "+task, 60*time.Second, func() bool {
		for _, line := range strings.Split(zombie.out.String(), "\n") {
			if (strings.Contains(line, `msg="task done"`) || strings.Contains(line, `msg="task failed"`)) &&
				strings.Contains(line, "task="+task+" ") {
				done = line
			}
		}
		return done != ""
	})
	t.Logf("the zombie's attempt ended: %s", strings.TrimSpace(done))
	if strings.Contains(done, "committed=true") {
		t.Logf("the zombie had committed before it was stopped; the re-run lost instead")
	}
	for id, n := range sluice.LoadedIDs(out) {
		if n != 1 {
			t.Errorf("after the zombie: record %s loaded %d times", id, n)
		}
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func leaderName(zc *zk.Conn, chroot string) (string, error) {
	b, _, err := zc.Get(chroot + "/leader")
	return string(b), err
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

// TestZooKeeperMissing: without Debian's zookeeper jars the harness fails
// with the install step, it never skips.
func TestZooKeeperMissing(t *testing.T) {
	saved := zkharness.JarDir
	zkharness.JarDir = t.TempDir()
	defer func() { zkharness.JarDir = saved }()
	_, err := zkharness.StartProcess(t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "make deps-zk") {
		t.Fatalf("err = %v, want one naming make deps-zk", err)
	}
}
