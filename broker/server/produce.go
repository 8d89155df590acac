package server

// Produce (key 0), versions 3-12 served; 0-12 advertised so that older
// librdkafka enables compression, and 0-2 (message formats v0/v1) answered
// with UNSUPPORTED_VERSION on every partition.
//
// Acks 0 (no answer; a failed partition closes the connection, as Kafka
// does), 1 and -1. On a single node 1 and -1 are identical: the high
// watermark is set to the log end offset after the append, before the
// answer. In cluster mode the leader appends (replication.go): acks=1
// answers after the leader's append, acks=-1 once the ISR holds the batch
// (the high watermark passed it), with NOT_ENOUGH_REPLICAS before the
// append when the ISR is below min.insync.replicas and
// NOT_ENOUGH_REPLICAS_AFTER_APPEND when it shrank below while waiting; a
// broker that does not lead the partition answers NOT_LEADER_OR_FOLLOWER.
// Any other acks value: INVALID_REQUIRED_ACKS. The batches are validated and stored as sent by the
// partition log (CORRUPT_MESSAGE, MESSAGE_TOO_LARGE, INVALID_RECORD,
// UNSUPPORTED_COMPRESSION_TYPE); idempotent producers get
// OUT_OF_ORDER_SEQUENCE_NUMBER / INVALID_PRODUCER_EPOCH, and a duplicate is
// answered with the original base offset. A transactional batch (with the
// request's transactional id) is appended only to a partition added to the
// producer's ongoing transaction (KIP-890 part 1, produce_txn.go): else
// INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING or INVALID_PRODUCER_EPOCH;
// without a transactional id it is INVALID_RECORD. Unknown topics are
// auto-created when auto.create.topics.enable is set; an unknown partition is
// UNKNOWN_TOPIC_OR_PARTITION; the internal topics are INVALID_TOPIC_EXCEPTION.
// Deviations: TimeoutMillis is unused (no replicas to wait for); no
// per-record errors (v8 ErrorRecords) are given.
//
// Bound: decoding costs about 40 bytes of memory per partition entry and the
// answer as much again, and an entry can be 8 bytes (null records). A request
// with more than maxProducePartitions partition entries closes the connection
// before it is decoded (decodeProduce counts them without allocating).

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/group"
	plog "github.com/sluicehq/sluice/broker/log"
	"github.com/sluicehq/sluice/broker/txn"
)

// maxProducePartitions bounds the partition entries of one Produce request.
const maxProducePartitions = 100_000

// decodeProduce counts the request's partition entries, skipping the
// records, and decodes it with kmsg only when they are within bounds.
func decodeProduce(version int16, body []byte) (kmsg.Request, error) {
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(version)
	flexible := req.IsFlexible()
	r := kbin.Reader{Src: body}
	arrayLen := func() int32 {
		if flexible {
			return r.CompactArrayLen()
		}
		return r.ArrayLen()
	}
	skip := func(int32Len bool) { // a (nullable) string or bytes
		var n int
		switch {
		case flexible:
			n = int(r.Uvarint()) - 1
		case int32Len:
			n = int(r.Int32())
		default:
			n = int(r.Int16())
		}
		if n > 0 {
			r.Span(n)
		}
	}
	if version >= 3 {
		skip(false) // transactional id
	}
	r.Int16()
	r.Int32()
	entries := 0
	for range max(arrayLen(), 0) {
		if !r.Ok() {
			break
		}
		skip(false) // topic name
		n := max(arrayLen(), 0)
		if entries += int(n); entries > maxProducePartitions {
			return nil, fmt.Errorf("more than %d partition entries", maxProducePartitions)
		}
		for range n {
			if !r.Ok() {
				break
			}
			r.Int32()
			skip(true) // records
			if flexible {
				skipTagsReader(&r)
			}
		}
		if flexible {
			skipTagsReader(&r)
		}
	}
	if err := req.ReadFrom(body); err != nil {
		return nil, err
	}
	return req, nil
}

func handleProduce(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ProduceRequest)
	resp := req.ResponseKind().(*kmsg.ProduceResponse)
	var global int16
	switch {
	case req.Version < 3:
		global = kerr.UnsupportedVersion.Code
	case req.Acks != 0 && req.Acks != 1 && req.Acks != -1:
		global = kerr.InvalidRequiredAcks.Code
	}
	failed := false
	var waits []replicatedAppend // acks=-1 appends of replicated partitions
	for ti, rt := range req.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic = rt.Topic
		var t *topic
		code := global
		if code == 0 && (rt.Topic == group.OffsetsTopic || rt.Topic == txn.StateTopic) {
			code = kerr.InvalidTopicException.Code // written by the group coordinator only, as on Kafka
		}
		if code == 0 {
			t, code = s.topics.getOrAutoCreate(rt.Topic, true)
		}
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition = rp.Partition
			sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = -1, -1, -1
			switch {
			case code != 0:
				sp.ErrorCode = code
			default:
				p, pcode := s.leaderPartition(t, rp.Partition)
				switch {
				case pcode != 0:
					sp.ErrorCode = pcode
				case req.TransactionID != nil && isTransactional(rp.Records):
					if s.replicas != nil { // single-node transactions only, for now
						sp.ErrorCode = kerr.TransactionalIDAuthorizationFailed.Code
					} else {
						produceTransactional(s, rc, t, p, *req.TransactionID, rp.Records, &sp)
					}
				case s.replicas != nil:
					produceReplicated(s, rc, req.Acks, t, p, rp.Records, &sp, &waits, ti, len(st.Partitions))
				default:
					produceOne(s, rc, t, p, rp.Records, &sp, false)
				}
			}
			if sp.ErrorCode != 0 {
				failed = true
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	if len(waits) > 0 {
		awaitReplicated(s, rc, req.TimeoutMillis, resp, waits)
	}
	if req.Acks == 0 {
		if failed {
			return closeReply{"acks=0 produce failed; closing so that the client notices"}, nil
		}
		return noReply{}, nil
	}
	return kmsgReply{resp}, nil
}

// produceOne appends one partition's batches and fills its answer.
func produceOne(s *Server, rc *requestContext, t *topic, p *partition, records []byte, sp *kmsg.ProduceResponseTopicPartition, transactional bool) {
	if len(records) == 0 {
		sp.ErrorCode = kerr.CorruptMessage.Code
		return
	}
	p.mu.Lock()
	res, err := p.log.Append(records, plog.AppendOptions{LeaderEpoch: 0, AssignOffsets: true, Transactional: transactional})
	if err == nil {
		// Single node: what is appended is committed.
		if leo := p.log.LogEndOffset(); leo > p.log.HighWatermark() {
			err = p.log.SetHighWatermark(leo)
		}
	}
	p.mu.Unlock()
	if err != nil {
		sp.ErrorCode = appendErrorCode(err)
		if sp.ErrorCode == kerr.KafkaStorageError.Code {
			rc.logger.Error("append", "topic", t.name, "partition", p.tp.Partition, "err", err)
		} else {
			rc.logger.Debug("append rejected", "topic", t.name, "partition", p.tp.Partition, "err", err)
		}
		msg := err.Error()
		sp.ErrorMessage = &msg
		if sp.ErrorCode == kerr.OutOfOrderSequenceNumber.Code || sp.ErrorCode == kerr.InvalidProducerEpoch.Code {
			sp.LogStartOffset = p.log.LogStartOffset()
		}
		return
	}
	sp.BaseOffset, sp.LogAppendTime, sp.LogStartOffset = res.BaseOffset, res.LogAppendTime, res.LogStartOffset
	if !res.Duplicate {
		s.metrics.bytesIn.WithLabelValues(t.name).Add(float64(len(records)))
		s.metrics.recordsIn.WithLabelValues(t.name).Add(float64(res.LastOffset - res.BaseOffset + 1))
		if s.audit != nil {
			s.audit.Appended(t.name, p.tp.Partition, records)
		}
	}
}
