package filesystem

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"
)

// Mem is an in-memory FS that models what the local FS makes durable, so
// tests can simulate a power loss: Crash keeps only what was synced. It
// follows Local call for call:
//
//   - a file's data is durable once its Close returned nil (fsync), and so
//     is its directory's listing then (fsync of the directory), including the
//     entries of other files of that directory, with whatever of their data
//     was synced (nothing, for a file still being written);
//   - WriteExclusive and Rename sync the directories they change;
//   - MkdirAll syncs each new directory into its parent;
//   - Remove and RemoveAll sync nothing: after a crash the entries are back
//     unless a later sync of their directory recorded the removal.
//
// An entry survives a crash only if every directory above it does.
type Mem struct {
	clock func() time.Time

	mu      sync.Mutex          // guards the fields below
	live    map[string]*memNode // what the running system sees
	durable map[string]*memNode // directory entries as last synced
}

type memNode struct {
	dir    bool
	data   []byte // as written
	synced []byte // as of the last fsync of the file
	mod    time.Time
}

// NewMem returns an empty Mem; clock gives modification times (nil:
// time.Now).
func NewMem(clock func() time.Time) *Mem {
	if clock == nil {
		clock = time.Now
	}
	root := &memNode{dir: true, mod: clock()}
	return &Mem{clock: clock, live: map[string]*memNode{".": root}, durable: map[string]*memNode{".": root}}
}

// Crash simulates a power loss: the FS becomes what was durable. Files
// open before the crash write into nothing.
func (m *Mem) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	paths := make([]string, 0, len(m.durable))
	for p := range m.durable {
		paths = append(paths, p)
	}
	sort.Slice(paths, func(i, j int) bool {
		return strings.Count(paths[i], "/") < strings.Count(paths[j], "/") || (strings.Count(paths[i], "/") == strings.Count(paths[j], "/") && paths[i] < paths[j])
	})
	live := map[string]*memNode{}
	for _, p := range paths {
		n := m.durable[p]
		if p != "." {
			if parent, ok := live[path.Dir(p)]; !ok || !parent.dir {
				continue // its directory did not survive
			}
		}
		live[p] = &memNode{dir: n.dir, data: bytes.Clone(n.synced), synced: bytes.Clone(n.synced), mod: n.mod}
	}
	m.live = live
	m.durable = map[string]*memNode{}
	for p, n := range live {
		m.durable[p] = n
	}
}

// String implements FS.
func (m *Mem) String() string { return "mem://" }

// Close implements FS.
func (m *Mem) Close() error { return nil }

func memErr(op, name string, err error) error { return &fs.PathError{Op: op, Path: name, Err: err} }

// syncDirLocked makes the listing of dir durable: its durable children
// become exactly its live children.
func (m *Mem) syncDirLocked(dir string) error {
	if n, ok := m.live[dir]; !ok || !n.dir {
		return memErr("sync", dir, ErrNotExist)
	}
	for p := range m.durable {
		if p != "." && path.Dir(p) == dir && m.live[p] != m.durable[p] {
			delete(m.durable, p)
		}
	}
	for p, n := range m.live {
		if p != "." && path.Dir(p) == dir {
			m.durable[p] = n
		}
	}
	return nil
}

// parentLocked checks that name's parent is a live directory.
func (m *Mem) parentLocked(op, name string) error {
	if n, ok := m.live[path.Dir(name)]; !ok || !n.dir {
		return memErr(op, name, ErrNotExist)
	}
	return nil
}

// Create implements FS.
func (m *Mem) Create(name string) (File, error) {
	p, err := Clean(name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.parentLocked("create", p); err != nil {
		return nil, err
	}
	if _, ok := m.live[p]; ok {
		return nil, memErr("create", name, ErrExist)
	}
	n := &memNode{mod: m.clock()}
	m.live[p] = n
	return &memFile{m: m, path: p, n: n}, nil
}

type memFile struct {
	m      *Mem
	path   string
	n      *memNode
	closed bool
}

func (f *memFile) Write(b []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return 0, memErr("write", f.path, fs.ErrClosed)
	}
	f.n.data = append(f.n.data, b...)
	f.n.mod = f.m.clock()
	return len(b), nil
}

// Close fsyncs the file and its directory, as Local does.
func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if f.closed {
		return memErr("close", f.path, fs.ErrClosed)
	}
	f.closed = true
	f.n.synced = bytes.Clone(f.n.data)
	return f.m.syncDirLocked(path.Dir(f.path))
}

// WriteExclusive implements FS: like Local, durable before it returns nil.
func (m *Mem) WriteExclusive(name string, data []byte) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.parentLocked("create", p); err != nil {
		return err
	}
	if _, ok := m.live[p]; ok {
		return memErr("create", name, ErrExist)
	}
	m.live[p] = &memNode{data: bytes.Clone(data), synced: bytes.Clone(data), mod: m.clock()}
	return m.syncDirLocked(path.Dir(p))
}

// Open implements FS.
func (m *Mem) Open(name string) (io.ReadCloser, error) {
	p, err := Clean(name)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[p]
	if !ok {
		return nil, memErr("open", name, ErrNotExist)
	}
	if n.dir {
		return nil, memErr("open", name, fmt.Errorf("is a directory"))
	}
	return io.NopCloser(bytes.NewReader(bytes.Clone(n.data))), nil
}

// Rename implements FS without replacing, syncing as Local does: a file's
// new and old directories, a directory's new parent only.
func (m *Mem) Rename(oldname, newname string) error {
	op, err := Clean(oldname)
	if err != nil {
		return err
	}
	np, err := Clean(newname)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[op]
	if !ok {
		return memErr("rename", oldname, ErrNotExist)
	}
	if _, ok := m.live[np]; ok {
		return memErr("rename", newname, ErrExist)
	}
	if err := m.parentLocked("rename", np); err != nil {
		return err
	}
	if n.dir && (np == op || strings.HasPrefix(np, op+"/")) {
		return memErr("rename", newname, ErrBadPath)
	}
	for p, c := range m.live {
		if p == op || strings.HasPrefix(p, op+"/") {
			delete(m.live, p)
			m.live[np+strings.TrimPrefix(p, op)] = c
		}
	}
	if err := m.syncDirLocked(path.Dir(np)); err != nil {
		return err
	}
	if n.dir {
		return nil
	}
	return m.syncDirLocked(path.Dir(op))
}

// Remove implements FS (not synced).
func (m *Mem) Remove(name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[p]
	if !ok {
		return nil
	}
	if n.dir {
		for q := range m.live {
			if strings.HasPrefix(q, p+"/") {
				return memErr("remove", name, fmt.Errorf("directory not empty"))
			}
		}
	}
	delete(m.live, p)
	return nil
}

// RemoveAll implements FS (not synced).
func (m *Mem) RemoveAll(name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	if p == "." {
		return memErr("removeall", name, ErrBadPath)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	for q := range m.live {
		if q == p || strings.HasPrefix(q, p+"/") {
			delete(m.live, q)
		}
	}
	return nil
}

// MkdirAll implements FS: each new directory is synced into its parent.
func (m *Mem) MkdirAll(name string) error {
	p, err := Clean(name)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	var missing []string
	for d := p; d != "."; d = path.Dir(d) {
		n, ok := m.live[d]
		if ok && !n.dir {
			return memErr("mkdir", d, fmt.Errorf("not a directory"))
		}
		if ok {
			break
		}
		missing = append(missing, d)
	}
	for i := len(missing) - 1; i >= 0; i-- {
		m.live[missing[i]] = &memNode{dir: true, mod: m.clock()}
		if err := m.syncDirLocked(path.Dir(missing[i])); err != nil {
			return err
		}
	}
	return nil
}

// List implements FS.
func (m *Mem) List(dir string) ([]FileInfo, error) {
	p, err := Clean(dir)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if n, ok := m.live[p]; !ok || !n.dir {
		return nil, memErr("list", dir, ErrNotExist)
	}
	var out []FileInfo
	for q, n := range m.live {
		if q != "." && path.Dir(q) == p {
			out = append(out, FileInfo{Name: path.Base(q), Size: int64(len(n.data)), IsDir: n.dir, ModTime: n.mod})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Stat implements FS.
func (m *Mem) Stat(name string) (FileInfo, error) {
	p, err := Clean(name)
	if err != nil {
		return FileInfo{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live[p]
	if !ok {
		return FileInfo{}, memErr("stat", name, ErrNotExist)
	}
	return FileInfo{Name: path.Base(p), Size: int64(len(n.data)), IsDir: n.dir, ModTime: n.mod}, nil
}
