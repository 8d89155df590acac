package clock

import (
	"cmp"
	"slices"
	"sync"
	"time"
)

// Manual is a Clock that moves only when Advance, Set or Step is called.
// The timers that fall due fire inside Advance or Set as if the clock passed
// through each deadline in turn: in deadline order (ties in the order they
// were armed), each delivering its own deadline. Time never goes backwards;
// only Step moves the reading back (a wall clock stepped, no time passing).
// Safe for concurrent use (see the package doc).
type Manual struct {
	mu      sync.Mutex
	now     time.Time
	pending []*manualTimer // armed and not yet fired or stopped, in no order
	armed   uint64         // how many times a timer was armed; orders ties
}

// NewManual returns a Manual clock reading start.
func NewManual(start time.Time) *Manual { return &Manual{now: start} }

// Now returns the clock's time.
func (m *Manual) Now() time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.now
}

// NewTimer returns a timer that fires when the clock reaches Now()+d (at
// once for d <= 0).
func (m *Manual) NewTimer(d time.Duration) Timer {
	t := &manualTimer{m: m, c: make(chan time.Time, 1)}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.arm(t, d)
	return t
}

// Advance moves the clock forward by d (not at all for d <= 0) and fires
// the timers that fall due.
func (m *Manual) Advance(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if d > 0 {
		m.fireUntil(m.now.Add(d))
	}
}

// Set moves the clock forward to t (never backwards: an earlier t leaves it
// where it is) and fires the timers that fall due.
func (m *Manual) Set(t time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if t.After(m.now) {
		m.fireUntil(t)
	}
}

// Step sets the clock's reading d away, forward or back, with no time
// passing: the wall clock being stepped (by NTP, an operator, a VM
// resumed). Timers keep the time they have left, as the operating system's
// timers count elapsed time, not the wall clock's reading; so nothing fires
// in Step, and a timer armed for a minute still fires after a minute of
// Advance. It is how a test checks that code which sleeps until a deadline
// on its clock survives the clock moving under it.
func (m *Manual) Step(d time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.now = m.now.Add(d)
	for _, t := range m.pending {
		t.when = t.when.Add(d)
	}
}

// Waiters returns how many timers are pending: a test polls it to know that
// a goroutine waits on this clock before it advances it.
func (m *Manual) Waiters() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// fireUntil fires, in deadline order, every pending timer due by until and
// sets the clock to until. m.mu is held.
func (m *Manual) fireUntil(until time.Time) {
	var due []*manualTimer
	kept := m.pending[:0]
	for _, t := range m.pending {
		if t.when.After(until) {
			kept = append(kept, t)
		} else {
			due = append(due, t)
		}
	}
	clear(m.pending[len(kept):])
	m.pending = kept
	slices.SortFunc(due, func(a, b *manualTimer) int {
		if c := a.when.Compare(b.when); c != 0 {
			return c
		}
		return cmp.Compare(a.seq, b.seq)
	})
	for _, t := range due {
		m.now = t.when
		t.c <- t.when // never blocks: the channel is empty while pending
	}
	m.now = until
}

// arm makes t pending, due d from now; for d <= 0 it fires at once. t is
// stopped and its channel empty. m.mu is held.
func (m *Manual) arm(t *manualTimer, d time.Duration) {
	m.armed++
	t.when, t.seq = m.now.Add(d), m.armed
	if d <= 0 {
		t.c <- m.now
		return
	}
	m.pending = append(m.pending, t)
}

// stop removes t from the pending timers and empties its channel; it
// reports whether t was pending or held a value not yet received. m.mu is
// held.
func (m *Manual) stop(t *manualTimer) bool {
	active := false
	if i := slices.Index(m.pending, t); i >= 0 {
		m.pending = slices.Delete(m.pending, i, i+1)
		active = true
	}
	select {
	case <-t.c:
		active = true
	default:
	}
	return active
}

// manualTimer is a Timer of a Manual clock.
type manualTimer struct {
	m *Manual
	c chan time.Time // capacity 1

	// Guarded by m.mu.
	when time.Time // the deadline
	seq  uint64    // when it was armed, among the clock's timers
}

func (t *manualTimer) C() <-chan time.Time { return t.c }

func (t *manualTimer) Stop() bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	return t.m.stop(t)
}

func (t *manualTimer) Reset(d time.Duration) bool {
	t.m.mu.Lock()
	defer t.m.mu.Unlock()
	active := t.m.stop(t)
	t.m.arm(t, d)
	return active
}
