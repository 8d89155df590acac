package server

// DescribeTransactions (key 65), version 0.
//
// The state of each named transactional id (de-duplicated, answered once):
// state, producer id and epoch, timeout, start time and partitions.
// TRANSACTIONAL_ID_NOT_FOUND for an unknown id, NOT_COORDINATOR for one
// this broker does not coordinate. No deviation.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleDescribeTransactions(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeTransactionsRequest)
	resp := req.ResponseKind().(*kmsg.DescribeTransactionsResponse)
	seen := map[string]bool{}
	for _, id := range req.TransactionalIDs {
		if seen[id] {
			continue
		}
		seen[id] = true
		st := kmsg.NewDescribeTransactionsResponseTransactionState()
		st.TransactionalID, st.ProducerID, st.ProducerEpoch, st.StartTimestamp = id, -1, -1, -1
		d, ok, err := s.txn.Describe(id)
		switch {
		case err != nil:
			st.ErrorCode = kerr.NotCoordinator.Code
		case !ok:
			st.ErrorCode = kerr.TransactionalIDNotFound.Code
		default:
			st.State, st.TimeoutMillis, st.StartTimestamp = d.State.String(), d.TimeoutMs, d.StartMs
			st.ProducerID, st.ProducerEpoch = d.ProducerID, d.ProducerEpoch
			for i := 0; i < len(d.Partitions); {
				rt := kmsg.NewDescribeTransactionsResponseTransactionStateTopic()
				rt.Topic = d.Partitions[i].Topic
				for ; i < len(d.Partitions) && d.Partitions[i].Topic == rt.Topic; i++ {
					rt.Partitions = append(rt.Partitions, d.Partitions[i].Partition)
				}
				st.Topics = append(st.Topics, rt)
			}
		}
		resp.TransactionStates = append(resp.TransactionStates, st)
	}
	return kmsgReply{resp}, nil
}
