package server

// EndTxn (key 26), versions 0-4.
//
// Commits or aborts the producer's ongoing transaction: the coordinator
// writes PrepareCommit/PrepareAbort to __transaction_state, a COMMIT or
// ABORT marker to every partition of the transaction (the group offsets of
// TxnOffsetCommit become visible, or are dropped, at the marker in
// __consumer_offsets) and then the Complete state; the answer comes after
// all of it (Kafka answers after the prepare and writes markers in the
// background; the difference is only when the answer comes). A retry of
// an ended transaction's EndTxn with the same outcome is answered 0.
// Errors: INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED (INVALID_PRODUCER_EPOCH
// before v2), INVALID_TXN_STATE (nothing to end, or the other outcome),
// CONCURRENT_TRANSACTIONS (markers not all written yet: retried by the
// coordinator's clock), NOT_COORDINATOR. Deviation: v5 (transaction.version
// 2: the epoch bumps at every EndTxn) is not served.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleEndTxn(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.EndTxnRequest)
	resp := req.ResponseKind().(*kmsg.EndTxnResponse)
	resp.ErrorCode = fencedCode(s.txn.EndTxn(req.TransactionalID, req.ProducerID, req.ProducerEpoch, req.Commit), req.Version < 2)
	return kmsgReply{resp}, nil
}
