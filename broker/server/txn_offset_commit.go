package server

// TxnOffsetCommit (key 28), versions 0-4.
//
// Commits a group's offsets inside the producer's transaction: the group's
// partition of __consumer_offsets must have been added to the ongoing
// transaction (AddOffsetsToTxn), checked under the transaction's lock as a
// transactional produce is; else INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING
// or PRODUCER_FENCED (INVALID_PRODUCER_EPOCH before v3) on every partition.
// The offsets are written at once to __consumer_offsets as a transactional
// batch and become the group's at the transaction's COMMIT marker (dropped
// at ABORT); until then OffsetFetch with require_stable answers
// UNSTABLE_OFFSET_COMMIT for them. v3+ carries the member's generation, id
// and instance id, checked as OffsetCommit checks them. Deviations: v5-6
// (transaction.version 2, topic ids) are not served; a transactional id
// over 32,767 bytes is INVALID_REQUEST.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
	"github.com/sluicehq/sluice/broker/txn"
)

func handleTxnOffsetCommit(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.TxnOffsetCommitRequest)
	var resp *kmsg.TxnOffsetCommitResponse
	if req.Group != "" {
		p, err := s.groups.OffsetsPartition(req.Group)
		if err != nil {
			rc.logger.Error("create the offsets topic", "err", err)
			resp = txnOffsetCommitError(req, kerr.CoordinatorNotAvailable.Code)
		} else {
			tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: p}
			code := s.txn.Guard(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tp, func() int16 {
				resp = s.groups.TxnCommitOffsets(req)
				return 0
			})
			if code != 0 {
				resp = txnOffsetCommitError(req, fencedCode(code, req.Version < 3))
			}
		}
	}
	if resp == nil { // an empty group: the group coordinator answers INVALID_GROUP_ID
		resp = s.groups.TxnCommitOffsets(req)
	}
	return kmsgReply{resp}, nil
}

// txnOffsetCommitError answers every partition of req with code.
func txnOffsetCommitError(req *kmsg.TxnOffsetCommitRequest, code int16) *kmsg.TxnOffsetCommitResponse {
	resp := req.ResponseKind().(*kmsg.TxnOffsetCommitResponse)
	for _, t := range req.Topics {
		rt := kmsg.NewTxnOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewTxnOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp
}
