package filesystem

import (
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"time"
)

// Sentinel errors. Implementations wrap them (errors.Is works).
var (
	// ErrExist reports that a path exists where it must not.
	ErrExist = fs.ErrExist
	// ErrNotExist reports that a path does not exist.
	ErrNotExist = fs.ErrNotExist
	// ErrBadPath reports a path that is absolute, empty or climbs above the root.
	ErrBadPath = errors.New("filesystem: bad path")
	// ErrBadURI reports an output URI that names no supported file system.
	ErrBadURI = errors.New("filesystem: bad URI")
)

// FS is the storage interface of the writers. See the package documentation
// for the guarantees of each method; they are the contract.
type FS interface {
	// Create creates a new file exclusively (ErrExist if present). The parent
	// directory must exist. Data is durable once File.Close returns nil.
	Create(name string) (File, error)
	// WriteExclusive creates name with data in one step (ErrExist if present)
	// and makes it durable before returning nil.
	WriteExclusive(name string, data []byte) error
	// Open opens a file for reading.
	Open(name string) (io.ReadCloser, error)
	// Rename moves oldname to newname and never replaces newname (ErrExist).
	Rename(oldname, newname string) error
	// Remove deletes a file or an empty directory; a missing path is no error.
	Remove(name string) error
	// RemoveAll deletes a tree; a missing path is no error.
	RemoveAll(name string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(name string) error
	// List returns the entries of a directory sorted by name.
	List(dir string) ([]FileInfo, error)
	// Stat describes one path.
	Stat(name string) (FileInfo, error)
	// String names the file system and its root, for messages.
	String() string
	// Close releases connections. The FS must not be used afterwards.
	Close() error
}

// File is a file being written. Write may buffer; Close makes the data
// durable and must be called exactly once.
type File interface {
	io.Writer
	// Close flushes, makes the data durable and releases the file. A non-nil
	// error means the content is unknown (empty, partial or complete).
	Close() error
}

// FileInfo describes a path.
type FileInfo struct {
	Name    string // base name
	Size    int64
	IsDir   bool
	ModTime time.Time
}

// Clean validates a relative slash path and returns its clean form.
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

// ReadFile reads a whole file through an FS.
func ReadFile(f FS, name string) ([]byte, error) {
	r, err := f.Open(name)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	return io.ReadAll(r)
}

// Exists reports whether name exists; errors other than not-exist are returned.
func Exists(f FS, name string) (bool, error) {
	_, err := f.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrNotExist) {
		return false, nil
	}
	return false, err
}
