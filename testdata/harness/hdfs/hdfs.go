// Package hdfs starts a real HDFS (a one-DataNode MiniDFSCluster from
// org.apache.hadoop:hadoop-client-minicluster, launched by
// testdata/hdfs/MiniHDFS.java) once per test binary, on a free loopback port.
//
//	func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }
//	func TestX(t *testing.T)   { addr := hdfs.Start(t) // "127.0.0.1:PORT" }
//
// `make deps` (target deps-hdfs in testdata/mk/hdfs.mk) resolves the class
// path into testdata/.cache/hdfs/classpath.txt and compiles the Java main into
// testdata/.cache/hdfs/classes. When they are missing, Start fails the test
// with a message naming that target. The JVM exits when the test binary's
// pipe to its standard input closes, so it never outlives the tests.
package hdfs

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

var (
	mu      sync.Mutex // guards the fields below
	started bool
	addr    string
	cmd     *exec.Cmd
	stdin   io.WriteCloser
	baseDir string
	logPath string
	failure error
)

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("harness/hdfs: go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start returns the NameNode address ("127.0.0.1:PORT") of the binary's
// MiniDFSCluster, starting it on first use. It fails tb when HDFS cannot run.
func Start(tb testing.TB) string {
	tb.Helper()
	if testing.Short() {
		tb.Skip("harness/hdfs: HDFS integration test skipped in -short mode (make unit)")
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		failure = start()
	}
	if failure != nil {
		tb.Fatalf("%v", failure)
	}
	return addr
}

func start() error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	cache := filepath.Join(root, "testdata", ".cache", "hdfs")
	cpFile := filepath.Join(cache, "classpath.txt")
	classes := filepath.Join(cache, "classes")
	cp, err := os.ReadFile(cpFile)
	if err != nil {
		return fmt.Errorf("harness/hdfs: MiniDFSCluster class path missing (%s): run `make deps` (target deps-hdfs) first: %v", cpFile, err)
	}
	if _, err := os.Stat(filepath.Join(classes, "MiniHDFS.class")); err != nil {
		return fmt.Errorf("harness/hdfs: MiniHDFS.class missing in %s: run `make deps` (target deps-hdfs) first", classes)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		return fmt.Errorf("harness/hdfs: java not found on PATH: run `make deps` (target deps-hdfs installs a JDK)")
	}
	baseDir, err = os.MkdirTemp("", "sluice-minihdfs-")
	if err != nil {
		return err
	}
	logPath = filepath.Join(baseDir, "minihdfs.log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return err
	}
	cmd = exec.Command(java, "-Xmx512m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1",
		"-Djava.net.preferIPv4Stack=true",
		"-cp", strings.TrimSpace(string(cp))+string(os.PathListSeparator)+classes,
		"MiniHDFS", filepath.Join(baseDir, "data"))
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	stdin, err = cmd.StdinPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("harness/hdfs: starting java: %w", err)
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			line := sc.Text()
			if rest, ok := strings.CutPrefix(line, "MINIHDFS READY hdfs://"); ok {
				ready <- rest
			}
			fmt.Fprintln(logFile, line)
		}
		close(ready)
	}()
	select {
	case a, ok := <-ready:
		if !ok {
			cmd.Wait()
			return fmt.Errorf("harness/hdfs: MiniDFSCluster exited before it was ready; log %s:\n%s", logPath, tail(logPath))
		}
		addr = a
		return nil
	case <-time.After(3 * time.Minute):
		cmd.Process.Kill()
		cmd.Wait()
		return fmt.Errorf("harness/hdfs: MiniDFSCluster not ready after 3 minutes; log %s:\n%s", logPath, tail(logPath))
	}
}

func tail(p string) string {
	b, _ := os.ReadFile(p)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// Stop shuts the clusters down (if started; the Kerberized one and its KDC
// too) and removes their data.
func Stop() {
	stopSecure()
	mu.Lock()
	defer mu.Unlock()
	if cmd == nil {
		return
	}
	stdin.Close()
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		<-done
	}
	cmd = nil
	os.RemoveAll(baseDir)
}

// Main runs the tests and stops the cluster afterwards:
// func TestMain(m *testing.M) { os.Exit(hdfs.Main(m)) }.
func Main(m *testing.M) int {
	code := m.Run()
	Stop()
	return code
}
