package server

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strconv"
	"sync/atomic"

	"github.com/sluicehq/sluice/broker/log/vfs"
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

// FSMetaStore is a MetaStore in directory Dir of a vfs.FS (vfs.OS in
// production; vfs.NewMem and errorfs in tests).
type FSMetaStore struct {
	FS  vfs.FS
	Dir string
}

var tmpSeq atomic.Int64

// ReadFile implements MetaStore.
func (s FSMetaStore) ReadFile(name string) ([]byte, error) {
	p := path.Join(s.Dir, name)
	f, err := s.FS.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Size()
	if err != nil {
		return nil, fmt.Errorf("%w: size of %s: %v", ErrStorage, p, err)
	}
	buf := make([]byte, size)
	if n, err := f.ReadAt(buf, 0); int64(n) != size && err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("%w: read %s: %v", ErrStorage, p, err)
	} else if int64(n) != size {
		return nil, fmt.Errorf("%w: read %s: short read", ErrStorage, p)
	}
	return buf, nil
}

// WriteFileAtomic implements MetaStore.
func (s FSMetaStore) WriteFileAtomic(name string, data []byte) (err error) {
	final := path.Join(s.Dir, name)
	tmp := path.Join(s.Dir, "."+name+".tmp-"+strconv.FormatInt(tmpSeq.Add(1), 10))
	f, err := s.FS.Create(tmp)
	if err != nil {
		return fmt.Errorf("%w: create %s: %v", ErrStorage, tmp, err)
	}
	defer func() {
		if err != nil {
			_ = s.FS.Remove(tmp)
		}
	}()
	if _, err = f.WriteAt(data, 0); err != nil {
		_ = f.Close()
		return fmt.Errorf("%w: write %s: %v", ErrStorage, tmp, err)
	}
	if err = f.Sync(); err != nil {
		_ = f.Close()
		return fmt.Errorf("%w: fsync %s: %v", ErrStorage, tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("%w: close %s: %v", ErrStorage, tmp, err)
	}
	if err = s.FS.Rename(tmp, final); err != nil {
		return fmt.Errorf("%w: rename %s to %s: %v", ErrStorage, tmp, final, err)
	}
	if err = s.FS.SyncDir(s.Dir); err != nil {
		return fmt.Errorf("%w: fsync dir %s: %v", ErrStorage, s.Dir, err)
	}
	return nil
}

func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
