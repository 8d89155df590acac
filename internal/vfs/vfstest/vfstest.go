// Package vfstest is the one conformance suite of internal/vfs: every FS
// implementation runs it (the OS, Mem, Faulty, Durable, HDFS on a real
// MiniDFSCluster), and it fails when an implementation breaks a guarantee
// stated in internal/vfs's package documentation.
//
//	func TestConformance(t *testing.T) {
//		vfstest.Run(t, vfstest.Options{New: func(t *testing.T) (vfs.FS, string) {
//			return vfs.OS{}, t.TempDir()
//		}})
//	}
package vfstest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path"
	"sync"
	"testing"

	"github.com/sluicehq/sluice/internal/vfs"
)

// Options describe the implementation under test.
type Options struct {
	// New returns the FS and an existing, empty directory of it to work in;
	// it is called once per subtest.
	New func(t *testing.T) (fs vfs.FS, root string)
	// AppendOnly marks an FS whose files are written once, in order
	// (HDFS): the suite then checks that random writes, Truncate,
	// OpenReadWrite and reads of a file being written fail with
	// vfs.ErrUnsupported instead of checking what they do.
	AppendOnly bool
	// RemoveMissingOK marks an FS whose Remove of a missing path succeeds
	// (vfs.Durable).
	RemoveMissingOK bool
	// Crash, when set, cuts the power of the FS New returned: the suite
	// checks that exactly what was made durable survives.
	Crash func(fs vfs.FS)
	// RenameChecksFirst marks an FS whose RenameNoReplace is
	// check-then-rename, exclusive only without a racing creator of the new
	// name (HDFS, as internal/vfs documents): the suite does not race
	// renames onto one name on it.
	RenameChecksFirst bool
}

// Run runs every check of the suite as a subtest.
func Run(t *testing.T, o Options) {
	checks := []struct {
		name string
		run  func(t *testing.T, o Options, fs vfs.FS, root string)
	}{
		{"CreateTruncates", createTruncates},
		{"CreateExclusive", createExclusive},
		{"CreateExclusiveRace", createExclusiveRace},
		{"WriteExclusive", writeExclusive},
		{"WriteExclusiveRace", writeExclusiveRace},
		{"FileIO", fileIO},
		{"RenameReplace", renameReplace},
		{"RenameNoReplace", renameNoReplace},
		{"RenameNoReplaceDir", renameNoReplaceDir},
		{"Remove", remove},
		{"RemoveAll", removeAll},
		{"MkdirAll", mkdirAll},
		{"ListAndStat", listAndStat},
	}
	if !o.RenameChecksFirst {
		checks = append(checks, struct {
			name string
			run  func(t *testing.T, o Options, fs vfs.FS, root string)
		}{"RenameNoReplaceRace", renameNoReplaceRace})
	}
	for _, c := range checks {
		t.Run(c.name, func(t *testing.T) {
			fs, root := o.New(t)
			c.run(t, o, fs, root)
		})
	}
	if o.Crash != nil {
		t.Run("Crash", func(t *testing.T) {
			fs, root := o.New(t)
			crash(t, o, fs, root)
		})
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// put creates name holding data through Create, Write, Sync and Close.
func put(t *testing.T, fs vfs.FS, name, data string) {
	t.Helper()
	f, err := fs.Create(name)
	must(t, err)
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	must(t, f.Sync())
	must(t, f.Close())
}

func content(t *testing.T, fs vfs.FS, name string) string {
	t.Helper()
	b, err := vfs.ReadFile(fs, name)
	must(t, err)
	return string(b)
}

func wantContent(t *testing.T, fs vfs.FS, name, want string) {
	t.Helper()
	if got := content(t, fs, name); got != want {
		t.Fatalf("%s holds %q, want %q", name, got, want)
	}
}

func wantMissing(t *testing.T, fs vfs.FS, name string) {
	t.Helper()
	if _, err := fs.Stat(name); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("%s: Stat = %v, want ErrNotExist", name, err)
	}
}

func createTruncates(t *testing.T, _ Options, fs vfs.FS, root string) {
	p := path.Join(root, "f")
	put(t, fs, p, "a longer content")
	put(t, fs, p, "short")
	wantContent(t, fs, p, "short")
}

func createExclusive(t *testing.T, _ Options, fs vfs.FS, root string) {
	p := path.Join(root, "f")
	f, err := fs.CreateExclusive(p)
	must(t, err)
	_, err = f.Write([]byte("first"))
	must(t, err)
	must(t, f.Sync())
	must(t, f.Close())
	if _, err := fs.CreateExclusive(p); !errors.Is(err, vfs.ErrExist) {
		t.Fatalf("second CreateExclusive: %v, want ErrExist", err)
	}
	wantContent(t, fs, p, "first")
	if _, err := fs.CreateExclusive(path.Join(root, "nodir", "f")); err == nil {
		t.Fatal("CreateExclusive without a parent directory succeeded")
	}
}

// race runs n attempts at once and checks that exactly one succeeded and
// every other failed with ErrExist.
func race(t *testing.T, n int, attempt func(i int) error) {
	t.Helper()
	var mu sync.Mutex
	wins := 0
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := attempt(i)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				wins++
			case !errors.Is(err, vfs.ErrExist):
				t.Errorf("attempt %d: %v, want ErrExist", i, err)
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of %d racing creators won, want exactly 1", wins, n)
	}
}

func createExclusiveRace(t *testing.T, _ Options, fs vfs.FS, root string) {
	p := path.Join(root, "m")
	race(t, 8, func(i int) error {
		f, err := fs.CreateExclusive(p)
		if err != nil {
			return err
		}
		if _, err := f.Write([]byte(fmt.Sprint(i))); err != nil {
			f.Close()
			return fmt.Errorf("a winner could not write: %v", err)
		}
		return f.Close()
	})
}

func writeExclusive(t *testing.T, _ Options, fs vfs.FS, root string) {
	p := path.Join(root, "m.json")
	must(t, fs.WriteExclusive(p, []byte(`{"k":1}`)))
	if err := fs.WriteExclusive(p, []byte(`{"k":2}`)); !errors.Is(err, vfs.ErrExist) {
		t.Fatalf("second WriteExclusive: %v, want ErrExist", err)
	}
	wantContent(t, fs, p, `{"k":1}`)
	must(t, fs.WriteExclusive(path.Join(root, "empty"), nil))
	wantContent(t, fs, path.Join(root, "empty"), "")
	ents, err := fs.List(root)
	must(t, err)
	if len(ents) != 2 {
		t.Fatalf("WriteExclusive left %v in the directory, want the two files only", ents)
	}
}

func writeExclusiveRace(t *testing.T, _ Options, fs vfs.FS, root string) {
	p := path.Join(root, "m")
	race(t, 8, func(i int) error { return fs.WriteExclusive(p, []byte(fmt.Sprint(i))) })
}

func fileIO(t *testing.T, o Options, fs vfs.FS, root string) {
	if o.AppendOnly {
		appendOnlyIO(t, fs, root)
		return
	}
	p := path.Join(root, "a")
	f, err := fs.Create(p)
	must(t, err)
	_, err = f.WriteAt([]byte("hello"), 0)
	must(t, err)
	_, err = f.WriteAt([]byte("world"), 10)
	must(t, err)
	if n, err := f.Size(); err != nil || n != 15 {
		t.Fatalf("Size = %d, %v, want 15", n, err)
	}
	buf := make([]byte, 15)
	_, err = f.ReadAt(buf, 0)
	must(t, err)
	if string(buf) != "hello\x00\x00\x00\x00\x00world" {
		t.Fatalf("ReadAt %q: a hole must read as zeros", buf)
	}
	if _, err := f.ReadAt(buf, 10); err != io.EOF {
		t.Fatalf("short ReadAt: %v, want io.EOF", err)
	}
	must(t, f.Truncate(5))
	must(t, f.Sync())
	must(t, f.Close())
	// Write and Read move the handle's position.
	rw, err := fs.OpenReadWrite(p)
	must(t, err)
	_, err = rw.Write([]byte("J"))
	must(t, err)
	_, err = rw.Write([]byte("E"))
	must(t, err)
	must(t, rw.Close())
	r, err := fs.Open(p)
	must(t, err)
	got, err := io.ReadAll(r)
	must(t, err)
	if string(got) != "JEllo" {
		t.Fatalf("after OpenReadWrite and two Writes: %q, want JEllo", got)
	}
	// An open file stays readable after its name is removed.
	must(t, fs.Remove(p))
	if _, err := r.ReadAt(buf[:5], 0); err != nil || string(buf[:5]) != "JEllo" {
		t.Fatalf("read after remove: %q %v", buf[:5], err)
	}
	must(t, r.Close())
	if _, err := fs.OpenReadWrite(p); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("OpenReadWrite of a missing file: %v, want ErrNotExist", err)
	}
	if _, err := fs.Open(p); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("Open of a missing file: %v, want ErrNotExist", err)
	}
}

func unsupported(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, vfs.ErrUnsupported) {
		t.Fatalf("%s on an append-only FS: %v, want ErrUnsupported", what, err)
	}
}

func appendOnlyIO(t *testing.T, fs vfs.FS, root string) {
	p := path.Join(root, "a")
	f, err := fs.CreateExclusive(p)
	must(t, err)
	_, err = f.Write([]byte("hello"))
	must(t, err)
	_, err = f.WriteAt([]byte(" world"), 5) // at the end: an append
	must(t, err)
	_, err = f.WriteAt([]byte("x"), 0)
	unsupported(t, "WriteAt before the end", err)
	unsupported(t, "Truncate", f.Truncate(1))
	_, err = f.ReadAt(make([]byte, 1), 0)
	unsupported(t, "ReadAt of a file being written", err)
	if n, err := f.Size(); err != nil || n != 11 {
		t.Fatalf("Size = %d, %v, want 11", n, err)
	}
	must(t, f.Sync())
	must(t, f.Close())
	_, err = fs.OpenReadWrite(p)
	unsupported(t, "OpenReadWrite", err)
	r, err := fs.Open(p)
	must(t, err)
	defer r.Close()
	buf := make([]byte, 5)
	_, err = r.ReadAt(buf, 6)
	must(t, err)
	if string(buf) != "world" {
		t.Fatalf("ReadAt = %q, want world", buf)
	}
	if n, err := r.Size(); err != nil || n != 11 {
		t.Fatalf("reader Size = %d, %v, want 11", n, err)
	}
	all, err := io.ReadAll(r)
	must(t, err)
	if string(all) != "hello world" {
		t.Fatalf("Read = %q", all)
	}
	_, err = r.Write([]byte("x"))
	unsupported(t, "Write to a file opened for reading", err)
}

func renameReplace(t *testing.T, _ Options, fs vfs.FS, root string) {
	a, b := path.Join(root, "a"), path.Join(root, "b")
	put(t, fs, a, "new")
	put(t, fs, b, "old")
	must(t, fs.RenameReplace(a, b))
	wantContent(t, fs, b, "new")
	wantMissing(t, fs, a)
	must(t, fs.RenameReplace(b, a)) // to a missing name
	wantContent(t, fs, a, "new")
	if err := fs.RenameReplace(path.Join(root, "nothing"), b); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("RenameReplace of a missing file: %v, want ErrNotExist", err)
	}
}

func renameNoReplace(t *testing.T, _ Options, fs vfs.FS, root string) {
	a, b, c := path.Join(root, "a"), path.Join(root, "b"), path.Join(root, "c")
	put(t, fs, a, "A")
	put(t, fs, b, "B")
	if err := fs.RenameNoReplace(a, b); !errors.Is(err, vfs.ErrExist) {
		t.Fatalf("RenameNoReplace onto an existing file: %v, want ErrExist", err)
	}
	wantContent(t, fs, a, "A")
	wantContent(t, fs, b, "B")
	must(t, fs.RenameNoReplace(a, c))
	wantContent(t, fs, c, "A")
	wantMissing(t, fs, a)
	if err := fs.RenameNoReplace(a, path.Join(root, "d")); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("RenameNoReplace of a missing file: %v, want ErrNotExist", err)
	}
}

func renameNoReplaceDir(t *testing.T, _ Options, fs vfs.FS, root string) {
	src, dst, other := path.Join(root, "src"), path.Join(root, "dst"), path.Join(root, "other")
	must(t, fs.MkdirAll(path.Join(src, "sub")))
	put(t, fs, path.Join(src, "sub", "f"), "f")
	must(t, fs.MkdirAll(other))
	if err := fs.RenameNoReplace(src, other); !errors.Is(err, vfs.ErrExist) {
		t.Fatalf("RenameNoReplace of a directory onto an existing one: %v, want ErrExist", err)
	}
	must(t, fs.RenameNoReplace(src, dst))
	wantContent(t, fs, path.Join(dst, "sub", "f"), "f")
	wantMissing(t, fs, src)
}

// renameNoReplaceRace renames many files, then many empty directories, each
// from its own name onto one new name at once, a few rounds of each:
// exactly one move wins, and every loser's source is left where it was.
func renameNoReplaceRace(t *testing.T, _ Options, fs vfs.FS, root string) {
	const n, rounds = 16, 4
	for r := range 2 * rounds {
		kind := [2]string{"file", "dir"}[r%2]
		src := func(i int) string { return path.Join(root, fmt.Sprintf("%s%d-%d", kind, r, i)) }
		dst := path.Join(root, fmt.Sprintf("%s%d", kind, r))
		for i := range n {
			if kind == "file" {
				put(t, fs, src(i), fmt.Sprint(i))
			} else {
				must(t, fs.MkdirAll(src(i)))
			}
		}
		race(t, n, func(i int) error { return fs.RenameNoReplace(src(i), dst) })
		left := 0
		for i := range n {
			if _, err := fs.Stat(src(i)); err == nil {
				left++
			} else if !errors.Is(err, vfs.ErrNotExist) {
				t.Fatal(err)
			}
		}
		if left != n-1 {
			t.Fatalf("%d of %d %s sources are left after the race, want %d", left, n, kind, n-1)
		}
		if _, err := fs.Stat(dst); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(t *testing.T, o Options, fs vfs.FS, root string) {
	f, d := path.Join(root, "f"), path.Join(root, "d")
	put(t, fs, f, "x")
	must(t, fs.MkdirAll(d))
	put(t, fs, path.Join(d, "g"), "y")
	if err := fs.Remove(d); err == nil {
		t.Fatal("Remove of a non-empty directory succeeded")
	}
	wantContent(t, fs, path.Join(d, "g"), "y")
	must(t, fs.Remove(path.Join(d, "g")))
	must(t, fs.Remove(d))
	must(t, fs.Remove(f))
	wantMissing(t, fs, f)
	wantMissing(t, fs, d)
	err := fs.Remove(f)
	if o.RemoveMissingOK && err != nil {
		t.Fatalf("Remove of a missing file: %v, want nil", err)
	}
	if !o.RemoveMissingOK && !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("Remove of a missing file: %v, want ErrNotExist", err)
	}
}

func removeAll(t *testing.T, _ Options, fs vfs.FS, root string) {
	d := path.Join(root, "d")
	must(t, fs.MkdirAll(path.Join(d, "e", "f")))
	put(t, fs, path.Join(d, "e", "x"), "x")
	must(t, fs.RemoveAll(d))
	wantMissing(t, fs, d)
	wantMissing(t, fs, path.Join(d, "e", "x"))
	must(t, fs.RemoveAll(d))
}

func mkdirAll(t *testing.T, _ Options, fs vfs.FS, root string) {
	d := path.Join(root, "a", "b", "c")
	must(t, fs.MkdirAll(d))
	must(t, fs.MkdirAll(d))
	if st, err := fs.Stat(d); err != nil || !st.IsDir {
		t.Fatalf("Stat after MkdirAll: %+v, %v", st, err)
	}
	put(t, fs, path.Join(root, "file"), "x")
	if err := fs.MkdirAll(path.Join(root, "file", "sub")); err == nil {
		t.Fatal("MkdirAll below a file succeeded")
	}
}

func listAndStat(t *testing.T, _ Options, fs vfs.FS, root string) {
	must(t, fs.MkdirAll(path.Join(root, "b")))
	put(t, fs, path.Join(root, "c"), "12345")
	put(t, fs, path.Join(root, "a"), "")
	ents, err := fs.List(root)
	must(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if fmt.Sprint(names) != "[a b c]" {
		t.Fatalf("List = %v, want [a b c] (sorted)", names)
	}
	if !ents[1].IsDir || ents[2].IsDir || ents[2].Size != 5 {
		t.Fatalf("List's infos: %+v", ents)
	}
	st, err := fs.Stat(path.Join(root, "c"))
	must(t, err)
	if st.Name != "c" || st.Size != 5 || st.IsDir {
		t.Fatalf("Stat = %+v", st)
	}
	if _, err := fs.List(path.Join(root, "missing")); !errors.Is(err, vfs.ErrNotExist) {
		t.Fatalf("List of a missing directory: %v, want ErrNotExist", err)
	}
	wantMissing(t, fs, path.Join(root, "missing"))
	must(t, fs.SyncDir(root))
}

// crash checks what survives a power cut: synced data and synced entries,
// and nothing else.
func crash(t *testing.T, o Options, fs vfs.FS, root string) {
	d, pub := path.Join(root, "d"), path.Join(root, "p")
	must(t, fs.MkdirAll(d))
	must(t, fs.MkdirAll(pub))
	must(t, fs.SyncDir(root))
	// Data: synced bytes survive, later ones do not.
	f, err := fs.Create(path.Join(d, "synced"))
	must(t, err)
	_, err = f.Write([]byte("durable"))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte(" and not"))
	must(t, err)
	// An entry whose data was synced but whose directory was not.
	g, err := fs.Create(path.Join(d, "entry-synced"))
	must(t, err)
	must(t, g.Sync())
	must(t, g.Close())
	must(t, fs.SyncDir(d))
	late, err := fs.Create(path.Join(d, "late")) // after the SyncDir
	must(t, err)
	must(t, late.Sync())
	must(t, late.Close())
	must(t, fs.WriteExclusive(path.Join(pub, "published"), []byte("whole")))
	must(t, fs.RenameNoReplace(path.Join(pub, "published"), path.Join(pub, "moved")))
	// A directory never synced into its parent goes with its files.
	e := path.Join(root, "e")
	must(t, fs.MkdirAll(e))
	put(t, fs, path.Join(e, "f"), "f")
	must(t, fs.SyncDir(e))
	o.Crash(fs)

	if _, err := f.ReadAt(make([]byte, 1), 0); !errors.Is(err, vfs.ErrCrashed) {
		t.Fatalf("a handle from before the crash: %v, want ErrCrashed", err)
	}
	wantContent(t, fs, path.Join(d, "synced"), "durable")
	wantContent(t, fs, path.Join(d, "entry-synced"), "")
	wantMissing(t, fs, path.Join(d, "late"))
	// RenameNoReplace made the new name durable; the old name's removal
	// was not synced, so the crash may keep it: never neither.
	wantContent(t, fs, path.Join(pub, "moved"), "whole")
	wantMissing(t, fs, path.Join(e, "f"))
	wantMissing(t, fs, e)

	// A RenameReplace is durable only after SyncDir.
	must(t, fs.RenameReplace(path.Join(d, "synced"), path.Join(d, "renamed")))
	o.Crash(fs)
	wantContent(t, fs, path.Join(d, "synced"), "durable")
	wantMissing(t, fs, path.Join(d, "renamed"))
	must(t, fs.RenameReplace(path.Join(d, "synced"), path.Join(d, "renamed")))
	must(t, fs.SyncDir(d))
	o.Crash(fs)
	wantContent(t, fs, path.Join(d, "renamed"), "durable")
	wantMissing(t, fs, path.Join(d, "synced"))
	if !bytes.Equal([]byte(content(t, fs, path.Join(pub, "moved"))), []byte("whole")) {
		t.Fatal("a durable file changed across crashes")
	}
}
