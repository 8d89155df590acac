package kafka

import (
	"bytes"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a started child process with its output kept for diagnostics.
type process struct {
	cmd    *exec.Cmd
	out    *lockedBuffer
	done   chan struct{}
	waitMu sync.Mutex
	err    error
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	// lines receives each complete line written, when not nil.
	lines chan string
	part  []byte
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.buf.Len() < 8<<20 {
		b.buf.Write(p)
	}
	if b.lines != nil {
		b.part = append(b.part, p...)
		for {
			i := bytes.IndexByte(b.part, '\n')
			if i < 0 {
				break
			}
			line := string(b.part[:i])
			b.part = b.part[i+1:]
			select {
			case b.lines <- line:
			default:
			}
		}
	}
	return len(p), nil
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// tail is the last n bytes of the output.
func (b *lockedBuffer) tail(n int) string {
	s := b.String()
	if len(s) > n {
		s = "…" + s[len(s)-n:]
	}
	return s
}

// startProcess starts cmd with its output captured; the child is killed if
// the test binary dies (parent-death signal).
func startProcess(cmd *exec.Cmd, lines chan string) (*process, error) {
	out := &lockedBuffer{lines: lines}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, out: out, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.waitMu.Lock()
		p.err = err
		p.waitMu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// stop sends sig, waits up to grace, then SIGKILLs the process group.
func (p *process) stop(sig syscall.Signal, grace time.Duration) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// kill SIGKILLs the process and waits for it.
func (p *process) kill() {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
}
