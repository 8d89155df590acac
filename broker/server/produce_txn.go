package server

// The transactional side of Produce (KIP-98 with KIP-890 part 1): a batch
// with the transactional bit, sent with a transactional id, is appended
// inside the transaction coordinator's Guard, which checks that the
// partition is in the producer's ongoing transaction and holds the
// transaction's lock over the append, so that no marker slips in between.

import (
	"encoding/binary"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/txn"
)

// Offsets of the RecordBatch v2 header fields read here.
const (
	batchAttributesAt    = 21
	batchProducerIDAt    = 43
	batchProducerEpochAt = 51
	batchHeaderBytes     = 61
	attrTransactionalBit = 0x10
)

// isTransactional reports whether the first batch of records has the
// transactional bit (the log refuses a transactional batch among others).
func isTransactional(records []byte) bool {
	return len(records) >= batchHeaderBytes && binary.BigEndian.Uint16(records[batchAttributesAt:])&attrTransactionalBit != 0
}

func produceTransactional(s *Server, rc *requestContext, t *topic, p *partition, txnID string, records []byte, sp *kmsg.ProduceResponseTopicPartition) {
	pid := int64(binary.BigEndian.Uint64(records[batchProducerIDAt:]))
	epoch := int16(binary.BigEndian.Uint16(records[batchProducerEpochAt:]))
	tp := txn.TopicPartition{Topic: t.name, Partition: p.tp.Partition}
	code := s.txn.Guard(txnID, pid, epoch, tp, func() int16 {
		produceOne(s, rc, t, p, records, sp, true)
		return sp.ErrorCode
	})
	if code != 0 && sp.ErrorCode == 0 {
		if code == kerr.ProducerFenced.Code {
			code = kerr.InvalidProducerEpoch.Code // Produce's fencing code
		}
		sp.ErrorCode = code
		rc.logger.Debug("transactional produce refused", "topic", t.name, "partition", p.tp.Partition, "producer_id", pid, "code", code)
	}
}
