package server

import (
	"context"
	"sync"
)

// requestMemory bounds the bytes of request frames held by all connections
// together (queued.max.request.bytes): frames being read and frames read but
// not yet answered. A connection reserves memory as its frame buffer grows,
// which it does only as bytes arrive, so a size prefix that lies costs
// nothing until the bytes come. When the bound is used up, connections stop
// reading (TCP then pushes back on the clients) until answered frames release
// their memory.
//
// No deadlock: a reader that must wait in the middle of a frame may take the
// single overflow pass and finish that frame beyond the bound; the pass is
// given back when that frame is answered (or abandoned), so some frame always
// completes and at most one frame is beyond the bound at a time. Hence at
// most queued.max.request.bytes plus the last growth step admitted below it
// plus one frame are held: the bound plus two frames at worst.
type requestMemory struct {
	limit   int64 // < 0: no bound (queued.max.request.bytes <= 0, as in Kafka)
	metrics *metrics

	mu       sync.Mutex // guards the fields below
	used     int64
	wake     chan struct{} // closed (and dropped) when memory is released
	overflow frameID       // the frame read beyond the bound; zero: none
}

// frameID names one frame of one connection.
type frameID struct {
	c   *conn
	seq uint64
}

func newRequestMemory(limit int64, m *metrics) *requestMemory {
	if limit <= 0 {
		limit = -1
	}
	return &requestMemory{limit: limit, metrics: m}
}

// reserve adds n bytes for frame f, waiting while the bound is used up.
// midFrame says f has begun arriving (and so may take the overflow pass). It
// returns false if ctx ended while waiting.
func (m *requestMemory) reserve(ctx context.Context, f frameID, n int64, midFrame bool) bool {
	waited := false
	for {
		m.mu.Lock()
		full := m.limit >= 0 && m.used >= m.limit
		if full && midFrame && m.overflow == (frameID{}) {
			m.overflow = f
		}
		if !full || m.overflow == f {
			m.used += n
			m.mu.Unlock()
			m.metrics.queuedBytes.Add(float64(n))
			return true
		}
		if m.wake == nil {
			m.wake = make(chan struct{})
		}
		wake := m.wake
		m.mu.Unlock()
		if !waited {
			waited = true
			m.metrics.readWaits.Inc()
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return false
		}
	}
}

// release returns n reserved bytes.
func (m *requestMemory) release(n int64) {
	if n == 0 {
		return
	}
	m.mu.Lock()
	m.used -= n
	m.wakeLocked()
	m.mu.Unlock()
	m.metrics.queuedBytes.Sub(float64(n))
}

// done gives back frame f's n reserved bytes, and the overflow pass if f
// holds it: f was answered or abandoned.
func (m *requestMemory) done(f frameID, n int64) {
	m.mu.Lock()
	if m.overflow == f {
		m.overflow = frameID{}
		m.wakeLocked()
	}
	m.mu.Unlock()
	m.release(n)
}

func (m *requestMemory) wakeLocked() {
	if m.wake != nil {
		close(m.wake)
		m.wake = nil
	}
}

// inUse returns the bytes reserved (tests).
func (m *requestMemory) inUse() int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.used
}
