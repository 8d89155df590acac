package kafka

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SluiceBinary builds ./cmd/sluice once per test binary (into a temporary
// directory removed by Main) and returns its path. With -race tests the
// binary is built with -race too, so broker data races fail loudly.
func SluiceBinary(t testing.TB) string {
	t.Helper()
	return sluiceBinary(t, BuildTags())
}

// MutationTag is the build tag under which sluice's test hooks can be
// switched on (internal/mutate): a binary built without it ignores them.
const MutationTag = "sluice_mutation"

// MutationSluiceBinary is SluiceBinary built with MutationTag added to the
// test binary's tags, for a test that switches a hook on in the broker
// process (SLUICE_MUTATE, or a crash hook such as
// server.CrashAfterMarkersEnv). Built once per test binary.
func MutationSluiceBinary(t testing.TB) string {
	t.Helper()
	tags := BuildTags()
	if !slices.Contains(strings.Split(tags, ","), MutationTag) {
		tags = strings.Trim(tags+","+MutationTag, ",")
	}
	return sluiceBinary(t, tags)
}

// sluiceBinary builds ./cmd/sluice with tags once per test binary.
func sluiceBinary(t testing.TB, tags string) string {
	t.Helper()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	b, ok := shared.bins[tags]
	if !ok {
		b.path, b.err = buildSluice(tags)
		if shared.bins == nil {
			shared.bins = map[string]builtBinary{}
		}
		shared.bins[tags] = b
	}
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// builtBinary is a sluice binary built for one set of tags, or why not.
type builtBinary struct {
	path string
	err  error
}

func buildSluice(tags string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp("", "sluice-bin-")
	if err != nil {
		return "", err
	}
	shared.cleanup = append(shared.cleanup, func() { os.RemoveAll(dir) })
	bin := filepath.Join(dir, "sluice")
	args := []string{"build", "-o", bin}
	if tags != "" {
		args = append(args, "-tags", tags)
	}
	if raceEnabled {
		args = append(args, "-race")
	}
	cmd := exec.Command("go", append(args, "./cmd/sluice")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kafka harness: go build ./cmd/sluice: %v\n%s", err, out)
	}
	return bin, nil
}

// Sluice is a running sluice broker process.
type Sluice struct {
	// Addr is the Kafka-protocol listener the broker logged.
	Addr string
	// DataDir is the broker's --data-dir.
	DataDir string
	// Args are the extra flags it was started with.
	Args []string
	bin  string
	proc *process
}

// StartSluice starts `sluice broker --data-dir DIR --listen 127.0.0.1:0`
// (plus args) on a fresh temp dir and waits for its "listening" log line. It
// is stopped at test cleanup.
func StartSluice(t testing.TB, args ...string) *Sluice {
	t.Helper()
	return StartSluiceBinary(t, SluiceBinary(t), args...)
}

// StartSluiceBinary is StartSluice running bin (MutationSluiceBinary, say).
func StartSluiceBinary(t testing.TB, bin string, args ...string) *Sluice {
	t.Helper()
	s := &Sluice{DataDir: t.TempDir(), Args: args, bin: bin}
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// StartSluiceProcess is StartSluice for callers without a testing.TB (the
// benchmark): bin and dataDir are given, the caller stops it.
func StartSluiceProcess(bin, dataDir string, args ...string) (*Sluice, error) {
	s := &Sluice{DataDir: dataDir, Args: args, bin: bin}
	return s, s.start()
}

var listenAddr = regexp.MustCompile(`addr=("?)([^\s"]+)`)

var brokerListening = regexp.MustCompile(`^sluice broker listening on (\S+)$`)

// parseListening finds the address of `sluice broker`'s "sluice broker
// listening on ADDR" line (the default listener, printed before any
// listener serves; with several listeners their slog lines come in any
// order), or of a slog "listening" line (text or JSON handler).
func parseListening(line string) (string, bool) {
	if !strings.Contains(line, "listening") {
		return "", false
	}
	if m := brokerListening.FindStringSubmatch(strings.TrimSpace(line)); m != nil {
		return m[1], true
	}
	if strings.HasPrefix(strings.TrimSpace(line), "{") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) == nil && m["msg"] == "listening" {
			if a, ok := m["addr"].(string); ok {
				return a, true
			}
		}
		return "", false
	}
	if !strings.Contains(line, "msg=listening") && !strings.Contains(line, `msg="listening"`) {
		return "", false
	}
	if m := listenAddr.FindStringSubmatch(line); m != nil {
		return m[2], true
	}
	return "", false
}

func (s *Sluice) start() error {
	listen := "127.0.0.1:0"
	if s.Addr != "" {
		listen = s.Addr // a restart keeps the address clients know
	}
	args := append([]string{"broker", "--data-dir", s.DataDir, "--listen", listen}, s.Args...)
	lines := make(chan string, 256)
	proc, err := startProcess(exec.Command(s.bin, args...), lines)
	if err != nil {
		return fmt.Errorf("kafka harness: start sluice broker: %w", err)
	}
	s.proc = proc
	timeout := time.After(60 * time.Second)
	for {
		select {
		case line := <-lines:
			if addr, ok := parseListening(line); ok {
				s.Addr = addr
				return nil
			}
		case <-proc.done:
			return fmt.Errorf("kafka harness: sluice broker %v exited before listening:\n%s", args, proc.out.tail(4000))
		case <-timeout:
			proc.kill()
			return fmt.Errorf("kafka harness: sluice broker %v logged no \"listening\" line in 60s:\n%s", args, proc.out.tail(4000))
		}
	}
}

// PID is the broker's process id.
func (s *Sluice) PID() int { return s.proc.cmd.Process.Pid }

// Output is what the broker logged so far.
func (s *Sluice) Output() string { return s.proc.out.String() }

// Kill sends SIGKILL (an unclean stop) and waits for the process to end.
func (s *Sluice) Kill() { s.proc.kill() }

// Stop sends SIGTERM (a clean stop), then SIGKILL after 20 s.
func (s *Sluice) Stop() {
	if s.proc != nil {
		s.proc.stop(syscall.SIGTERM, 20*time.Second)
	}
}

// Restart starts the broker again on the same data dir and address.
func (s *Sluice) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	if err := s.start(); err != nil {
		t.Fatal(err)
	}
}

// ExitError reports how the process ended, nil while it runs or after a clean exit.
func (s *Sluice) ExitError() error {
	select {
	case <-s.proc.done:
		s.proc.waitMu.Lock()
		defer s.proc.waitMu.Unlock()
		return s.proc.err
	default:
		return nil
	}
}

// WaitContext waits for the process to exit or ctx to end.
func (s *Sluice) WaitContext(ctx context.Context) error {
	select {
	case <-s.proc.done:
		return s.ExitError()
	case <-ctx.Done():
		return ctx.Err()
	}
}

// BuildTags returns the -tags the running (test) binary was built with, so
// that a sluice binary built for it compiles with the same tags (make test's
// GOTAGS) and reuses the packages already compiled, instead of compiling
// arrow-go and DuckDB's bindings a second time under other tags.
func BuildTags() string {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, s := range info.Settings {
		if s.Key == "-tags" {
			return s.Value
		}
	}
	return ""
}
