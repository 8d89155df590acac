package writers

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// faultRun runs the workload once on a Faulty FS that fails operation
// failAt, then recovers on the real FS, re-runs the split when it is not
// committed, and checks that every record is there exactly once and nothing
// uncommitted is visible. It returns the number of operations the faulty
// run attempted and whether the fault fired.
func faultRun(t *testing.T, inner vfs.FS, failAt int, sticky bool) (int, bool) {
	t.Helper()
	schema := pageViewSchema(t)
	cfg := workloadConfig(t)
	faulty := vfs.FailAt(inner, failAt, sticky)
	res, err := runSplit(NewStore(faulty, recoverOpts), workload, cfg, schema)
	if err == nil && !res.Won {
		t.Fatalf("op %d: first attempt lost with nobody else running", failAt)
	}
	if err != nil && !errors.Is(err, faults.ErrInjected) && !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("op %d: error not caused by the fault: %v", failAt, err)
	}
	if !faulty.Failed() && err != nil {
		t.Fatalf("op %d: error without a fault: %v", failAt, err)
	}

	// Before recovery: whatever is visible under a final path is committed.
	store := NewStore(inner, recoverOpts)
	committed := map[string]bool{}
	if ms, err := store.Commits(workload.Topic, workload.Partition); err == nil {
		for _, m := range ms {
			for _, f := range m.Files {
				committed[f.Final] = true
			}
		}
	}
	for _, f := range walkFiles(t, inner, ".") {
		if !committed[f] {
			t.Fatalf("op %d: %s visible under a final path without a commit", failAt, f)
		}
		readOffsets(t, inner, f) // whole, not half-written
	}

	if _, err := store.Recover(workload.Topic, workload.Partition); err != nil {
		t.Fatalf("op %d: recover: %v", failAt, err)
	}
	next, err := store.NextStart(workload.Topic, workload.Partition, workload.Start)
	if err != nil {
		t.Fatalf("op %d: %v", failAt, err)
	}
	switch next {
	case workload.Start:
		res, err := runSplit(store, workload, cfg, schema)
		if err != nil || !res.Won {
			t.Fatalf("op %d: re-run: %+v %v", failAt, res, err)
		}
	case workload.End:
		if err == nil && res.Won && !faulty.Failed() {
			break
		}
	default:
		t.Fatalf("op %d: NextStart %d", failAt, next)
	}
	verifyExactlyOnce(t, inner, workload)
	return faulty.Ops(), faulty.Failed()
}

// TestFaultLoopLocal fails every operation of a multi-file commit in turn,
// once as a crash (every later operation fails too) and once as a single
// transient error.
func TestFaultLoopLocal(t *testing.T) {
	total, _ := faultRun(t, localFS(t), -1, false)
	t.Logf("the workload takes %d file-system operations", total)
	if total < 30 {
		t.Fatalf("only %d operations: the workload is too small to mean much", total)
	}
	for _, sticky := range []bool{true, false} {
		for i := 0; i < total; i++ {
			t.Run(fmt.Sprintf("sticky=%v/op=%d", sticky, i), func(t *testing.T) {
				t.Parallel() // the runs are independent; most of their time is fsync
				// Without fsync: the loop is about which operation fails, and
				// fsync would make 250 runs slow; TestFSContract covers syncing.
				l, err := filesystem.NewLocalNoSync(t.TempDir())
				if err != nil {
					t.Fatal(err)
				}
				if _, fired := faultRun(t, l, i, sticky); !fired {
					t.Fatalf("op %d never ran", i)
				}
			})
		}
	}
}

// TestFaultLoopHDFS runs the same loop against HDFS for a sample of i.
func TestFaultLoopHDFS(t *testing.T) {
	total, _ := faultRun(t, hdfsFS(t), -1, false)
	sample := map[int]bool{}
	for _, i := range []int{0, 1, 2, 3, total / 5, total / 3, total / 2, 2 * total / 3, 4 * total / 5, total - 6, total - 5, total - 4, total - 3, total - 2, total - 1} {
		if i >= 0 && i < total {
			sample[i] = true
		}
	}
	for i := range sample {
		t.Run(fmt.Sprintf("op=%d", i), func(t *testing.T) {
			faultRun(t, hdfsFS(t), i, true)
		})
	}
}
