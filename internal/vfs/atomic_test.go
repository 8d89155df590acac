package vfs_test

import (
	"bytes"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// TestWriteFileAtomicCrash: after a crash at any point the file holds the
// old or the new content in full, and RemoveTemporaries clears what the
// crash left without touching directories or other files.
func TestWriteFileAtomicCrash(t *testing.T) {
	mem := vfs.NewMem()
	if err := mem.MkdirAll("/d"); err != nil {
		t.Fatal(err)
	}
	mem.SyncDir("/")
	if err := vfs.WriteFileAtomic(mem, "/d", "meta.json", []byte("old")); err != nil {
		t.Fatal(err)
	}
	// A crash between the temporary's creation and the rename.
	f, _ := mem.Create("/d/meta.json.tmp")
	f.WriteAt([]byte("half"), 0)
	f.Sync()
	f.Close()
	legacy, _ := mem.Create("/d/.meta.json.tmp-7")
	legacy.Sync()
	legacy.Close()
	for _, d := range []string{"/d/.meta.json.tmp-8", "/d/x.tmp"} { // directories and unrelated names stay
		mem.MkdirAll(d)
	}
	mem.SyncDir("/d")
	mem.Crash()
	got, err := vfs.ReadFile(mem, "/d/meta.json")
	if err != nil || !bytes.Equal(got, []byte("old")) {
		t.Fatalf("after crash: %q %v", got, err)
	}
	removed, err := vfs.RemoveTemporaries(mem, "/d", "meta.json")
	if err != nil || len(removed) != 2 {
		t.Fatalf("removed %v, %v", removed, err)
	}
	names, _ := vfs.ListNames(mem, "/d")
	if len(names) != 3 {
		t.Fatalf("left %v", names)
	}
	if err := vfs.WriteFileAtomic(mem, "/d", "meta.json", []byte("new")); err != nil {
		t.Fatal(err)
	}
	mem.Crash()
	if got, _ := vfs.ReadFile(mem, "/d/meta.json"); !bytes.Equal(got, []byte("new")) {
		t.Fatalf("synced write lost: %q", got)
	}
}
