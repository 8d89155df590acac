package vfs_test

import (
	"errors"
	"io"
	"path"
	"testing"

	"github.com/sluicehq/sluice/broker/log/vfs"
	"github.com/sluicehq/sluice/broker/log/vfs/errorfs"
)

// implementations returns every FS with a fresh root directory: one suite
// runs against all of them.
func implementations(t *testing.T) map[string]struct {
	fs   vfs.FS
	root string
} {
	return map[string]struct {
		fs   vfs.FS
		root string
	}{
		"os":      {vfs.OS, t.TempDir()},
		"mem":     {vfs.NewMem(), "/root"},
		"errorfs": {errorfs.Wrap(vfs.NewMem(), errorfs.OnIndex(-1)), "/root"},
	}
}

func TestFSContract(t *testing.T) {
	for name, impl := range implementations(t) {
		t.Run(name, func(t *testing.T) {
			fs, root := impl.fs, impl.root
			dir := path.Join(root, "d")
			if err := fs.MkdirAll(dir); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Create(path.Join(dir, "a"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("hello"), 0); err != nil {
				t.Fatal(err)
			}
			if _, err := f.WriteAt([]byte("world"), 10); err != nil {
				t.Fatal(err)
			}
			if n, _ := f.Size(); n != 15 {
				t.Fatalf("size %d", n)
			}
			buf := make([]byte, 15)
			if _, err := f.ReadAt(buf, 0); err != nil {
				t.Fatal(err)
			}
			if string(buf) != "hello\x00\x00\x00\x00\x00world" {
				t.Fatalf("read %q: a hole must read as zeros", buf)
			}
			if _, err := f.ReadAt(buf, 10); err != io.EOF {
				t.Fatalf("short read: %v", err)
			}
			if err := f.Truncate(5); err != nil {
				t.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if size, isDir, err := fs.Stat(path.Join(dir, "a")); err != nil || size != 5 || isDir {
				t.Fatalf("stat %d %v %v", size, isDir, err)
			}
			if err := fs.Rename(path.Join(dir, "a"), path.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
			if names, _ := fs.List(dir); len(names) != 1 || names[0] != "b" {
				t.Fatalf("list %v", names)
			}
			if _, err := fs.Open(path.Join(dir, "a")); !vfs.IsNotExist(err) {
				t.Fatalf("open renamed: %v", err)
			}
			r, err := fs.Open(path.Join(dir, "b"))
			if err != nil {
				t.Fatal(err)
			}
			if err := fs.Remove(path.Join(dir, "b")); err != nil {
				t.Fatal(err)
			}
			// An open file stays readable after its name is removed.
			if _, err := r.ReadAt(buf[:5], 0); err != nil || string(buf[:5]) != "hello" {
				t.Fatalf("read after remove: %q %v", buf[:5], err)
			}
			r.Close()
			if err := fs.SyncDir(dir); err != nil {
				t.Fatal(err)
			}
			if err := fs.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if _, _, err := fs.Stat(dir); !vfs.IsNotExist(err) {
				t.Fatalf("stat removed dir: %v", err)
			}
			if _, err := fs.OpenReadWrite(path.Join(dir, "x")); !vfs.IsNotExist(err) {
				t.Fatalf("open missing: %v", err)
			}
		})
	}
}

func TestMemRenameDir(t *testing.T) {
	m := vfs.NewMem()
	m.MkdirAll("/a/b")
	f, _ := m.Create("/a/b/f")
	f.WriteAt([]byte("x"), 0)
	if err := m.Rename("/a", "/z"); err != nil {
		t.Fatal(err)
	}
	if size, _, err := m.Stat("/z/b/f"); err != nil || size != 1 {
		t.Fatalf("moved file: %d %v", size, err)
	}
	if _, _, err := m.Stat("/a/b"); !vfs.IsNotExist(err) {
		t.Fatal("old tree still there")
	}
}

func TestMemCrash(t *testing.T) {
	m := vfs.NewMem()
	m.MkdirAll("/d")
	m.SyncDir("/")
	f, _ := m.Create("/d/synced")
	f.WriteAt([]byte("durable"), 0)
	f.Sync()
	f.WriteAt([]byte(" and not"), 7)
	g, _ := m.Create("/d/unsynced-entry")
	g.WriteAt([]byte("x"), 0)
	g.Sync() // data synced, but the directory entry is not
	m.SyncDir("/d")
	h, _ := m.Create("/d/late")
	h.Sync()
	m.Crash()
	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, vfs.ErrCrashed) {
		t.Fatalf("old handle after crash: %v", err)
	}
	names, _ := m.List("/d")
	if len(names) != 2 || names[0] != "synced" || names[1] != "unsynced-entry" {
		t.Fatalf("after crash: %v", names)
	}
	r, _ := m.Open("/d/synced")
	if n, _ := r.Size(); n != 7 {
		t.Fatalf("unsynced bytes survived: size %d", n)
	}
	// A rename is durable only after SyncDir.
	m.Rename("/d/synced", "/d/renamed")
	m.Crash()
	if names, _ := m.List("/d"); names[0] != "synced" {
		t.Fatalf("rename survived without SyncDir: %v", names)
	}
	// A directory not synced into its parent disappears with its files.
	m.MkdirAll("/e")
	k, _ := m.Create("/e/f")
	k.Sync()
	m.SyncDir("/e")
	m.Crash()
	if _, _, err := m.Stat("/e/f"); !vfs.IsNotExist(err) {
		t.Fatalf("file in an unsynced directory survived: %v", err)
	}
}

func TestErrorFSCounter(t *testing.T) {
	inj := errorfs.OnIndex(2)
	fs := errorfs.Wrap(vfs.NewMem(), inj)
	fs.MkdirAll("/d")                        // op 0
	f, _ := fs.Create("/d/f")                // op 1
	n, err := f.WriteAt(make([]byte, 10), 0) // op 2 fails, torn
	if !errors.Is(err, errorfs.ErrInjected) || n != 5 {
		t.Fatalf("injected write: %d %v", n, err)
	}
	if _, err := f.WriteAt([]byte{1}, 0); err != nil { // op 3: only op 2 fails
		t.Fatal(err)
	}
	if fired, what := inj.Fired(); !fired || what == "" {
		t.Fatal("Fired() does not report the failure")
	}
	sticky := &errorfs.Counter{Fail: 0, Sticky: true}
	fs2 := errorfs.Wrap(vfs.NewMem(), sticky)
	fs2.MkdirAll("/x")
	if err := fs2.MkdirAll("/y"); !errors.Is(err, errorfs.ErrInjected) {
		t.Fatalf("sticky: %v", err)
	}
}
