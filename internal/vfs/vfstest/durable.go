package vfstest

import (
	"errors"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// RunDurable checks vfs.Durable's guarantees on an FS whose power new's
// crash cuts: each acknowledged step survives a crash without a Sync from
// the caller, removals are not synced, and names are confined.
func RunDurable(t *testing.T, new func(t *testing.T) (fs vfs.FS, crash func())) {
	t.Run("Conformance", func(t *testing.T) {
		Run(t, Options{
			New:             func(t *testing.T) (vfs.FS, string) { fs, _ := new(t); return fs, "." },
			RemoveMissingOK: true,
		})
	})
	t.Run("StepsSurviveACrash", func(t *testing.T) {
		fs, crash := new(t)
		must(t, fs.MkdirAll("a/b"))
		f, err := fs.CreateExclusive("a/b/data")
		must(t, err)
		_, err = f.Write([]byte("whole"))
		must(t, err)
		must(t, f.Close()) // no Sync: Close makes it durable
		open, err := fs.CreateExclusive("a/open")
		must(t, err)
		_, err = open.Write([]byte("lost"))
		must(t, err)
		must(t, fs.WriteExclusive("a/b/kept", []byte("k")))
		must(t, fs.MkdirAll("c"))
		must(t, fs.WriteExclusive("c/r", []byte("r")))
		must(t, fs.RenameNoReplace("c/r", "a/moved"))
		must(t, fs.Remove("a/b/kept")) // not synced: comes back
		crash()
		wantContent(t, fs, "a/b/data", "whole")
		wantContent(t, fs, "a/b/kept", "k")
		wantContent(t, fs, "a/moved", "r")
		wantMissing(t, fs, "c/r")
		// a/open's entry was synced with its directory (by the move into
		// a/), its data never.
		wantContent(t, fs, "a/open", "")
	})
	t.Run("Names", func(t *testing.T) {
		fs, _ := new(t)
		for _, bad := range []string{"../etc", "/abs", "a/../../x"} {
			if _, err := fs.Stat(bad); !errors.Is(err, vfs.ErrBadPath) {
				t.Errorf("Stat(%q) = %v, want ErrBadPath", bad, err)
			}
		}
		if err := fs.RemoveAll("."); !errors.Is(err, vfs.ErrBadPath) {
			t.Fatalf("RemoveAll of the root: %v, want ErrBadPath", err)
		}
	})
}
