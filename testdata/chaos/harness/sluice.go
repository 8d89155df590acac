package harness

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/testdata/harness/kafka"
	"github.com/sluicehq/sluice/testdata/harness/zk"
)

var binary struct {
	sync.Mutex
	dir, path string
	err       error
}

// Main runs the tests and removes the sluice binary SluiceBinary built:
// a chaos test package's TestMain is `os.Exit(harness.Main(m))`.
func Main(m *testing.M) int {
	code := m.Run()
	binary.Lock()
	if binary.dir != "" {
		os.RemoveAll(binary.dir)
	}
	binary.Unlock()
	return code
}

// SluiceBinary builds ./cmd/sluice once per test binary and returns its path.
func SluiceBinary(t testing.TB) string {
	t.Helper()
	binary.Lock()
	defer binary.Unlock()
	if binary.path == "" && binary.err == nil {
		binary.path, binary.err = buildSluice()
	}
	if binary.err != nil {
		t.Fatal(binary.err)
	}
	return binary.path
}

func buildSluice() (string, error) {
	root, err := kafka.RepoRoot()
	if err != nil {
		return "", err
	}
	if binary.dir, err = os.MkdirTemp("", "sluice-chaos-bin-"); err != nil {
		return "", err
	}
	bin := filepath.Join(binary.dir, "sluice")
	cmd := exec.Command("go", "build", "-tags", kafka.BuildTags(), "-o", bin, "./cmd/sluice")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("harness: go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin, nil
}

// FreePort returns a port free on addr now, for a node that must keep its
// port across restarts (clients and ZooKeeper know it by it).
func FreePort(t testing.TB, addr string) int {
	t.Helper()
	ln, err := net.Listen("tcp", addr+":0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// Broker is a sluice broker node: `sluice broker` on the node's address and
// a fixed port, its data directory kept across restarts.
type Broker struct {
	*Node
	// HostPort is the Kafka listener, host:port.
	HostPort string
	// DataDir is --data-dir.
	DataDir string
}

// Broker makes (not starts) a broker node named name with data in dataDir
// and extra flags (a --config FILE, --log-level).
func (r *Run) Broker(name, dataDir string, flags ...string) *Broker {
	r.t.Helper()
	n := r.Reserve(name)
	b := &Broker{Node: n, DataDir: dataDir, HostPort: fmt.Sprintf("%s:%d", n.Addr, FreePort(r.t, n.Addr))}
	args := append([]string{SluiceBinary(r.t), "broker", "--data-dir", dataDir, "--listen", b.HostPort}, flags...)
	n.Define(Spec{Args: args, Ready: func(line string) bool { return strings.Contains(line, "msg=listening") }})
	return b
}

// ZooKeeper is a ZooKeeper server node on its own address.
type ZooKeeper struct {
	*Node
	// HostPort is the client address.
	HostPort string
}

// Connect is HostPort with chroot appended.
func (z *ZooKeeper) Connect(chroot string) string { return z.HostPort + chroot }

// ZooKeeper makes (not starts) a ZooKeeper node from Debian's zookeeper
// package (testdata/harness/zk.ServerCommand: its config and command line),
// data under dir.
func (r *Run) ZooKeeper(name, dir string) *ZooKeeper {
	r.t.Helper()
	n := r.Reserve(name)
	port := FreePort(r.t, n.Addr)
	args, err := zk.ServerCommand(dir, n.Addr, port, "info")
	if err != nil {
		r.t.Fatal(err)
	}
	n.Define(Spec{Args: args, Ready: func(line string) bool { return strings.Contains(line, "binding to port") }})
	return &ZooKeeper{Node: n, HostPort: fmt.Sprintf("%s:%d", n.Addr, port)}
}

// Sluice makes (not starts) a node running `sluice ARGS...`; ready is the
// text of the line that means it serves.
func (r *Run) Sluice(name, ready string, args ...string) *Node {
	r.t.Helper()
	n := r.Reserve(name)
	n.Define(Spec{Args: append([]string{SluiceBinary(r.t)}, args...), Ready: func(line string) bool { return strings.Contains(line, ready) }})
	return n
}
