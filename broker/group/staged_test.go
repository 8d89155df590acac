package group

import (
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/sluicehq/sluice/internal/vfs"
)

// stagedStorage is logStorage whose appends commit when the test says so
// (a cluster's replicated append): AppendStaged appends at once and its
// wait blocks until a value (nil or an error) arrives on the next gate.
type stagedStorage struct {
	*logStorage
	staged chan chan error // each AppendStaged hands the test its gate
}

func (st *stagedStorage) AppendStaged(p int32, batch []byte) (func() error, error) {
	if err := st.Append(p, batch); err != nil {
		return nil, err
	}
	gate := make(chan error, 1)
	st.staged <- gate
	return func() error { return <-gate }, nil
}

func newStagedFixture(t *testing.T) (*fixture, *stagedStorage) {
	f := &fixture{t: t, fs: vfs.NewMem(), clock: newManualClock()}
	f.st = newLogStorage(t, f.fs, 4)
	st := &stagedStorage{logStorage: f.st, staged: make(chan chan error, 16)}
	c, err := New(Options{Storage: st, Clock: f.clock, OffsetsPartitions: 4, Clustered: true,
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.OffsetsPartitions(true); err != nil {
		t.Fatal(err)
	}
	for p := range int32(4) {
		if err := c.LoadPartition(p, 4); err != nil {
			t.Fatal(err)
		}
	}
	f.c = c
	t.Cleanup(func() { checkInvariants(t, f.c) })
	return f, st
}

// groupsOn returns n group ids whose offsets partition is p.
func groupsOn(p int32, n int) []string {
	var out []string
	for i := 0; len(out) < n; i++ {
		if id := fmt.Sprintf("g%d", i); partitionFor(id, 4) == p {
			out = append(out, id)
		}
	}
	return out
}

func commitAsync(f *fixture, group string, offset int64) chan int16 {
	done := make(chan int16, 1)
	go func() { done <- f.commit(group, "", -1, "t", 0, offset) }()
	return done
}

func nextGate(t *testing.T, st *stagedStorage) chan error {
	t.Helper()
	select {
	case g := <-st.staged:
		return g
	case <-time.After(5 * time.Second):
		t.Fatal("no staged append")
		return nil
	}
}

// TestStagedCommitWaitsWithoutTheLock: in a clustered coordinator an
// OffsetCommit waiting for its append to commit holds up neither another
// group's commit nor a fetch of its own group's offsets (which still shows
// the previous offset); a second commit of the same group waits behind the
// first and the later one wins; a failed wait answers its code and leaves
// the offset.
func TestStagedCommitWaitsWithoutTheLock(t *testing.T) {
	f, st := newStagedFixture(t)
	ids := groupsOn(1, 2)
	a, b := ids[0], ids[1]

	first := commitAsync(f, a, 10)
	gateA1 := nextGate(t, st)
	second := commitAsync(f, a, 20) // queued behind the first: no append yet
	other := commitAsync(f, b, 5)
	nextGate(t, st) <- nil
	if code := <-other; code != 0 {
		t.Fatalf("the other group's commit: %v", kerr.ErrorForCode(code))
	}
	if got := f.fetched(a, "t", 0); got != -1 {
		t.Fatalf("a commit not yet committed is visible: %d", got)
	}
	select {
	case g := <-st.staged:
		t.Fatalf("the group's second commit appended before its first was applied (%v)", g)
	case <-time.After(100 * time.Millisecond):
	}
	gateA1 <- nil
	if code := <-first; code != 0 {
		t.Fatalf("first commit: %v", kerr.ErrorForCode(code))
	}
	nextGate(t, st) <- nil
	if code := <-second; code != 0 {
		t.Fatalf("second commit: %v", kerr.ErrorForCode(code))
	}
	if got := f.fetched(a, "t", 0); got != 20 {
		t.Fatalf("offset after both commits: %d, want 20", got)
	}

	failed := commitAsync(f, a, 30)
	nextGate(t, st) <- fmt.Errorf("%w: replicated append: timed out", kerr.RequestTimedOut)
	if code := <-failed; code != kerr.RequestTimedOut.Code {
		t.Fatalf("commit whose wait timed out: %v", kerr.ErrorForCode(code))
	}
	if got := f.fetched(a, "t", 0); got != 20 {
		t.Fatalf("a failed commit moved the offset: %d", got)
	}
}

// TestStagedCommitPartitionDropped: a commit whose offsets partition is
// dropped (the leadership moved) while it waits is answered NOT_COORDINATOR
// and applies nothing here.
func TestStagedCommitPartitionDropped(t *testing.T) {
	f, st := newStagedFixture(t)
	a := groupsOn(2, 1)[0]
	done := commitAsync(f, a, 7)
	gate := nextGate(t, st)
	f.c.DropPartition(2)
	gate <- nil
	if code := <-done; code != kerr.NotCoordinator.Code {
		t.Fatalf("commit across a drop: %v", kerr.ErrorForCode(code))
	}
	f.c.mu.Lock()
	_, ok := f.c.groups[a]
	f.c.mu.Unlock()
	if ok {
		t.Fatalf("the dropped partition's group is back")
	}
}
