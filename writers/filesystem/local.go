package filesystem

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"sync/atomic"
)

// Local is an FS over a directory of the local file system.
type Local struct {
	root   string
	noSync bool
}

// NewLocalNoSync is NewLocal without fsync: every guarantee holds except
// durability across a machine crash. For tests and scratch output only.
func NewLocalNoSync(dir string) (*Local, error) {
	l, err := NewLocal(dir)
	if err != nil {
		return nil, err
	}
	l.noSync = true
	return l, nil
}

var tmpSeq atomic.Uint64

// NewLocal returns an FS rooted at dir, creating dir if needed.
func NewLocal(dir string) (*Local, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("filesystem: local root %q: %w", dir, err)
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("filesystem: local root %q: %w", dir, err)
	}
	return &Local{root: abs}, nil
}

func (l *Local) path(name string) (string, error) {
	c, err := Clean(name)
	if err != nil {
		return "", err
	}
	return filepath.Join(l.root, filepath.FromSlash(c)), nil
}

// String implements FS.
func (l *Local) String() string { return "file://" + filepath.ToSlash(l.root) }

// Root returns the absolute local directory of the FS.
func (l *Local) Root() string { return l.root }

// Close implements FS.
func (l *Local) Close() error { return nil }

// Create implements FS: O_CREATE|O_EXCL; Close fsyncs file and directory.
func (l *Local) Create(name string) (File, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, err
	}
	return &localFile{f: f, noSync: l.noSync}, nil
}

type localFile struct {
	f      *os.File
	noSync bool
}

func (lf *localFile) Write(b []byte) (int, error) { return lf.f.Write(b) }

func (lf *localFile) Close() error {
	if lf.noSync {
		return lf.f.Close()
	}
	serr := lf.f.Sync()
	cerr := lf.f.Close()
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return cerr
	}
	return syncDir(filepath.Dir(lf.f.Name()))
}

func (l *Local) syncDir(dir string) error {
	if l.noSync {
		return nil
	}
	return syncDir(dir)
}

// syncHook, when set, sees every directory sync (tests).
var syncHook atomic.Pointer[func(dir string)]

func syncDir(dir string) error {
	if h := syncHook.Load(); h != nil {
		(*h)(dir)
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	cerr := d.Close()
	if serr != nil {
		return &fs.PathError{Op: "sync", Path: dir, Err: serr}
	}
	return cerr
}

// WriteExclusive implements FS: temp file, fsync, link (fails if the target
// exists), unlink temp, fsync directory. Readers never see a partial file.
func (l *Local) WriteExclusive(name string, data []byte) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	tmp := fmt.Sprintf("%s.tmp-%d-%d", p, os.Getpid(), tmpSeq.Add(1))
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, werr := f.Write(data)
	var serr error
	if !l.noSync {
		serr = f.Sync()
	}
	cerr := f.Close()
	if err := errors.Join(werr, serr, cerr); err != nil {
		os.Remove(tmp)
		return &fs.PathError{Op: "write", Path: name, Err: err}
	}
	lerr := os.Link(tmp, p)
	os.Remove(tmp)
	if lerr != nil {
		if errors.Is(lerr, fs.ErrExist) {
			return &fs.PathError{Op: "create", Path: name, Err: ErrExist}
		}
		return lerr
	}
	return l.syncDir(filepath.Dir(p))
}

// Open implements FS.
func (l *Local) Open(name string) (io.ReadCloser, error) {
	p, err := l.path(name)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

// Rename implements FS without replacing: files move by link + unlink (link
// fails when the target exists); directories by a checked rename.
func (l *Local) Rename(oldname, newname string) error {
	op, err := l.path(oldname)
	if err != nil {
		return err
	}
	np, err := l.path(newname)
	if err != nil {
		return err
	}
	st, err := os.Lstat(op)
	if err != nil {
		return err
	}
	if st.IsDir() {
		if _, err := os.Lstat(np); err == nil {
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
		}
		if err := os.Rename(op, np); err != nil {
			return err
		}
		return l.syncDir(filepath.Dir(np))
	}
	if err := os.Link(op, np); err != nil {
		if !errors.Is(err, fs.ErrExist) {
			return err
		}
		// Already moved (a crash between link and unlink, or a concurrent
		// roll-forward): the destination is this very file. Finish the move.
		nst, serr := os.Lstat(np)
		if serr != nil || !os.SameFile(st, nst) {
			return &fs.PathError{Op: "rename", Path: newname, Err: ErrExist}
		}
	}
	if err := l.syncDir(filepath.Dir(np)); err != nil {
		return err
	}
	if err := os.Remove(op); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return l.syncDir(filepath.Dir(op))
}

// Remove implements FS.
func (l *Local) Remove(name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// RemoveAll implements FS.
func (l *Local) RemoveAll(name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	return os.RemoveAll(p)
}

// MkdirAll implements FS: each directory it creates is fsynced into its
// parent, so a new directory (and what is later made durable in it)
// survives a power loss.
func (l *Local) MkdirAll(name string) error {
	p, err := l.path(name)
	if err != nil {
		return err
	}
	var missing []string
	for d := p; d != l.root && len(d) > len(l.root); d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err == nil {
			if !st.IsDir() {
				return &fs.PathError{Op: "mkdir", Path: name, Err: fmt.Errorf("%s is not a directory", d)}
			}
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		missing = append(missing, d)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := l.syncDir(filepath.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// List implements FS.
func (l *Local) List(dir string) ([]FileInfo, error) {
	p, err := l.path(dir)
	if err != nil {
		return nil, err
	}
	ents, err := os.ReadDir(p)
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
		out = append(out, fromOS(info))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (l *Local) Stat(name string) (FileInfo, error) {
	p, err := l.path(name)
	if err != nil {
		return FileInfo{}, err
	}
	st, err := os.Stat(p)
	if err != nil {
		return FileInfo{}, err
	}
	return fromOS(st), nil
}

func fromOS(st os.FileInfo) FileInfo {
	return FileInfo{Name: st.Name(), Size: st.Size(), IsDir: st.IsDir(), ModTime: st.ModTime()}
}
