package harness

import (
	"math/rand"
	"testing"
	"time"
)

// A Stepped clock jumps by each step and back by each heal of a ClockStep;
// Earliest maps its readings back to the wall clock, the earlier of two
// after a step back, none for a reading a step forward skipped.
func TestSteppedClock(t *testing.T) {
	c := NewStepped()
	near := func(what string, got, want time.Time) {
		t.Helper()
		if d := got.Sub(want); d < -time.Second || d > time.Second {
			t.Fatalf("%s: %v, want about %v", what, got, want)
		}
	}
	near("no offset", c.Now(), time.Now())
	before := c.Now()
	time.Sleep(10 * time.Millisecond) // so the step lies after the reading
	n := &ClockStep{As: "clock-back", By: -time.Hour, Clocks: map[string]*Stepped{"s1": c}}
	what, err := n.Start(rand.New(rand.NewSource(1)), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Log(what)
	if c.Offset() != -time.Hour {
		t.Fatalf("offset %v after a step back of an hour", c.Offset())
	}
	back := c.Now()
	near("stepped back", back, time.Now().Add(-time.Hour))
	if !back.Before(before) {
		t.Fatalf("a reading after the step back (%v) is not before one before it (%v)", back, before)
	}
	if w, ok := c.Earliest(before); !ok {
		t.Fatalf("the reading %v before the step has no wall time", before)
	} else {
		near("reading before the step", w, before)
	}
	if w, ok := c.Earliest(back); !ok {
		t.Fatal("a reading after the step back has no wall time")
	} else {
		near("reading after the step", w, time.Now())
	}
	if err := n.Heal(); err != nil {
		t.Fatal(err)
	}
	if c.Offset() != 0 {
		t.Fatalf("offset %v after the heal", c.Offset())
	}
	c.Step(time.Hour)
	if _, ok := c.Earliest(time.Now().Add(30 * time.Minute)); ok {
		t.Fatal("a reading the step forward skipped (and the future) has a wall time")
	}
	if _, err := (&ClockStep{As: "x", By: time.Hour, Clocks: map[string]*Stepped{"s1": c}}).Start(nil, "s2"); err == nil {
		t.Fatal("a step of a clock not in Clocks started")
	}
}
