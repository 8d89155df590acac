// Package errorfs wraps a vfs.FS and injects errors, so tests can fail each
// file-system operation of a workload in turn (a crash loop).
//
//	fs := errorfs.Wrap(vfs.NewMem(), errorfs.OnIndex(7)) // the 8th operation fails
//
// A failing WriteAt first writes a prefix of its data, as a torn write would.
package errorfs

import (
	"github.com/sluicehq/sluice/broker/log/vfs"
	"github.com/sluicehq/sluice/internal/faults"
)

// The vocabulary is internal/faults', shared with writers/filesystem.Faulty:
// these names keep errorfs's callers as they were.

// ErrInjected is the error returned by an injected failure.
var ErrInjected = faults.ErrInjected

// Op names a file-system operation.
type Op = faults.Op

// Operations that can fail.
const (
	OpCreate   = faults.Create
	OpOpen     = faults.Open
	OpRemove   = faults.Remove
	OpRename   = faults.Rename
	OpMkdir    = faults.Mkdir
	OpList     = faults.List
	OpStat     = faults.Stat
	OpSyncDir  = faults.SyncDir
	OpRead     = faults.Read
	OpWrite    = faults.Write
	OpSync     = faults.Sync
	OpTruncate = faults.Truncate
	OpSize     = faults.Size
	OpClose    = faults.Close
)

// Injector decides whether an operation fails (faults.Filter, Randomly and
// the predicates choose by operation, path or probability).
type Injector = faults.Injector

// Counter is an Injector that counts operations and fails the one with index
// Fail (0-based; a negative Fail never fails). After the first failure it
// keeps failing every operation if Sticky, as a disk that went away would.
type Counter = faults.Counter

// OnIndex returns a Counter failing operation i and only it.
func OnIndex(i int64) *Counter { return faults.OnIndex(i) }

// FS is a vfs.FS that consults an Injector before each operation.
type FS struct {
	fs  vfs.FS
	inj Injector
}

// Wrap returns fs with errors injected by inj.
func Wrap(fs vfs.FS, inj Injector) *FS { return &FS{fs: fs, inj: inj} }

func (e *FS) wrap(f vfs.File, err error, name string) (vfs.File, error) {
	if err != nil {
		return nil, err
	}
	return &file{f: f, inj: e.inj, name: name}, nil
}

// Create implements vfs.FS.
func (e *FS) Create(name string) (vfs.File, error) {
	if err := e.inj.MaybeError(OpCreate, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Create(name)
	return e.wrap(f, err, name)
}

// OpenReadWrite implements vfs.FS.
func (e *FS) OpenReadWrite(name string) (vfs.File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.OpenReadWrite(name)
	return e.wrap(f, err, name)
}

// Open implements vfs.FS.
func (e *FS) Open(name string) (vfs.File, error) {
	if err := e.inj.MaybeError(OpOpen, name); err != nil {
		return nil, err
	}
	f, err := e.fs.Open(name)
	return e.wrap(f, err, name)
}

// Remove implements vfs.FS.
func (e *FS) Remove(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.fs.Remove(name)
}

// RemoveAll implements vfs.FS.
func (e *FS) RemoveAll(name string) error {
	if err := e.inj.MaybeError(OpRemove, name); err != nil {
		return err
	}
	return e.fs.RemoveAll(name)
}

// Rename implements vfs.FS.
func (e *FS) Rename(oldname, newname string) error {
	if err := e.inj.MaybeError(OpRename, oldname); err != nil {
		return err
	}
	return e.fs.Rename(oldname, newname)
}

// MkdirAll implements vfs.FS.
func (e *FS) MkdirAll(dir string) error {
	if err := e.inj.MaybeError(OpMkdir, dir); err != nil {
		return err
	}
	return e.fs.MkdirAll(dir)
}

// List implements vfs.FS.
func (e *FS) List(dir string) ([]string, error) {
	if err := e.inj.MaybeError(OpList, dir); err != nil {
		return nil, err
	}
	return e.fs.List(dir)
}

// Stat implements vfs.FS.
func (e *FS) Stat(name string) (int64, bool, error) {
	if err := e.inj.MaybeError(OpStat, name); err != nil {
		return 0, false, err
	}
	return e.fs.Stat(name)
}

// SyncDir implements vfs.FS.
func (e *FS) SyncDir(dir string) error {
	if err := e.inj.MaybeError(OpSyncDir, dir); err != nil {
		return err
	}
	return e.fs.SyncDir(dir)
}

type file struct {
	f    vfs.File
	inj  Injector
	name string
}

func (f *file) ReadAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpRead, f.name); err != nil {
		return 0, err
	}
	return f.f.ReadAt(p, off)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	if err := f.inj.MaybeError(OpWrite, f.name); err != nil {
		n, _ := f.f.WriteAt(p[:len(p)/2], off) // a torn write
		return n, err
	}
	return f.f.WriteAt(p, off)
}

func (f *file) Close() error {
	err := f.f.Close()
	if ierr := f.inj.MaybeError(OpClose, f.name); ierr != nil && err == nil {
		err = ierr
	}
	return err
}

func (f *file) Sync() error {
	if err := f.inj.MaybeError(OpSync, f.name); err != nil {
		return err
	}
	return f.f.Sync()
}

func (f *file) Truncate(size int64) error {
	if err := f.inj.MaybeError(OpTruncate, f.name); err != nil {
		return err
	}
	return f.f.Truncate(size)
}

func (f *file) Size() (int64, error) {
	if err := f.inj.MaybeError(OpSize, f.name); err != nil {
		return 0, err
	}
	return f.f.Size()
}
