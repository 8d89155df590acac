package vfs

import (
	"errors"
	"io/fs"
	"path"
)

// DurableFS makes each step of the writers' commit protocol durable when
// it returns nil, so that code built on it never calls Sync or SyncDir:
//
//   - Create and CreateExclusive return files whose Close syncs the file,
//     closes it and syncs its directory (the directory's other entries with
//     it, as an fsync of a directory does). A Close that did not return nil
//     leaves the file empty, partial or complete.
//   - RenameNoReplace and RenameReplace sync the directories of both names.
//   - MkdirAll syncs each directory it creates into its parent.
//   - WriteExclusive is durable by FS's contract already.
//   - Remove and RemoveAll are not synced (after a crash a removed entry may
//     be back), and a missing path is no error for either; RemoveAll of the
//     root is refused (ErrBadPath).
//
// Names are relative (Clean's rules). DurableFS owns the FS beneath: its
// Close closes it.
type DurableFS struct {
	fs FS
}

var _ FS = (*DurableFS)(nil)

// Durable returns fsys with each acknowledged step made durable.
func Durable(fsys FS) *DurableFS { return &DurableFS{fs: fsys} }

// Parent returns the FS beneath.
func (d *DurableFS) Parent() FS { return d.fs }

func (d *DurableFS) file(name string, f File, err error) (File, error) {
	if err != nil {
		return nil, err
	}
	return &durableFile{File: f, fs: d.fs, dir: path.Dir(name)}, nil
}

// Create implements FS.
func (d *DurableFS) Create(name string) (File, error) {
	c, err := Clean(name)
	if err != nil {
		return nil, err
	}
	f, err := d.fs.Create(c)
	return d.file(c, f, err)
}

// CreateExclusive implements FS.
func (d *DurableFS) CreateExclusive(name string) (File, error) {
	c, err := Clean(name)
	if err != nil {
		return nil, err
	}
	f, err := d.fs.CreateExclusive(c)
	return d.file(c, f, err)
}

// durableFile syncs on Close.
type durableFile struct {
	File
	fs  FS
	dir string
}

func (f *durableFile) Close() error {
	serr := f.File.Sync()
	cerr := f.File.Close()
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return cerr
	}
	return f.fs.SyncDir(f.dir)
}

// WriteExclusive implements FS.
func (d *DurableFS) WriteExclusive(name string, data []byte) error {
	c, err := Clean(name)
	if err != nil {
		return err
	}
	return d.fs.WriteExclusive(c, data)
}

// Open implements FS.
func (d *DurableFS) Open(name string) (File, error) {
	c, err := Clean(name)
	if err != nil {
		return nil, err
	}
	return d.fs.Open(c)
}

// OpenReadWrite implements FS.
func (d *DurableFS) OpenReadWrite(name string) (File, error) {
	c, err := Clean(name)
	if err != nil {
		return nil, err
	}
	f, err := d.fs.OpenReadWrite(c)
	return d.file(c, f, err)
}

func cleanPair(oldname, newname string) (string, string, error) {
	o, err := Clean(oldname)
	if err != nil {
		return "", "", err
	}
	n, err := Clean(newname)
	return o, n, err
}

// RenameReplace implements FS.
func (d *DurableFS) RenameReplace(oldname, newname string) error {
	o, n, err := cleanPair(oldname, newname)
	if err != nil {
		return err
	}
	if err := d.fs.RenameReplace(o, n); err != nil {
		return err
	}
	return d.syncDirs(o, n)
}

// RenameNoReplace implements FS.
func (d *DurableFS) RenameNoReplace(oldname, newname string) error {
	o, n, err := cleanPair(oldname, newname)
	if err != nil {
		return err
	}
	if err := d.fs.RenameNoReplace(o, n); err != nil {
		return err
	}
	// The new name is durable by FS's contract; the old name's removal
	// needs its directory synced.
	return d.fs.SyncDir(path.Dir(o))
}

// syncDirs syncs the directories of both names.
func (d *DurableFS) syncDirs(o, n string) error {
	if err := d.fs.SyncDir(path.Dir(n)); err != nil {
		return err
	}
	if path.Dir(o) == path.Dir(n) {
		return nil
	}
	return d.fs.SyncDir(path.Dir(o))
}

// Remove implements FS; a missing path is no error.
func (d *DurableFS) Remove(name string) error {
	c, err := Clean(name)
	if err != nil {
		return err
	}
	if err := d.fs.Remove(c); err != nil && !errors.Is(err, ErrNotExist) {
		return err
	}
	return nil
}

// RemoveAll implements FS; the root is refused.
func (d *DurableFS) RemoveAll(name string) error {
	c, err := Clean(name)
	if err != nil {
		return err
	}
	if c == "." {
		return &fs.PathError{Op: "removeall", Path: name, Err: ErrBadPath}
	}
	if err := d.fs.RemoveAll(c); err != nil && !errors.Is(err, ErrNotExist) {
		return err
	}
	return nil
}

// MkdirAll implements FS: each directory it creates is synced into its
// parent, so a new directory (and what is later made durable in it)
// survives a crash.
func (d *DurableFS) MkdirAll(dir string) error {
	c, err := Clean(dir)
	if err != nil {
		return err
	}
	var missing []string
	for p := c; p != "."; p = path.Dir(p) {
		st, err := d.fs.Stat(p)
		if err == nil {
			if !st.IsDir {
				return &fs.PathError{Op: "mkdir", Path: dir, Err: errors.New(p + " is not a directory")}
			}
			break
		}
		if !errors.Is(err, ErrNotExist) {
			return err
		}
		missing = append(missing, p)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := d.fs.MkdirAll(c); err != nil {
		return err
	}
	for i := len(missing) - 1; i >= 0; i-- {
		if err := d.fs.SyncDir(path.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// List implements FS.
func (d *DurableFS) List(dir string) ([]FileInfo, error) {
	c, err := Clean(dir)
	if err != nil {
		return nil, err
	}
	return d.fs.List(c)
}

// Stat implements FS.
func (d *DurableFS) Stat(name string) (FileInfo, error) {
	c, err := Clean(name)
	if err != nil {
		return FileInfo{}, err
	}
	return d.fs.Stat(c)
}

// SyncDir implements FS.
func (d *DurableFS) SyncDir(dir string) error {
	c, err := Clean(dir)
	if err != nil {
		return err
	}
	return d.fs.SyncDir(c)
}

// String implements FS.
func (d *DurableFS) String() string { return d.fs.String() }

// Close implements FS: it closes the FS beneath.
func (d *DurableFS) Close() error { return d.fs.Close() }
