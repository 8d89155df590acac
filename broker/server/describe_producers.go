package server

// DescribeProducers (key 61), version 0.
//
// The producer table of each named partition (de-duplicated): per producer
// its id, epoch, last sequence, last append time (-1 for a producer not
// seen appending since the partition was opened), coordinator epoch of its
// last marker and the first offset of its open transaction (-1: none).
// UNKNOWN_TOPIC_OR_PARTITION for a partition that does not exist. Bound: at
// most maxDescribedProducers producers per partition (the lowest ids), and
// maxAnsweredProducers in all.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// maxDescribedProducers bounds the producers of one partition's answer,
// maxAnsweredProducers those of the whole answer.
const (
	maxDescribedProducers = 10000
	maxAnsweredProducers  = 100000
)

func handleDescribeProducers(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.DescribeProducersRequest)
	resp := req.ResponseKind().(*kmsg.DescribeProducersResponse)
	once := partitionsOnce{}
	budget := maxAnsweredProducers
	for _, rt := range req.Topics {
		st := kmsg.NewDescribeProducersResponseTopic()
		st.Topic = rt.Topic
		t, known := s.topics.get(rt.Topic)
		for _, p := range rt.Partitions {
			if !once.first(rt.Topic, p) {
				continue
			}
			sp := kmsg.NewDescribeProducersResponseTopicPartition()
			sp.Partition = p
			if !known || p < 0 || int(p) >= len(t.parts) {
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
				st.Partitions = append(st.Partitions, sp)
				continue
			}
			table := t.parts[p].log.ProducerTable(min(maxDescribedProducers, budget))
			budget -= len(table)
			for _, pi := range table {
				ap := kmsg.NewDescribeProducersResponseTopicPartitionActiveProducer()
				ap.ProducerID, ap.ProducerEpoch, ap.LastSequence, ap.LastTimestamp = pi.ProducerID, int32(pi.ProducerEpoch), pi.LastSequence, pi.LastTimestamp
				ap.CoordinatorEpoch, ap.CurrentTxnStartOffset = pi.CoordinatorEpoch, pi.TxnFirstOffset
				sp.ActiveProducers = append(sp.ActiveProducers, ap)
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}
