package server

// The transactional side of Fetch and ListOffsets (KIP-98).
//
// Fetch with isolation_level 1 (read_committed) reads only below the
// partition's last stable offset and answers, for the records it returns,
// the aborted transactions that overlap them (producer id, first offset),
// from the log's aborted-transactions index, so that the client drops
// their records. Control batches (transaction markers) go out as stored;
// clients skip them, as with Kafka. Every Fetch answer carries the real
// last stable offset. ListOffsets with isolation_level 1 answers the last
// stable offset for LATEST (-1).

import (
	"github.com/twmb/franz-go/pkg/kbin"

	plog "github.com/sluicehq/sluice/broker/log"
)

// readCommitted is Kafka's isolation_level for read_committed.
const readCommitted = 1

// maxAbortedPerPartition bounds the aborted transactions one partition's
// answer carries (each 16 bytes); a read that would overlap more is cut
// short by the log's index at the transactions found so far.
const maxAbortedPerPartition = 1 << 16

// fetchBound returns the offset reads stop at and the last stable offset to
// report.
func fetchBound(l *plog.Log, isolation int8, hw int64) (bound, lastStable int64) {
	lastStable = min(l.LastStableOffset(), hw)
	if isolation == readCommitted {
		return lastStable, lastStable
	}
	return hw, lastStable
}

// fillAborted sets the aborted transactions of a read_committed answer:
// those overlapping [fetch offset, end of the records returned).
func (fp *fetchPartition) fillAborted(l *plog.Log, isolation int8) error {
	if isolation != readCommitted || fp.region == nil || fp.region.Len() == 0 {
		return nil
	}
	es, err := l.AbortedTransactions(fp.fetchOffset, fp.region.LastOffset()+1)
	if err != nil {
		return err
	}
	if len(es) > maxAbortedPerPartition {
		es = es[:maxAbortedPerPartition]
	}
	fp.aborted = es
	if fp.aborted == nil {
		fp.aborted = []plog.AbortedTxn{} // read_committed: an empty array, not null
	}
	return nil
}

// appendAborted writes a partition's AbortedTransactions field: null for
// read_uncommitted, else (producer id, first offset) per transaction.
func appendAborted(dst []byte, aborted []plog.AbortedTxn, flex bool) []byte {
	if aborted == nil {
		if flex {
			return kbin.AppendUvarint(dst, 0)
		}
		return kbin.AppendInt32(dst, -1)
	}
	dst = appendArrayLen(dst, len(aborted), flex)
	for _, e := range aborted {
		dst = kbin.AppendInt64(dst, e.ProducerID)
		dst = kbin.AppendInt64(dst, e.FirstOffset)
		if flex {
			dst = append(dst, 0) // tags
		}
	}
	return dst
}

// latestOffset is ListOffsets' answer for LATEST (-1) at an isolation level.
func latestOffset(l *plog.Log, isolation int8) int64 {
	if isolation == readCommitted {
		return min(l.LastStableOffset(), l.HighWatermark())
	}
	return l.HighWatermark()
}
