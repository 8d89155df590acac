// Package zk starts a real ZooKeeper server for tests: Debian's `zookeeper`
// package's org.apache.zookeeper.server.ZooKeeperServerMain with a config
// file on a free loopback port and a temporary data directory. A missing
// java or zookeeper.jar is a test failure that names the install step
// (`make deps-zk`), never a skip.
package zk

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// InstallHint names the make target that installs ZooKeeper.
const InstallHint = "run `make deps-zk` (or `make deps`) from the repository root; it apt-installs Debian's zookeeper package"

// JarDir is where Debian's zookeeper package puts its jars.
var JarDir = "/usr/share/java"

// Classpath returns zookeeper.jar (its manifest lists the jars it needs)
// plus slf4j-simple for its logs, or an error saying how to install them.
func Classpath() (string, error) {
	var cp []string
	for _, jar := range []string{"zookeeper.jar", "slf4j-simple.jar"} {
		p := filepath.Join(JarDir, jar)
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("zk harness: %s is missing: %s", p, InstallHint)
		}
		cp = append(cp, p)
	}
	return strings.Join(cp, string(os.PathListSeparator)), nil
}

// Server is a running ZooKeeper server process.
type Server struct {
	// Addr is the client address, 127.0.0.1:port.
	Addr string
	// Dir holds the config, the data directory and the server's log.
	Dir string

	mu   sync.Mutex
	cmd  *exec.Cmd
	out  bytes.Buffer
	done chan struct{}
}

// Start starts a ZooKeeper server for the test and stops it at cleanup.
func Start(t testing.TB) *Server {
	t.Helper()
	s, err := StartProcess(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// Connect returns Addr with a chroot appended ("127.0.0.1:2181/sluice").
func (s *Server) Connect(chroot string) string { return s.Addr + chroot }

// StartProcess starts a server in dir (created if needed); the caller stops
// it. It retries on a new port when the chosen one was taken meanwhile.
func StartProcess(dir string) (*Server, error) {
	var last error
	for try := 0; try < 3; try++ {
		s, err := start(filepath.Join(dir, fmt.Sprintf("zk%d", try)))
		if err == nil {
			return s, nil
		}
		last = err
	}
	return nil, last
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// tickTime 200 ms lets clients ask for sessions as short as 400 ms, so
// tests that wait for a dead process's session to expire stay quick.
const config = `tickTime=200
minSessionTimeout=400
maxSessionTimeout=30000
dataDir=%s
clientPort=%d
clientPortAddress=%s
admin.enableServer=false
4lw.commands.whitelist=ruok,srvr
maxClientCnxns=200
`

// ServerCommand writes dir/zoo.cfg for a server serving clients on
// addr:port, its data in dir/data, and returns the command line that runs
// it (java found on PATH, Classpath's jars, ZooKeeper's own log at
// logLevel: "warn", "info"). Start runs it; the chaos harness runs it as a
// node of its own.
func ServerCommand(dir, addr string, port int, logLevel string) ([]string, error) {
	java, err := exec.LookPath("java")
	if err != nil {
		return nil, fmt.Errorf("zk harness: java not found on PATH: %s", InstallHint)
	}
	cp, err := Classpath()
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		return nil, err
	}
	cfg := filepath.Join(dir, "zoo.cfg")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(config, data, port, addr)), 0o644); err != nil {
		return nil, err
	}
	return []string{java, "-Xmx256m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Dorg.slf4j.simpleLogger.defaultLogLevel=" + logLevel, "-Dzookeeper.jmx.log4j.disable=true",
		"-cp", cp, "org.apache.zookeeper.server.ZooKeeperServerMain", cfg}, nil
}

func start(dir string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	args, err := ServerCommand(dir, "127.0.0.1", port, "warn")
	if err != nil {
		return nil, err
	}
	s := &Server{Addr: fmt.Sprintf("127.0.0.1:%d", port), Dir: dir, done: make(chan struct{})}
	s.cmd = exec.Command(args[0], args[1:]...)
	s.cmd.Stdout, s.cmd.Stderr = (*lockedWriter)(s), (*lockedWriter)(s)
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("zk harness: start java: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if ok, _ := fourLetter(s.Addr, "ruok"); ok == "imok" {
			return s, nil
		}
		select {
		case <-s.done:
			return nil, fmt.Errorf("zk harness: ZooKeeper exited before serving on %s:\n%s", s.Addr, s.Output())
		case <-time.After(100 * time.Millisecond): // polling the port
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("zk harness: ZooKeeper did not answer ruok on %s in 60s:\n%s", s.Addr, s.Output())
		}
	}
}

type lockedWriter Server

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 4<<20 {
		w.out.Write(p)
	}
	return len(p), nil
}

// Output is what the server logged so far.
func (s *Server) Output() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// fourLetter sends a ZooKeeper four-letter command and returns the answer.
func fourLetter(addr, cmd string) (string, error) {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte(cmd)); err != nil {
		return "", err
	}
	var b strings.Builder
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		b.WriteString(sc.Text())
	}
	return strings.TrimSpace(b.String()), nil
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
		<-s.done
	}
}
