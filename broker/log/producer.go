package log

import (
	"encoding/binary"
	"fmt"
	"sort"
	"time"

	"github.com/sluicehq/sluice/internal/mutate"
)

// producerBatchesKept is how many recent batches per producer are remembered
// for duplicate detection (Kafka: max.in.flight.requests.per.connection <= 5).
const producerBatchesKept = 5

type producerBatch struct {
	FirstSeq, LastSeq      int32
	BaseOffset, LastOffset int64
}

type producerEntry struct {
	Epoch   int16
	Batches []producerBatch // oldest first, at most producerBatchesKept
	// TxnFirst is the first offset of the producer's open transaction, -1
	// when none is open; CoordinatorEpoch is that of its last marker (-1: none).
	TxnFirst         int64
	CoordinatorEpoch int32
	// lastSeen is the clock time of the producer's last append (not in
	// snapshots: an entry loaded at open counts from its first expiry check).
	lastSeen time.Time
}

// producerState is the producer table of one partition: idempotent
// producers' recent sequences and transactional producers' open
// transactions. It is guarded by Log.mu.
type producerState struct {
	m     map[int64]*producerEntry
	open  map[int64]int64 // producer id -> first offset of its open transaction (TxnFirst >= 0)
	dirty bool            // changed since the last snapshot
}

func newProducerState() *producerState {
	return &producerState{m: map[int64]*producerEntry{}, open: map[int64]int64{}}
}

func newProducerEntry(epoch int16) *producerEntry {
	return &producerEntry{Epoch: epoch, TxnFirst: -1, CoordinatorEpoch: -1}
}

// check decides what to do with an idempotent batch from a client: append it
// (nil, nil), report it as a duplicate of an earlier append, or reject it.
func (ps *producerState) check(h *batchHeader) (*producerBatch, error) {
	if h.Attributes&attrControl != 0 {
		return nil, ps.checkMarker(h)
	}
	if mutate.Enabled(mutate.IdempotentSequence) { // test-only: append every batch as new
		return nil, nil
	}
	e := ps.m[h.ProducerID]
	if e == nil || len(e.Batches) == 0 {
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d is unknown and its first batch has sequence %d, want 0", ErrOutOfOrderSequence, h.ProducerID, h.BaseSequence)
		}
		return nil, nil
	}
	switch {
	case h.ProducerEpoch < e.Epoch:
		return nil, fmt.Errorf("%w: producer %d epoch %d is older than %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	case h.ProducerEpoch > e.Epoch:
		if h.BaseSequence != 0 {
			return nil, fmt.Errorf("%w: producer %d new epoch %d must start at sequence 0, got %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence)
		}
		return nil, nil
	}
	last := h.lastSequence()
	for i := range e.Batches {
		if b := &e.Batches[i]; b.FirstSeq == h.BaseSequence && b.LastSeq == last {
			dup := *b
			return &dup, nil
		}
	}
	if want := addSeq(e.Batches[len(e.Batches)-1].LastSeq, 1); h.BaseSequence != want {
		return nil, fmt.Errorf("%w: producer %d epoch %d sent sequence %d, want %d", ErrOutOfOrderSequence, h.ProducerID, h.ProducerEpoch, h.BaseSequence, want)
	}
	return nil, nil
}

// update records an appended batch (from a client, a follower fetch or a
// replay). endsTxn says the batch is a COMMIT or ABORT marker: it closes the
// producer's open transaction; other control batches change nothing but
// the epoch. A transactional data batch opens a transaction if none is.
func (ps *producerState) update(h *batchHeader, endsTxn bool) {
	if h.ProducerID < 0 {
		return
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = newProducerEntry(h.ProducerEpoch)
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.Epoch {
		e.Epoch, e.Batches = h.ProducerEpoch, e.Batches[:0]
	}
	ps.dirty = true
	if h.Attributes&attrControl != 0 {
		if endsTxn {
			e.TxnFirst = -1
			delete(ps.open, h.ProducerID)
		}
		return // markers carry no sequence
	}
	if h.Attributes&attrTransactional != 0 && e.TxnFirst < 0 {
		e.TxnFirst = h.BaseOffset
		ps.open[h.ProducerID] = h.BaseOffset
	}
	if len(e.Batches) == producerBatchesKept {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:producerBatchesKept-1]
	}
	e.Batches = append(e.Batches, producerBatch{h.BaseSequence, h.lastSequence(), h.BaseOffset, h.lastOffset()})
}

// Producer snapshot payload (in the metadata frame of checkpoint.go):
//
//	version 1: count uint32, then per producer (ascending id):
//	           id int64 | epoch int16 | k uint8 | k x (firstSeq int32, lastSeq int32, baseOffset int64, lastOffset int64)
//	version 2: the same with, after epoch, coordinatorEpoch int32 | txnFirst int64 (-1: no open transaction)
//
// Version 2 is written; both are read (a version 1 snapshot has no open transactions).
const producerSnapshotVersion = 2

// encode serialises the table (sorted by producer id, so equal states encode equally).
func (ps *producerState) encode() []byte {
	ids := make([]int64, 0, len(ps.m))
	for id := range ps.m {
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool { return ids[i] < ids[j] })
	p := binary.BigEndian.AppendUint32(nil, uint32(len(ids)))
	for _, id := range ids {
		e := ps.m[id]
		p = binary.BigEndian.AppendUint64(p, uint64(id))
		p = binary.BigEndian.AppendUint16(p, uint16(e.Epoch))
		p = binary.BigEndian.AppendUint32(p, uint32(e.CoordinatorEpoch))
		p = binary.BigEndian.AppendUint64(p, uint64(e.TxnFirst))
		p = append(p, byte(len(e.Batches)))
		for _, b := range e.Batches {
			p = binary.BigEndian.AppendUint32(p, uint32(b.FirstSeq))
			p = binary.BigEndian.AppendUint32(p, uint32(b.LastSeq))
			p = binary.BigEndian.AppendUint64(p, uint64(b.BaseOffset))
			p = binary.BigEndian.AppendUint64(p, uint64(b.LastOffset))
		}
	}
	return frameVersioned(magicProducers, producerSnapshotVersion, p)
}

func decodeProducerState(b []byte) (*producerState, error) {
	p, version, err := unframeVersioned(magicProducers, b, 1, producerSnapshotVersion)
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%w: truncated producer snapshot", ErrCorruptBatch)
	if len(p) < 4 {
		return nil, bad
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	fixed := 11
	if version >= 2 {
		fixed = 23
	}
	ps := newProducerState()
	for i := 0; i < n; i++ {
		if len(p) < fixed {
			return nil, bad
		}
		id := int64(binary.BigEndian.Uint64(p))
		e := newProducerEntry(int16(binary.BigEndian.Uint16(p[8:])))
		if version >= 2 {
			e.CoordinatorEpoch = int32(binary.BigEndian.Uint32(p[10:]))
			e.TxnFirst = int64(binary.BigEndian.Uint64(p[14:]))
			if e.TxnFirst < -1 {
				return nil, fmt.Errorf("%w: producer %d has open transaction offset %d", ErrCorruptBatch, id, e.TxnFirst)
			}
		}
		k := int(p[fixed-1])
		p = p[fixed:]
		if k > producerBatchesKept || len(p) < 24*k {
			return nil, bad
		}
		for j := 0; j < k; j++ {
			e.Batches = append(e.Batches, producerBatch{
				int32(binary.BigEndian.Uint32(p)), int32(binary.BigEndian.Uint32(p[4:])),
				int64(binary.BigEndian.Uint64(p[8:])), int64(binary.BigEndian.Uint64(p[16:])),
			})
			p = p[24:]
		}
		ps.m[id] = e
		if e.TxnFirst >= 0 {
			ps.open[id] = e.TxnFirst
		}
	}
	if len(p) != 0 {
		return nil, bad
	}
	return ps, nil
}
