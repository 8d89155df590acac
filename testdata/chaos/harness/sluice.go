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
	cmd := exec.Command("go", "build", "-tags", "duckdb_arrow", "-o", bin, "./cmd/sluice")
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

const zkConfig = `tickTime=200
minSessionTimeout=400
maxSessionTimeout=30000
dataDir=%s
clientPort=%d
clientPortAddress=%s
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxClientCnxns=200
`

// ZooKeeper makes (not starts) a ZooKeeper node from Debian's zookeeper
// package (testdata/harness/zk's classpath), data under dir.
func (r *Run) ZooKeeper(name, dir string) *ZooKeeper {
	r.t.Helper()
	cp, err := zk.Classpath()
	if err != nil {
		r.t.Fatal(err)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		r.t.Fatalf("harness: java not found: %s", zk.InstallHint)
	}
	n := r.Reserve(name)
	z := &ZooKeeper{Node: n}
	port := FreePort(r.t, n.Addr)
	z.HostPort = fmt.Sprintf("%s:%d", n.Addr, port)
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		r.t.Fatal(err)
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(zkConfig, filepath.Join(dir, "data"), port, n.Addr)), 0o644); err != nil {
		r.t.Fatal(err)
	}
	n.Define(Spec{Args: []string{java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=info", "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg},
		Ready: func(line string) bool { return strings.Contains(line, "binding to port") }})
	return z
}

// Sluice makes (not starts) a node running `sluice ARGS...`; ready is the
// text of the line that means it serves.
func (r *Run) Sluice(name, ready string, args ...string) *Node {
	r.t.Helper()
	n := r.Reserve(name)
	n.Define(Spec{Args: append([]string{SluiceBinary(r.t)}, args...), Ready: func(line string) bool { return strings.Contains(line, ready) }})
	return n
}
