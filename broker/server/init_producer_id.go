package server

// InitProducerId (key 22), versions 0-5.
//
// Without a transactional id (idempotent producers) every request gets a
// fresh producer id (never reused, even across restarts) with epoch 0; an
// existing id/epoch passed in v3+ is not bumped but replaced by a fresh id,
// which Kafka also does for non-transactional producers. With a
// transactional id the transaction coordinator (broker/txn) answers: a new
// id gets a fresh producer id, a known one its epoch bumped, fencing the
// old producer (its ongoing transaction is aborted first); v3+ may name the
// current producer id and epoch to recover (KIP-360). Errors:
// INVALID_REQUEST (empty id, or over 32,767 bytes), INVALID_TRANSACTION_TIMEOUT
// (not within 1..transaction.max.timeout.ms), PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v4), CONCURRENT_TRANSACTIONS (the previous
// transaction's markers could not be written yet), NOT_COORDINATOR,
// COORDINATOR_NOT_AVAILABLE. Deviation: where Kafka answers
// CONCURRENT_TRANSACTIONS while it aborts a fenced producer's transaction
// and lets the client retry, sluice aborts it synchronously and answers the
// new epoch at once.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		r := s.txn.InitProducerID(*req.TransactionalID, req.TransactionTimeoutMillis, req.ProducerID, req.ProducerEpoch)
		resp.ProducerID, resp.ProducerEpoch, resp.ErrorCode = r.ProducerID, r.Epoch, r.ErrorCode
		if resp.ErrorCode == kerr.ProducerFenced.Code && req.Version < 4 {
			resp.ErrorCode = kerr.InvalidProducerEpoch.Code
		}
		return kmsgReply{resp}, nil
	}
	id, err := s.pids.allocate()
	if err != nil {
		rc.logger.Error("allocate producer id", "err", err)
		resp.ErrorCode = kerr.CoordinatorNotAvailable.Code
		return kmsgReply{resp}, nil
	}
	resp.ProducerID, resp.ProducerEpoch = id, 0
	return kmsgReply{resp}, nil
}
