package harness

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Errors of the process layer.
var (
	// ErrNotRunning is returned by a signal sent to a node that is not running.
	ErrNotRunning = errors.New("harness: node is not running")
	// ErrRunning is returned by Start on a node that runs already.
	ErrRunning = errors.New("harness: node is running")
	// ErrNotReady is returned when a node exits or stays silent before its ready line.
	ErrNotReady = errors.New("harness: node did not become ready")
)

// Spec says how to start one named process.
type Spec struct {
	// Name names the node in logs, faults and the report ("broker", "w1").
	Name string
	// Args is the command line; Args[0] is the program.
	Args []string
	// Env is added to the test process's environment.
	Env []string
	// Dir is the working directory (empty: the test's).
	Dir string
	// Ready reports whether a line the process logged means it serves; nil
	// means ready as soon as it started.
	Ready func(line string) bool
	// ReadyTimeout bounds the wait for Ready (default 60 s).
	ReadyTimeout time.Duration
	// OnLine, if set, sees every line the process logs, in order, with the
	// number of the start it belongs to (1, 2, ...): how a workload run as
	// a node reports what it did.
	OnLine func(start int, line string)
}

// Node is one named process on its own loopback address. Its output goes to
// a log file that survives restarts (each start is headed by a marker line).
// Methods are safe for concurrent use.
type Node struct {
	// Name is the Spec's name.
	Name string
	// Addr is the node's own loopback address (127.0.0.N, no port).
	Addr string
	// LogPath is the file the process's output is appended to.
	LogPath string

	spec   Spec
	cgroup string // cgroup directory, "" without a Network
	events *Events

	mu     sync.Mutex // guards the fields below
	cmd    *exec.Cmd
	done   chan struct{} // closed when cmd has been waited for
	paused bool
	starts int
}

// Start starts the process and waits for its ready line.
func (n *Node) Start() error {
	n.mu.Lock()
	if n.cmd != nil {
		n.mu.Unlock()
		return fmt.Errorf("%w: %s", ErrRunning, n.Name)
	}
	if len(n.spec.Args) == 0 {
		n.mu.Unlock()
		return fmt.Errorf("harness: node %s has no command line (Define it)", n.Name)
	}
	log, err := os.OpenFile(n.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		n.mu.Unlock()
		return fmt.Errorf("harness: log of %s: %w", n.Name, err)
	}
	n.starts++
	fmt.Fprintf(log, "=== harness: start %d of %s at %s: %s\n", n.starts, n.Name, time.Now().UTC().Format(time.RFC3339Nano), strings.Join(n.spec.Args, " "))
	cmd := exec.Command(n.spec.Args[0], n.spec.Args[1:]...)
	cmd.Dir = n.spec.Dir
	cmd.Env = append(os.Environ(), n.spec.Env...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	attr := &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	var cg *os.File
	if n.cgroup != "" {
		if cg, err = os.Open(n.cgroup); err != nil {
			n.mu.Unlock()
			log.Close()
			return fmt.Errorf("harness: cgroup of %s: %w", n.Name, err)
		}
		attr.UseCgroupFD, attr.CgroupFD = true, int(cg.Fd())
	}
	cmd.SysProcAttr = attr
	err = cmd.Start()
	if cg != nil {
		cg.Close()
	}
	if err != nil {
		n.mu.Unlock()
		log.Close()
		return fmt.Errorf("harness: start %s: %w", n.Name, err)
	}
	done := make(chan struct{})
	n.cmd, n.done, n.paused = cmd, done, false
	start := n.starts
	n.mu.Unlock()

	ready := make(chan struct{})
	var once sync.Once
	if n.spec.Ready == nil {
		once.Do(func() { close(ready) })
	}
	copied := make(chan struct{})
	go func() { // the log: every line to the file, the first ready line signalled
		defer close(copied)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := sc.Text()
			fmt.Fprintf(log, "%s %s\n", time.Now().UTC().Format(logStamp), line)
			if n.spec.OnLine != nil {
				n.spec.OnLine(start, line)
			}
			if n.spec.Ready != nil && n.spec.Ready(line) {
				once.Do(func() { close(ready) })
			}
		}
		io.Copy(io.Discard, pr) // a line over 1 MiB: keep the pipe drained
	}()
	go func() {
		err := cmd.Wait()
		pw.Close()
		<-copied
		fmt.Fprintf(log, "=== harness: %s exited at %s: %v\n", n.Name, time.Now().UTC().Format(time.RFC3339Nano), err)
		log.Close()
		n.mu.Lock()
		if n.cmd == cmd {
			n.cmd = nil
		}
		n.mu.Unlock()
		close(done)
	}()
	timeout := n.spec.ReadyTimeout
	if timeout == 0 {
		timeout = 60 * time.Second
	}
	select {
	case <-ready:
		n.events.add(n.Name, "started", "")
		return nil
	case <-done:
		return fmt.Errorf("%w: %s exited before its ready line (log %s)", ErrNotReady, n.Name, n.LogPath)
	case <-time.After(timeout):
		n.signal(syscall.SIGKILL)
		<-done
		return fmt.Errorf("%w: %s logged no ready line in %s (log %s)", ErrNotReady, n.Name, timeout, n.LogPath)
	}
}

// Running reports whether the process runs (paused counts as running).
func (n *Node) Running() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.cmd != nil
}

// Paused reports whether the process is stopped by Pause.
func (n *Node) Paused() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.paused
}

// PID is the process id, 0 when it does not run.
func (n *Node) PID() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return 0
	}
	return n.cmd.Process.Pid
}

// signal sends sig to the node's process group.
func (n *Node) signal(sig syscall.Signal) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cmd == nil {
		return fmt.Errorf("%w: %s", ErrNotRunning, n.Name)
	}
	if err := syscall.Kill(-n.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("harness: %s to %s: %w", sig, n.Name, err)
	}
	switch sig {
	case syscall.SIGSTOP:
		n.paused = true
	case syscall.SIGCONT:
		n.paused = false
	}
	return nil
}

func (n *Node) waitChan() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done == nil {
		c := make(chan struct{})
		close(c)
		return c
	}
	return n.done
}

// Kill sends SIGKILL (kill -9, an unclean stop) and waits for the exit.
func (n *Node) Kill() error {
	done := n.waitChan()
	if err := n.signal(syscall.SIGKILL); err != nil {
		return err
	}
	<-done
	n.events.add(n.Name, "killed", "SIGKILL")
	return nil
}

// Stop sends SIGTERM (a clean stop; SIGCONT too, should it be paused), and
// SIGKILL if it has not exited after grace.
func (n *Node) Stop(grace time.Duration) error {
	done := n.waitChan()
	if err := n.signal(syscall.SIGTERM); err != nil {
		return err
	}
	n.signal(syscall.SIGCONT)
	select {
	case <-done:
		n.events.add(n.Name, "stopped", "SIGTERM")
	case <-time.After(grace):
		n.signal(syscall.SIGKILL)
		<-done
		n.events.add(n.Name, "stopped", fmt.Sprintf("SIGTERM, SIGKILL after %s", grace))
	}
	return nil
}

// Pause sends SIGSTOP to the process group.
func (n *Node) Pause() error {
	if err := n.signal(syscall.SIGSTOP); err != nil {
		return err
	}
	// SIGSTOP is delivered asynchronously: on a loaded machine the process
	// may still answer for a moment after kill(2) returns. Pause returns
	// once the kernel shows it stopped, so a test's "paused" means paused.
	if pid := n.PID(); pid != 0 {
		stat := fmt.Sprintf("/proc/%d/stat", pid)
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(2 * time.Millisecond) {
			if b, err := os.ReadFile(stat); err != nil || procStopped(b) {
				break
			}
		}
	}
	n.events.add(n.Name, "paused", "SIGSTOP")
	return nil
}

// procStopped reports whether a /proc/<pid>/stat line shows the process
// stopped (state T, or t when traced): the state follows the command's
// closing parenthesis.
func procStopped(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	return stat[i+2] == 'T' || stat[i+2] == 't'
}

// Resume sends SIGCONT to the process group.
func (n *Node) Resume() error {
	if err := n.signal(syscall.SIGCONT); err != nil {
		return err
	}
	n.events.add(n.Name, "resumed", "SIGCONT")
	return nil
}

// Restart kills the process if it runs and starts it again.
func (n *Node) Restart() error {
	if n.Running() {
		if err := n.Kill(); err != nil && !errors.Is(err, ErrNotRunning) {
			return err
		}
	}
	return n.Start()
}

// Wait waits until the process exits or timeout passes; it reports whether it exited.
func (n *Node) Wait(timeout time.Duration) bool {
	select {
	case <-n.waitChan():
		return true
	case <-time.After(timeout):
		return false
	}
}

// Starts is how many times the node was started.
func (n *Node) Starts() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.starts
}

// Log returns the node's log file as it is now.
func (n *Node) Log() string {
	b, _ := os.ReadFile(n.LogPath)
	return string(b)
}

// logStamp heads every line the harness copies into a node's log, so the
// report can show the lines around a moment of the history.
const logStamp = "15:04:05.000000"

// logDir is where the nodes of a run keep their logs.
func logDir(dir string) string { return filepath.Join(dir, "logs") }
