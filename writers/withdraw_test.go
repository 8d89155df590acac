package writers

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/writers/filesystem"
)

// loadThree commits [0,100), [100,200), [200,300) of pageviews/2.
func loadThree(t *testing.T, fs vfs.FS) {
	t.Helper()
	store := NewStore(fs, StoreOptions{})
	for _, sp := range []Split{{Topic: "pageviews", Partition: 2, Start: 0, End: 100}, {Topic: "pageviews", Partition: 2, Start: 100, End: 200}, {Topic: "pageviews", Partition: 2, Start: 200, End: 300}} {
		if res, err := runSplit(store, sp, workloadConfig(t), pageViewSchema(t)); err != nil || !res.Won {
			t.Fatal(res, err)
		}
	}
}

// TestWithdrawInterrupted: a Withdraw that dies at any operation and is
// run again continues the same withdrawal: one directory holds every
// withdrawn file and manifest, and the output is back at offset 100.
func TestWithdrawInterrupted(t *testing.T) {
	mem := vfs.Durable(vfs.NewMem())
	loadThree(t, mem)
	probe := vfs.FailAt(mem, -1, false)
	if _, _, err := NewStore(probe, StoreOptions{}).Withdraw("pageviews", 2, 100); err != nil {
		t.Fatal(err)
	}
	total := probe.Ops()
	t.Logf("a withdrawal takes %d operations", total)
	for i := 0; i < total; i++ {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			mem := vfs.Durable(vfs.NewMem())
			loadThree(t, mem)
			before := len(walkFiles(t, mem, "."))
			faulty := vfs.FailAt(mem, i, true)
			if _, _, err := NewStore(faulty, StoreOptions{}).Withdraw("pageviews", 2, 100); !errors.Is(err, faults.ErrInjected) {
				t.Fatalf("op %d: %v", i, err)
			}
			store := NewStore(mem, StoreOptions{})
			if dirs, _ := mem.List(partDir(withdrawnDir, "pageviews", 2)); len(dirs) == 1 {
				if _, _, err := store.Withdraw("pageviews", 2, 50); !errors.Is(err, ErrWithdrawal) {
					t.Fatalf("op %d: another withdrawal while one is unfinished: %v", i, err)
				}
			}
			_, dest, err := store.Withdraw("pageviews", 2, 100)
			if err != nil {
				t.Fatalf("op %d: run again: %v", i, err)
			}
			dirs, err := mem.List(partDir(withdrawnDir, "pageviews", 2))
			if err != nil || len(dirs) != 1 || !strings.HasSuffix(dest, dirs[0].Name) {
				t.Fatalf("op %d: withdrawal directories %v (%v), want one: %s", i, dirs, err, dest)
			}
			moved := walkFiles(t, mem, dest)
			after := walkFiles(t, mem, ".")
			if len(after)+len(moved)-2 != before { // two manifests moved too
				t.Fatalf("op %d: %d files before, %d after, %d withdrawn", i, before, len(after), len(moved))
			}
			if n, err := store.NextStart("pageviews", 2, 0); err != nil || n != 100 {
				t.Fatalf("op %d: NextStart %d %v", i, n, err)
			}
		})
	}
}

// TestNextStartReadsNewestOnly: with a year of hourly commits NextStart
// (and a commit's chain check) reads one manifest, not all of them.
func TestNextStartReadsNewestOnly(t *testing.T) {
	mem, err := filesystem.NewLocalNoSync(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const hours = 8760
	if err := mem.MkdirAll(partDir(commitsDir, "pv", 0)); err != nil {
		t.Fatal(err)
	}
	o := &Origin{Topic: "pv", Start: 0}
	b, _ := o.encode()
	if err := mem.WriteExclusive(OriginPath("pv", 0), b); err != nil {
		t.Fatal(err)
	}
	for h := int64(0); h < hours; h++ {
		m := &Manifest{Topic: "pv", Start: h * 1000, End: (h + 1) * 1000, Attempt: "a"}
		b, _ := m.Encode()
		if err := mem.WriteExclusive(ManifestPath("pv", 0, m.Start), b); err != nil {
			t.Fatal(err)
		}
	}
	counter := faults.Record(faults.Never)
	store := NewStore(vfs.NewFaulty(mem, counter), StoreOptions{})
	n, err := store.NextStart("pv", 0, 0)
	if err != nil || n != hours*1000 {
		t.Fatalf("NextStart %d %v", n, err)
	}
	if opens := countOps(counter.Log(), "open "); opens != 1 {
		t.Fatalf("NextStart opened %d files, want 1", opens)
	}
	before := len(counter.Log())
	res, err := runSplit(store, Split{Topic: "pv", Partition: 0, Start: hours * 1000, End: hours*1000 + 10}, chainCfg, nil)
	if err != nil || !res.Won {
		t.Fatalf("%+v %v", res, err)
	}
	if opens := countOps(counter.Log()[before:], "open _sluice/commits"); opens != 2 {
		t.Fatalf("a commit opened %d records, want 2 (origin, the manifest before)", opens)
	}
}

func countOps(log []string, prefix string) int {
	n := 0
	for _, op := range log {
		if strings.HasPrefix(op, prefix) {
			n++
		}
	}
	return n
}
