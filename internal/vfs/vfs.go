package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors. Implementations wrap them (errors.Is works).
var (
	// ErrExist reports that a path exists where it must not.
	ErrExist = fs.ErrExist
	// ErrNotExist reports that a path does not exist.
	ErrNotExist = fs.ErrNotExist
	// ErrBadPath reports a name that is absolute, empty of meaning or climbs
	// above the root of a Sub or Durable FS.
	ErrBadPath = errors.New("vfs: bad path")
	// ErrUnsupported reports an operation the implementation cannot do
	// (random writes on HDFS).
	ErrUnsupported = errors.New("vfs: operation not supported by this file system")
	// ErrCrashed is returned by a Mem file handle opened before Mem.Crash.
	ErrCrashed = errors.New("vfs: file handle from before a simulated crash")
)

// FS is a file system. The package documentation states each method's
// guarantee; they are the contract every implementation meets.
type FS interface {
	// Create opens name for reading and writing, truncating it if it exists.
	Create(name string) (File, error)
	// CreateExclusive creates a new file for reading and writing; ErrExist
	// if name exists, decided atomically.
	CreateExclusive(name string) (File, error)
	// WriteExclusive creates name holding data (ErrExist if it exists) and
	// makes it durable before it returns nil.
	WriteExclusive(name string, data []byte) error
	// Open opens an existing file for reading.
	Open(name string) (File, error)
	// OpenReadWrite opens an existing file for reading and writing.
	OpenReadWrite(name string) (File, error)
	// RenameReplace renames oldname to newname, atomically replacing newname.
	RenameReplace(oldname, newname string) error
	// RenameNoReplace renames oldname to newname; ErrExist if newname
	// exists. The new name is durable when it returns nil.
	RenameNoReplace(oldname, newname string) error
	// Remove removes a file or an empty directory; ErrNotExist if missing.
	Remove(name string) error
	// RemoveAll removes a tree; a missing path is no error.
	RemoveAll(name string) error
	// MkdirAll creates a directory and its missing parents.
	MkdirAll(dir string) error
	// List returns the entries of dir, sorted by name.
	List(dir string) ([]FileInfo, error)
	// Stat describes one path.
	Stat(name string) (FileInfo, error)
	// SyncDir makes dir's entries (creations, renames, removals) durable.
	SyncDir(dir string) error
	// String names the file system and its root, for messages.
	String() string
	// Close releases the file system's connections; it must not be used
	// afterwards.
	Close() error
}

// File is an open file. ReadAt and WriteAt take explicit offsets, so several
// goroutines may read one File concurrently; Read and Write move the
// handle's own position (which starts at 0).
type File interface {
	io.Reader
	io.ReaderAt
	io.Writer
	io.WriterAt
	io.Closer
	// Sync makes the file's data durable.
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Size returns the current size of the file.
	Size() (int64, error)
}

// RawFile is implemented by files backed by an operating-system descriptor;
// a caller can use it for sendfile(2). Mem files do not implement it.
type RawFile interface {
	SyscallConn() (syscall.RawConn, error)
}

// FileInfo describes a path.
type FileInfo struct {
	Name    string // base name
	Size    int64
	IsDir   bool
	ModTime time.Time
}

// IsNotExist reports whether err says a file does not exist.
func IsNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }

// Clean validates a relative slash-separated name and returns its clean
// form ("" is "."); an absolute name or one that climbs above its root is
// an error wrapping ErrBadPath.
func Clean(name string) (string, error) {
	if name == "" {
		name = "."
	}
	if strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return "", &fs.PathError{Op: "path", Path: name, Err: ErrBadPath}
	}
	c := path.Clean(name)
	if c == ".." || strings.HasPrefix(c, "../") {
		return "", &fs.PathError{Op: "path", Path: name, Err: ErrBadPath}
	}
	return c, nil
}

// ReadFile returns the whole content of a file (one Size and one ReadAt).
// A missing file is an error wrapping ErrNotExist.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("size of %s: %w", name, err)
	}
	buf := make([]byte, size)
	n, err := f.ReadAt(buf, 0)
	if int64(n) != size {
		if err == nil || errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return buf, nil
}

// Exists reports whether name exists; errors other than not-exist are
// returned.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return false, err
}

// ListNames returns the names of dir's entries, sorted.
func ListNames(fsys FS, dir string) ([]string, error) {
	ents, err := fsys.List(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name
	}
	return names, nil
}
