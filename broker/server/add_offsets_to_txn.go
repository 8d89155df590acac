package server

// AddOffsetsToTxn (key 25), versions 0-4.
//
// Adds the group's partition of __consumer_offsets (created if needed) to
// the producer's transaction, so that its TxnOffsetCommit offsets are
// committed or aborted with it. Errors as AddPartitionsToTxn's
// (PRODUCER_FENCED is INVALID_PRODUCER_EPOCH before v2), and INVALID_GROUP_ID
// for an empty group. No deviation.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
	"github.com/sluicehq/sluice/broker/txn"
)

func handleAddOffsetsToTxn(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AddOffsetsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddOffsetsToTxnResponse)
	if req.Group == "" {
		resp.ErrorCode = kerr.InvalidGroupID.Code
		return kmsgReply{resp}, nil
	}
	p, err := s.groups.OffsetsPartition(req.Group)
	if err != nil {
		rc.logger.Error("create the offsets topic", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return kmsgReply{resp}, nil
	}
	tp := txn.TopicPartition{Topic: group.OffsetsTopic, Partition: p}
	codes := s.txn.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, []txn.TopicPartition{tp})
	resp.ErrorCode = fencedCode(codes[tp], req.Version < 2)
	return kmsgReply{resp}, nil
}
