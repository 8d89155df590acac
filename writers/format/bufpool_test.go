package format

import "testing"

func TestRecyclerReusesZeroedBuffers(t *testing.T) {
	r := newRecycler(1 << 20)
	b := r.Allocate(1000)
	if len(b) != 1000 || cap(b) != 1024 {
		t.Fatalf("len %d cap %d, want 1000 and 1024", len(b), cap(b))
	}
	for i := range b {
		b[i] = 0xff
	}
	r.Free(b)
	c := r.Allocate(900)
	if &c[0] != &b[0] {
		t.Fatal("a freed buffer of the same class was not reused")
	}
	for i, x := range c {
		if x != 0 {
			t.Fatalf("byte %d of a reused buffer is %#x, want 0", i, x)
		}
	}
	c[0] = 7
	d := r.Reallocate(5000, c)
	if len(d) != 5000 || d[0] != 7 || d[1] != 0 {
		t.Fatalf("reallocate: len %d, d[0] %d, d[1] %d", len(d), d[0], d[1])
	}
	e := r.Allocate(1024) // c went back to the pool when it grew
	if &e[0] != &c[0] {
		t.Fatal("the buffer replaced by Reallocate was not reused")
	}
}

func TestRecyclerKeepsAtMostMaxKept(t *testing.T) {
	r := newRecycler(4096)
	a, b := r.Allocate(4096), r.Allocate(4096)
	r.Free(a)
	r.Free(b) // over the limit: dropped
	if r.kept != 4096 || len(r.free[12]) != 1 {
		t.Fatalf("kept %d bytes in %d buffers, want 4096 in 1", r.kept, len(r.free[12]))
	}
	r.Free(make([]byte, 100)) // not a power of two: not ours
	if r.kept != 4096 {
		t.Fatalf("kept %d, want 4096", r.kept)
	}
	r.reset()
	if r.kept != 0 {
		t.Fatal("reset kept buffers")
	}
}
