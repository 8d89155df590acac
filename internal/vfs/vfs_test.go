package vfs_test

import (
	"errors"
	"path"
	"testing"

	"github.com/sluicehq/sluice/internal/faults"
	"github.com/sluicehq/sluice/internal/vfs"
	"github.com/sluicehq/sluice/internal/vfs/vfstest"
)

func memRoot(t *testing.T, m *vfs.Mem) (vfs.FS, string) {
	if err := m.MkdirAll("/root"); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		t.Fatal(err)
	}
	return m, "/root"
}

func TestConformance(t *testing.T) {
	t.Run("os", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{New: func(t *testing.T) (vfs.FS, string) { return vfs.OS{}, t.TempDir() }})
	})
	t.Run("os-bylink", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{
			New:               func(t *testing.T) (vfs.FS, string) { return vfs.OSByLink, t.TempDir() },
			RenameChecksFirst: true, // a directory moves by a checked rename(2)
		})
	})
	t.Run("os-nosync", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{New: func(t *testing.T) (vfs.FS, string) { return vfs.OS{NoSync: true}, t.TempDir() }})
	})
	t.Run("mem", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{
			New:   func(t *testing.T) (vfs.FS, string) { return memRoot(t, vfs.NewMem()) },
			Crash: func(fs vfs.FS) { fs.(*vfs.Mem).Crash() },
		})
	})
	t.Run("faulty-mem", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{New: func(t *testing.T) (vfs.FS, string) {
			fs, root := memRoot(t, vfs.NewMem())
			return vfs.NewFaulty(fs, faults.Never), root
		}})
	})
	t.Run("sub-os", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{New: func(t *testing.T) (vfs.FS, string) { return vfs.Sub(vfs.OS{}, t.TempDir()), "." }})
	})
	t.Run("durable-mem", func(t *testing.T) {
		vfstest.RunDurable(t, func(t *testing.T) (vfs.FS, func()) {
			m := vfs.NewMem()
			return vfs.Durable(m), m.Crash
		})
	})
	t.Run("durable-os", func(t *testing.T) {
		vfstest.Run(t, vfstest.Options{
			New:             func(t *testing.T) (vfs.FS, string) { return vfs.Durable(vfs.Sub(vfs.OS{}, t.TempDir())), "." },
			RemoveMissingOK: true,
		})
	})
}

func TestMemRenameDir(t *testing.T) {
	m := vfs.NewMem()
	m.MkdirAll("/a/b")
	f, _ := m.Create("/a/b/f")
	f.WriteAt([]byte("x"), 0)
	if err := m.RenameReplace("/a", "/z"); err != nil {
		t.Fatal(err)
	}
	if st, err := m.Stat("/z/b/f"); err != nil || st.Size != 1 {
		t.Fatalf("moved file: %+v %v", st, err)
	}
	if _, err := m.Stat("/a/b"); !vfs.IsNotExist(err) {
		t.Fatal("old tree still there")
	}
	if err := m.RenameReplace("/z", "/z/b/inside"); !errors.Is(err, vfs.ErrBadPath) {
		t.Fatalf("moving a directory into itself: %v, want ErrBadPath", err)
	}
}

// TestFaultyCounter: the i-th operation fails (a WriteAt torn), only it
// unless sticky; Ops and a Recorder see every operation.
func TestFaultyCounter(t *testing.T) {
	inj := faults.OnIndex(2)
	rec := faults.Record(inj)
	fs := vfs.NewFaulty(vfs.NewMem(), rec)
	fs.MkdirAll("/d")                        // op 0
	f, _ := fs.Create("/d/f")                // op 1
	n, err := f.WriteAt(make([]byte, 10), 0) // op 2 fails, torn
	if !errors.Is(err, faults.ErrInjected) || n != 5 {
		t.Fatalf("injected write: %d %v", n, err)
	}
	if _, err := f.WriteAt([]byte{1}, 0); err != nil { // op 3: only op 2 fails
		t.Fatal(err)
	}
	if fired, what := inj.Fired(); !fired || what == "" {
		t.Fatal("Fired() does not report the failure")
	}
	if fs.Ops() != 4 || !fs.Failed() || rec.Log()[2] != "write /d/f" {
		t.Fatalf("ops %d failed %v log %v", fs.Ops(), fs.Failed(), rec.Log())
	}
	sticky := vfs.FailAt(vfs.NewMem(), 0, true)
	sticky.MkdirAll("/x")
	if err := sticky.MkdirAll("/y"); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("sticky: %v", err)
	}
}

// TestFaultyVocabulary: Faulty takes any internal/faults injector: here the
// first rename under a given directory, whatever came before; a failed
// Write writes nothing, a failed Close still closes.
func TestFaultyVocabulary(t *testing.T) {
	mem := vfs.NewMem()
	f := vfs.NewFaulty(vfs.Durable(mem), faults.Filter(faults.OnIndex(0), faults.Ops(faults.Rename), faults.PathHasPrefix("commits/")))
	for _, d := range []string{"commits", "tmp"} {
		if err := f.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.WriteExclusive("tmp/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.RenameNoReplace("tmp/a", "tmp/b"); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteExclusive("commits/a", []byte("a")); err != nil {
		t.Fatal(err)
	}
	if err := f.RenameNoReplace("commits/a", "commits/b"); !errors.Is(err, faults.ErrInjected) {
		t.Fatalf("the first rename under commits/: %v", err)
	}
	if err := f.RenameNoReplace("commits/a", "commits/b"); err != nil {
		t.Fatal(err)
	}
	if !f.Failed() || f.Ops() != 7 {
		t.Fatalf("failed %v after %d ops", f.Failed(), f.Ops())
	}

	w := vfs.FailAt(vfs.Durable(mem), 1, true)
	file, err := w.CreateExclusive("tmp/x") // op 0
	if err != nil {
		t.Fatal(err)
	}
	if n, err := file.Write([]byte("x")); n != 0 || !errors.Is(err, faults.ErrInjected) { // op 1
		t.Fatalf("write: %d %v", n, err)
	}
	if err := file.Close(); !errors.Is(err, faults.ErrInjected) { // sticky
		t.Fatalf("close: %v", err)
	}
	if _, err := file.Write([]byte("y")); err == nil {
		t.Fatal("the file beneath was not closed by a failed Close")
	}
}

// syncRecorder records the directories synced beneath a Durable FS.
type syncRecorder struct {
	vfs.FS
	synced []string
}

func (s *syncRecorder) SyncDir(dir string) error {
	s.synced = append(s.synced, dir)
	return s.FS.SyncDir(dir)
}

// TestDurableMkdirAllSyncsParents: every directory MkdirAll creates is
// synced into its parent (without it a power loss can drop a directory, and
// with it a manifest that Commit said had won); an existing one costs none.
func TestDurableMkdirAllSyncsParents(t *testing.T) {
	rec := &syncRecorder{FS: vfs.Sub(vfs.OS{}, t.TempDir())}
	fs := vfs.Durable(rec)
	for _, d := range []string{"a", "a/b/c/d", "a/b"} {
		if err := fs.MkdirAll(d); err != nil {
			t.Fatal(err)
		}
	}
	if got, want := path.Join(rec.synced...), path.Join(".", "a", "a/b", "a/b/c"); got != want {
		t.Fatalf("synced %v, want [. a a/b a/b/c]", rec.synced)
	}
}
