package vfs

import (
	"io/fs"
	"path"
	"strings"
)

// SubFS is one directory of another FS seen as a file system of its own:
// names are relative to the directory (Clean's rules) and never reach above
// it. It does not own the FS beneath: its Close does nothing.
type SubFS struct {
	fs  FS
	dir string
}

var _ FS = (*SubFS)(nil)

// Sub returns the directory dir of fsys as an FS. dir is a name of fsys
// (an OS path for OS, an absolute HDFS path for HDFS, a relative name for
// another Sub or Durable).
func Sub(fsys FS, dir string) *SubFS { return &SubFS{fs: fsys, dir: dir} }

// Dir returns the directory of the parent FS that is the root.
func (s *SubFS) Dir() string { return s.dir }

// Parent returns the FS beneath.
func (s *SubFS) Parent() FS { return s.fs }

// Path returns the parent FS's name of a relative name.
func (s *SubFS) Path(name string) (string, error) {
	c, err := Clean(name)
	if err != nil {
		return "", err
	}
	return path.Join(s.dir, c), nil
}

func (s *SubFS) paths(oldname, newname string) (string, string, error) {
	o, err := s.Path(oldname)
	if err != nil {
		return "", "", err
	}
	n, err := s.Path(newname)
	return o, n, err
}

// Create implements FS.
func (s *SubFS) Create(name string) (File, error) {
	p, err := s.Path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.Create(p)
}

// CreateExclusive implements FS.
func (s *SubFS) CreateExclusive(name string) (File, error) {
	p, err := s.Path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.CreateExclusive(p)
}

// WriteExclusive implements FS.
func (s *SubFS) WriteExclusive(name string, data []byte) error {
	p, err := s.Path(name)
	if err != nil {
		return err
	}
	return s.fs.WriteExclusive(p, data)
}

// Open implements FS.
func (s *SubFS) Open(name string) (File, error) {
	p, err := s.Path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.Open(p)
}

// OpenReadWrite implements FS.
func (s *SubFS) OpenReadWrite(name string) (File, error) {
	p, err := s.Path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.OpenReadWrite(p)
}

// RenameReplace implements FS.
func (s *SubFS) RenameReplace(oldname, newname string) error {
	o, n, err := s.paths(oldname, newname)
	if err != nil {
		return err
	}
	return s.fs.RenameReplace(o, n)
}

// RenameNoReplace implements FS.
func (s *SubFS) RenameNoReplace(oldname, newname string) error {
	o, n, err := s.paths(oldname, newname)
	if err != nil {
		return err
	}
	return s.fs.RenameNoReplace(o, n)
}

// Remove implements FS.
func (s *SubFS) Remove(name string) error {
	p, err := s.Path(name)
	if err != nil {
		return err
	}
	return s.fs.Remove(p)
}

// RemoveAll implements FS; the root itself is refused (ErrBadPath).
func (s *SubFS) RemoveAll(name string) error {
	p, err := s.Path(name)
	if err != nil {
		return err
	}
	if p == path.Clean(s.dir) {
		return &fs.PathError{Op: "removeall", Path: name, Err: ErrBadPath}
	}
	return s.fs.RemoveAll(p)
}

// MkdirAll implements FS.
func (s *SubFS) MkdirAll(dir string) error {
	p, err := s.Path(dir)
	if err != nil {
		return err
	}
	return s.fs.MkdirAll(p)
}

// List implements FS.
func (s *SubFS) List(dir string) ([]FileInfo, error) {
	p, err := s.Path(dir)
	if err != nil {
		return nil, err
	}
	return s.fs.List(p)
}

// Stat implements FS.
func (s *SubFS) Stat(name string) (FileInfo, error) {
	p, err := s.Path(name)
	if err != nil {
		return FileInfo{}, err
	}
	return s.fs.Stat(p)
}

// SyncDir implements FS.
func (s *SubFS) SyncDir(dir string) error {
	p, err := s.Path(dir)
	if err != nil {
		return err
	}
	return s.fs.SyncDir(p)
}

// String implements FS: the parent's name followed by the directory
// ("file:///var/warehouse", "hdfs://nn:9000/warehouse/pv").
func (s *SubFS) String() string {
	if strings.HasPrefix(s.dir, "/") {
		return s.fs.String() + s.dir
	}
	return s.fs.String() + "/" + s.dir
}

// Close implements FS: it does nothing (the FS beneath is not Sub's).
func (s *SubFS) Close() error { return nil }
