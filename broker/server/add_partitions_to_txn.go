package server

// AddPartitionsToTxn (key 24), versions 0-4.
//
// v0-3 (clients): adds the partitions to the producer's transaction, which
// becomes Ongoing. Each distinct partition is answered: UNKNOWN_TOPIC_OR_PARTITION
// for one that does not exist (and OPERATION_NOT_ATTEMPTED for the others
// of the request), INVALID_PRODUCER_ID_MAPPING, PRODUCER_FENCED
// (INVALID_PRODUCER_EPOCH before v2), CONCURRENT_TRANSACTIONS,
// NOT_COORDINATOR, and INVALID_REQUEST for a request or transaction over
// transaction.max.partitions (a sluice bound; Kafka has none). v4 (brokers,
// KIP-890 part 1) batches transactions; with verify_only set a transaction's
// partitions are only checked against its ongoing transaction
// (INVALID_TXN_STATE for one not in it), which is what sluice's own Produce
// does internally. Deviation: v5 (transaction.version 2, KIP-890 part 2) is
// not served; clients use v3 with transaction.version 1, which sluice
// advertises by not advertising the feature.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/config"
	"github.com/sluicehq/sluice/broker/txn"
)

func handleAddPartitionsToTxn(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AddPartitionsToTxnRequest)
	resp := req.ResponseKind().(*kmsg.AddPartitionsToTxnResponse)
	if req.Version < 4 {
		if n := countPartitions(req.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) int { return len(t.Partitions) }); n > s.txnMaxPartitions() {
			rc.logger.Warn("add partitions to transaction refused: more than transaction.max.partitions", "partitions", n, "limit", s.txnMaxPartitions())
			for _, t := range req.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTopic()
				rt.Topic = t.Topic
				rt.Partitions = make([]kmsg.AddPartitionsToTxnResponseTopicPartition, len(t.Partitions))
				for i, p := range t.Partitions {
					rt.Partitions[i].Partition, rt.Partitions[i].ErrorCode = p, kerr.InvalidRequest.Code
				}
				resp.Topics = append(resp.Topics, rt)
			}
			return kmsgReply{resp}, nil
		}
		tps := txnPartitions(req.Topics, func(t kmsg.AddPartitionsToTxnRequestTopic) (string, []int32) { return t.Topic, t.Partitions })
		codes := s.txn.AddPartitions(req.TransactionalID, req.ProducerID, req.ProducerEpoch, tps)
		for _, t := range req.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTopicPartition()
				rp.Partition = p
				rp.ErrorCode = fencedCode(codes[txn.TopicPartition{Topic: t.Topic, Partition: p}], req.Version < 2)
				rt.Partitions = append(rt.Partitions, rp)
			}
			resp.Topics = append(resp.Topics, rt)
		}
		return kmsgReply{resp}, nil
	}
	for _, rtx := range req.Transactions {
		if n := countPartitions(rtx.Topics, func(t kmsg.AddPartitionsToTxnRequestTransactionTopic) int { return len(t.Partitions) }); n > s.txnMaxPartitions() {
			rc.logger.Warn("add partitions to transaction refused: more than transaction.max.partitions", "partitions", n, "limit", s.txnMaxPartitions())
			st := kmsg.NewAddPartitionsToTxnResponseTransaction()
			st.TransactionalID = rtx.TransactionalID
			for _, t := range rtx.Topics {
				rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
				rt.Topic = t.Topic
				rt.Partitions = make([]kmsg.AddPartitionsToTxnResponseTransactionTopicPartition, len(t.Partitions))
				for i, p := range t.Partitions {
					rt.Partitions[i].Partition, rt.Partitions[i].ErrorCode = p, kerr.InvalidRequest.Code
				}
				st.Topics = append(st.Topics, rt)
			}
			resp.Transactions = append(resp.Transactions, st)
			continue
		}
		tps := txnPartitions(rtx.Topics, func(t kmsg.AddPartitionsToTxnRequestTransactionTopic) (string, []int32) { return t.Topic, t.Partitions })
		var codes map[txn.TopicPartition]int16
		if rtx.VerifyOnly {
			codes = s.txn.Verify(rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch, tps)
		} else {
			codes = s.txn.AddPartitions(rtx.TransactionalID, rtx.ProducerID, rtx.ProducerEpoch, tps)
		}
		st := kmsg.NewAddPartitionsToTxnResponseTransaction()
		st.TransactionalID = rtx.TransactionalID
		for _, t := range rtx.Topics {
			rt := kmsg.NewAddPartitionsToTxnResponseTransactionTopic()
			rt.Topic = t.Topic
			for _, p := range t.Partitions {
				rp := kmsg.NewAddPartitionsToTxnResponseTransactionTopicPartition()
				rp.Partition, rp.ErrorCode = p, codes[txn.TopicPartition{Topic: t.Topic, Partition: p}]
				rt.Partitions = append(rt.Partitions, rp)
			}
			st.Topics = append(st.Topics, rt)
		}
		resp.Transactions = append(resp.Transactions, st)
	}
	return kmsgReply{resp}, nil
}

// countPartitions counts the partition entries of a request's topics.
func countPartitions[T any](ts []T, n func(T) int) int {
	total := 0
	for _, t := range ts {
		total += n(t)
	}
	return total
}

// txnMaxPartitions is transaction.max.partitions. A request naming more
// partitions is answered INVALID_REQUEST per partition here, before the
// coordinator, whose answer map and flattened list of the partitions cost
// some 75 bytes per 4-byte entry (310 MB for a 4 MB request of 1,000,000).
func (s *Server) txnMaxPartitions() int {
	tc, err := s.cfg.Txn()
	if err != nil {
		tc = config.DefaultTxn()
	}
	return int(tc.MaxPartitions)
}

// txnPartitions flattens a request's topics into partitions.
func txnPartitions[T any](ts []T, parts func(T) (string, []int32)) []txn.TopicPartition {
	var out []txn.TopicPartition
	for _, t := range ts {
		name, ps := parts(t)
		for _, p := range ps {
			out = append(out, txn.TopicPartition{Topic: name, Partition: p})
		}
	}
	return out
}

// fencedCode turns PRODUCER_FENCED into INVALID_PRODUCER_EPOCH for the
// versions before KIP-588 gave clients the newer code.
func fencedCode(code int16, old bool) int16 {
	if old && code == kerr.ProducerFenced.Code {
		return kerr.InvalidProducerEpoch.Code
	}
	return code
}
