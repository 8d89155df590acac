package server

// InitProducerId (key 22), versions 0-4.
//
// Idempotent producers only: every request gets a fresh producer id (never
// reused, even across restarts) with epoch 0; an existing id/epoch passed in
// v3+ is not bumped but replaced by a fresh id, which Kafka also does for
// non-transactional producers. Deviation: transactions are not supported; a
// request with a transactional id is answered
// TRANSACTIONAL_ID_AUTHORIZATION_FAILED so that clients fail fast instead of
// retrying.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleInitProducerID(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.InitProducerIDRequest)
	resp := req.ResponseKind().(*kmsg.InitProducerIDResponse)
	resp.ProducerID, resp.ProducerEpoch = -1, -1
	if req.TransactionalID != nil {
		resp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
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
