package writers

import (
	"errors"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/vfs"
)

// TestWaitUsesInjectedClock: a commit that finds a torn manifest waits
// ManifestWait for it on the store's clock (its timers), not the wall clock:
// here 30 s pass on the test clock in a few backoff steps, at once.
func TestWaitUsesInjectedClock(t *testing.T) {
	mem := vfs.Durable(vfs.NewMem())
	c := newTestClock(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	store := NewStore(mem, StoreOptions{Clock: c, ManifestWait: 30 * time.Second})
	sp := Split{Topic: "pv", Partition: 0, Start: 10, End: 20}
	if _, err := store.origin("pv", 0, 10); err != nil {
		t.Fatal(err)
	}
	if err := mem.WriteExclusive(ManifestPath("pv", 0, 10), []byte("sluice-manifest 2 crc32c=")); err != nil {
		t.Fatal(err)
	}
	start := c.Now()
	if _, err := runSplit(store, sp, chainCfg, nil); !errors.Is(err, ErrCommitUnknown) {
		t.Fatalf("commit over a torn manifest: %v", err)
	}
	if waited, sleeps := c.Now().Sub(start), c.waits.Load(); waited < 30*time.Second || sleeps > 100 {
		t.Fatalf("waited %s on the test clock in %d sleeps", waited, sleeps)
	}
}

// TestRecoverRemovesManifestTemps: what a crash of a local WriteExclusive
// leaves next to the manifests is removed by Recover once older than
// TornGrace; a fresh one (maybe being written) is left.
func TestRecoverRemovesManifestTemps(t *testing.T) {
	fs := localFS(t)
	c := newTestClock(time.Now())
	store := NewStore(fs, StoreOptions{Clock: c})
	dir := partDir(commitsDir, "pv", 0)
	if err := fs.MkdirAll(dir); err != nil {
		t.Fatal(err)
	}
	stale := dir + "/00000000000000000010.json.tmp-4242-1"
	if err := fs.WriteExclusive(stale, []byte("sluice-manifest 2")); err != nil {
		t.Fatal(err)
	}
	if _, err := store.Recover("pv", 0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(fs, stale); !ok {
		t.Fatal("a fresh temporary was removed")
	}
	c.Advance(time.Hour)
	if _, err := store.Recover("pv", 0); err != nil {
		t.Fatal(err)
	}
	if ok, _ := vfs.Exists(fs, stale); ok {
		t.Fatal("a stale temporary is still there")
	}
}
