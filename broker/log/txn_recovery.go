package log

// replayProducersLocked replays the batches from offset from to the log end
// into ps (the producer table as of from): sequences, epochs and open
// transactions from every header, and, from each ABORT marker's record, its
// entry in the aborted-transactions index. The index entries of markers at
// or after from are dropped first and so recomputed; those below from were
// made durable before the checkpoint or snapshot that named from (syncLocked
// persists them before the recovery point moves). It returns how many
// batches it replayed. Log.mu is held for writing.
func (l *Log) replayProducersLocked(ps *producerState, from int64) (int, error) {
	// Entries at or after the log end belong to a cut tail (a truncation, a
	// recovery cut) even when nothing is replayed.
	drop := min(from, l.leo)
	for _, s := range l.segments[l.segmentIndexLocked(drop):] {
		if s.txn.isEmptyOnDisk() {
			continue
		}
		if err := s.dropAbortedFrom(l.fs, drop); err != nil {
			return 0, err
		}
	}
	if from >= l.leo {
		return 0, nil
	}
	n := 0
	err := l.scanHeadersLocked(from, func(h *batchHeader, s *segment, r *fileReader, pos int64) error {
		var b []byte
		if h.ProducerID >= 0 && h.Attributes&attrControl != 0 {
			var err error
			if b, err = r.at(pos, int(h.size())); err != nil {
				return err
			}
		}
		n++
		if abort, ok := ps.applyBatch(h, b); ok {
			return s.addAborted(l.fs, abort)
		}
		return nil
	})
	return n, err
}
