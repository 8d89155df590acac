package filesystem

import (
	"errors"
	"fmt"
	"io"
	"sync"
)

// ErrInjected is the error a Faulty FS returns for the operation it fails.
var ErrInjected = errors.New("filesystem: injected fault")

// Faulty wraps a real FS and fails one chosen operation: the n-th call
// (counting from 0) of Create, WriteExclusive, Open, Rename, Remove,
// RemoveAll, MkdirAll, List, Stat, File.Write and File.Close. The operation
// is not performed (a failed File.Close still closes the inner file, so that
// a half-written file is left behind as a crash would leave it). With Sticky
// set, every operation after the failing one fails too, as if the process
// had died there.
type Faulty struct {
	inner FS

	mu     sync.Mutex // guards the fields below
	count  int
	failAt int // -1: never
	sticky bool
	failed bool
	log    []string
}

// NewFaulty wraps inner. failAt < 0 never fails (use it to count operations).
func NewFaulty(inner FS, failAt int, sticky bool) *Faulty {
	return &Faulty{inner: inner, failAt: failAt, sticky: sticky}
}

// Ops returns how many operations were attempted so far.
func (f *Faulty) Ops() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

// Failed reports whether the fault was injected.
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

func (f *Faulty) step(op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := f.count
	f.count++
	f.log = append(f.log, op+" "+name)
	if n == f.failAt || (f.sticky && f.failed) {
		f.failed = true
		return fmt.Errorf("%s %s (operation %d): %w", op, name, n, ErrInjected)
	}
	return nil
}

// String implements FS.
func (f *Faulty) String() string { return "faulty(" + f.inner.String() + ")" }

// Close implements FS (closes the inner FS; not counted).
func (f *Faulty) Close() error { return f.inner.Close() }

// Create implements FS.
func (f *Faulty) Create(name string) (File, error) {
	if err := f.step("create", name); err != nil {
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
	if err := ff.fs.step("write", ff.name); err != nil {
		return 0, err
	}
	return ff.inner.Write(b)
}

func (ff *faultyFile) Close() error {
	if err := ff.fs.step("close", ff.name); err != nil {
		ff.inner.Close()
		return err
	}
	return ff.inner.Close()
}

// WriteExclusive implements FS.
func (f *Faulty) WriteExclusive(name string, data []byte) error {
	if err := f.step("writeexclusive", name); err != nil {
		return err
	}
	return f.inner.WriteExclusive(name, data)
}

// Open implements FS.
func (f *Faulty) Open(name string) (io.ReadCloser, error) {
	if err := f.step("open", name); err != nil {
		return nil, err
	}
	return f.inner.Open(name)
}

// Rename implements FS.
func (f *Faulty) Rename(oldname, newname string) error {
	if err := f.step("rename", oldname+" -> "+newname); err != nil {
		return err
	}
	return f.inner.Rename(oldname, newname)
}

// Remove implements FS.
func (f *Faulty) Remove(name string) error {
	if err := f.step("remove", name); err != nil {
		return err
	}
	return f.inner.Remove(name)
}

// RemoveAll implements FS.
func (f *Faulty) RemoveAll(name string) error {
	if err := f.step("removeall", name); err != nil {
		return err
	}
	return f.inner.RemoveAll(name)
}

// MkdirAll implements FS.
func (f *Faulty) MkdirAll(name string) error {
	if err := f.step("mkdirall", name); err != nil {
		return err
	}
	return f.inner.MkdirAll(name)
}

// List implements FS.
func (f *Faulty) List(dir string) ([]FileInfo, error) {
	if err := f.step("list", dir); err != nil {
		return nil, err
	}
	return f.inner.List(dir)
}

// Stat implements FS.
func (f *Faulty) Stat(name string) (FileInfo, error) {
	if err := f.step("stat", name); err != nil {
		return FileInfo{}, err
	}
	return f.inner.Stat(name)
}
