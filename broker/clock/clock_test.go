package clock

import (
	"testing"
	"time"
)

func TestManualTimers(t *testing.T) {
	m := NewManual(time.Unix(1000, 0))
	a, b := m.NewTimer(time.Second), m.NewTimer(3*time.Second)
	if m.Timers() != 2 {
		t.Fatalf("%d timers", m.Timers())
	}
	m.Advance(999 * time.Millisecond)
	select {
	case <-a.C():
		t.Fatal("fired early")
	default:
	}
	m.Advance(time.Millisecond)
	if got := <-a.C(); !got.Equal(time.Unix(1001, 0)) {
		t.Fatalf("fired at %v", got)
	}
	if !b.Stop() || b.Stop() {
		t.Fatal("Stop of an active, then a stopped timer")
	}
	m.Advance(time.Hour)
	select {
	case <-b.C():
		t.Fatal("a stopped timer fired")
	default:
	}
	b.Reset(0)
	<-b.C()
	if m.Timers() != 0 {
		t.Fatalf("%d timers left", m.Timers())
	}
	w := Wall.NewTimer(0)
	<-w.C()
}
