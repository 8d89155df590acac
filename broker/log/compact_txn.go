package log

import (
	"math"
	"sort"
)

// abortedSet is every aborted transaction of a log, by producer, for the
// cleaner: entries of one producer never overlap and are in offset order.
type abortedSet map[int64][]AbortedTxn

// holds reports whether h is a data batch of an aborted transaction.
func (a abortedSet) holds(h *batchHeader) bool {
	if h.ProducerID < 0 || h.Attributes&attrTransactional == 0 || h.Attributes&attrControl != 0 {
		return false
	}
	es := a[h.ProducerID]
	i := sort.Search(len(es), func(i int) bool { return es[i].LastOffset >= h.BaseOffset })
	return i < len(es) && es[i].FirstOffset <= h.BaseOffset
}

// abortedIndexLocked loads the aborted transactions of every segment.
// Log.mu is held (for reading at least).
func (l *Log) abortedIndexLocked() (abortedSet, error) {
	a := abortedSet{}
	for _, s := range l.segments {
		es, err := s.aborted(l.fs)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			a[e.ProducerID] = append(a[e.ProducerID], e)
		}
	}
	return a, nil
}

// firstUnstableLocked is the first offset of the oldest open transaction
// (MaxInt64 if none). Log.mu is held.
func (l *Log) firstUnstableLocked() int64 {
	first := int64(math.MaxInt64)
	for _, o := range l.producers.open {
		first = min(first, o)
	}
	return first
}

// txnCleaner is what one cleaner pass knows of transactions as it walks
// the segments in offset order.
type txnCleaner struct {
	aborted        abortedSet
	lastOfProducer map[int64]int64 // base offset of each producer's last batch: always kept
	horizon        int64           // markers written before it (ms) may go once their data is gone
	retained       map[int64]bool  // producer -> a batch of its current transaction stays
	dropped        map[int64]bool  // offsets of ABORT markers removed in the current segment
}

func newTxnCleaner(aborted abortedSet, lastOfProducer map[int64]int64, horizon int64) *txnCleaner {
	return &txnCleaner{aborted: aborted, lastOfProducer: lastOfProducer, horizon: horizon,
		retained: map[int64]bool{}, dropped: map[int64]bool{}}
}

// kept notes that (part of) data batch h stays in the log.
func (t *txnCleaner) kept(h *batchHeader) {
	if h.ProducerID >= 0 && h.Attributes&attrTransactional != 0 {
		t.retained[h.ProducerID] = true
	}
}

// dropMarker decides whether control batch h (whole: b) goes: a COMMIT or
// ABORT marker none of whose transaction's batches stay, written before
// the horizon, that is not its producer's last batch.
func (t *txnCleaner) dropMarker(h *batchHeader, b []byte) bool {
	if h.ProducerID < 0 {
		return false
	}
	mk, ok := parseMarker(b, h)
	if !ok {
		return false
	}
	retained := t.retained[h.ProducerID]
	delete(t.retained, h.ProducerID)
	if retained || t.lastOfProducer[h.ProducerID] == h.BaseOffset || h.MaxTimestamp >= t.horizon {
		return false
	}
	if !mk.commit {
		t.dropped[h.BaseOffset] = true
	}
	return true
}

// takeDropped returns the ABORT markers dropped since the last call.
func (t *txnCleaner) takeDropped() map[int64]bool {
	d := t.dropped
	t.dropped = map[int64]bool{}
	return d
}

// swapTxnIndexLocked makes the transaction index of a segment about to be
// swapped for its cleaned copy durable, without the entries of the dropped
// ABORT markers. Log.mu is held for writing.
func (l *Log) swapTxnIndexLocked(s *segment, dropped map[int64]bool) error {
	if len(dropped) == 0 {
		created, err := s.persistTxnIndex(l.fs)
		if created {
			l.dirDirty = true
		}
		return err
	}
	es, err := s.aborted(l.fs)
	if err != nil {
		return err
	}
	kept := make([]AbortedTxn, 0, len(es))
	for _, e := range es {
		if !dropped[e.LastOffset] {
			kept = append(kept, e)
		}
	}
	return s.replaceAborted(l.fs, kept)
}
