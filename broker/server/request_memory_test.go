package server

import (
	"context"
	"testing"
	"time"
)

// TestRequestMemoryBound walks the rules: a frame starts only below the
// bound; one frame at a time may grow past it (the overflow pass), and the
// pass is given back when that frame is answered.
func TestRequestMemoryBound(t *testing.T) {
	m := newRequestMemory(10, newMetrics())
	c := &conn{}
	f1, f2, f3 := frameID{c, 1}, frameID{c, 2}, frameID{c, 3}
	// reserve within 20 ms, or report that it waits
	try := func(f frameID, n int64, mid bool) bool {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
		defer cancel()
		return m.reserve(ctx, f, n, mid)
	}
	if !try(f1, 6, false) || !try(f2, 6, false) {
		t.Fatal("frames starting below the bound must be admitted")
	}
	if try(f3, 1, false) {
		t.Fatal("a frame started with the bound used up")
	}
	if !try(f2, 1, true) {
		t.Fatal("a frame under way did not get the overflow pass")
	}
	if try(f1, 1, true) {
		t.Fatal("two frames beyond the bound at once")
	}
	if m.inUse() != 13 {
		t.Fatalf("in use %d, want 13", m.inUse())
	}
	m.done(f2, 7) // answered: memory and pass given back
	if !try(f1, 1, true) || !try(f3, 1, false) || m.inUse() != 8 {
		t.Fatalf("after the overflowing frame was answered: in use %d", m.inUse())
	}
	m.done(f1, 7)
	m.done(f3, 1)
	if m.inUse() != 0 {
		t.Fatalf("in use %d after every frame was answered", m.inUse())
	}
	if u := newRequestMemory(0, newMetrics()); !u.reserve(context.Background(), f1, 1<<40, false) {
		t.Fatal("queued.max.request.bytes 0 must mean no bound")
	}
}
