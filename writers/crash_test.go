package writers

import (
	"errors"
	"fmt"
	"testing"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
)

// crashSplits is what the crash workload loads: two chained splits.
var crashSplits = []Split{{Topic: "pageviews", Partition: 2, Start: 100, End: 250}, {Topic: "pageviews", Partition: 2, Start: 250, End: 400}}

// crashWorkload loads crashSplits on store as a loader does (recover, then
// split after split), stopping at the first error. It returns the
// manifests it won: Commit said so, whatever error came with it.
func crashWorkload(t *testing.T, store *Store) ([]*Manifest, error) {
	if _, err := store.Recover("pageviews", 2); err != nil {
		return nil, err
	}
	var won []*Manifest
	for _, sp := range crashSplits {
		res, err := runSplit(store, sp, workloadConfig(t), pageViewSchema(t))
		if res.Won {
			won = append(won, res.Manifest)
		}
		if err != nil {
			return won, err
		}
	}
	return won, nil
}

// verifyLoaded checks a loaded range [from, to) of a partition: the
// manifests tile it from the origin, every offset is in exactly one final
// file of the commit that holds it, no uncommitted file is visible and no
// temporaries are left.
func verifyLoaded(t testing.TB, fs vfs.FS, topic string, part int32, from, to int64) {
	t.Helper()
	store := NewStore(fs, StoreOptions{})
	ms, err := store.Commits(topic, part)
	if err != nil {
		t.Fatal(err)
	}
	if end, err := CheckTiling(from, ms); err != nil || end != to {
		t.Fatalf("commits tile up to %d (want %d): %v", end, to, err)
	}
	listed := map[string]bool{}
	seen := map[int64]int{}
	for _, m := range ms {
		for _, f := range m.Files {
			listed[f.Final] = true
			offs := readOffsets(t, fs, f.Final)
			if int64(len(offs)) != f.Records {
				t.Fatalf("%s holds %d records, its manifest says %d", f.Final, len(offs), f.Records)
			}
			for _, o := range offs {
				if o < m.Start || o >= m.End {
					t.Fatalf("%s holds offset %d outside [%d, %d)", f.Final, o, m.Start, m.End)
				}
				seen[o]++
			}
		}
	}
	for off := from; off < to; off++ {
		if seen[off] != 1 {
			t.Fatalf("offset %d is there %d times", off, seen[off])
		}
	}
	for _, f := range walkFiles(t, fs, ".") {
		if !listed[f] {
			t.Fatalf("%s is visible but not committed", f)
		}
	}
	if ents, err := fs.List(partDir(tmpDir, topic, part)); err == nil && len(ents) > 0 {
		t.Fatalf("temporaries left: %v", ents)
	}
}

// crashRun runs the workload on a Mem whose operation failAt fails (and,
// sticky, every later one: the process died there), then cuts the power
// (Mem.Crash). It checks that every commit the workload won survived with
// all its files, then recovers, loads what is missing, and checks that
// every record is there exactly once.
func crashRun(t *testing.T, failAt int, sticky bool) (ops int, fired bool) {
	disk := vfs.NewMem()
	mem := vfs.Durable(disk)
	faulty := vfs.FailAt(mem, failAt, sticky)
	won, err := crashWorkload(t, NewStore(faulty, StoreOptions{}))
	if err != nil && !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("op %d: an error the fault did not cause: %v", failAt, err)
	}
	if err == nil && len(won) != len(crashSplits) {
		t.Fatalf("op %d: won %d of %d splits without an error", failAt, len(won), len(crashSplits))
	}
	disk.Crash()

	store := NewStore(mem, recoverOpts)
	for _, m := range won {
		got, err := store.readManifest(ManifestPath(m.Topic, m.Partition, m.Start))
		if err != nil || got.Attempt != m.Attempt {
			t.Fatalf("op %d: the won commit [%d, %d) did not survive the crash: %+v %v", failAt, m.Start, m.End, got, err)
		}
		for _, f := range m.Files {
			tmp, _ := vfs.Exists(mem, f.Temp)
			final, _ := vfs.Exists(mem, f.Final)
			if !tmp && !final {
				t.Fatalf("op %d: file %s of the won commit [%d, %d) did not survive the crash", failAt, f.Final, m.Start, m.End)
			}
		}
	}
	if _, err := store.Recover("pageviews", 2); err != nil {
		t.Fatalf("op %d: recover: %v", failAt, err)
	}
	for {
		next, err := store.NextStart("pageviews", 2, 100)
		if err != nil {
			t.Fatalf("op %d: %v", failAt, err)
		}
		if next == 400 {
			break
		}
		sp := crashSplits[0]
		if next >= sp.End {
			sp = crashSplits[1]
		}
		if sp.Start != next {
			t.Fatalf("op %d: NextStart %d is no split's start", failAt, next)
		}
		if res, err := runSplit(store, sp, workloadConfig(t), pageViewSchema(t)); err != nil || !res.Won {
			t.Fatalf("op %d: loading %s after recovery: %+v %v", failAt, sp, res, err)
		}
	}
	for _, m := range won {
		for _, f := range m.Files {
			if ok, _ := vfs.Exists(mem, f.Final); !ok {
				t.Fatalf("op %d: %s of a won commit is missing after recovery", failAt, f.Final)
			}
		}
	}
	verifyLoaded(t, mem, "pageviews", 2, 100, 400)
	return faulty.Ops(), faulty.Failed()
}

// TestCrashLoop cuts the power at every file-system operation of a
// two-split load: once when the process died at that operation, once
// after that single operation failed and the process went on.
func TestCrashLoop(t *testing.T) {
	total, _ := crashRun(t, -1, false)
	t.Logf("the workload takes %d file-system operations", total)
	for _, sticky := range []bool{true, false} {
		for i := 0; i < total; i++ {
			t.Run(fmt.Sprintf("sticky=%v/op=%d", sticky, i), func(t *testing.T) {
				t.Parallel()
				if _, fired := crashRun(t, i, sticky); !fired {
					t.Fatalf("op %d never ran", i)
				}
			})
		}
	}
}
