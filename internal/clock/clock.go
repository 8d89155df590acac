package clock

import "time"

// Clock tells the time and makes timers that fire by that time.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a pending timer that fires once d of this clock's
	// time has passed (at once for d <= 0).
	NewTimer(d time.Duration) Timer
}

// Timer is a one-shot timer of a Clock, with the semantics of time.Timer
// since Go 1.23: after Stop or Reset returns, no value from before the call
// is received from C.
type Timer interface {
	// C delivers the time the timer fired.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether it did so:
	// false if the timer was already stopped or its value already received.
	Stop() bool
	// Reset stops the timer and makes it fire d from now (at once for
	// d <= 0); it reports what Stop would have.
	Reset(d time.Duration) bool
}

// Real is the operating system's clock. Its zero value is ready to use.
type Real struct{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// OrReal returns c, or Real when c is nil: the rule that a Clock field left
// empty means the real clock.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
