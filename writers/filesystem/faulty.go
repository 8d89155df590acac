package filesystem

import (
	"io"
	"sync"

	"github.com/sluicehq/sluice/internal/faults"
)

// ErrInjected is the error (wrapped) of every operation a Faulty FS fails:
// internal/faults' one vocabulary, shared with broker/log/vfs/errorfs.
var ErrInjected = faults.ErrInjected

// Faulty wraps a real FS and fails the operations its injector chooses
// (by index, operation, path or probability: see internal/faults), among
// Create, WriteExclusive, Open, Rename, Remove, RemoveAll, MkdirAll, List,
// Stat, File.Write and File.Close. A failed operation is not performed (a
// failed File.Close still closes the inner file, so that a half-written
// file is left behind as a crash would leave it).
type Faulty struct {
	inner FS
	inj   faults.Injector

	mu     sync.Mutex // guards the fields below
	count  int
	failed bool
	log    []string
}

// NewFaulty wraps inner and fails its n-th operation (counting from 0;
// failAt < 0 never fails: use it to count operations). With sticky set,
// every operation after the failing one fails too, as if the process had
// died there.
func NewFaulty(inner FS, failAt int, sticky bool) *Faulty {
	return NewFaultyWith(inner, &faults.Counter{Fail: int64(failAt), Sticky: sticky})
}

// NewFaultyWith wraps inner with any injector.
func NewFaultyWith(inner FS, inj faults.Injector) *Faulty {
	return &Faulty{inner: inner, inj: inj}
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

// Log returns the operations seen, in order ("op path").
func (f *Faulty) Log() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.log...)
}

func (f *Faulty) step(op faults.Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	f.log = append(f.log, string(op)+" "+name)
	err := f.inj.MaybeError(op, name)
	if err != nil {
		f.failed = true
	}
	return err
}

// String implements FS.
func (f *Faulty) String() string { return "faulty(" + f.inner.String() + ")" }

// Close implements FS (closes the inner FS; not counted).
func (f *Faulty) Close() error { return f.inner.Close() }

// Create implements FS.
func (f *Faulty) Create(name string) (File, error) {
	if err := f.step(faults.Create, name); err != nil {
		return nil, err
	}
	w, err := f.inner.Create(name)
	if err != nil {
		return nil, err
	}
	return &faultyFile{fs: f, name: name, inner: w}, nil
}

type faultyFile struct {
	fs    *Faulty
	name  string
	inner File
}

func (ff *faultyFile) Write(b []byte) (int, error) {
	if err := ff.fs.step(faults.Write, ff.name); err != nil {
		return 0, err
	}
	return ff.inner.Write(b)
}

func (ff *faultyFile) Close() error {
	if err := ff.fs.step(faults.Close, ff.name); err != nil {
		ff.inner.Close()
		return err
	}
	return ff.inner.Close()
}

// WriteExclusive implements FS.
func (f *Faulty) WriteExclusive(name string, data []byte) error {
	if err := f.step(faults.WriteExclusive, name); err != nil {
		return err
	}
	return f.inner.WriteExclusive(name, data)
}

// Open implements FS.
func (f *Faulty) Open(name string) (io.ReadCloser, error) {
	if err := f.step(faults.Open, name); err != nil {
		return nil, err
	}
	return f.inner.Open(name)
}

// Rename implements FS.
func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.step(faults.Rename, oldname+" -> "+newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if err := f.step(faults.Remove, name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// RemoveAll implements FS.
func (f *Faulty) RemoveAll(name string) error {
	if err := f.step(faults.RemoveAll, name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(name string) error {
	if err := f.step(faults.Mkdir, name); err != nil {
		return err
	}
	return f.inner.MkdirAll(name)
}

// List implements FS.
func (f *Faulty) List(dir string) ([]FileInfo, error) {
	if err := f.step(faults.List, dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

// Stat implements FS.
func (f *Faulty) Stat(name string) (FileInfo, error) {
	if err := f.step(faults.Stat, name); err != nil {
		return FileInfo{}, err
	}
	return f.inner.Stat(name)
}
