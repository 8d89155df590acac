package query

import (
	"io"
	"path"

	"github.com/sluicehq/sluice/writers/filesystem"
)

// subFS is the directory dir of a file system seen as a file system of its
// own, so that a writers.Store can run on one dataset of a warehouse that
// was opened once.
type subFS struct {
	fs  filesystem.FS
	dir string
}

func sub(fs filesystem.FS, dir string) filesystem.FS {
	if dir == "" || dir == "." {
		return fs
	}
	return &subFS{fs: fs, dir: dir}
}

func (s *subFS) path(name string) (string, error) {
	c, err := filesystem.Clean(name)
	if err != nil {
		return "", err
	}
	return path.Join(s.dir, c), nil
}

func (s *subFS) Create(name string) (filesystem.File, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.Create(p)
}

func (s *subFS) WriteExclusive(name string, data []byte) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	return s.fs.WriteExclusive(p, data)
}

func (s *subFS) Open(name string) (io.ReadCloser, error) {
	p, err := s.path(name)
	if err != nil {
		return nil, err
	}
	return s.fs.Open(p)
}

func (s *subFS) Rename(oldname, newname string) error {
	o, err := s.path(oldname)
	if err != nil {
		return err
	}
	n, err := s.path(newname)
	if err != nil {
		return err
	}
	return s.fs.Rename(o, n)
}

func (s *subFS) Remove(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	return s.fs.Remove(p)
}

func (s *subFS) RemoveAll(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	return s.fs.RemoveAll(p)
}

func (s *subFS) MkdirAll(name string) error {
	p, err := s.path(name)
	if err != nil {
		return err
	}
	return s.fs.MkdirAll(p)
}

func (s *subFS) List(dir string) ([]filesystem.FileInfo, error) {
	p, err := s.path(dir)
	if err != nil {
		return nil, err
	}
	return s.fs.List(p)
}

func (s *subFS) Stat(name string) (filesystem.FileInfo, error) {
	p, err := s.path(name)
	if err != nil {
		return filesystem.FileInfo{}, err
	}
	return s.fs.Stat(p)
}

func (s *subFS) String() string { return s.fs.String() + "/" + s.dir }

// Close does nothing: the warehouse owns the parent file system.
func (s *subFS) Close() error { return nil }
