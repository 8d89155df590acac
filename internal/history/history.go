package history

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
)

// ErrFormat is returned (wrapped) for a history file that is not JSON lines
// of operations.
var ErrFormat = errors.New("history: bad history file")

// Kind names what an operation did.
type Kind string

// The kinds of operation (see the package doc for their fields).
const (
	Produce        Kind = "produce"
	Poll           Kind = "poll"
	Assign         Kind = "assign"
	Commit         Kind = "commit"
	FetchCommitted Kind = "fetch-committed"
	FinalRead      Kind = "final-read"
	LoadRead       Kind = "load-read"
	// Load is a run of loads into the warehouse (its outcome only; the
	// checker reads what it loaded from a load-read).
	Load Kind = "load"
)

// Outcome says whether an operation took effect.
type Outcome string

// The outcomes.
const (
	// OK: it took effect and its result is known.
	OK Outcome = "ok"
	// Fail: it definitely did not take effect.
	Fail Outcome = "fail"
	// Unknown: it may or may not have taken effect (timeout, crash).
	Unknown Outcome = "unknown"
)

// Record is one record a read saw, at its position.
type Record struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value"`
}

// Offset is a position of one partition: a consumer's start (assign) or a
// group's committed offset (commit, fetch-committed). -1 is unknown.
type Offset struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
}

// Range is [Start, End) of one partition, read completely (final-read) or
// committed by loads (load-read).
type Range struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	Start     int64  `json:"start"`
	End       int64  `json:"end"`
}

// Op is one operation of one process with its outcome.
type Op struct {
	// ID is the operation's place in the order recorded (completion order
	// but for operations Taken): History[i].ID == i.
	ID int `json:"id"`
	// Process is the client that did it; one operation at a time each.
	Process int `json:"process"`
	// Kind is what it did.
	Kind Kind `json:"kind"`
	// Outcome says whether it took effect.
	Outcome Outcome `json:"outcome"`
	// Start and End are the ticks at invocation and completion: A happened
	// before B when A.End < B.Start.
	Start int64 `json:"start"`
	End   int64 `json:"end"`

	// Topic, Partition, Offset and Value are a produce's: the value sent
	// and, when ok, the acknowledged offset (-1 when unknown).
	Topic     string `json:"topic,omitempty"`
	Partition int32  `json:"partition"`
	Offset    int64  `json:"offset"`
	Value     string `json:"value,omitempty"`
	// Idempotent says a produce's producer was idempotent (or
	// transactional): the broker appends a retried batch of it once, so
	// its value is in the log at most once however often it was sent.
	Idempotent bool `json:"idempotent,omitempty"`
	// Attempts is how many Produce requests carried a produce's value,
	// the client's own retries included; 0 when the client did not count
	// (taken as one).
	Attempts int `json:"attempts,omitempty"`

	// Records are what a poll, final-read or load-read saw.
	Records []Record `json:"records,omitempty"`
	// Group is a commit's or fetch-committed's consumer group.
	Group string `json:"group,omitempty"`
	// Member and Generation are the group member id and generation a
	// group consumer's poll was made in, or its commit was sent with
	// (empty and 0 when not known).
	Member     string `json:"member,omitempty"`
	Generation int32  `json:"generation,omitempty"`
	// Offsets are an assign's starting positions or a group's committed
	// offsets.
	Offsets []Offset `json:"offsets,omitempty"`
	// Ranges are what a final-read read completely or what a load-read's
	// loads committed.
	Ranges []Range `json:"ranges,omitempty"`
	// Want are the ranges a load-read's loads were waited for (a final
	// read's, once the faults ended): every ok produce acknowledged in them
	// must lie in Ranges (load-incomplete), so a run that loads nothing
	// does not pass for want of anything to check. Empty: no claim.
	Want []Range `json:"want,omitempty"`
	// Error is the client's error text, if any.
	Error string `json:"error,omitempty"`
}

// History is a list of operations in the order recorded.
type History []Op

// Recorder collects the operations of many concurrent clients into one
// History, optionally writing each as a JSON line as it completes. It is
// safe for concurrent use.
type Recorder struct {
	ticks *Ticks

	mu  sync.Mutex // guards the fields below
	ops History
	enc *json.Encoder
	bw  *bufio.Writer
	err error
}

// NewRecorder returns a Recorder that writes each completed operation to w
// as one JSON line (w may be nil: memory only). Flush or Close write out
// what is buffered.
func NewRecorder(w io.Writer) *Recorder { return NewRecorderTicks(w, NewTicks()) }

// NewRecorderTicks is NewRecorder taking its ticks from ticks, which other
// Recorders (of this process or, with OpenTicks, of others) may share.
func NewRecorderTicks(w io.Writer, ticks *Ticks) *Recorder {
	r := &Recorder{ticks: ticks}
	if w != nil {
		r.bw = bufio.NewWriter(w)
		r.enc = json.NewEncoder(r.bw)
	}
	return r
}

// Pending is an invoked operation not yet completed.
type Pending struct {
	r       *Recorder
	process int
	kind    Kind
	start   int64
}

// Invoke starts an operation of process: its Start tick is taken now.
func (r *Recorder) Invoke(process int, kind Kind) Pending {
	return Pending{r: r, process: process, kind: kind, start: r.ticks.Next()}
}

// Complete records the operation with its outcome and result. op's
// Process, Kind, Start, End and ID are set from the Pending and the
// Recorder; the rest is the caller's. It returns the operation recorded.
func (p Pending) Complete(op Op) Op {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	op.Process, op.Kind, op.Start = p.process, p.kind, p.start
	op.End = r.ticks.Next()
	return r.appendLocked(op)
}

func (r *Recorder) appendLocked(op Op) Op {
	op.ID = len(r.ops)
	r.ops = append(r.ops, op)
	if r.enc != nil && r.err == nil {
		if err := r.enc.Encode(op); err != nil {
			r.err = fmt.Errorf("history: write op %d: %w", op.ID, err)
		}
	}
	return op
}

// Take records an operation that another Recorder sharing r's Ticks
// completed (a workload process's, read from its output), as process. Its
// Start and End are kept: they are when it happened, while r only learns
// of it later; stamping it anew on arrival would move it after operations
// it preceded (a commit seen after a later commit's read: a false
// commit-backwards). Its ID is r's next. An op whose ticks r's counter has
// not handed out yet, or whose End is not after its Start, is refused with
// ErrForeignTicks: it was stamped by another counter.
//
// r's order is then the order operations were recorded in, which for a
// taken op is later than its completion.
func (r *Recorder) Take(process int, op Op) (Op, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if op.Start < 0 || op.End <= op.Start || op.End >= r.ticks.Taken() {
		return Op{}, fmt.Errorf("%w: op %s [%d,%d] with %d ticks taken", ErrForeignTicks, op.Kind, op.Start, op.End, r.ticks.Taken())
	}
	op.Process = process
	return r.appendLocked(op), nil
}

// History returns a copy of the operations completed so far.
func (r *Recorder) History() History {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append(History(nil), r.ops...)
}

// Flush writes out buffered lines and returns the first write error.
func (r *Recorder) Flush() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.bw != nil && r.err == nil {
		if err := r.bw.Flush(); err != nil {
			r.err = fmt.Errorf("history: flush: %w", err)
		}
	}
	return r.err
}

// Write writes h as JSON lines.
func Write(w io.Writer, h History) error {
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	for i := range h {
		if err := enc.Encode(h[i]); err != nil {
			return fmt.Errorf("history: write op %d: %w", h[i].ID, err)
		}
	}
	return bw.Flush()
}

// maxLine bounds one JSON line (one operation) when reading.
const maxLine = 64 << 20

// Read reads a history written as JSON lines. Operation ids must run 0, 1,
// 2, … in order (a file cut short is fine: it reads what is whole, unless
// the last line is torn, which is ErrFormat).
func Read(rd io.Reader) (History, error) {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 64<<10), maxLine)
	var h History
	for line := 1; sc.Scan(); line++ {
		if len(sc.Bytes()) == 0 {
			continue
		}
		var op Op
		if err := json.Unmarshal(sc.Bytes(), &op); err != nil {
			return h, fmt.Errorf("%w: line %d: %v", ErrFormat, line, err)
		}
		if op.ID != len(h) {
			return h, fmt.Errorf("%w: line %d: op id %d, want %d", ErrFormat, line, op.ID, len(h))
		}
		h = append(h, op)
	}
	if err := sc.Err(); err != nil {
		return h, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return h, nil
}

// WriteFile writes h to path (created or truncated) and syncs it.
func WriteFile(path string, h History) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	if err := Write(f, h); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("history: sync %s: %w", path, err)
	}
	return f.Close()
}

// ReadFile reads a history file written by WriteFile or a Recorder.
func ReadFile(path string) (History, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	defer f.Close()
	h, err := Read(f)
	if err != nil {
		return h, fmt.Errorf("%s: %w", path, err)
	}
	return h, nil
}
