package schemaregistry

import (
	"context"
	"sync"
)

// byteBudget bounds the bytes that requests hold together: acquire waits
// while the budget is used up, release gives bytes back.
type byteBudget struct {
	mu    sync.Mutex // guards the fields below
	limit int64
	used  int64
	wake  chan struct{} // closed (and dropped) when bytes are given back
}

func newByteBudget(limit int64) *byteBudget { return &byteBudget{limit: limit} }

// acquire takes n bytes, waiting until they are free or ctx ends.
func (b *byteBudget) acquire(ctx context.Context, n int64) error {
	for {
		b.mu.Lock()
		if b.used+n <= b.limit {
			b.used += n
			b.mu.Unlock()
			return nil
		}
		if b.wake == nil {
			b.wake = make(chan struct{})
		}
		wake := b.wake
		b.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// release gives back n bytes taken by acquire.
func (b *byteBudget) release(n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if b.wake != nil {
		close(b.wake)
		b.wake = nil
	}
}

// inUse is the bytes taken and not given back.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}
