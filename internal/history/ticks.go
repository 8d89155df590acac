package history

import (
	"errors"
	"fmt"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"
)

// ErrForeignTicks is returned (wrapped) by Recorder.Take for an operation
// whose ticks cannot come from the Recorder's Ticks.
var ErrForeignTicks = errors.New("history: operation's ticks are not of this recorder's counter")

// Ticks is the counter a Recorder takes its ticks from. Recorders that
// share one Ticks order their operations on one time line, so one may take
// another's operations (Recorder.Take) with their ticks unchanged. NewTicks
// is a counter in memory; OpenTicks one in a file that several processes
// map, so a test and the workload processes it starts share it. Methods
// are safe for concurrent use, across processes too for a file's.
type Ticks struct {
	local  atomic.Int64
	shared *int64 // into mem when file-backed
	mem    []byte
}

// NewTicks returns a counter in memory, starting at 0.
func NewTicks() *Ticks { return &Ticks{} }

// tickFileSize is the counter file's length: one int64, native byte order.
const tickFileSize = 8

// OpenTicks opens (creating it, empty meaning 0) the counter file at path
// and maps it shared: every process that opens the same file takes its
// ticks from one counter. Close unmaps it.
func OpenTicks(path string) (*Ticks, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("history: ticks: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, fmt.Errorf("history: ticks: %w", err)
	}
	if st.Size() < tickFileSize {
		// an existing counter's bytes are kept: only a new file grows
		if err := f.Truncate(tickFileSize); err != nil {
			return nil, fmt.Errorf("history: ticks %s: %w", path, err)
		}
	}
	mem, err := syscall.Mmap(int(f.Fd()), 0, tickFileSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("history: ticks %s: mmap: %w", path, err)
	}
	// a mapping starts on a page boundary: the int64 is aligned
	return &Ticks{shared: (*int64)(unsafe.Pointer(&mem[0])), mem: mem}, nil
}

// Next takes the next tick.
func (t *Ticks) Next() int64 {
	if t.shared != nil {
		return atomic.AddInt64(t.shared, 1) - 1
	}
	return t.local.Add(1) - 1
}

// Taken is the number of ticks taken so far: every tick handed out is
// below it.
func (t *Ticks) Taken() int64 {
	if t.shared != nil {
		return atomic.LoadInt64(t.shared)
	}
	return t.local.Load()
}

// Close unmaps a file's counter (no-op in memory); the Ticks must not be
// used afterwards.
func (t *Ticks) Close() error {
	if t.mem == nil {
		return nil
	}
	mem := t.mem
	t.mem, t.shared = nil, nil
	if err := syscall.Munmap(mem); err != nil {
		return fmt.Errorf("history: ticks: munmap: %w", err)
	}
	return nil
}
