package harness

import (
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
)

// Environment variables a run reads.
const (
	// EnvSeed fixes the seed (CHAOS_SEED=N reproduces a run).
	EnvSeed = "CHAOS_SEED"
	// EnvTime is how long a scenario runs (a Go duration); unset means the
	// short fixed-seed run of `make test`.
	EnvTime = "CHAOS_TIME"
	// EnvReportDir is where reports go instead of testdata/.cache/chaos.
	EnvReportDir = "CHAOS_REPORT_DIR"
)

// ShortSeed is the seed of the short runs `make test` makes.
const ShortSeed = 19

// Run is one run of a scenario: its seed and random source, its length, its
// report directory, its network and nodes, and the events of all of them. Use
// NewRun; everything it made is undone at the test's cleanup.
type Run struct {
	// Scenario names the run ("broker-kill-acks-all").
	Scenario string
	// Seed seeds Rand; logged first, so any run can be replayed.
	Seed int64
	// Rand is the run's only random source for faults.
	Rand *rand.Rand
	// Duration is how long the faulty phase lasts.
	Duration time.Duration
	// Long reports whether CHAOS_TIME asked for a long run.
	Long bool
	// Dir is the report directory (logs/ holds the process logs).
	Dir string
	// Events is the log of everything done to the system.
	Events *Events
	// Net is the run's network.
	Net *Network
	// Begin is when the run began.
	Begin time.Time
	// Work is a scratch directory for data directories and files, removed
	// at cleanup after the nodes are dead and the disks unmounted.
	Work string

	t     testing.TB
	mu    sync.Mutex // guards nodes and disks
	nodes []*Node
	disks []*Disk
}

var runCount struct {
	sync.Mutex
	n int
}

// NewRun starts a run of scenario whose short version lasts short. It reads
// CHAOS_SEED and CHAOS_TIME, makes the report directory and the network,
// and logs the seed.
func NewRun(t testing.TB, scenario string, short time.Duration) *Run {
	t.Helper()
	SluiceBinary(t) // built first, so the run's clock starts after it
	r := &Run{Scenario: scenario, Duration: short, Begin: time.Now(), t: t, Seed: ShortSeed}
	if v := os.Getenv(EnvTime); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			t.Fatalf("harness: %s=%q: want a Go duration such as 3m", EnvTime, v)
		}
		r.Duration, r.Long = d, true
		r.Seed = time.Now().UnixNano() % 1_000_000_000
	}
	if v := os.Getenv(EnvSeed); v != "" {
		s, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("harness: %s=%q: want an integer", EnvSeed, v)
		}
		r.Seed = s
	}
	r.Rand = rand.New(rand.NewSource(r.Seed))
	r.Events = newEvents(r.Begin)
	dir, err := reportDir(scenario, r.Seed)
	if err != nil {
		t.Fatal(err)
	}
	r.Dir = dir
	if r.Work, err = os.MkdirTemp("", "sluice-chaos-"); err != nil {
		t.Fatal(err)
	}
	t.Logf("chaos %s: seed %d (reproduce: %s=%d), %s, report %s", scenario, r.Seed, EnvSeed, r.Seed, r.Duration, dir)
	runCount.Lock()
	runCount.n++
	name := fmt.Sprintf("sluice_chaos_%d_%d", os.Getpid(), runCount.n)
	runCount.Unlock()
	t.Cleanup(r.cleanup)
	if r.Net, err = NewNetwork(name, r.Events); err != nil {
		t.Fatal(err)
	}
	return r
}

var scenarioName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// reportDir makes (emptied) $CHAOS_REPORT_DIR/<scenario>-<seed>, or the same
// under testdata/.cache/chaos of the repository.
func reportDir(scenario string, seed int64) (string, error) {
	base := os.Getenv(EnvReportDir)
	if base == "" {
		root, err := kafka.RepoRoot()
		if err != nil {
			return "", err
		}
		base = filepath.Join(root, "testdata", ".cache", "chaos")
	}
	dir := filepath.Join(base, fmt.Sprintf("%s-%d", scenarioName.ReplaceAllString(scenario, "_"), seed))
	if err := os.RemoveAll(dir); err != nil {
		return "", fmt.Errorf("harness: report dir: %w", err)
	}
	if err := os.MkdirAll(logDir(dir), 0o755); err != nil {
		return "", fmt.Errorf("harness: report dir: %w", err)
	}
	return dir, nil
}

// Node makes a named node on the next address of the run's block (it does
// not start it). Its log is logs/<name>.log of the report directory.
func (r *Run) Node(spec Spec) *Node {
	r.t.Helper()
	if spec.Name == "" || len(spec.Args) == 0 {
		r.t.Fatalf("harness: a node needs a name and a command line: %+v", spec)
	}
	addr, cg, err := r.Net.attach(spec.Name)
	if err != nil {
		r.t.Fatal(err)
	}
	n := &Node{Name: spec.Name, Addr: addr, LogPath: filepath.Join(logDir(r.Dir), spec.Name+".log"), spec: spec, cgroup: cg, events: r.Events}
	r.mu.Lock()
	r.nodes = append(r.nodes, n)
	r.mu.Unlock()
	return n
}

// Reserve gives a name the next address and cgroup without a Spec yet, so a
// command line can name the node's own address; Define sets it later.
func (r *Run) Reserve(name string) *Node {
	r.t.Helper()
	addr, cg, err := r.Net.attach(name)
	if err != nil {
		r.t.Fatal(err)
	}
	n := &Node{Name: name, Addr: addr, LogPath: filepath.Join(logDir(r.Dir), name+".log"), cgroup: cg, events: r.Events}
	r.mu.Lock()
	r.nodes = append(r.nodes, n)
	r.mu.Unlock()
	return n
}

// Define sets the Spec of a reserved node (its Name stays).
func (n *Node) Define(spec Spec) {
	n.mu.Lock()
	defer n.mu.Unlock()
	spec.Name = n.Name
	n.spec = spec
}

// Disk mounts a tmpfs of size bytes on dir for the run.
func (r *Run) Disk(dir string, size int64) *Disk {
	r.t.Helper()
	d, err := MountDisk(dir, size)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.disks = append(r.disks, d)
	r.mu.Unlock()
	r.Events.add(dir, "mounted", fmt.Sprintf("tmpfs size=%d", size))
	return d
}

// LoopDisk mounts an ext4 of size bytes on a loop device (its image under
// Work) on dir for the run: a disk that can be filled and slowed.
func (r *Run) LoopDisk(dir string, size int64) *Disk {
	r.t.Helper()
	r.mu.Lock()
	image := filepath.Join(r.Work, fmt.Sprintf("disk-%d.img", len(r.disks)))
	r.mu.Unlock()
	d, err := MountLoopDisk(dir, image, size)
	if err != nil {
		r.t.Fatal(err)
	}
	r.mu.Lock()
	r.disks = append(r.disks, d)
	r.mu.Unlock()
	r.Events.add(dir, "mounted", fmt.Sprintf("ext4 on %s size=%d", d.loop, size))
	return d
}

// Nodes lists the run's nodes.
func (r *Run) Nodes() []*Node {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]*Node(nil), r.nodes...)
}

// Elapsed is the time since the run began.
func (r *Run) Elapsed() time.Duration { return time.Since(r.Begin) }

// Note adds an event of the workload or the test ("phase", "restarted all").
func (r *Run) Note(target, what, detail string) { r.Events.add(target, what, detail) }

// cleanup kills every node, unmounts the disks and removes the network.
func (r *Run) cleanup() {
	for _, n := range r.Nodes() {
		if n.Running() {
			n.Kill()
		}
	}
	r.mu.Lock()
	disks := r.disks
	r.mu.Unlock()
	for _, d := range disks {
		if err := d.Unmount(); err != nil {
			r.t.Error(err)
		}
	}
	if r.Net != nil {
		if err := r.Net.Close(); err != nil {
			r.t.Error(err)
		}
	}
	if err := os.RemoveAll(r.Work); err != nil {
		r.t.Error(err)
	}
}

// WorkDir makes (if needed) and returns a directory under Work.
func (r *Run) WorkDir(name string) string {
	r.t.Helper()
	dir := filepath.Join(r.Work, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Fatal(err)
	}
	return dir
}
