package filesystem

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
)

// TestLocalMkdirAllSyncsParents: every directory MkdirAll creates is
// fsynced into its parent (without it a power loss can drop a directory,
// and with it a manifest that Commit said had won).
func TestLocalMkdirAllSyncsParents(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var synced []string
	hook := func(dir string) {
		mu.Lock()
		defer mu.Unlock()
		if rel, err := filepath.Rel(l.Root(), dir); err == nil {
			synced = append(synced, filepath.ToSlash(rel))
		}
	}
	syncHook.Store(&hook)
	defer syncHook.Store(nil)
	if err := l.MkdirAll("a"); err != nil {
		t.Fatal(err)
	}
	if err := l.MkdirAll("a/b/c/d"); err != nil {
		t.Fatal(err)
	}
	if err := l.MkdirAll("a/b"); err != nil { // exists: nothing to sync
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{".", "a", "a/b", "a/b/c"}; !slices.Equal(synced, want) {
		t.Fatalf("synced %v, want %v", synced, want)
	}
}

// TestLocalRenameAlreadyMoved: a move interrupted between link and unlink
// leaves both names; the same Rename again completes it instead of failing.
func TestLocalRenameAlreadyMoved(t *testing.T) {
	l, err := NewLocal(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.WriteExclusive("f", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := os.Link(filepath.Join(l.Root(), "f"), filepath.Join(l.Root(), "g")); err != nil {
		t.Fatal(err)
	}
	if err := l.Rename("f", "g"); err != nil {
		t.Fatalf("rename after an interrupted move: %v", err)
	}
	if ok, _ := Exists(l, "f"); ok {
		t.Fatal("the old name is still there")
	}
	// A different file at the destination is still refused.
	if err := l.WriteExclusive("h", []byte("y")); err != nil {
		t.Fatal(err)
	}
	if err := l.Rename("h", "g"); !errors.Is(err, ErrExist) {
		t.Fatalf("rename onto another file: %v", err)
	}
}
