package harness

import (
	"context"
	"errors"
	"math/rand"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

func self(t *testing.T) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return exe
}

// server makes and starts an echo node on its own address; it returns the
// node and its host:port.
func server(t *testing.T, r *Run, name string) (*Node, string) {
	t.Helper()
	n := r.Reserve(name)
	addr := make(chan string, 1)
	n.Define(Spec{Args: []string{self(t)}, Env: []string{"CHAOS_HELPER=serve", "CHAOS_LISTEN=" + n.Addr + ":0"},
		Ready: func(line string) bool {
			if a, ok := strings.CutPrefix(line, "ready "); ok {
				addr <- a
				return true
			}
			return false
		}})
	if err := n.Start(); err != nil {
		t.Fatal(err)
	}
	return n, <-addr
}

// dialFrom runs one echo round trip to target from inside node n's cgroup
// (so with n's address) and returns "ok" or "err ...".
func dialFrom(t *testing.T, n *Node, target string) string {
	t.Helper()
	result := make(chan string, 1)
	n.Define(Spec{Args: []string{self(t)}, Env: []string{"CHAOS_HELPER=dial", "CHAOS_TARGET=" + target},
		Ready: func(line string) bool {
			if line == "ok" || strings.HasPrefix(line, "err") {
				result <- line
				return true
			}
			return false
		}})
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	defer n.Kill()
	return <-result
}

func TestNodeKillPauseRestart(t *testing.T) {
	r := NewRun(t, "harness-node", time.Second)
	n, addr := server(t, r, "echo")
	if got := echo(addr, 5*time.Second); got != "ok" {
		t.Fatalf("echo before faults: %s", got)
	}
	pid := n.PID()
	if err := n.Pause(); err != nil {
		t.Fatal(err)
	}
	if got := echo(addr, 300*time.Millisecond); got == "ok" {
		t.Fatal("a paused node answered")
	}
	if err := n.Resume(); err != nil {
		t.Fatal(err)
	}
	if got := echo(addr, 5*time.Second); got != "ok" {
		t.Fatalf("echo after resume: %s", got)
	}
	if err := n.Kill(); err != nil {
		t.Fatal(err)
	}
	if n.Running() {
		t.Fatal("running after kill -9")
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("pid %d still exists after Kill: %v", pid, err)
	}
	if err := n.Pause(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("pause of a dead node: %v, want ErrNotRunning", err)
	}
	if got := echo(addr, time.Second); got == "ok" {
		t.Fatal("a killed node answered")
	}
	n.Define(Spec{Args: []string{self(t)}, Env: []string{"CHAOS_HELPER=serve", "CHAOS_LISTEN=" + addr},
		Ready: func(line string) bool { return strings.HasPrefix(line, "ready ") }})
	if err := n.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := echo(addr, 5*time.Second); got != "ok" {
		t.Fatalf("echo after restart: %s", got)
	}
	if err := n.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	log := n.Log()
	if c := strings.Count(log, "=== harness: start"); c != 2 || n.Starts() != 2 {
		t.Fatalf("log shows %d starts (Starts %d), want 2:\n%s", c, n.Starts(), log)
	}
	var whats []string
	for _, e := range r.Events.List() {
		whats = append(whats, e.What)
	}
	want := []string{"started", "paused", "resumed", "killed", "started", "stopped"}
	if !reflect.DeepEqual(whats, want) {
		t.Fatalf("events %v, want %v", whats, want)
	}
}

func TestPartitionsByAddress(t *testing.T) {
	r := NewRun(t, "harness-partition", time.Second)
	s, addr := server(t, r, "server")
	c := r.Reserve("client")
	if got := dialFrom(t, c, addr); got != "ok" {
		t.Fatalf("before any cut: %s", got)
	}
	if !strings.Contains(s.Log(), "accepted from "+c.Addr) {
		t.Fatalf("the server did not see the client's own address %s:\n%s", c.Addr, s.Log())
	}
	cases := []struct {
		name string
		cut  func() error
	}{
		{"both ways", func() error { return r.Net.Partition([]string{c.Addr}, []string{s.Addr}) }},
		{"client to server", func() error { return r.Net.Cut(c.Addr, s.Addr) }},
		{"server to client", func() error { return r.Net.Cut(s.Addr, c.Addr) }},
		{"server loses all", func() error { return r.Net.Lossy(s.Addr, 100) }},
	}
	for _, tc := range cases {
		if err := tc.cut(); err != nil {
			t.Fatal(err)
		}
		if got := dialFrom(t, c, addr); got == "ok" {
			t.Fatalf("%s: the client reached the server through the cut", tc.name)
		}
		if tc.name != "server loses all" {
			if got := echo(addr, 5*time.Second); got != "ok" {
				t.Fatalf("%s: the test's own client (not in the cut) failed: %s", tc.name, got)
			}
		}
		if len(r.Net.Faults()) != 1 {
			t.Fatalf("%s: faults %v", tc.name, r.Net.Faults())
		}
		if err := r.Net.Heal(); err != nil {
			t.Fatal(err)
		}
		if got := dialFrom(t, c, addr); got != "ok" {
			t.Fatalf("%s: after heal: %s", tc.name, got)
		}
	}
	if err := r.Net.Lossy(s.Addr, 101); err == nil {
		t.Fatal("a loss of 101% was taken")
	}
}

// With more than two nodes a cut is of the pair it names only: a one-way
// cut of c -> s1 leaves c -> s2 and d -> s1 alone, a two-way partition of
// c from s2 leaves c -> s1 alone (what a cluster scenario's pairwise
// faults rely on).
func TestPartitionsArePairwise(t *testing.T) {
	r := NewRun(t, "harness-partition-pairs", time.Second)
	s1, addr1 := server(t, r, "s1")
	s2, addr2 := server(t, r, "s2")
	c, d := r.Reserve("c"), r.Reserve("d")
	for _, step := range []struct {
		name string
		cut  func() error
		from *Node
		to   string
		ok   bool
	}{
		{"c -> s1 cut", func() error { return r.Net.Cut(c.Addr, s1.Addr) }, c, addr1, false},
		{"c -> s1 cut", nil, c, addr2, true},
		{"c -> s1 cut", nil, d, addr1, true},
		{"c <-/-> s2", func() error { r.Net.Heal(); return r.Net.Partition([]string{c.Addr}, []string{s2.Addr}) }, c, addr2, false},
		{"c <-/-> s2", nil, c, addr1, true},
		{"c <-/-> s2", nil, d, addr2, true},
	} {
		if step.cut != nil {
			if err := step.cut(); err != nil {
				t.Fatal(err)
			}
		}
		if got := dialFrom(t, step.from, step.to); (got == "ok") != step.ok {
			t.Fatalf("%s: %s dialling %s: %s, want reachable %v (faults %v)", step.name, step.from.Name, step.to, got, step.ok, r.Net.Faults())
		}
	}
}

func TestProxyDelays(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); b := make([]byte, 64); n, _ := c.Read(b); c.Write(b[:n]) }()
		}
	}()
	p, err := NewProxy("127.0.0.1:0", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	if got := echo(p.Addr, 5*time.Second); got != "ok" {
		t.Fatalf("through the proxy: %s", got)
	}
	p.SetDelay(150 * time.Millisecond)
	start := time.Now()
	if got := echo(p.Addr, 5*time.Second); got != "ok" {
		t.Fatalf("through the slow proxy: %s", got)
	}
	if rtt := time.Since(start); rtt < 300*time.Millisecond { // two one-way delays at the least, by construction
		t.Fatalf("round trip %s through a 150ms-each-way proxy", rtt)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	if got := echo(p.Addr, time.Second); got == "ok" {
		t.Fatal("a closed proxy relayed")
	}
}

func TestDiskFillAndRelease(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	d, err := MountDisk(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Unmount()
	if !Mounted(dir) {
		t.Fatal("not mounted")
	}
	if err := d.Fill(0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), make([]byte, 8192), 0o644); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write on a full disk: %v, want ENOSPC", err)
	}
	if err := d.Release(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "x"), make([]byte, 8192), 0o644); err != nil {
		t.Fatalf("write after release: %v", err)
	}
	if err := d.Unmount(); err != nil {
		t.Fatal(err)
	}
	if Mounted(dir) {
		t.Fatal("still mounted")
	}
}

func TestRandomScheduleIsSeeded(t *testing.T) {
	a := RandomSchedule(rand.New(rand.NewSource(7)), time.Minute, 5*time.Second, "kill", "pause")
	b := RandomSchedule(rand.New(rand.NewSource(7)), time.Minute, 5*time.Second, "kill", "pause")
	c := RandomSchedule(rand.New(rand.NewSource(8)), time.Minute, 5*time.Second, "kill", "pause")
	if !reflect.DeepEqual(a, b) || len(a) == 0 {
		t.Fatalf("same seed, different schedules:\n%v\n%v", a, b)
	}
	if reflect.DeepEqual(a, c) {
		t.Fatal("seeds 7 and 8 gave the same schedule")
	}
	if len(a) < 2 || a[0].Nemesis == a[1].Nemesis {
		t.Fatalf("the first round does not name each nemesis once: %v", a)
	}
	end := time.Duration(0)
	for _, s := range a {
		if s.At < end || s.Hold <= 0 {
			t.Fatalf("steps overlap or hold nothing: %v", a)
		}
		end = s.At + s.Hold
	}
	if end > time.Minute {
		t.Fatalf("schedule runs past its total: %v", a)
	}
}

// recorder is a Nemesis that records what it was asked to do.
type recorder struct {
	calls   []string
	started chan struct{}
}

func (r *recorder) Name() string { return "rec" }
func (r *recorder) Start(rng *rand.Rand, target string) (string, error) {
	got, err := pick(rng, []string{"a", "b", "c"}, target)
	r.calls = append(r.calls, "start "+got)
	close(r.started)
	return got, err
}
func (r *recorder) Heal() error { r.calls = append(r.calls, "heal"); return nil }

func TestScheduleHealsWhenCancelled(t *testing.T) {
	rec := &recorder{started: make(chan struct{})}
	ev := newEvents(time.Now())
	s := &Schedule{Steps: []Step{{At: 0, Hold: time.Hour, Nemesis: "rec", Target: "b"}}, Nemeses: []Nemesis{rec},
		Rand: rand.New(rand.NewSource(1)), Events: ev}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- s.Play(ctx) }()
	<-rec.started
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if want := []string{"start b", "heal", "heal"}; !reflect.DeepEqual(rec.calls, want) {
		t.Fatalf("calls %v, want %v", rec.calls, want)
	}
	var whats []string
	for _, e := range ev.List() {
		whats = append(whats, e.Target+" "+e.What)
	}
	if want := []string{"schedule begins", "rec fault", "rec healed", "schedule ends"}; !reflect.DeepEqual(whats, want) {
		t.Fatalf("events %v, want %v", whats, want)
	}
	bad := &Schedule{Steps: []Step{{Nemesis: "nope"}}, Rand: rand.New(rand.NewSource(1)), Events: ev}
	if err := bad.Play(context.Background()); !errors.Is(err, ErrSchedule) {
		t.Fatalf("unknown nemesis: %v", err)
	}
}

// A run leaves no process, nft table, cgroup or mount behind, even failed.
func TestRunCleansUp(t *testing.T) {
	var table, cgroup, disk string
	var pid int
	ok := t.Run("run", func(t *testing.T) {
		r := NewRun(t, "harness-cleanup", time.Second)
		n, _ := server(t, r, "s")
		pid = n.PID()
		if err := r.Net.Lossy(n.Addr, 10); err != nil {
			t.Fatal(err)
		}
		disk = r.WorkDir("disk")
		r.Disk(disk, 1<<20)
		table, cgroup = r.Net.Table, r.Net.cgRoot
		if !TableExists(table) {
			t.Fatal("no table while running")
		}
	})
	if !ok {
		t.Fatal("the run failed")
	}
	if TableExists(table) {
		t.Errorf("nft table %s left behind", table)
	}
	if _, err := os.Stat(cgroup); !os.IsNotExist(err) {
		t.Errorf("cgroup %s left behind: %v", cgroup, err)
	}
	if Mounted(disk) {
		t.Errorf("tmpfs %s left mounted", disk)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("process %d left running: %v", pid, err)
	}
}

// libfaketime moves the clock of a C program but not of a Go binary, which
// reads the time through the vDSO without libc: the reason sluice code takes
// its clock jumps through an injected clock instead.
func TestFaketimeDoesNotMoveGo(t *testing.T) {
	if _, err := os.Stat(FaketimeLib); err != nil {
		t.Fatalf("%s is missing: run `make deps-chaos` (Debian's faketime): %v", FaketimeLib, err)
	}
	env := append(os.Environ(), FaketimeEnv("@2001-02-03 04:05:06")...)
	date := exec.Command("date", "+%Y")
	date.Env = env
	out, err := date.Output()
	if err != nil || strings.TrimSpace(string(out)) != "2001" {
		t.Fatalf("faketime does not move date(1) either: %q %v", out, err)
	}
	goNow := exec.Command(self(t))
	goNow.Env = append(env, "CHAOS_HELPER=now")
	out, err = goNow.Output()
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(out)) == "year 2001" {
		t.Fatalf("libfaketime moved a Go binary's clock (%q): the package doc's claim is wrong", out)
	}
}

// Aimed starts its nemesis on the node its Target names, whatever the
// random source would draw, and says so under its own name.
func TestAimedHitsTheTargetFound(t *testing.T) {
	r := NewRun(t, "harness-aimed", time.Second)
	a, _ := server(t, r, "a")
	b, _ := server(t, r, "b")
	for _, n := range []*Node{a, b} { // restarts by Heal: a Ready that reports no address
		n.Define(Spec{Args: []string{self(t)}, Env: []string{"CHAOS_HELPER=serve", "CHAOS_LISTEN=" + n.Addr + ":0"},
			Ready: func(line string) bool { return strings.HasPrefix(line, "ready ") }})
	}
	aimed := &Aimed{As: "kill-leader", Nemesis: &Kill{Nodes: []*Node{a, b}}, Target: func() (string, error) { return "b", nil }}
	for i := 0; i < 3; i++ { // Kill alone would draw a some of the time
		what, err := aimed.Start(rand.New(rand.NewSource(int64(i))), "")
		if err != nil || what != "b" || !a.Running() || b.Running() {
			t.Fatalf("start %d: %q %v; a running %v, b running %v", i, what, err, a.Running(), b.Running())
		}
		if err := aimed.Heal(); err != nil || !b.Running() {
			t.Fatalf("heal %d: %v; b running %v", i, err, b.Running())
		}
	}
	lost := errors.New("no leader")
	aimed.Target = func() (string, error) { return "", lost }
	if _, err := aimed.Start(r.Rand, ""); !errors.Is(err, lost) || !a.Running() || !b.Running() {
		t.Fatalf("a target not found: %v; a running %v, b running %v", err, a.Running(), b.Running())
	}
	if aimed.Name() != "kill-leader" {
		t.Fatalf("name %q", aimed.Name())
	}
}
