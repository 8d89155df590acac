package harness

import (
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// FaketimeLib is Debian's libfaketime (package faketime).
const FaketimeLib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"

// FaketimeEnv is the environment that runs a dynamically linked program with
// its clock set by spec (libfaketime's FAKETIME syntax: "@2001-02-03
// 04:05:06" to start there, "+2h" for an offset). It moves the clock of
// programs that read it through libc — the JVM of ZooKeeper, date(1) — and
// not of Go binaries (see the package doc).
func FaketimeEnv(spec string) []string {
	return []string{"LD_PRELOAD=" + FaketimeLib, "FAKETIME=" + spec, "FAKETIME_DONT_RESET=1"}
}

// Stepped is a clock.Clock that runs with the wall clock but for an offset
// that Step changes at once, as an NTP step or `date -s` moves a machine's
// clock: readings jump, timers keep the time they have left (they are the
// wall clock's). Its readings carry no monotonic part, so every comparison
// and difference of them sees the jump, as one of times read back from a
// file or another process does. For the clock jumps of in-process sluice
// code (libfaketime cannot move a Go binary's). Safe for concurrent use.
type Stepped struct {
	mu    sync.Mutex // guards steps
	steps []clockStep
}

// clockStep is an offset in force from a wall-clock time on.
type clockStep struct {
	from   time.Time
	offset time.Duration
}

// NewStepped returns a Stepped clock with no offset, made now: no reading
// of it was taken before (Earliest).
func NewStepped() *Stepped { return &Stepped{steps: []clockStep{{from: time.Now()}}} }

// Now implements clock.Clock.
func (s *Stepped) Now() time.Time { return time.Now().Round(0).Add(s.Offset()) }

// NewTimer implements clock.Clock: a wall-clock timer.
func (s *Stepped) NewTimer(d time.Duration) clock.Timer { return clock.Real{}.NewTimer(d) }

// Offset is how far the clock is from the wall clock now.
func (s *Stepped) Offset() time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.steps[len(s.steps)-1].offset
}

// Step moves the clock by d (negative: back) at once.
func (s *Stepped) Step(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.steps = append(s.steps, clockStep{from: time.Now(), offset: s.steps[len(s.steps)-1].offset + d})
}

// Earliest is the earliest wall-clock time since the clock was made at
// which it read reading, and false if it never did (not yet, or skipped by
// a step forward). A reading taken after a step back may have been taken twice;
// the earlier bounds when the thing stamped with it happened.
func (s *Stepped) Earliest(reading time.Time) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, st := range s.steps {
		t := reading.Add(-st.offset)
		if t.Before(st.from) || (i+1 < len(s.steps) && !t.Before(s.steps[i+1].from)) || t.After(time.Now()) {
			continue
		}
		return t, true
	}
	return time.Time{}, false
}
