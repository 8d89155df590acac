package format

import (
	"math/bits"
	"sync"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is an Arrow allocator for one Parquet writer's record builders:
// a buffer freed when a row group has been written (the record released)
// is kept and handed out again for the next row group, instead of a fresh
// one for the garbage collector every time. Buffers come in power-of-two
// capacities, are zeroed when handed out (as Go's are), and at most
// maxKept bytes are kept. Not safe for concurrent use (one writer, one
// goroutine).
type recycler struct {
	free    [48][][]byte // by log2 of the capacity
	kept    int
	maxKept int
}

const recyclerMin = 6 // 64 bytes: smaller buffers are left to Go

func newRecycler(maxKept int) *recycler { return &recycler{maxKept: maxKept} }

func sizeClass(n int) int {
	if n <= 1<<recyclerMin {
		return recyclerMin
	}
	return bits.Len(uint(n - 1))
}

// Allocate returns a zeroed buffer of size bytes.
func (r *recycler) Allocate(size int) []byte {
	c := sizeClass(size)
	if c >= len(r.free) {
		return memory.DefaultAllocator.Allocate(size)
	}
	if l := r.free[c]; len(l) > 0 {
		b := l[len(l)-1]
		l[len(l)-1] = nil
		r.free[c] = l[:len(l)-1]
		r.kept -= cap(b)
		b = b[:size]
		clear(b)
		return b
	}
	return make([]byte, size, 1<<c)
}

// Reallocate grows b to size bytes, keeping its contents.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if cap(b) >= size {
		n := len(b)
		b = b[:size]
		if size > n {
			clear(b[n:])
		}
		return b
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free keeps b for reuse if it is one of ours and there is room.
func (r *recycler) Free(b []byte) {
	c := cap(b)
	if c < 1<<recyclerMin || c&(c-1) != 0 || r.kept+c > r.maxKept {
		return
	}
	k := bits.Len(uint(c)) - 1
	if k >= len(r.free) {
		return
	}
	r.kept += c
	r.free[k] = append(r.free[k], b[:0])
}

// reset drops every kept buffer.
func (r *recycler) reset() {
	clear(r.free[:])
	r.kept = 0
}

// sharedPool is the recycler the Parquet writers of a process share, so a
// file's buffers serve the next file (a load closes and opens files all
// the time) instead of fresh memory from the system, zeroed page by page.
// It holds at most sharedKept bytes, and lets all go when no writer is open.
type sharedPool struct {
	mu   sync.Mutex
	r    *recycler
	open int
}

// sharedKept bounds the free buffers the pool keeps: enough for the
// small and middle sizes that are asked for all the time, not the large
// ones of a whole row group, which would sit beside the rows that
// writers.MemoryBudget bounds (256 MiB kept made a 2-worker load's peak
// RSS 0.8 GiB; 8 MiB costs no measurable CPU).
const sharedKept = 8 << 20

var buffers = &sharedPool{r: newRecycler(sharedKept)}

func (s *sharedPool) Allocate(size int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Allocate(size)
}

func (s *sharedPool) Reallocate(size int, b []byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.r.Reallocate(size, b)
}

func (s *sharedPool) Free(b []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.r.Free(b)
}

// acquire counts a writer in; release counts it out, dropping the kept
// buffers with the last one.
func (s *sharedPool) acquire() {
	s.mu.Lock()
	s.open++
	s.mu.Unlock()
}

func (s *sharedPool) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.open--; s.open == 0 {
		s.r.reset()
	}
}
