package vfs

import (
	"sync"

	"github.com/sluicehq/sluice/internal/faults"
)

// Faulty wraps an FS and asks a faults.Injector before each operation
// whether it fails, so that tests can fail each operation of a workload in
// turn (a crash loop) or at random (log the seed):
//
//	fs := vfs.NewFaulty(vfs.NewMem(), faults.OnIndex(7)) // the 8th operation fails
//
// Every method of FS and of File is an operation, named by the faults.Op
// constants: Create (Create, CreateExclusive), WriteExclusive, Open (Open,
// OpenReadWrite), Rename (both renames; the path is "old -> new"), Remove,
// RemoveAll, Mkdir, List, Stat, SyncDir, and on files Read (Read, ReadAt),
// Write (Write, WriteAt), Sync, Truncate, Size and Close. String and the
// FS's Close are not operations.
//
// A failed operation is not performed, with two exceptions that leave what
// a crash would leave: a failing WriteAt first writes the first half of its
// data (a torn write), and a failing File.Close still closes the file
// beneath. A failing Write writes nothing. To see which operations a
// workload makes, put a faults.Recorder in front of the injector.
type Faulty struct {
	fs  FS
	inj faults.Injector

	mu     sync.Mutex // guards the fields below
	count  int
	failed bool
}

var _ FS = (*Faulty)(nil)

// NewFaulty wraps fsys with errors chosen by inj.
func NewFaulty(fsys FS, inj faults.Injector) *Faulty { return &Faulty{fs: fsys, inj: inj} }

// FailAt wraps fsys and fails its operation i (counting from 0; i < 0 never
// fails: use it to count operations). With sticky set every operation after
// the failing one fails too, as if the process had died there.
func FailAt(fsys FS, i int, sticky bool) *Faulty {
	return NewFaulty(fsys, &faults.Counter{Fail: int64(i), Sticky: sticky})
}

// Ops returns how many operations were attempted so far.
func (f *Faulty) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// Failed reports whether a fault was injected.
func (f *Faulty) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *Faulty) step(op faults.Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	err := f.inj.MaybeError(op, name)
	if err != nil {
		f.failed = true
	}
	return err
}

func (f *Faulty) file(name string, inner File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, name: name, f: inner}, nil
}

// Create implements FS.
func (f *Faulty) Create(name string) (File, error) {
	if err := f.step(faults.Create, name); err != nil {
		return nil, err
	}
	inner, err := f.fs.Create(name)
	return f.file(name, inner, err)
}

// CreateExclusive implements FS.
func (f *Faulty) CreateExclusive(name string) (File, error) {
	if err := f.step(faults.Create, name); err != nil {
		return nil, err
	}
	inner, err := f.fs.CreateExclusive(name)
	return f.file(name, inner, err)
}

// WriteExclusive implements FS.
func (f *Faulty) WriteExclusive(name string, data []byte) error {
	if err := f.step(faults.WriteExclusive, name); err != nil {
		return err
	}
	return f.fs.WriteExclusive(name, data)
}

// Open implements FS.
func (f *Faulty) Open(name string) (File, error) {
	if err := f.step(faults.Open, name); err != nil {
		return nil, err
	}
	inner, err := f.fs.Open(name)
	return f.file(name, inner, err)
}

// OpenReadWrite implements FS.
func (f *Faulty) OpenReadWrite(name string) (File, error) {
	if err := f.step(faults.Open, name); err != nil {
		return nil, err
	}
	inner, err := f.fs.OpenReadWrite(name)
	return f.file(name, inner, err)
}

// RenameReplace implements FS.
func (f *Faulty) RenameReplace(oldname, newname string) error {
	if err := f.step(faults.Rename, oldname+" -> "+newname); err != nil {
		return err
	}
	return f.fs.RenameReplace(oldname, newname)
}

// RenameNoReplace implements FS.
func (f *Faulty) RenameNoReplace(oldname, newname string) error {
	if err := f.step(faults.Rename, oldname+" -> "+newname); err != nil {
		return err
	}
	return f.fs.RenameNoReplace(oldname, newname)
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if err := f.step(faults.Remove, name); err != nil {
		return err
	}
	return f.fs.Remove(name)
}

// RemoveAll implements FS.
func (f *Faulty) RemoveAll(name string) error {
	if err := f.step(faults.RemoveAll, name); err != nil {
		return err
	}
	return f.fs.RemoveAll(name)
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(dir string) error {
	if err := f.step(faults.Mkdir, dir); err != nil {
		return err
	}
	return f.fs.MkdirAll(dir)
}

// List implements FS.
func (f *Faulty) List(dir string) ([]FileInfo, error) {
	if err := f.step(faults.List, dir); err != nil {
		return nil, err
	}
	return f.fs.List(dir)
}

// Stat implements FS.
func (f *Faulty) Stat(name string) (FileInfo, error) {
	if err := f.step(faults.Stat, name); err != nil {
		return FileInfo{}, err
	}
	return f.fs.Stat(name)
}

// SyncDir implements FS.
func (f *Faulty) SyncDir(dir string) error {
	if err := f.step(faults.SyncDir, dir); err != nil {
		return err
	}
	return f.fs.SyncDir(dir)
}

// String implements FS.
func (f *Faulty) String() string { return "faulty(" + f.fs.String() + ")" }

// Close implements FS (closes the FS beneath; not an operation).
func (f *Faulty) Close() error { return f.fs.Close() }

type faultyFile struct {
	fs   *Faulty
	name string
	f    File
}

func (ff *faultyFile) Read(p []byte) (int, error) {
	if err := ff.fs.step(faults.Read, ff.name); err != nil {
		return 0, err
	}
	return ff.f.Read(p)
}

func (ff *faultyFile) ReadAt(p []byte, off int64) (int, error) {
	if err := ff.fs.step(faults.Read, ff.name); err != nil {
		return 0, err
	}
	return ff.f.ReadAt(p, off)
}

func (ff *faultyFile) Write(p []byte) (int, error) {
	if err := ff.fs.step(faults.Write, ff.name); err != nil {
		return 0, err
	}
	return ff.f.Write(p)
}

func (ff *faultyFile) WriteAt(p []byte, off int64) (int, error) {
	if err := ff.fs.step(faults.Write, ff.name); err != nil {
		n, _ := ff.f.WriteAt(p[:len(p)/2], off) // a torn write
		return n, err
	}
	return ff.f.WriteAt(p, off)
}

func (ff *faultyFile) Close() error {
	ierr := ff.fs.step(faults.Close, ff.name)
	err := ff.f.Close()
	if ierr != nil {
		return ierr
	}
	return err
}

func (ff *faultyFile) Sync() error {
	if err := ff.fs.step(faults.Sync, ff.name); err != nil {
		return err
	}
	return ff.f.Sync()
}

func (ff *faultyFile) Truncate(size int64) error {
	if err := ff.fs.step(faults.Truncate, ff.name); err != nil {
		return err
	}
	return ff.f.Truncate(size)
}

func (ff *faultyFile) Size() (int64, error) {
	if err := ff.fs.step(faults.Size, ff.name); err != nil {
		return 0, err
	}
	return ff.f.Size()
}
