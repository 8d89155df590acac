// Package clock is the broker's source of time for schedules and timeouts
// (fetch long polls, fetch sessions, retention and flush passes, and later
// group session timeouts): Wall in production, Manual in tests, which
// advance time instead of sleeping.
package clock

import (
	"sync"
	"time"
)

// Clock tells the time and makes timers that fire by that time. It
// satisfies broker/log's Clock.
type Clock interface {
	Now() time.Time
	// NewTimer returns a timer that fires once d of this clock's time has
	// passed (at once for d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a time.Timer of a Clock.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was active.
	Stop() bool
	// Reset makes the timer fire d from now; it reports whether it was active.
	Reset(d time.Duration) bool
}

// Wall is the real clock.
var Wall Clock = wall{}

type wall struct{}

func (wall) Now() time.Time                 { return time.Now() }
func (wall) NewTimer(d time.Duration) Timer { return wallTimer{time.NewTimer(d)} }

type wallTimer struct{ t *time.Timer }

func (w wallTimer) C() <-chan time.Time        { return w.t.C }
func (w wallTimer) Stop() bool                 { return w.t.Stop() }
func (w wallTimer) Reset(d time.Duration) bool { return w.t.Reset(d) }

// Manual is a Clock that moves only when Advance is called; timers fire
// inside Advance. Safe for concurrent use.
type Manual struct {
	mu     sync.Mutex
	now    time.Time
	timers map[*manualTimer]struct{} // active timers
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual {
	return &Manual{now: start, timers: map[*manualTimer]struct{}{}}
}

// Now implements Clock.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// Advance moves the clock forward by d and fires every timer that is due.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	for t := range m.timers {
		if !t.when.After(m.now) {
			delete(m.timers, t)
			select {
			case t.c <- m.now:
			default:
			}
		}
	}
}

// Timers returns how many timers are waiting to fire: a test polls it to
// know that a goroutine is waiting on this clock before it advances it.
func (m *Manual) Timers() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.timers)
}

// NewTimer implements Clock.
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

type manualTimer struct {
	m    *Manual
	c    chan time.Time
	when time.Time // guarded by m.mu
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	_, active := t.m.timers[t]
	delete(t.m.timers, t)
	return active
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	_, active := t.m.timers[t]
	t.when = t.m.now.Add(d)
	if d <= 0 {
		delete(t.m.timers, t)
		select {
		case t.c <- t.m.now:
		default:
		}
		return active
	}
	t.m.timers[t] = struct{}{}
	return active
}
