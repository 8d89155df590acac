// Package vfs is the small file-system interface through which broker/log does
// all of its I/O, with two implementations: OS (the real disk) and Mem (an
// in-memory file system that can simulate a crash by dropping everything that
// was not synced). The errorfs subpackage wraps any FS and fails the i-th
// operation, so that crash loops can walk every failure point of a workload.
//
// Durability contract (what callers may rely on, and what Mem enforces):
//
//   - Data written to a File is durable only after File.Sync returns nil.
//   - A newly created, renamed or removed directory entry is durable only after
//     SyncDir of its parent directory returns nil.
//   - Rename replaces the destination atomically.
//   - Reads of an open File keep working after its name was removed.
package vfs

import (
	"errors"
	"io"
	"io/fs"
	"syscall"
)

// ErrNotExist is returned (wrapped) when a named file does not exist;
// errors.Is(err, fs.ErrNotExist) also holds.
var ErrNotExist = fs.ErrNotExist

// File is an open file. ReadAt and WriteAt take explicit offsets, so several
// goroutines may read one File concurrently without sharing a file position.
type File interface {
	io.ReaderAt
	io.WriterAt
	io.Closer
	// Sync makes the file's data durable.
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
}

// RawFile is implemented by files backed by an operating-system descriptor; a
// caller can use it for sendfile(2). Mem files do not implement it.
type RawFile interface {
	SyscallConn() (syscall.RawConn, error)
}

// FS is a file system. Names are slash-separated paths.
type FS interface {
	// Create creates or truncates the named file, opened for reading and writing.
	Create(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// RemoveAll removes a directory tree; a missing path is not an error.
	RemoveAll(name string) error
	// Rename atomically renames oldname to newname, replacing newname.
	Rename(oldname, newname string) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(dir string) error
	// List returns the names (not paths) of the entries of dir, sorted.
	List(dir string) ([]string, error)
	// Stat returns the size of the named file and whether it is a directory.
	Stat(name string) (size int64, isDir bool, err error)
	// SyncDir makes the directory's entries (creations, renames, removals) durable.
	SyncDir(dir string) error
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
