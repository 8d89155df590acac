package mirror

import (
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"

	"github.com/sluicehq/sluice/internal/mutate"
)

// CrashEnv is a test-only hook of a binary built with the sluice_mutation
// tag (internal/mutate): set to STAGE:N in a mirror process's environment,
// it makes the process kill itself (SIGKILL, no cleanup) the Nth time a
// transaction reaches STAGE:
//
//	copied      the copied records are flushed; the position is not written
//	positioned  the position records are flushed; EndTxn is not sent
//	committed   EndTxn(commit) returned; the session's view is not updated
//
// These are the crash points the exactly-once claim rests on
// (TestMirrorCrashPoints). Unset or empty: no effect. A build without the
// tag never reads it.
const CrashEnv = "SLUICE_TEST_MIRROR_CRASH"

// Crash stages (CrashEnv).
const (
	StageCopied     = "copied"
	StagePositioned = "positioned"
	StageCommitted  = "committed"
)

// crashPoint counts the transactions that reached its stage.
type crashPoint struct {
	stage string
	n     int
	mu    sync.Mutex // the tasks' loops share it
	seen  int
}

func crashFromEnv(log *slog.Logger) *crashPoint {
	if !mutate.Built { // a constant: production builds hold no hook
		return nil
	}
	v := os.Getenv(CrashEnv)
	if v == "" {
		return nil
	}
	stage, count, _ := strings.Cut(v, ":")
	n, err := strconv.Atoi(count)
	if err != nil || n < 1 || (stage != StageCopied && stage != StagePositioned && stage != StageCommitted) {
		log.Warn("ignoring a malformed test hook", "env", CrashEnv, "value", v)
		return nil
	}
	log.Warn("test hook armed: the mirror kills itself at a crash point", "env", CrashEnv, "stage", stage, "n", n)
	return &crashPoint{stage: stage, n: n}
}

// at kills the process the nth time a transaction (of any task) reaches
// stage.
func (c *crashPoint) at(stage string) {
	if c == nil || c.stage != stage {
		return
	}
	c.mu.Lock()
	c.seen++
	hit := c.seen == c.n
	c.mu.Unlock()
	if !hit {
		return
	}
	if p, err := os.FindProcess(os.Getpid()); err == nil {
		_ = p.Kill()
	}
	select {} // the kill is asynchronous: send nothing more
}
