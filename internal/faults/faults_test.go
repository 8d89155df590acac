package faults

import (
	"errors"
	"testing"
)

func TestCounter(t *testing.T) {
	c := OnIndex(2)
	var errs []error
	for i := 0; i < 5; i++ {
		errs = append(errs, c.MaybeError(Write, "f"))
	}
	if errs[0] != nil || errs[1] != nil || !errors.Is(errs[2], ErrInjected) || errs[3] != nil {
		t.Fatalf("%v", errs)
	}
	if fired, what := c.Fired(); !fired || what != "op 2: write f" || c.Count() != 5 {
		t.Fatalf("%v %q %d", fired, what, c.Count())
	}
	s := &Counter{Fail: 1, Sticky: true}
	s.MaybeError(Open, "a")
	for i := 0; i < 3; i++ {
		if err := s.MaybeError(Open, "a"); !errors.Is(err, ErrInjected) {
			t.Fatalf("sticky op %d: %v", i+1, err)
		}
	}
}

// TestFilter: a filtered counter counts only what its predicates select:
// "the 2nd sync of a path under commits/".
func TestFilter(t *testing.T) {
	inj := Filter(OnIndex(1), Ops(Sync), PathHasPrefix("commits/"))
	ops := []struct {
		op   Op
		path string
		fail bool
	}{
		{Sync, "commits/a", false}, {Write, "commits/a", false}, {Sync, "tmp/a", false},
		{Sync, "commits/b", true}, {Sync, "commits/c", false},
	}
	for _, o := range ops {
		if err := inj.MaybeError(o.op, o.path); (err != nil) != o.fail {
			t.Fatalf("%s %s: %v", o.op, o.path, err)
		}
	}
	if err := Filter(Never, PathContains("x")).MaybeError(Write, "x"); err != nil {
		t.Fatal(err)
	}
}

// TestRandomly: the same seed fails the same operations; the rate is near P.
func TestRandomly(t *testing.T) {
	run := func(seed uint64) []int {
		r := Randomly(0.1, seed)
		var failed []int
		for i := 0; i < 10000; i++ {
			if r.MaybeError(Read, "f") != nil {
				failed = append(failed, i)
			}
		}
		return failed
	}
	a, b := run(42), run(42)
	if len(a) != len(b) || len(a) < 800 || len(a) > 1200 {
		t.Fatalf("%d and %d failures of 10000 at p=0.1", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatal("the same seed failed different operations")
		}
	}
}
