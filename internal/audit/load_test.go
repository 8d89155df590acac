package audit_test

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/sluicehq/sluice/internal/audit"
	"github.com/sluicehq/sluice/writers"
	"github.com/sluicehq/sluice/writers/filesystem"
	"github.com/sluicehq/sluice/writers/format"
)

// A LoadReader read again after more splits were committed holds what a
// read of every manifest holds, and reads only the manifests committed
// since: a manifest it read before, made unreadable, fails a whole read
// (LoadCounts) but not its next Read.
func TestLoadReaderReadsOnlyNewManifests(t *testing.T) {
	dir := t.TempDir()
	fs, err := filesystem.NewLocal(dir)
	if err != nil {
		t.Fatal(err)
	}
	store := writers.NewStore(fs, writers.StoreOptions{})
	at := time.Date(2026, 12, 1, 13, 4, 0, 0, time.UTC)
	commit := func(start, end int64, times ...time.Time) {
		t.Helper()
		w, err := writers.NewSplitWriter(store, writers.Split{Topic: "pv", Partition: 0, Start: start, End: end},
			writers.Config{Format: format.Options{Kind: format.JSONLines}})
		if err != nil {
			t.Fatal(err)
		}
		for _, ts := range times {
			w.Count(ts, 10, writers.Loaded)
		}
		if _, err := w.Commit(end); err != nil {
			t.Fatal(err)
		}
	}
	var r audit.LoadReader
	read := func(want map[int64]int64) {
		t.Helper()
		got, err := r.Read(store, "job", []string{"pv"})
		if err != nil {
			t.Fatal(err)
		}
		n := map[int64]int64{}
		for _, c := range got.Counts {
			n[c.WindowStart] += c.Messages
		}
		if !reflect.DeepEqual(n, want) {
			t.Fatalf("load tier %v, want %v", n, want)
		}
	}
	m0 := at.UnixMilli()
	commit(0, 2, at, at.Add(time.Second))
	read(map[int64]int64{m0: 2})
	commit(2, 6, at, at.Add(time.Minute), at.Add(time.Minute), at.Add(2*time.Second))
	read(map[int64]int64{m0: 4, m0 + 60_000: 2})
	if whole, err := audit.LoadCounts(store, "job", []string{"pv"}); err != nil || len(whole.Counts) != 2 || whole.Counts[0].Messages != 4 {
		t.Fatalf("a whole read: %v %+v", err, whole.Counts)
	}

	// Tear the first manifest: read before, so the reader does not read it again.
	var first string
	filepath.WalkDir(filepath.Join(dir, writers.SluiceDir, "commits"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && first == "" {
			first = p
		}
		return nil
	})
	if first == "" {
		t.Fatal("no manifest on disk")
	}
	if err := os.WriteFile(first, []byte("{torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	commit(6, 7, at.Add(time.Minute))
	read(map[int64]int64{m0: 4, m0 + 60_000: 3})
	if _, err := audit.LoadCounts(store, "job", []string{"pv"}); err == nil {
		t.Fatalf("a whole read over the torn %s: no error", first)
	}
}
