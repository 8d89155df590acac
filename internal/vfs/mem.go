package vfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sluicehq/sluice/internal/clock"
)

// Mem is an in-memory FS that tracks what is durable. Crash reverts it to the
// state a machine would see after power loss: every file keeps only the bytes
// of its last Sync, and only directory entries made durable by SyncDir exist.
// It is safe for concurrent use. Names are slash-separated; a relative name
// is taken from the root ("a/b" is "/a/b").
type Mem struct {
	clock clock.Clock // modification times

	mu      sync.Mutex // guards the fields below
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
	mu        sync.RWMutex // guards the fields below
	isDir     bool
	mod       time.Time
	data      []byte
	synced    []byte
	dirtyFrom int64 // data[dirtyFrom:] may differ from synced; Sync copies only that
}

var _ FS = (*Mem)(nil)

// NewMem returns an empty in-memory file system whose modification times
// come from the wall clock.
func NewMem() *Mem { return NewMemClock(clock.Real{}) }

// NewMemClock returns an empty in-memory file system whose modification
// times come from c.
func NewMemClock(c clock.Clock) *Mem {
	return &Mem{clock: clock.OrReal(c), live: newNamespace(), durable: newNamespace()}
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

// Create implements FS: it creates or truncates a file.
func (m *Mem) Create(name string) (File, error) { return m.create(name, false) }

// CreateExclusive implements FS.
func (m *Mem) CreateExclusive(name string) (File, error) { return m.create(name, true) }

func (m *Mem) create(name string, exclusive bool) (File, error) {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.newFileLocked(p, exclusive)
	if err != nil {
		return nil, err
	}
	return &memFile{fs: m, n: n, gen: m.gen, name: p, write: true}, nil
}

// newFileLocked puts an empty file at p. A new node: the old one (if any)
// may still be referenced by durable state.
func (m *Mem) newFileLocked(p string, exclusive bool) (*memNode, error) {
	if err := m.parentExists(p); err != nil {
		return nil, err
	}
	if n, ok := m.live.get(p); ok {
		if exclusive {
			return nil, &fs.PathError{Op: "create", Path: p, Err: ErrExist}
		}
		if n.isDir {
			return nil, &fs.PathError{Op: "create", Path: p, Err: errors.New("is a directory")}
		}
	}
	n := &memNode{mod: m.clock.Now()}
	m.live.set(p, n)
	return n, nil
}

// WriteExclusive implements FS: the file appears whole, with its data and
// its directory entry durable.
func (m *Mem) WriteExclusive(name string, data []byte) error {
	p := clean(name)
	m.mu.Lock()
	defer m.mu.Unlock()
	n, err := m.newFileLocked(p, true)
	if err != nil {
		return err
	}
	n.data = append([]byte(nil), data...)
	n.synced = append([]byte(nil), data...)
	n.dirtyFrom = int64(len(data))
	return m.syncDirLocked(path.Dir(p))
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

// Remove implements FS.
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

// RemoveAll implements FS.
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

// RenameReplace implements FS: a file or a directory moves atomically (a
// directory only to a name that does not exist).
func (m *Mem) RenameReplace(oldname, newname string) error {
	op, np := clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.renameLocked(op, np)
}

// RenameNoReplace implements FS: ErrExist if newname exists; the move is
// atomic and the new name is made durable (SyncDir of its directory).
func (m *Mem) RenameNoReplace(oldname, newname string) error {
	op, np := clean(oldname), clean(newname)
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.live.get(op); !ok {
		return &fs.PathError{Op: "rename", Path: op, Err: fs.ErrNotExist}
	}
	if _, ok := m.live.get(np); ok {
		return &fs.PathError{Op: "rename", Path: np, Err: ErrExist}
	}
	if err := m.renameLocked(op, np); err != nil {
		return err
	}
	return m.syncDirLocked(path.Dir(np))
}

func (m *Mem) renameLocked(op, np string) error {
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
		if strings.HasPrefix(np, op+"/") {
			return &fs.PathError{Op: "rename", Path: np, Err: ErrBadPath}
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

// MkdirAll implements FS.
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
		m.live.set(d, &memNode{isDir: true, mod: m.clock.Now()})
	}
	return nil
}

// List implements FS.
func (m *Mem) List(dir string) ([]FileInfo, error) {
	p := clean(dir)
	m.mu.Lock()
	defer m.mu.Unlock()
	if !isRoot(p) {
		if n, ok := m.live.get(p); !ok || !n.isDir {
			return nil, &fs.PathError{Op: "readdir", Path: p, Err: fs.ErrNotExist}
		}
	}
	var out []FileInfo
	for _, q := range m.live.children(p) {
		if q != p {
			out = append(out, m.live.nodes[q].info(path.Base(q)))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (n *memNode) info(name string) FileInfo {
	n.mu.RLock()
	defer n.mu.RUnlock()
	return FileInfo{Name: name, Size: int64(len(n.data)), IsDir: n.isDir, ModTime: n.mod}
}

// Stat implements FS.
func (m *Mem) Stat(name string) (FileInfo, error) {
	p := clean(name)
	m.mu.Lock()
	n, ok := m.live.get(p)
	m.mu.Unlock()
	if !ok {
		if isRoot(p) {
			return FileInfo{Name: "/", IsDir: true}, nil
		}
		return FileInfo{}, &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return n.info(path.Base(p)), nil
}

// SyncDir implements FS: dir's current entries become durable.
func (m *Mem) SyncDir(dir string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.syncDirLocked(clean(dir))
}

func (m *Mem) syncDirLocked(p string) error {
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

// String implements FS.
func (m *Mem) String() string { return "mem://" }

// Close implements FS; it does nothing.
func (m *Mem) Close() error { return nil }

// memFile is one handle. Read and Write (and their position) are not safe
// for concurrent use of one handle; ReadAt and WriteAt are.
type memFile struct {
	fs     *Mem
	n      *memNode
	gen    int
	name   string
	write  bool
	closed bool
	pos    int64
}

func (f *memFile) Read(p []byte) (int, error) {
	n, err := f.ReadAt(p, f.pos)
	f.pos += int64(n)
	if err == io.EOF && n > 0 {
		err = nil
	}
	return n, err
}

func (f *memFile) Write(p []byte) (int, error) {
	n, err := f.WriteAt(p, f.pos)
	f.pos += int64(n)
	return n, err
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
	f.n.mod = f.fs.clock.Now()
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
