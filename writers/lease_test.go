package writers

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/format"
)

// testClock is a clock.Manual tests move by hand (Advance); a wait on it
// (the store's backoff between re-reads) moves it by the wait at once, so
// the store waits out its deadlines without wall time passing.
type testClock struct {
	*clock.Manual
	waits atomic.Int64 // timers made: the store's waits
}

func newTestClock(now time.Time) *testClock { return &testClock{Manual: clock.NewManual(now)} }

// NewTimer returns a timer of d that has fired: the clock moved d.
func (c *testClock) NewTimer(d time.Duration) clock.Timer {
	c.waits.Add(1)
	t := c.Manual.NewTimer(d)
	c.Manual.Advance(d)
	return t
}

// leaseStore is a store whose attempts hold a one-minute lease, on a clock
// two hours ahead of the files' modification times (so a judge by mtime
// would call every attempt dead).
func leaseStore(t *testing.T) (*Store, *testClock) {
	c := newTestClock(time.Now().Add(2 * time.Hour))
	return NewStore(localFS(t), StoreOptions{Clock: c, Lease: time.Minute}), c
}

// writeAll writes the whole split through w, moving the clock by step
// between records.
func writeAll(t *testing.T, w *SplitWriter, c *testClock, step time.Duration) {
	t.Helper()
	split := w.Attempt().Split()
	for off := split.Start; off < split.End; off++ {
		c.Advance(step)
		if err := w.Write(pageViewSchema(t), pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestLeaseKeepsLiveAttempt: an attempt that writes for 5 minutes with a
// 1-minute lease renews it as it goes; Recover leaves it alone all along
// (its files' mtimes are hours old by the store's clock), and it commits.
func TestLeaseKeepsLiveAttempt(t *testing.T) {
	store, c := leaseStore(t)
	w, err := NewSplitWriter(store, workload, workloadConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	split := workload
	for off := split.Start; off < split.End; off++ {
		c.Advance(time.Second)
		if err := w.Write(pageViewSchema(t), pageView(off), format.Meta{Offset: off, Timestamp: t0}); err != nil {
			t.Fatal(err)
		}
		if off%50 == 0 {
			rep, err := store.Recover(split.Topic, split.Partition)
			if err != nil || len(rep.Pending) != 1 || len(rep.Discarded) != 0 {
				t.Fatalf("offset %d: recover took a live attempt: %+v %v", off, rep, err)
			}
		}
	}
	leases := 0
	for _, f := range walkFiles(t, store.FS(), w.Attempt().dir) {
		if strings.Contains(f, leasePrefix) {
			leases++
		}
	}
	if leases != 1 {
		t.Fatalf("%d lease files, want the newest only", leases)
	}
	if res, err := w.Commit(split.End); err != nil || !res.Won {
		t.Fatalf("%+v %v", res, err)
	}
	verifyExactlyOnce(t, store.FS(), split)
}

// TestLeaseExpiredAttemptCannotCommit: an attempt that stalls past its
// lease is taken by Recover; when it wakes up its commit is refused and
// a new attempt loads the split once.
func TestLeaseExpiredAttemptCannotCommit(t *testing.T) {
	store, c := leaseStore(t)
	w, _ := NewSplitWriter(store, workload, workloadConfig(t))
	writeAll(t, w, c, 0)
	c.Advance(2 * time.Minute) // a stall: no renewal
	rep, err := store.Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.Discarded) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	if res, err := w.Commit(workload.End); !errors.Is(err, ErrAttemptExpired) || res.Won {
		t.Fatalf("commit of a reaped attempt: %+v %v", res, err)
	}
	if res, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t)); err != nil || !res.Won {
		t.Fatalf("re-run: %+v %v", res, err)
	}
	verifyExactlyOnce(t, store.FS(), workload)
}

// TestLeaseRaceCommitDuringRecover: a stalled attempt (lease expired)
// wakes up and commits while Recover is between its look at the attempt
// and its deletion. Either the commit stands with all its files, or the
// attempt is refused; never a manifest whose files were deleted.
func TestLeaseRaceCommitDuringRecover(t *testing.T) {
	for _, when := range []string{"before reap", "after reap"} {
		t.Run(when, func(t *testing.T) {
			store, c := leaseStore(t)
			w, _ := NewSplitWriter(store, workload, workloadConfig(t))
			writeAll(t, w, c, 0)
			c.Advance(2 * time.Minute)
			var res Result
			var cerr error
			hook := func(string) { res, cerr = w.Commit(workload.End) }
			if when == "before reap" {
				testHookBeforeReap = hook
			} else {
				testHookAfterReap = hook
			}
			defer func() { testHookBeforeReap, testHookAfterReap = nil, nil }()
			rep, err := store.Recover(workload.Topic, workload.Partition)
			if err != nil {
				t.Fatalf("recover: %v", err)
			}
			t.Logf("commit: won=%v err=%v; recovery %+v", res.Won, cerr, rep)
			if when == "before reap" {
				if cerr != nil || !res.Won {
					t.Fatalf("the attempt claimed first and must win: %+v %v", res, cerr)
				}
			} else {
				if !errors.Is(cerr, ErrAttemptExpired) || res.Won {
					t.Fatalf("the reaped attempt committed: %+v %v", res, cerr)
				}
				if res, err := runSplit(store, workload, workloadConfig(t), pageViewSchema(t)); err != nil || !res.Won {
					t.Fatalf("re-run: %+v %v", res, err)
				}
			}
			verifyExactlyOnce(t, store.FS(), workload)
		})
	}
}

// TestIntentCompletedByRecover: the manifest write fails after the
// attempt wrote its intent: Commit says ErrCommitUnknown, Abort refuses
// (Recover may need the files), and Recover completes the commit.
func TestIntentCompletedByRecover(t *testing.T) {
	mem := vfs.Durable(vfs.NewMem())
	inj := faults.Filter(faults.OnIndex(0), faults.Ops(faults.WriteExclusive), faults.PathHasPrefix("_sluice/commits/pageviews/2/0"))
	store := NewStore(vfs.NewFaulty(mem, inj), StoreOptions{})
	w, _ := NewSplitWriter(store, workload, workloadConfig(t))
	writeAll(t, w, newTestClock(time.Time{}), 0)
	if _, err := w.Commit(workload.End); !errors.Is(err, ErrCommitUnknown) || !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("commit: %v", err)
	}
	if err := w.Abort(); !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("abort after the intent: %v", err)
	}
	rep, err := NewStore(mem, StoreOptions{}).Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.RolledForward) != 1 {
		t.Fatalf("%+v %v", rep, err)
	}
	verifyExactlyOnce(t, mem, workload)
}

// TestRecoverSparesNewbornAttempt: NewAttempt makes the attempt directory
// before it writes the first lease. A Recover in between must not take the
// attempt as dead (it would rob a live attempt at birth); an attempt that
// died before its first lease is reaped once a lease period from its birth
// (carried in its ID) has passed.
func TestRecoverSparesNewbornAttempt(t *testing.T) {
	store, c := leaseStore(t)
	id := c.Now().UTC().Format(attemptTimeLayout) + "-00ff00ff00ff00ff"
	dir := attemptDir(workload.Topic, workload.Partition, workload.Start, id)
	if err := store.FS().MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	c.Advance(30 * time.Second)
	rep, err := store.Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.Pending) != 1 || len(rep.Discarded) != 0 {
		t.Fatalf("recover took an attempt with no lease yet, 30 s after its birth: %+v %v", rep, err)
	}
	c.Advance(time.Minute)
	rep, err = store.Recover(workload.Topic, workload.Partition)
	if err != nil || len(rep.Pending) != 0 || len(rep.Discarded) != 1 {
		t.Fatalf("recover kept an attempt that died before its first lease: %+v %v", rep, err)
	}
	if _, err := store.FS().Stat(dir); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("the dead attempt's directory is still there: %v", err)
	}
}
