package clock_test

import (
	"sync"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

var start = time.Unix(1_700_000_000, 0)

// fired reports whether t's channel holds a value, and which.
func fired(t clock.Timer) (time.Time, bool) {
	select {
	case v := <-t.C():
		return v, true
	default:
		return time.Time{}, false
	}
}

func TestManualFiresOnAdvance(t *testing.T) {
	m := clock.NewManual(start)
	a := m.NewTimer(time.Second)
	if m.Waiters() != 1 {
		t.Fatalf("%d waiters, want 1", m.Waiters())
	}
	m.Advance(999 * time.Millisecond)
	if _, ok := fired(a); ok {
		t.Fatal("fired before its deadline")
	}
	m.Advance(time.Millisecond)
	if v, ok := fired(a); !ok || !v.Equal(start.Add(time.Second)) {
		t.Fatalf("at the deadline: fired %v, value %v", ok, v)
	}
	if m.Waiters() != 0 || !m.Now().Equal(start.Add(time.Second)) {
		t.Fatalf("after firing: %d waiters, now %v", m.Waiters(), m.Now())
	}
	m.Advance(time.Hour)
	if _, ok := fired(a); ok {
		t.Fatal("a one-shot timer fired twice")
	}
}

func TestManualDeliversEachDeadline(t *testing.T) {
	m := clock.NewManual(start)
	// Armed out of order, two with the same deadline.
	delays := []time.Duration{3 * time.Second, time.Second, 2 * time.Second, time.Second}
	timers := make([]clock.Timer, len(delays))
	for i, d := range delays {
		timers[i] = m.NewTimer(d)
	}
	// Each timer delivers its own deadline, even when one Advance passes
	// them all, and the clock ends at the target.
	m.Advance(10 * time.Second)
	for i, tm := range timers {
		if v, ok := fired(tm); !ok || !v.Equal(start.Add(delays[i])) {
			t.Fatalf("timer %d (%v): fired %v with %v", i, delays[i], ok, v)
		}
	}
	if !m.Now().Equal(start.Add(10 * time.Second)) {
		t.Fatalf("now %v", m.Now())
	}
}

// TestManualOrderSeenByReceiver: a goroutine that re-arms a timer each time
// it fires sees every deadline in turn when the test advances past several
// of them one step at a time, and the fired values are ordered.
func TestManualOrderSeenByReceiver(t *testing.T) {
	m := clock.NewManual(start)
	tm := m.NewTimer(time.Second)
	got := make(chan time.Time)
	go func() {
		for i := 0; i < 5; i++ {
			v := <-tm.C()
			tm.Reset(time.Second)
			got <- v
		}
	}()
	var prev time.Time
	for i := 1; i <= 5; i++ {
		m.Advance(time.Second)
		v := <-got
		if want := start.Add(time.Duration(i) * time.Second); !v.Equal(want) || !v.After(prev) {
			t.Fatalf("fire %d: %v, want %v after %v", i, v, want, prev)
		}
		prev = v
	}
}

func TestManualStop(t *testing.T) {
	m := clock.NewManual(start)
	a, b := m.NewTimer(time.Second), m.NewTimer(2*time.Second)
	if !a.Stop() {
		t.Fatal("Stop of a pending timer reported false")
	}
	if a.Stop() {
		t.Fatal("a second Stop reported true")
	}
	m.Advance(time.Hour)
	if _, ok := fired(a); ok {
		t.Fatal("a stopped timer fired")
	}
	// b fired but was not received: Stop empties its channel (no stale
	// value after Stop, as with time.Timer since Go 1.23) and reports it.
	if !b.Stop() {
		t.Fatal("Stop of a fired, unreceived timer reported false")
	}
	if _, ok := fired(b); ok {
		t.Fatal("a value from before Stop was received")
	}
	if m.Waiters() != 0 {
		t.Fatalf("%d waiters", m.Waiters())
	}
}

func TestManualReset(t *testing.T) {
	m := clock.NewManual(start)
	a := m.NewTimer(time.Second)
	if !a.Reset(5 * time.Second) {
		t.Fatal("Reset of a pending timer reported false")
	}
	m.Advance(4 * time.Second)
	if _, ok := fired(a); ok {
		t.Fatal("fired at the old deadline")
	}
	m.Advance(time.Second)
	if v, ok := fired(a); !ok || !v.Equal(start.Add(5*time.Second)) {
		t.Fatalf("at the new deadline: %v %v", ok, v)
	}
	if a.Reset(0) {
		t.Fatal("Reset of a received timer reported true")
	}
	if v, ok := fired(a); !ok || !v.Equal(m.Now()) {
		t.Fatalf("Reset(0): %v %v", ok, v)
	}
	z := m.NewTimer(-time.Second)
	if _, ok := fired(z); !ok || m.Waiters() != 0 {
		t.Fatalf("NewTimer(<0) did not fire at once (%d waiters)", m.Waiters())
	}
}

func TestManualNeverMovesBackwards(t *testing.T) {
	m := clock.NewManual(start)
	a := m.NewTimer(time.Minute)
	m.Set(start.Add(-time.Hour))
	m.Advance(-time.Hour)
	if !m.Now().Equal(start) {
		t.Fatalf("now %v, want %v", m.Now(), start)
	}
	m.Set(start.Add(time.Minute))
	if _, ok := fired(a); !ok || !m.Now().Equal(start.Add(time.Minute)) {
		t.Fatalf("Set to the deadline: fired %v, now %v", ok, m.Now())
	}
}

// Step moves the reading back and forth with no time passing: nothing
// fires, and a pending timer fires after the time it had left, delivering
// its deadline on the stepped reading.
func TestManualStep(t *testing.T) {
	m := clock.NewManual(start)
	a := m.NewTimer(time.Minute)
	m.Step(-time.Hour)
	if !m.Now().Equal(start.Add(-time.Hour)) || m.Waiters() != 1 {
		t.Fatalf("stepped back: now %v, %d waiters", m.Now(), m.Waiters())
	}
	m.Step(2 * time.Hour)
	if _, ok := fired(a); ok || !m.Now().Equal(start.Add(time.Hour)) {
		t.Fatalf("stepped forward: fired %v, now %v", ok, m.Now())
	}
	m.Step(-time.Hour)
	m.Advance(59 * time.Second)
	if _, ok := fired(a); ok {
		t.Fatal("fired before its minute passed")
	}
	m.Advance(time.Second)
	if v, ok := fired(a); !ok || !v.Equal(start.Add(time.Minute)) {
		t.Fatalf("after its minute: fired %v, value %v", ok, v)
	}
	b := m.NewTimer(time.Second)
	m.Step(-time.Minute)
	m.Set(m.Now().Add(time.Second)) // a second passes on the stepped reading
	if v, ok := fired(b); !ok || !v.Equal(start.Add(time.Second)) {
		t.Fatalf("a second after the step: fired %v, value %v", ok, v)
	}
}

// TestManualConcurrent runs Now, NewTimer, Stop, Reset and Advance from
// several goroutines (meaningful under -race): every timer armed for at most
// the total advance has fired or been stopped, and none is left pending.
func TestManualConcurrent(t *testing.T) {
	m := clock.NewManual(start)
	const workers, rounds = 4, 200
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < rounds; i++ {
				tm := m.NewTimer(time.Duration(1+i%3) * time.Millisecond)
				switch i % 3 {
				case 0:
					tm.Stop()
				case 1:
					tm.Reset(time.Millisecond)
					<-tm.C()
				default:
					<-tm.C()
				}
				_ = m.Now()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for {
		select {
		case <-done:
			if m.Waiters() != 0 {
				t.Fatalf("%d timers left pending", m.Waiters())
			}
			return
		default:
			m.Advance(time.Millisecond)
		}
	}
}

func TestRealAndOrReal(t *testing.T) {
	if _, ok := clock.OrReal(nil).(clock.Real); !ok {
		t.Fatal("OrReal(nil) is not Real")
	}
	m := clock.NewManual(start)
	if clock.OrReal(m) != clock.Clock(m) {
		t.Fatal("OrReal changed a given clock")
	}
	var r clock.Real
	before := time.Now()
	tm := r.NewTimer(0)
	if v := <-tm.C(); v.Before(before) {
		t.Fatalf("a real timer delivered %v, before %v", v, before)
	}
	if tm.Stop() {
		t.Fatal("Stop of a received real timer reported true")
	}
	if r.Now().Before(before) {
		t.Fatal("Real.Now went backwards")
	}
}
