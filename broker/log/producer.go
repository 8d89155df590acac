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
	// lastSeen is the clock time of the producer's last append (not in
	// snapshots: an entry loaded at open counts from its first expiry check).
	lastSeen time.Time
}

// producerState is the idempotent-producer table of one partition. It is
// guarded by Log.mu.
type producerState struct {
	m     map[int64]*producerEntry
	dirty bool // changed since the last snapshot
}

func newProducerState() *producerState { return &producerState{m: map[int64]*producerEntry{}} }

// check decides what to do with an idempotent batch from a client: append it
// (nil, nil), report it as a duplicate of an earlier append, or reject it.
func (ps *producerState) check(h *batchHeader) (*producerBatch, error) {
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

// update records an appended batch (from a client, a follower fetch or a replay).
func (ps *producerState) update(h *batchHeader) {
	if h.ProducerID < 0 {
		return
	}
	e := ps.m[h.ProducerID]
	if e == nil {
		e = &producerEntry{Epoch: h.ProducerEpoch}
		ps.m[h.ProducerID] = e
	}
	if h.ProducerEpoch != e.Epoch {
		e.Epoch, e.Batches = h.ProducerEpoch, e.Batches[:0]
	}
	if len(e.Batches) == producerBatchesKept {
		copy(e.Batches, e.Batches[1:])
		e.Batches = e.Batches[:producerBatchesKept-1]
	}
	e.Batches = append(e.Batches, producerBatch{h.BaseSequence, h.lastSequence(), h.BaseOffset, h.lastOffset()})
	ps.dirty = true
}

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
		p = append(p, byte(len(e.Batches)))
		for _, b := range e.Batches {
			p = binary.BigEndian.AppendUint32(p, uint32(b.FirstSeq))
			p = binary.BigEndian.AppendUint32(p, uint32(b.LastSeq))
			p = binary.BigEndian.AppendUint64(p, uint64(b.BaseOffset))
			p = binary.BigEndian.AppendUint64(p, uint64(b.LastOffset))
		}
	}
	return frame(magicProducers, p)
}

func decodeProducerState(b []byte) (*producerState, error) {
	p, err := unframe(magicProducers, b)
	if err != nil {
		return nil, err
	}
	bad := fmt.Errorf("%w: truncated producer snapshot", ErrCorruptBatch)
	if len(p) < 4 {
		return nil, bad
	}
	n := int(binary.BigEndian.Uint32(p))
	p = p[4:]
	ps := newProducerState()
	for i := 0; i < n; i++ {
		if len(p) < 11 {
			return nil, bad
		}
		id := int64(binary.BigEndian.Uint64(p))
		e := &producerEntry{Epoch: int16(binary.BigEndian.Uint16(p[8:]))}
		k := int(p[10])
		p = p[11:]
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
	}
	if len(p) != 0 {
		return nil, bad
	}
	return ps, nil
}
