// Package faults is sluice's one fault-injection vocabulary: internal/vfs's
// Faulty wrapper asks an Injector before each file-system operation, for the
// broker's log and the writers alike.
//
// An Injector is asked before each operation whether it fails. Injectors
// choose by index (the i-th operation: crash loops walk i = 0, 1, 2, …), by
// operation, by path, or with a probability, and compose:
//
//	faults.OnIndex(7)                                     the 8th operation
//	faults.Filter(faults.OnIndex(2), faults.Ops(faults.Sync))   the 3rd sync
//	faults.Filter(faults.Randomly(0.01, seed), faults.PathContains("/commits/"))
//
// A wrapper decides what a failed operation leaves behind (nothing, or a
// torn write); the injector only decides which operations fail.
package faults

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
)

// ErrInjected is the error (wrapped) of every injected failure.
var ErrInjected = errors.New("faults: injected error")

// Op names a file-system operation.
type Op string

// The operations of sluice's file-system interfaces (each wrapper uses the
// ones its interface has).
const (
	Create         Op = "create"
	WriteExclusive Op = "writeexclusive"
	Open           Op = "open"
	Remove         Op = "remove"
	RemoveAll      Op = "removeall"
	Rename         Op = "rename"
	Mkdir          Op = "mkdir"
	List           Op = "list"
	Stat           Op = "stat"
	SyncDir        Op = "syncdir"
	Read           Op = "read"
	Write          Op = "write"
	Sync           Op = "sync"
	Truncate       Op = "truncate"
	Size           Op = "size"
	Close          Op = "close"
)

func (o Op) String() string { return string(o) }

// Injector decides whether an operation fails: a non-nil error (wrapping
// ErrInjected) fails it. It is called concurrently.
type Injector interface {
	MaybeError(op Op, path string) error
}

func injected(op Op, path, why string) error {
	return fmt.Errorf("%w (%s %s, %s)", ErrInjected, op, path, why)
}

// Counter fails by index: it counts the operations it is asked about and
// fails the one with index Fail (0-based; negative: never). With Sticky set
// every later operation fails too, as after a crash or a disk gone away.
type Counter struct {
	Fail   int64
	Sticky bool

	n      atomic.Int64
	failed atomic.Bool
	mu     sync.Mutex // guards what
	what   string
}

// OnIndex returns a Counter failing operation i and only it.
func OnIndex(i int64) *Counter { return &Counter{Fail: i} }

// MaybeError implements Injector.
func (c *Counter) MaybeError(op Op, path string) error {
	i := c.n.Add(1) - 1
	if (c.Sticky && c.failed.Load()) || i == c.Fail {
		if c.failed.CompareAndSwap(false, true) {
			c.mu.Lock()
			c.what = fmt.Sprintf("op %d: %s %s", i, op, path)
			c.mu.Unlock()
		}
		return injected(op, path, fmt.Sprintf("operation %d", i))
	}
	return nil
}

// Count returns the number of operations seen.
func (c *Counter) Count() int64 { return c.n.Load() }

// Fired reports whether the failure was injected, and which operation got it.
func (c *Counter) Fired() (bool, string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.failed.Load(), c.what
}

// Random fails each operation it is asked about with probability P, from
// a seeded source (log the seed: a run is reproducible from it).
type Random struct {
	P     float64
	mu    sync.Mutex // guards rng and fired
	rng   *rand.Rand
	fired int64
}

// Randomly returns a Random with probability p and the given seed.
func Randomly(p float64, seed uint64) *Random {
	return &Random{P: p, rng: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

// MaybeError implements Injector.
func (r *Random) MaybeError(op Op, path string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.rng.Float64() < r.P {
		r.fired++
		return injected(op, path, fmt.Sprintf("probability %g", r.P))
	}
	return nil
}

// Fired returns how many failures were injected.
func (r *Random) Fired() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.fired
}

// Predicate selects operations.
type Predicate func(op Op, path string) bool

// Ops selects the given operations.
func Ops(ops ...Op) Predicate {
	return func(op Op, _ string) bool {
		for _, o := range ops {
			if o == op {
				return true
			}
		}
		return false
	}
}

// PathContains selects operations on a path containing s.
func PathContains(s string) Predicate {
	return func(_ Op, path string) bool { return strings.Contains(path, s) }
}

// PathHasPrefix selects operations on a path starting with prefix.
func PathHasPrefix(prefix string) Predicate {
	return func(_ Op, path string) bool { return strings.HasPrefix(path, prefix) }
}

// Filter passes to inj only the operations every predicate selects; the
// others never fail and are not seen (nor counted) by inj.
func Filter(inj Injector, preds ...Predicate) Injector { return filter{inj, preds} }

type filter struct {
	inj   Injector
	preds []Predicate
}

func (f filter) MaybeError(op Op, path string) error {
	for _, p := range f.preds {
		if !p(op, path) {
			return nil
		}
	}
	return f.inj.MaybeError(op, path)
}

// Recorder passes each operation to an Injector and keeps "op path" of
// every one, in order, for a test that checks which operations a bounded
// workload makes (it keeps them all).
type Recorder struct {
	inj Injector
	mu  sync.Mutex // guards log
	log []string
}

// Record returns a Recorder in front of inj.
func Record(inj Injector) *Recorder { return &Recorder{inj: inj} }

// MaybeError implements Injector.
func (r *Recorder) MaybeError(op Op, path string) error {
	r.mu.Lock()
	r.log = append(r.log, string(op)+" "+path)
	r.mu.Unlock()
	return r.inj.MaybeError(op, path)
}

// Log returns the operations seen so far ("op path").
func (r *Recorder) Log() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.log...)
}

// Never is an Injector that fails nothing (wrappers count with it).
var Never Injector = never{}

type never struct{}

func (never) MaybeError(Op, string) error { return nil }
