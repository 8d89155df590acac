package log

// Transactions, the log's side (KIP-98).
//
// A transactional producer's data batches carry attribute bit 4; the
// transaction coordinator ends a transaction in each partition with a
// control batch (bits 4 and 5) holding one marker record:
//
//	key:   version int16 = 0 | type int16 (0 ABORT, 1 COMMIT)
//	value: version int16 = 0 | coordinatorEpoch int32
//
// The producer table (producer.go) keeps each producer's open transaction
// (the offset of its first batch); the last stable offset is the first
// offset of the oldest open transaction, bounded by the log start and the
// high watermark. An ABORT marker adds an entry to the aborted-transactions
// index of the segment it lands in (txn_index.go). All of it is rebuilt from
// the batches by recovery (txn_recovery.go).

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"sort"
)

// Control record types of transaction markers.
const (
	markerAbort  = 0
	markerCommit = 1
)

// txnMarker is a decoded COMMIT or ABORT control record.
type txnMarker struct {
	commit           bool
	coordinatorEpoch int32
}

// parseMarker reads the marker record of a whole control batch b. ok is
// false for a batch that is not a transaction marker (another control
// record type, or records it cannot read).
func parseMarker(b []byte, h *batchHeader) (txnMarker, bool) {
	if h.Attributes&attrControl == 0 || h.RecordCount < 1 || len(b) <= batchHeaderSize {
		return txnMarker{}, false
	}
	recs := b[batchHeaderSize:]
	if codec := h.Attributes & attrCompressionMask; codec != 0 {
		var err error
		if recs, err = decompressRecords(codec, recs, 1<<20); err != nil {
			return txnMarker{}, false
		}
	}
	length, n := binary.Varint(recs)
	if n <= 0 || length < 2 || length > int64(len(recs)-n) {
		return txnMarker{}, false
	}
	rec := recs[n+1 : n+int(length)] // after the attributes byte
	for range 2 {                    // timestamp delta, offset delta
		_, m := binary.Varint(rec)
		if m <= 0 {
			return txnMarker{}, false
		}
		rec = rec[m:]
	}
	keyLen, m := binary.Varint(rec)
	if m <= 0 || keyLen < 4 || keyLen > int64(len(rec)-m) {
		return txnMarker{}, false
	}
	key := rec[m : m+int(keyLen)]
	rec = rec[m+int(keyLen):]
	var mk txnMarker
	switch binary.BigEndian.Uint16(key[2:]) {
	case markerAbort:
	case markerCommit:
		mk.commit = true
	default:
		return txnMarker{}, false
	}
	if int16(binary.BigEndian.Uint16(key)) < 0 {
		return txnMarker{}, false
	}
	mk.coordinatorEpoch = -1
	if valueLen, m := binary.Varint(rec); m > 0 && valueLen >= 6 && valueLen <= int64(len(rec)-m) {
		mk.coordinatorEpoch = int32(binary.BigEndian.Uint32(rec[m+2:]))
	}
	return mk, true
}

// encodeMarkerBatch builds the control batch of a marker, as Kafka writes
// it: uncompressed, one record, transactional and control bits set, base
// sequence -1.
func encodeMarkerBatch(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, now int64) []byte {
	var key, value []byte
	typ := uint16(markerAbort)
	if commit {
		typ = markerCommit
	}
	key = binary.BigEndian.AppendUint16(key, 0)
	key = binary.BigEndian.AppendUint16(key, typ)
	value = binary.BigEndian.AppendUint16(value, 0)
	value = binary.BigEndian.AppendUint32(value, uint32(coordinatorEpoch))
	var rec []byte
	rec = append(rec, 0)              // attributes
	rec = binary.AppendVarint(rec, 0) // timestamp delta
	rec = binary.AppendVarint(rec, 0) // offset delta
	rec = binary.AppendVarint(rec, int64(len(key)))
	rec = append(rec, key...)
	rec = binary.AppendVarint(rec, int64(len(value)))
	rec = append(rec, value...)
	rec = binary.AppendVarint(rec, 0) // headers
	b := make([]byte, batchHeaderSize, batchHeaderSize+len(rec)+binary.MaxVarintLen32)
	b = binary.AppendVarint(b, int64(len(rec)))
	b = append(b, rec...)
	binary.BigEndian.PutUint64(b[offBaseOffset:], 0)
	binary.BigEndian.PutUint32(b[offLength:], uint32(len(b)-logOverhead))
	binary.BigEndian.PutUint32(b[offLeaderEpoch:], 0)
	b[offMagic] = 2
	binary.BigEndian.PutUint16(b[offAttributes:], attrTransactional|attrControl)
	binary.BigEndian.PutUint32(b[offLastOffsetDelta:], 0)
	binary.BigEndian.PutUint64(b[offFirstTimestamp:], uint64(now))
	binary.BigEndian.PutUint64(b[offMaxTimestamp:], uint64(now))
	binary.BigEndian.PutUint64(b[offProducerID:], uint64(producerID))
	binary.BigEndian.PutUint16(b[offProducerEpoch:], uint16(producerEpoch))
	binary.BigEndian.PutUint32(b[offBaseSequence:], 0xffffffff)
	binary.BigEndian.PutUint32(b[offRecordCount:], 1)
	binary.BigEndian.PutUint32(b[offCRC:], crc32.Checksum(b[offAttributes:], crcTable))
	return b
}

// AppendMarker appends the COMMIT (commit) or ABORT marker that ends
// producer producerID's transaction in this partition, as the transaction
// coordinator's WriteTxnMarkers does, and returns its offset. A producer
// whose known epoch is newer than producerEpoch is refused with
// ErrInvalidProducerEpoch, a coordinatorEpoch older than that of the
// producer's last marker with ErrCoordinatorFenced (the coordinator
// serialises the markers of one producer, so that check is not atomic with
// the append). A marker for a producer with no open transaction is written
// and harmless, as in Kafka (an ABORT still gets an index entry). An ABORT
// adds the transaction to the aborted-transactions index.
func (l *Log) AppendMarker(producerID int64, producerEpoch int16, commit bool, coordinatorEpoch int32, leaderEpoch int32) (int64, error) {
	if producerID < 0 || producerEpoch < 0 {
		return -1, fmt.Errorf("%w: marker for producer %d epoch %d", ErrInvalidRecord, producerID, producerEpoch)
	}
	l.mu.RLock()
	e := l.producers.m[producerID]
	fenced := e != nil && coordinatorEpoch < e.CoordinatorEpoch
	var known int32
	if e != nil {
		known = e.CoordinatorEpoch
	}
	l.mu.RUnlock()
	if fenced {
		return -1, fmt.Errorf("%w: marker for producer %d from coordinator epoch %d, it has seen %d", ErrCoordinatorFenced, producerID, coordinatorEpoch, known)
	}
	b := encodeMarkerBatch(producerID, producerEpoch, commit, coordinatorEpoch, l.clock.Now().UnixMilli())
	res, err := l.Append(b, AppendOptions{LeaderEpoch: leaderEpoch, AssignOffsets: true, marker: true})
	if err != nil {
		return -1, err
	}
	return res.BaseOffset, nil
}

// checkKinds refuses, on a leader, the batches the caller did not say it
// may append: control batches come only from AppendMarker, transactional
// ones only with AppendOptions.Transactional. A transactional batch needs a
// producer id.
func (opts AppendOptions) checkKinds(hdrs []batchHeader) error {
	if !opts.AssignOffsets {
		return nil // a follower copies its leader's batches, markers included
	}
	for i := range hdrs {
		h := &hdrs[i]
		switch control, txn := h.Attributes&attrControl != 0, h.Attributes&attrTransactional != 0; {
		case control && !opts.marker:
			return fmt.Errorf("%w: clients may not produce control batches", ErrInvalidRecord)
		case txn && !control && !opts.Transactional:
			return fmt.Errorf("%w: transactional batches are not accepted on this path", ErrInvalidRecord)
		case txn && h.ProducerID < 0:
			return fmt.Errorf("%w: transactional batch without a producer id", ErrInvalidRecord)
		}
	}
	return nil
}

// checkMarker validates a marker's producer epoch against the table.
func (ps *producerState) checkMarker(h *batchHeader) error {
	if e := ps.m[h.ProducerID]; e != nil && h.ProducerEpoch < e.Epoch {
		return fmt.Errorf("%w: marker for producer %d with epoch %d, it has epoch %d", ErrInvalidProducerEpoch, h.ProducerID, h.ProducerEpoch, e.Epoch)
	}
	return nil
}

// abortOf returns the index entry of an ABORT marker h of a producer, before
// the table records it: the transaction runs from the producer's open
// transaction's first offset (the marker's own offset if none is open) to
// the marker, and the last stable offset after it is the first offset of
// the oldest other open transaction, or the marker's offset + 1.
func (ps *producerState) abortOf(h *batchHeader) AbortedTxn {
	e := AbortedTxn{ProducerID: h.ProducerID, FirstOffset: h.BaseOffset, LastOffset: h.lastOffset(), LastStableOffset: h.lastOffset() + 1}
	if first, ok := ps.open[h.ProducerID]; ok {
		e.FirstOffset = first
	}
	for id, first := range ps.open {
		if id != h.ProducerID && first < e.LastStableOffset {
			e.LastStableOffset = first
		}
	}
	return e
}

// applyBatch records one batch in the producer table and, for an ABORT
// marker, returns its index entry. b is the whole batch.
func (ps *producerState) applyBatch(h *batchHeader, b []byte) (AbortedTxn, bool) {
	var (
		abort  AbortedTxn
		isAbrt bool
		ends   bool
	)
	if h.ProducerID >= 0 && h.Attributes&attrControl != 0 {
		if mk, ok := parseMarker(b, h); ok {
			ends = true
			if !mk.commit {
				abort, isAbrt = ps.abortOf(h), true
			}
			defer func() {
				if e := ps.m[h.ProducerID]; e != nil {
					e.CoordinatorEpoch = mk.coordinatorEpoch
				}
			}()
		}
	}
	ps.update(h, ends)
	return abort, isAbrt
}

// trackBatchLocked records an appended batch (b, whole, now at the end of
// the active segment) in the producer table and the transaction index. If
// the index cannot be loaded the log fails (reopening recomputes the entry).
// Log.mu is held for writing.
func (l *Log) trackBatchLocked(h *batchHeader, b []byte) {
	abort, ok := l.producers.applyBatch(h, b)
	if !ok {
		return
	}
	if err := l.active().addAborted(l.fs, abort); err != nil {
		l.fail(err)
	}
}

// LastStableOffset returns the partition's last stable offset: the first
// offset of the oldest open transaction, or the high watermark if that is
// lower or none is open; never below the log start offset. A read_committed
// consumer reads below it.
func (l *Log) LastStableOffset() int64 {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return l.lastStableLocked()
}

func (l *Log) lastStableLocked() int64 {
	lso := l.hw
	for _, first := range l.producers.open {
		lso = min(lso, max(first, l.logStart))
	}
	return lso
}

// OpenTxn is a producer's transaction still open in the partition.
type OpenTxn struct {
	ProducerID    int64
	ProducerEpoch int16
	FirstOffset   int64
}

// OpenTransactions returns the partition's open transactions, oldest first.
func (l *Log) OpenTransactions() []OpenTxn {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]OpenTxn, 0, len(l.producers.open))
	for id, first := range l.producers.open {
		out = append(out, OpenTxn{ProducerID: id, ProducerEpoch: l.producers.m[id].Epoch, FirstOffset: first})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].FirstOffset < out[j].FirstOffset })
	return out
}

// ProducerInfo is one producer of the partition's producer table, as
// DescribeProducers reports it.
type ProducerInfo struct {
	ProducerID       int64
	ProducerEpoch    int16
	LastSequence     int32 // -1: none kept
	LastTimestamp    int64 // ms of its last append seen since open; -1: none
	CoordinatorEpoch int32 // of its last marker; -1: none
	TxnFirstOffset   int64 // first offset of its open transaction; -1: none
}

// ProducerTable returns up to limit producers of the table, by ascending id.
func (l *Log) ProducerTable(limit int) []ProducerInfo {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make([]ProducerInfo, 0, min(limit, len(l.producers.m)))
	for id, e := range l.producers.m {
		pi := ProducerInfo{ProducerID: id, ProducerEpoch: e.Epoch, LastSequence: -1, LastTimestamp: -1,
			CoordinatorEpoch: e.CoordinatorEpoch, TxnFirstOffset: e.TxnFirst}
		if n := len(e.Batches); n > 0 {
			pi.LastSequence = e.Batches[n-1].LastSeq
		}
		if !e.lastSeen.IsZero() {
			pi.LastTimestamp = e.lastSeen.UnixMilli()
		}
		out = append(out, pi)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProducerID < out[j].ProducerID })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}
