package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// MetaStore stores the server's small metadata files (topic registry,
// producer-id block) in the data directory.
type MetaStore interface {
	// ReadFile returns the file's content, or an error wrapping
	// fs.ErrNotExist when it was never written.
	ReadFile(name string) ([]byte, error)
	// WriteFileAtomic replaces the file so that after a crash it holds either
	// the old or the new content in full: write a temporary file, fsync it,
	// rename it over the old one, fsync the directory. It returns only when
	// the new content is durable.
	WriteFileAtomic(name string, data []byte) error
}

// OSMetaStore is a MetaStore on the local disk, in directory Dir.
type OSMetaStore struct{ Dir string }

// ReadFile implements MetaStore.
func (s OSMetaStore) ReadFile(name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(s.Dir, name))
}

// WriteFileAtomic implements MetaStore.
func (s OSMetaStore) WriteFileAtomic(name string, data []byte) (err error) {
	final := filepath.Join(s.Dir, name)
	tmp, err := os.CreateTemp(s.Dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("%w: create temp for %s: %v", ErrStorage, final, err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if _, err = tmp.Write(data); err != nil {
		return fmt.Errorf("%w: write %s: %v", ErrStorage, tmp.Name(), err)
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("%w: fsync %s: %v", ErrStorage, tmp.Name(), err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %v", ErrStorage, tmp.Name(), err)
	}
	if err = os.Rename(tmp.Name(), final); err != nil {
		return fmt.Errorf("%w: rename to %s: %v", ErrStorage, final, err)
	}
	d, err := os.Open(s.Dir)
	if err != nil {
		return fmt.Errorf("%w: open dir %s: %v", ErrStorage, s.Dir, err)
	}
	defer d.Close()
	if err = d.Sync(); err != nil {
		return fmt.Errorf("%w: fsync dir %s: %v", ErrStorage, s.Dir, err)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
