package writers

import (
	"sync"
)

// DefaultMemoryBudget is the budget a loader shares among its open files
// unless told otherwise: 32 MiB of buffered rows, as the format writers
// count them (the memory behind them is about twice that: the column
// builders grow by doubling). On the page-view benchmark (testdata/bench/
// load.sh, 2 workers, hour partitions) that makes row groups of about 50k
// to 100k rows, 2.5% more output than 128k-row groups, and a peak RSS under
// 300 MiB where 128k-row groups took 0.8 GiB.
const DefaultMemoryBudget = 32 << 20

// MemoryBudget bounds the bytes that the open files of the SplitWriters
// sharing it hold in memory: the rows a Parquet file buffers for its next
// row group. Every budgetEvery (32) records a writer reports its file's
// buffered bytes; when the reported total passes the limit, the file that
// buffers the most writes its rows out as a (short) row group, and so on
// until the total is within the limit again. So what the files buffer
// exceeds the limit by at most the records each wrote since its last
// report.
//
// The bytes are the format writer's own estimate (the text and binary
// data of the buffered rows plus 8 bytes a value of the other columns),
// not the memory the process holds, which also has the builders' spare
// capacity, the fetched records and the garbage collector's headroom.
// Formats that buffer little (Avro blocks, JSON lines) are not counted.
//
// A MemoryBudget is safe for concurrent use: the writers of a load's
// workers share one, and a flush may write another worker's file (under
// that file's lock). The zero value and nil bound nothing.
//
// Lock order: a file's lock (openFile.mu) is never held while taking
// MemoryBudget.mu, nor the other way round: a writer reads its file's
// buffered bytes under the file's lock, then reports them under the
// budget's; a flush picks its file under the budget's lock, then writes it
// under the file's.
type MemoryBudget struct {
	limit int64

	mu      sync.Mutex
	files   map[*openFile]*budgetEntry // guarded by mu
	flushes int64                      // row groups written early, guarded by mu
}

// budgetEntry is the budget's view of one open file, guarded by
// MemoryBudget.mu.
type budgetEntry struct {
	held int64 // bytes the file buffers, as last reported
	seq  int64 // the file's read sequence of that report
}

// bufferingWriter is a format writer that holds rows in memory until it
// writes them out (Parquet: a row group).
type bufferingWriter interface {
	// Buffered estimates the bytes the rows not yet written hold.
	Buffered() int64
	// FlushBuffered writes the buffered rows out now (a short row group).
	FlushBuffered() error
}

// NewMemoryBudget returns a budget of limit bytes; limit <= 0 bounds
// nothing.
func NewMemoryBudget(limit int64) *MemoryBudget {
	return &MemoryBudget{limit: limit, files: map[*openFile]*budgetEntry{}}
}

// Limit returns the budget's limit in bytes (0: none).
func (b *MemoryBudget) Limit() int64 {
	if b == nil {
		return 0
	}
	return max(b.limit, 0)
}

// Buffered returns the bytes the files under the budget buffer, as last
// reported.
func (b *MemoryBudget) Buffered() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buffered()
}

// buffered is the sum of what the files hold, as last reported. Called
// with b.mu held.
func (b *MemoryBudget) buffered() int64 {
	var sum int64
	for _, e := range b.files {
		sum += e.held
	}
	return sum
}

// Flushes returns how many row groups the budget made files write early.
func (b *MemoryBudget) Flushes() int64 {
	if b == nil {
		return 0
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.flushes
}

func (b *MemoryBudget) active() bool { return b != nil && b.limit > 0 }

// report records that of buffers n bytes (read at of's sequence seq) and,
// when the total passes the limit, flushes the largest files until it is
// within. It returns nothing: a flush's error is the flushed file's, kept
// for its own writer (see openFile.flushErr).
func (b *MemoryBudget) report(of *openFile, n, seq int64) {
	b.mu.Lock()
	e := b.files[of]
	if e == nil {
		e = &budgetEntry{}
		b.files[of] = e
	}
	if seq > e.seq {
		e.held, e.seq = n, seq
	}
	for b.buffered() > b.limit {
		victim := b.largest()
		if victim == nil {
			break
		}
		// Counted out now, so that concurrent reports do not pick the same
		// file while it is being written; its writer or the flush below
		// reports what it holds next.
		b.files[victim].held = 0
		b.flushes++
		b.mu.Unlock()
		n, seq, ok := victim.flushForBudget()
		b.mu.Lock()
		if ve := b.files[victim]; ok && ve != nil && seq > ve.seq {
			ve.held, ve.seq = n, seq
		}
	}
	b.mu.Unlock()
}

// largest returns the file that holds the most bytes (nil if none holds
// any). Called with b.mu held.
func (b *MemoryBudget) largest() *openFile {
	var victim *openFile
	var most int64
	for of, e := range b.files {
		if e.held > most {
			victim, most = of, e.held
		}
	}
	return victim
}

// forget takes a closed or aborted file out of the budget.
func (b *MemoryBudget) forget(of *openFile) {
	if !b.active() {
		return
	}
	b.mu.Lock()
	delete(b.files, of)
	b.mu.Unlock()
}
