package txn

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/internal/recbatch"
	"github.com/sluicehq/sluice/internal/clock"
)

// memLog is a StateLog in memory: each partition a list of batches with
// their base offsets assigned at Append, read back as a log read returns
// them. failAppend, when set, is asked before each append.
type memLog struct {
	mu         sync.Mutex
	partitions int32
	batches    map[int32][][]byte
	next       map[int32]int64
	failAppend func(partition int32) error
	maxBatch   int
}

func newMemLog(partitions int32) *memLog {
	return &memLog{partitions: partitions, batches: map[int32][][]byte{}, next: map[int32]int64{}}
}

func (l *memLog) Partitions(create bool) (int32, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.partitions, nil
}

func (l *memLog) Append(p int32, batch []byte) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if p < 0 || p >= l.partitions {
		return fmt.Errorf("memlog: partition %d of %d", p, l.partitions)
	}
	if l.failAppend != nil {
		if err := l.failAppend(p); err != nil {
			return err
		}
	}
	b := append([]byte(nil), batch...)
	binary.BigEndian.PutUint64(b, uint64(l.next[p]))           // base offset (outside the CRC)
	l.next[p] += int64(int32(binary.BigEndian.Uint32(b[57:]))) // record count
	l.batches[p] = append(l.batches[p], b)
	return nil
}

func (l *memLog) Read(p int32, from int64, maxBytes int) ([]byte, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []byte
	for _, b := range l.batches[p] {
		last := int64(binary.BigEndian.Uint64(b)) + int64(int32(binary.BigEndian.Uint32(b[23:])))
		if last < from {
			continue
		}
		if len(out) > 0 && len(out)+len(b) > maxBytes {
			break
		}
		out = append(out, b...)
	}
	return out, nil
}

func (l *memLog) MaxBatchBytes() int { return l.maxBatch }

// records returns every record of the log for id, in order (a nil
// snapshot pointer for a tombstone).
func (l *memLog) records(t *testing.T, id string) []snapshot {
	t.Helper()
	var out []snapshot
	for p := int32(0); p < l.partitions; p++ {
		b, _ := l.Read(p, 0, 1<<30)
		_, corrupt := recbatch.Walk(b, 0, recbatch.Visitor{Record: func(_ recbatch.Batch, _ int64, r recbatch.Record) error {
			got, s, ok, err := decodeRecord(r)
			if err != nil {
				t.Fatalf("state record: %v", err)
			}
			if got == id && ok {
				out = append(out, s)
			}
			return nil
		}})
		if corrupt != nil {
			t.Fatalf("state log partition %d: %v", p, corrupt)
		}
	}
	return out
}

// appendRaw appends a record of id (a tombstone when value is nil).
func (l *memLog) appendRaw(t *testing.T, p int32, id string, value []byte) {
	t.Helper()
	if err := l.Append(p, recbatch.Encode([]recbatch.Record{{Key: stateKey(id), Value: value}}, 0, recbatch.NoProducer)); err != nil {
		t.Fatal(err)
	}
}

// marker is one WriteMarker call that succeeded.
type marker struct {
	tp         TopicPartition
	producerID int64
	epoch      int16
	commit     bool
}

// memMarkers is Markers over a set of existing partitions; fail, when set,
// is asked before each marker (an error fails it, as a disk would).
type memMarkers struct {
	mu      sync.Mutex
	exists  map[TopicPartition]bool
	written []marker
	fail    func(tp TopicPartition) error
}

func newMemMarkers(topics map[string]int32) *memMarkers {
	m := &memMarkers{exists: map[TopicPartition]bool{}}
	for topic, n := range topics {
		for p := int32(0); p < n; p++ {
			m.exists[TopicPartition{topic, p}] = true
		}
	}
	return m
}

func (m *memMarkers) WriteMarker(tp TopicPartition, producerID int64, epoch int16, commit bool, _ int32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.exists[tp] {
		return fmt.Errorf("%w: %v", ErrPartitionGone, tp)
	}
	if m.fail != nil {
		if err := m.fail(tp); err != nil {
			return err
		}
	}
	m.written = append(m.written, marker{tp, producerID, epoch, commit})
	return nil
}

func (m *memMarkers) PartitionExists(tp TopicPartition) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.exists[tp]
}

// take returns the markers written since the last take.
func (m *memMarkers) take() []marker {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.written
	m.written = nil
	return out
}

// ownership owns the partitions not in lost.
type ownership struct {
	mu   sync.Mutex
	lost map[int32]bool
}

func (o *ownership) Owns(p int32) (int32, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return 3, !o.lost[p]
}

// fixture is a coordinator over in-memory storage on a manual clock.
type fixture struct {
	t       *testing.T
	log     *memLog
	markers *memMarkers
	clock   *clock.Manual
	own     *ownership
	nextPID int64
	opts    Options
	c       *Coordinator
}

var errInjected = errors.New("injected failure")

func newFixture(t *testing.T, tune func(*Options)) *fixture {
	t.Helper()
	f := &fixture{t: t, log: newMemLog(4), markers: newMemMarkers(map[string]int32{"a": 3, "b": 2}),
		clock: clock.NewManual(time.UnixMilli(1_700_000_000_000)), own: &ownership{lost: map[int32]bool{}}, nextPID: 1000}
	f.opts = Options{StateLog: f.log, Markers: f.markers, Ownership: f.own, Clock: f.clock,
		Logger:             slog.New(slog.NewTextHandler(io.Discard, nil)),
		AllocateProducerID: func() (int64, error) { f.nextPID++; return f.nextPID, nil }, StatePartitions: 4}
	if tune != nil {
		tune(&f.opts)
	}
	f.restart()
	return f
}

// restart builds a new coordinator over the same storage (a broker restart:
// what memory held and the state log did not is gone).
func (f *fixture) restart() {
	f.t.Helper()
	c, err := New(f.opts)
	if err != nil {
		f.t.Fatal(err)
	}
	f.c = c
}

func (f *fixture) init(id string, timeoutMs int32) InitResult {
	f.t.Helper()
	r := f.c.InitProducerID(id, timeoutMs, -1, -1)
	if r.ErrorCode != 0 {
		f.t.Fatalf("init %q: %v", id, kerr.ErrorForCode(r.ErrorCode))
	}
	return r
}

func (f *fixture) add(id string, r InitResult, tps ...TopicPartition) {
	f.t.Helper()
	for tp, code := range f.c.AddPartitions(id, r.ProducerID, r.Epoch, tps) {
		if code != 0 {
			f.t.Fatalf("add %v to %q: %v", tp, id, kerr.ErrorForCode(code))
		}
	}
}

func (f *fixture) describe(id string) Description {
	f.t.Helper()
	d, ok, err := f.c.Describe(id)
	if err != nil || !ok {
		f.t.Fatalf("describe %q: ok %v, %v", id, ok, err)
	}
	return d
}

func (f *fixture) wantState(id string, want kmsg.TransactionState) Description {
	f.t.Helper()
	d := f.describe(id)
	if d.State != want {
		f.t.Fatalf("%q is %v, want %v", id, d.State, want)
	}
	return d
}

func wantCode(t *testing.T, what string, got int16, want *kerr.Error) {
	t.Helper()
	var w int16
	if want != nil {
		w = want.Code
	}
	if got != w {
		t.Fatalf("%s: %v, want %v", what, kerr.ErrorForCode(got), kerr.ErrorForCode(w))
	}
}

// states lists the states of a sequence of records.
func states(ss []snapshot) []kmsg.TransactionState {
	out := make([]kmsg.TransactionState, len(ss))
	for i, s := range ss {
		out[i] = s.state
	}
	return out
}

var (
	a0 = TopicPartition{"a", 0}
	a1 = TopicPartition{"a", 1}
	a2 = TopicPartition{"a", 2}
	b0 = TopicPartition{"b", 0}
	b1 = TopicPartition{"b", 1}
)
