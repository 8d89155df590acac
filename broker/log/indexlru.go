package log

import (
	"container/list"
	"sync"
)

// defaultMaxLoadedIndexes bounds how many closed segments keep their offset
// and time indexes in memory when ManagerOptions.MaxLoadedIndexes is 0.
// A closed segment's indexes are loaded by a read, a time lookup or a
// retention pass; with 10 MiB index files that is up to ~20 MiB each, so
// without a bound retention alone would eventually load every index.
const defaultMaxLoadedIndexes = 1024

// indexLRU bounds the number of closed (sealed) segments whose indexes are
// in memory. Active segments are never tracked: appends add to their indexes.
// A segment is unloaded only when its indexes are all in the files (nothing
// to rewrite), so unloading loses nothing; a later load reads them back.
//
// Lock order: segment.mu and indexLRU.mu are never held together; touch
// takes victims out of the list under indexLRU.mu, then unloads each under
// its own segment.mu.
type indexLRU struct {
	max     int
	metrics *counters

	mu    sync.Mutex
	lru   list.List // of *segment, front = most recently used
	elems map[*segment]*list.Element
}

func newIndexLRU(max int, m *counters) *indexLRU {
	if max <= 0 {
		max = defaultMaxLoadedIndexes
	}
	return &indexLRU{max: max, metrics: m, elems: map[*segment]*list.Element{}}
}

func (c *indexLRU) len() int {
	if c == nil {
		return 0
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lru.Len()
}

// touch records a use of s's loaded indexes and unloads the least recently
// used beyond the bound.
func (c *indexLRU) touch(s *segment) {
	if c == nil {
		return
	}
	c.mu.Lock()
	if e, ok := c.elems[s]; ok {
		c.lru.MoveToFront(e)
		c.mu.Unlock()
		return
	}
	c.elems[s] = c.lru.PushFront(s)
	var victims []*segment
	for c.lru.Len() > c.max {
		e := c.lru.Back()
		v := e.Value.(*segment)
		c.lru.Remove(e)
		delete(c.elems, v)
		victims = append(victims, v)
	}
	c.mu.Unlock()
	for _, v := range victims {
		if !v.unloadIndexes() {
			// Not yet written (or reactivated): keep it, try again later.
			c.mu.Lock()
			if _, ok := c.elems[v]; !ok && v.isSealed() {
				c.elems[v] = c.lru.PushFront(v)
			}
			c.mu.Unlock()
			continue
		}
		c.metrics.IndexUnloads.Add(1)
	}
}

// remove forgets s (deleted, or active again after a truncation).
func (c *indexLRU) remove(s *segment) {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.elems[s]; ok {
		c.lru.Remove(e)
		delete(c.elems, s)
	}
}

// seal marks s closed to appends: from now on its indexes may be unloaded.
func (s *segment) seal() {
	s.mu.Lock()
	s.sealed = true
	s.mu.Unlock()
}

func (s *segment) isSealed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sealed
}

// unloadIndexes drops a sealed segment's in-memory indexes if the files hold
// all of them; it reports whether it did. Readers holding the old slices keep
// using them.
func (s *segment) unloadIndexes() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.sealed || !s.loaded || s.rewrite || s.indexWritten != len(s.index) || s.timeWritten != len(s.timeIndex) {
		return false
	}
	s.index, s.timeIndex, s.maxTs, s.maxTsRel = nil, nil, -1, 0
	s.indexWritten, s.timeWritten = 0, 0
	s.loaded = false
	return true
}

// ensureLoaded loads s's indexes if needed and, for a sealed segment, counts
// the use in the manager's index LRU.
func (l *Log) ensureLoaded(s *segment, size int64) error {
	s.mu.Lock()
	was := s.loaded
	err := s.loadIndexesLocked(l.fs, size)
	sealed := s.sealed
	s.mu.Unlock()
	if err != nil || !sealed {
		return err
	}
	if !was {
		l.metrics.IndexLoads.Add(1)
	}
	l.indexes.touch(s)
	return nil
}
