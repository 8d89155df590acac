package vfs

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
	"syscall"
)

// OS is the real file system; names are operating-system paths. The zero
// value is the production disk. NoSync turns Sync and SyncDir (and the
// syncs inside WriteExclusive and RenameNoReplace) into no-ops: every
// guarantee holds except durability across a machine crash, for tests and
// scratch output only.
type OS struct {
	NoSync bool

	byLink bool // RenameNoReplace never tries renameat2 (tests of the fallback)
}

var _ FS = OS{}

type osFile struct {
	f      *os.File
	noSync bool
}

func (f osFile) Read(p []byte) (int, error)               { return f.f.Read(p) }
func (f osFile) Write(p []byte) (int, error)              { return f.f.Write(p) }
func (f osFile) ReadAt(p []byte, off int64) (int, error)  { return f.f.ReadAt(p, off) }
func (f osFile) WriteAt(p []byte, off int64) (int, error) { return f.f.WriteAt(p, off) }
func (f osFile) Close() error                             { return f.f.Close() }
func (f osFile) Truncate(size int64) error                { return f.f.Truncate(size) }
func (f osFile) SyscallConn() (syscall.RawConn, error)    { return f.f.SyscallConn() }

func (f osFile) Sync() error {
	if f.noSync {
		return nil
	}
	return f.f.Sync()
}

func (f osFile) Size() (int64, error) {
	st, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func (o OS) open(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return osFile{f: f, noSync: o.NoSync}, nil
}

// Create implements FS.
func (o OS) Create(name string) (File, error) {
	return o.open(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
}

// CreateExclusive implements FS: O_CREAT|O_EXCL.
func (o OS) CreateExclusive(name string) (File, error) {
	return o.open(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}

// OpenReadWrite implements FS.
func (o OS) OpenReadWrite(name string) (File, error) { return o.open(name, os.O_RDWR, 0) }

// Open implements FS.
func (o OS) Open(name string) (File, error) { return o.open(name, os.O_RDONLY, 0) }

var tmpSeq atomic.Uint64

// errNoRenameNoReplace says that the system cannot rename without replacing
// in one step (renameNoReplace's fallback signal; never returned by OS).
var errNoRenameNoReplace = errors.New("vfs: no atomic rename without replace here")

// WriteExclusive implements FS: a temporary file, fsync, link(2) into place
// (which fails if name exists), unlink of the temporary, fsync of the
// directory. A reader never sees the file partial.
func (o OS) WriteExclusive(name string, data []byte) error {
	tmp := fmt.Sprintf("%s.tmp-%d-%d", name, os.Getpid(), tmpSeq.Add(1))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	var serr error
	if !o.NoSync {
		serr = f.Sync()
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	lerr := os.Link(tmp, name)
	os.Remove(tmp)
	if lerr != nil {
		if errors.Is(lerr, fs.ErrExist) {
			return &fs.PathError{Op: "create", Path: name, Err: ErrExist}
		}
		return lerr
	}
	return o.SyncDir(filepath.Dir(name))
}

// Remove implements FS.
func (OS) Remove(name string) error { return os.Remove(name) }

// RemoveAll implements FS.
func (OS) RemoveAll(name string) error { return os.RemoveAll(name) }

// RenameReplace implements FS: rename(2).
func (OS) RenameReplace(oldname, newname string) error { return os.Rename(oldname, newname) }

// RenameNoReplace implements FS: renameat2(2) with RENAME_NOREPLACE where
// the kernel and the file system have it (Linux), one atomic and exclusive
// step for files and directories alike. Elsewhere a file moves by link(2)
// (atomic and exclusive), fsync of the new directory, unlink, and a
// directory by a checked rename(2) (check-then-rename). Either way the new
// directory is synced. If newname is already oldname's very file (a link
// move interrupted between link and unlink, or a concurrent one), it
// finishes the move and succeeds.
func (o OS) RenameNoReplace(oldname, newname string) error {
	err := errNoRenameNoReplace
	if !o.byLink {
		err = renameNoReplace(oldname, newname)
	}
	switch {
	case errors.Is(err, errNoRenameNoReplace):
		return o.renameByLink(oldname, newname)
	case errors.Is(err, fs.ErrExist):
		st, serr := os.Lstat(oldname)
		if serr != nil {
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
		}
		return o.finishMove(st, oldname, newname)
	case err != nil:
		return err
	}
	return o.SyncDir(filepath.Dir(newname))
}

// renameByLink is RenameNoReplace without renameat2.
func (o OS) renameByLink(oldname, newname string) error {
	st, err := os.Lstat(oldname)
	if err != nil {
		return err
	}
	if st.IsDir() {
		if _, err := os.Lstat(newname); err == nil {
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
		}
		if err := os.Rename(oldname, newname); err != nil {
			return err
		}
		return o.SyncDir(filepath.Dir(newname))
	}
	if err := os.Link(oldname, newname); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		return o.finishMove(st, oldname, newname)
	}
	return o.unlinkMoved(oldname, newname)
}

// finishMove is RenameNoReplace finding newname present: if it is the file
// st describes (oldname's), the move was made by link and not finished, so
// it finishes it; otherwise newname is another path: ErrExist.
func (o OS) finishMove(st fs.FileInfo, oldname, newname string) error {
	nst, err := os.Lstat(newname)
	if err != nil || st.IsDir() || !os.SameFile(st, nst) {
		return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
	}
	return o.unlinkMoved(oldname, newname)
}

// unlinkMoved ends a move by link: the new name made durable, the old one
// removed.
func (o OS) unlinkMoved(oldname, newname string) error {
	if err := o.SyncDir(filepath.Dir(newname)); err != nil {
		return err
	}
	if err := os.Remove(oldname); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// MkdirAll implements FS.
func (OS) MkdirAll(dir string) error { return os.MkdirAll(dir, 0o755) }

// List implements FS. An entry removed while the directory is read is left
// out.
func (OS) List(dir string) ([]FileInfo, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	out := make([]FileInfo, 0, len(ents))
	for _, e := range ents {
		info, err := e.Info()
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, err
		}
		out = append(out, FromFileInfo(info))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (OS) Stat(name string) (FileInfo, error) {
	st, err := os.Stat(name)
	if err != nil {
		return FileInfo{}, err
	}
	return FromFileInfo(st), nil
}

// FromFileInfo converts an fs.FileInfo.
func FromFileInfo(st fs.FileInfo) FileInfo {
	return FileInfo{Name: st.Name(), Size: st.Size(), IsDir: st.IsDir(), ModTime: st.ModTime()}
}

// SyncDir implements FS.
func (o OS) SyncDir(dir string) error {
	if o.NoSync {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	if err := d.Sync(); err != nil {
		d.Close()
		return fmt.Errorf("vfs: sync dir %s: %w", dir, err)
	}
	return d.Close()
}

// String implements FS.
func (OS) String() string { return "file://" }

// Close implements FS; it does nothing.
func (OS) Close() error { return nil }
