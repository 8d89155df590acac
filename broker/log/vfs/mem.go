package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"sync"
)

// ErrCrashed is returned by a Mem file handle opened before Mem.Crash.
var ErrCrashed = errors.New("vfs: file handle from before a simulated crash")

// Mem is an in-memory FS that tracks what is durable. Crash reverts it to the
// state a machine would see after power loss: every file keeps only the bytes
// of its last Sync, and only directory entries made durable by SyncDir exist.
// It is safe for concurrent use.
type Mem struct {
	mu      sync.Mutex
	gen     int
	live    *namespace // current namespace
	durable *namespace // namespace as of the last SyncDir of each directory
}

// namespace maps paths to nodes and indexes them by parent directory, so
// that listing, syncing or removing a directory costs its own entries, not
// the whole file system's (a data directory may hold 65,536 partitions).
type namespace struct {
	nodes map[string]*memNode
	kids  map[string]map[string]struct{} // parent path -> full paths of its entries
}

func newNamespace() *namespace {
	return &namespace{nodes: map[string]*memNode{}, kids: map[string]map[string]struct{}{}}
}

func (ns *namespace) get(p string) (*memNode, bool) { n, ok := ns.nodes[p]; return n, ok }

func (ns *namespace) set(p string, n *memNode) {
	if _, ok := ns.nodes[p]; !ok {
		d := path.Dir(p)
		k := ns.kids[d]
		if k == nil {
			k = map[string]struct{}{}
			ns.kids[d] = k
		}
		k[p] = struct{}{}
	}
	ns.nodes[p] = n
}

func (ns *namespace) del(p string) {
	if _, ok := ns.nodes[p]; !ok {
		return
	}
	delete(ns.nodes, p)
	d := path.Dir(p)
	if k := ns.kids[d]; k != nil {
		delete(k, p)
		if len(k) == 0 {
			delete(ns.kids, d)
		}
	}
}

// children returns the full paths of dir's entries.
func (ns *namespace) children(dir string) []string {
	out := make([]string, 0, len(ns.kids[dir]))
	for q := range ns.kids[dir] {
		out = append(out, q)
	}
	return out
}

// descendants returns the full paths of everything below dir.
func (ns *namespace) descendants(dir string) []string {
	var out []string
	stack := []string{dir}
	for len(stack) > 0 {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for q := range ns.kids[d] {
			out = append(out, q)
			stack = append(stack, q)
		}
	}
	return out
}

type memNode struct {
	mu        sync.RWMutex
	isDir     bool
	data      []byte
	synced    []byte
	dirtyFrom int64 // data[dirtyFrom:] may differ from synced; Sync copies only that
}

// NewMem returns an empty in-memory file system.
func NewMem() *Mem {
	return &Mem{live: newNamespace(), durable: newNamespace()}
}

func clean(name string) string { return path.Clean("/" + name) }

func isRoot(p string) bool { return p == "/" }

// Crash simulates power loss: unsynced data and unsynced directory entries are
// lost, and every open handle starts failing with ErrCrashed.
func (m *Mem) Crash() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.gen++
	live := newNamespace()
	for p, n := range m.durable.nodes {
		// An entry survives only if every ancestor directory survived.
		ok := true
		for d := path.Dir(p); !isRoot(d); d = path.Dir(d) {
			if _, found := m.durable.get(d); !found {
				ok = false
				break
			}
		}
		if !ok {
			continue
		}
		n.mu.Lock()
		n.data = append([]byte(nil), n.synced...)
		n.dirtyFrom = int64(len(n.data))
		n.mu.Unlock()
		live.set(p, n)
	}
	m.live = live
	durable := newNamespace()
	for p, n := range live.nodes {
		durable.set(p, n)
	}
	m.durable = durable
}

func (m *Mem) parentExists(p string) error {
	d := path.Dir(p)
	if isRoot(d) {
		return nil
	}
	n, ok := m.live.get(d)
	if !ok || !n.isDir {
		return &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	return nil
}

// Create creates or truncates a file.
func (m *Mem) Create(name string) (File, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.parentExists(p); err != nil {
		return nil, err
	}
	if n, ok := m.live.get(p); ok && n.isDir {
		return nil, &fs.PathError{Op: "create", Path: p, Err: errors.New("is a directory")}
	}
	// A new node: the old one (if any) may still be referenced by durable state.
	n := &memNode{}
	m.live.set(p, n)
	return &memFile{fs: m, n: n, gen: m.gen, name: p, write: true}, nil
}

func (m *Mem) open(name string, write bool) (File, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live.get(p)
	if !ok {
		return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
	}
	if n.isDir {
		return nil, &fs.PathError{Op: "open", Path: p, Err: errors.New("is a directory")}
	}
	return &memFile{fs: m, n: n, gen: m.gen, name: p, write: write}, nil
}

// OpenReadWrite opens an existing file for reading and writing.
func (m *Mem) OpenReadWrite(name string) (File, error) { return m.open(name, true) }

// Open opens an existing file for reading.
func (m *Mem) Open(name string) (File, error) { return m.open(name, false) }

// Remove removes a file or an empty directory.
func (m *Mem) Remove(name string) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live.get(p)
	if !ok {
		return &fs.PathError{Op: "remove", Path: p, Err: fs.ErrNotExist}
	}
	if n.isDir && len(m.live.kids[p]) > 0 {
		return &fs.PathError{Op: "remove", Path: p, Err: errors.New("directory not empty")}
	}
	m.live.del(p)
	return nil
}

// RemoveAll removes a tree.
func (m *Mem) RemoveAll(name string) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, q := range m.live.descendants(p) {
		m.live.del(q)
	}
	m.live.del(p)
	return nil
}

// Rename renames a file or a directory atomically (a directory only to a
// name that does not exist).
func (m *Mem) Rename(oldname, newname string) error {
	op, np := clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, ok := m.live.get(op)
	if !ok {
		return &fs.PathError{Op: "rename", Path: op, Err: fs.ErrNotExist}
	}
	if err := m.parentExists(np); err != nil {
		return err
	}
	if n.isDir {
		if _, exists := m.live.get(np); exists {
			return &fs.PathError{Op: "rename", Path: np, Err: fs.ErrExist}
		}
		// The tree moves with the directory; what was durable inside it
		// stays durable (the directory entry itself needs SyncDir of the parent).
		for _, ns := range []*namespace{m.live, m.durable} {
			for _, q := range ns.descendants(op) {
				c := ns.nodes[q]
				ns.del(q)
				ns.set(np+q[len(op):], c)
			}
		}
	}
	m.live.del(op)
	m.live.set(np, n)
	return nil
}

// MkdirAll creates a directory and its parents.
func (m *Mem) MkdirAll(dir string) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	var chain []string
	for d := p; !isRoot(d); d = path.Dir(d) {
		chain = append(chain, d)
	}
	for i := len(chain) - 1; i >= 0; i-- {
		d := chain[i]
		if n, ok := m.live.get(d); ok {
			if !n.isDir {
				return &fs.PathError{Op: "mkdir", Path: d, Err: errors.New("not a directory")}
			}
			continue
		}
		m.live.set(d, &memNode{isDir: true})
	}
	return nil
}

// List returns the sorted names of dir's entries.
func (m *Mem) List(dir string) ([]string, error) {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !isRoot(p) {
		if n, ok := m.live.get(p); !ok || !n.isDir {
			return nil, &fs.PathError{Op: "readdir", Path: p, Err: fs.ErrNotExist}
		}
	}
	var names []string
	for _, q := range m.live.children(p) {
		if q != p {
			names = append(names, path.Base(q))
		}
	}
	sort.Strings(names)
	return names, nil
}

// Stat reports a file's size and whether it is a directory.
func (m *Mem) Stat(name string) (int64, bool, error) {
	p := clean(name)
	m.mu.Lock()
	n, ok := m.live.get(p)
	m.mu.Unlock()
	if !ok {
		if isRoot(p) {
			return 0, true, nil
		}
		return 0, false, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	n.mu.RLock()
	defer n.mu.RUnlock()
	return int64(len(n.data)), n.isDir, nil
}

// SyncDir makes dir's current entries durable.
func (m *Mem) SyncDir(dir string) error {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !isRoot(p) {
		if n, ok := m.live.get(p); !ok || !n.isDir {
			return &fs.PathError{Op: "syncdir", Path: p, Err: fs.ErrNotExist}
		}
	}
	for _, q := range m.durable.children(p) {
		if q != p {
			m.durable.del(q)
		}
	}
	for _, q := range m.live.children(p) {
		if q != p {
			m.durable.set(q, m.live.nodes[q])
		}
	}
	return nil
}

type memFile struct {
	fs     *Mem
	n      *memNode
	gen    int
	name   string
	write  bool
	closed bool
}

func (f *memFile) check() error {
	if f.closed {
		return fmt.Errorf("vfs: %s: %w", f.name, fs.ErrClosed)
	}
	f.fs.mu.Lock()
	gen := f.fs.gen
	f.fs.mu.Unlock()
	if gen != f.gen {
		return fmt.Errorf("vfs: %s: %w", f.name, ErrCrashed)
	}
	return nil
}

func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, errors.New("vfs: negative offset")
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	if off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	n := copy(p, f.n.data[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	if !f.write {
		return 0, fmt.Errorf("vfs: %s opened read-only", f.name)
	}
	if off < 0 {
		return 0, errors.New("vfs: negative offset")
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	end := off + int64(len(p))
	if old := int64(len(f.n.data)); end > old {
		if end > int64(cap(f.n.data)) {
			grown := make([]byte, end, max(end, 2*int64(cap(f.n.data))))
			copy(grown, f.n.data)
			f.n.data = grown
		} else {
			f.n.data = f.n.data[:end]
		}
		if off > old {
			clear(f.n.data[old:off]) // a hole reads as zeros
		}
	}
	copy(f.n.data[off:], p)
	f.n.dirtyFrom = min(f.n.dirtyFrom, off)
	return len(p), nil
}

func (f *memFile) Close() error {
	if f.closed {
		return fmt.Errorf("vfs: %s: %w", f.name, fs.ErrClosed)
	}
	f.closed = true
	return nil
}

func (f *memFile) Sync() error {
	if err := f.check(); err != nil {
		return err
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	keep := min(f.n.dirtyFrom, int64(len(f.n.synced)), int64(len(f.n.data)))
	f.n.synced = append(f.n.synced[:keep], f.n.data[keep:]...)
	f.n.dirtyFrom = int64(len(f.n.data))
	return nil
}

func (f *memFile) Truncate(size int64) error {
	if err := f.check(); err != nil {
		return err
	}
	if !f.write {
		return fmt.Errorf("vfs: %s opened read-only", f.name)
	}
	f.n.mu.Lock()
	defer f.n.mu.Unlock()
	f.n.dirtyFrom = min(f.n.dirtyFrom, size)
	if size <= int64(len(f.n.data)) {
		f.n.data = f.n.data[:size]
		return nil
	}
	grown := make([]byte, size)
	copy(grown, f.n.data)
	f.n.data = grown
	return nil
}

func (f *memFile) Size() (int64, error) {
	if err := f.check(); err != nil {
		return 0, err
	}
	f.n.mu.RLock()
	defer f.n.mu.RUnlock()
	return int64(len(f.n.data)), nil
}
