package server

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"
)

// Incremental fetch sessions (KIP-227), used by Fetch v7+.
//
// A full fetch with SessionEpoch 0 creates a session holding the requested
// partitions; the answer carries its id. Later requests name the session
// and the next epoch and list only partitions whose fetch offset or limits
// changed (plus ForgottenTopics to drop); the answer lists only partitions
// with records, an error, or a high watermark / log start offset that
// changed since it was last sent. Epoch -1 closes a session (and the request
// is answered as a sessionless full fetch). At most
// max.incremental.fetch.session.cache.slots sessions are kept; creating one
// more evicts the least recently used, whose client then gets
// FETCH_SESSION_ID_NOT_FOUND and starts over with a full fetch.

// sessionKey names a partition in a session.
type sessionKey struct {
	topic     string
	partition int32
}

// sessionPart is a session's cached state of one partition.
type sessionPart struct {
	key         sessionKey
	fetchOffset int64
	maxBytes    int32
	leaderEpoch int32
	// What the client was last told; -1 (initially, and after an error)
	// forces the partition into the next answer.
	highWatermark  int64
	logStartOffset int64
}

// mustRespond reports whether an incremental answer has to include the
// partition, and records what is being sent (Kafka's
// CachedPartition.maybeUpdateResponseData).
func (p *sessionPart) mustRespond(code int16, hw, logStart, records int64) bool {
	must := records > 0
	if p.highWatermark != hw {
		must = true
		p.highWatermark = hw
	}
	if p.logStartOffset != logStart {
		must = true
		p.logStartOffset = logStart
	}
	if code != 0 {
		must = true
		p.highWatermark = -1
	}
	return must
}

// fetchSession is one client's session. mu is held for the whole of a
// Fetch that uses it (a client has one fetch in flight per session).
type fetchSession struct {
	id int32

	lastUsed atomic.Int64 // unix nanoseconds; read by eviction without mu

	mu    sync.Mutex // guards the fields below
	epoch int32      // the epoch the next request must carry
	parts map[sessionKey]*sessionPart
	order []*sessionPart // answer order: insertion order
}

func nextEpoch(e int32) int32 {
	if e == 1<<31-1 {
		return 1
	}
	return e + 1
}

// upsert adds or updates a partition.
func (fs *fetchSession) upsert(k sessionKey, fetchOffset int64, maxBytes, leaderEpoch int32) {
	if p, ok := fs.parts[k]; ok {
		p.fetchOffset, p.maxBytes, p.leaderEpoch = fetchOffset, maxBytes, leaderEpoch
		return
	}
	p := &sessionPart{key: k, fetchOffset: fetchOffset, maxBytes: maxBytes, leaderEpoch: leaderEpoch,
		highWatermark: -1, logStartOffset: -1}
	fs.parts[k] = p
	fs.order = append(fs.order, p)
}

// forget drops a partition.
func (fs *fetchSession) forget(k sessionKey) {
	p, ok := fs.parts[k]
	if !ok {
		return
	}
	delete(fs.parts, k)
	for i, q := range fs.order {
		if q == p {
			fs.order = append(fs.order[:i], fs.order[i+1:]...)
			break
		}
	}
}

// fetchSessions is the session cache.
type fetchSessions struct {
	slots int

	mu       sync.Mutex // guards sessions
	sessions map[int32]*fetchSession
}

func newFetchSessions(slots int) *fetchSessions {
	return &fetchSessions{slots: slots, sessions: map[int32]*fetchSession{}}
}

// create makes a new session (epoch 1 next), evicting the least recently
// used one when full; nil when sessions are disabled.
func (c *fetchSessions) create(now time.Time) *fetchSession {
	if c.slots <= 0 {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.sessions) >= c.slots {
		var lru *fetchSession
		for _, s := range c.sessions {
			if lru == nil || s.lastUsed.Load() < lru.lastUsed.Load() {
				lru = s
			}
		}
		delete(c.sessions, lru.id)
	}
	id := int32(0)
	for id == 0 || c.sessions[id] != nil {
		id = rand.Int32N(1<<31-1) + 1
	}
	s := &fetchSession{id: id, epoch: 1, parts: map[sessionKey]*sessionPart{}}
	s.lastUsed.Store(now.UnixNano())
	c.sessions[id] = s
	return s
}

func (c *fetchSessions) get(id int32) *fetchSession {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sessions[id]
}

func (c *fetchSessions) remove(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.sessions, id)
}

// count returns the number of live sessions.
func (c *fetchSessions) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}
