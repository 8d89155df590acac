package log

import (
	"container/list"
	"fmt"
	"sync"
	"syscall"

	"github.com/sluicehq/sluice/internal/vfs"
)

// defaultMaxOpenFiles bounds the segment file handles a Manager keeps open
// when ManagerOptions.MaxOpenFiles is 0 (or half of RLIMIT_NOFILE, if lower).
const defaultMaxOpenFiles = 1024

// fileCache keeps a bounded number of segment files open. A handle in use
// (pinned by an append, a flush or an unreleased Region) stays open; idle
// handles sit in an LRU list and the least recently used is closed when the
// bound is exceeded. It is reopened on demand. Index files are not cached:
// they are opened only for the moment they are written or loaded.
type fileCache struct {
	fs  vfs.FS
	max int

	mu      sync.Mutex // guards everything below and every handle's fields
	open    int
	lru     list.List // of *handle: open, unpinned, front = most recently used
	reopens int64     // files reopened after an eviction (metric)
}

// handle is one segment file as seen by the cache.
type handle struct {
	path string
	// Guarded by fileCache.mu.
	f       vfs.File
	pins    int
	elem    *list.Element
	removed bool // the segment was deleted or closed: close the file at the last release
	opened  bool // opened at least once (for the reopen metric)
}

func newFileCache(fsys vfs.FS, max int) *fileCache {
	if max <= 0 {
		max = defaultMaxOpenFiles
		// Leave at least half of the process's descriptors to sockets and the rest.
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err == nil && lim.Cur/2 < uint64(max) {
			max = int(max64(lim.Cur/2, 16))
		}
	}
	return &fileCache{fs: fsys, max: max}
}

func max64(a, b uint64) uint64 {
	if a > b {
		return a
	}
	return b
}

// acquire pins h's file, opening it if it is not open.
func (c *fileCache) acquire(h *handle) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if h.removed {
		return nil, fmt.Errorf("%w: segment %s", ErrClosed, h.path)
	}
	if h.f == nil {
		f, err := c.fs.OpenReadWrite(h.path)
		if err != nil {
			return nil, fmt.Errorf("log: open segment: %w", err)
		}
		if h.opened {
			c.reopens++
		}
		h.f, h.opened = f, true
		c.open++
	}
	if h.elem != nil {
		c.lru.Remove(h.elem)
		h.elem = nil
	}
	h.pins++
	c.evictLocked()
	return h.f, nil
}

// adopt installs an already open file (for example a just created segment)
// as h's file, pinned once; the caller releases it.
func (c *fileCache) adopt(h *handle, f vfs.File) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.f, h.opened = f, true
	h.pins++
	c.open++
	c.evictLocked()
}

// release unpins h.
func (c *fileCache) release(h *handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.pins--
	if h.pins > 0 {
		return
	}
	if h.removed {
		c.closeLocked(h)
		return
	}
	h.elem = c.lru.PushFront(h)
	c.evictLocked()
}

// remove marks h gone (segment deleted or log closed); its file is closed now
// or at the last release.
func (c *fileCache) remove(h *handle) {
	c.mu.Lock()
	defer c.mu.Unlock()
	h.removed = true
	if h.pins == 0 {
		c.closeLocked(h)
	}
}

func (c *fileCache) closeLocked(h *handle) {
	if h.elem != nil {
		c.lru.Remove(h.elem)
		h.elem = nil
	}
	if h.f != nil {
		_ = h.f.Close() // read/write errors were already reported; close only frees the descriptor
		h.f = nil
		c.open--
	}
}

func (c *fileCache) evictLocked() {
	for c.open > c.max && c.lru.Len() > 0 {
		h := c.lru.Remove(c.lru.Back()).(*handle)
		h.elem = nil
		_ = h.f.Close()
		h.f = nil
		c.open--
	}
}

func (c *fileCache) stats() (open int, reopens int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.open, c.reopens
}
