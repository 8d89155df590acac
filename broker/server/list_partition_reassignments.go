package server

// ListPartitionReassignments (key 46), version 0 (KIP-455): served. It
// lists the partitions with a replica move in progress as this broker's
// view of ZooKeeper last saw them (cluster mode; a single node never has
// one): replicas (the target first, then the replicas leaving), adding and
// removing replicas. Topics null lists every moving partition; a named
// partition that does not exist or is not moving is left out rather than
// refused, as in Kafka.

import (
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/cluster"
)

func handleListPartitionReassignments(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.ListPartitionReassignmentsRequest)
	resp := req.ResponseKind().(*kmsg.ListPartitionReassignmentsResponse)
	if s.cluster == nil {
		return kmsgReply{resp}, nil
	}
	var asked map[partitionKey]bool
	if req.Topics != nil {
		asked = map[partitionKey]bool{}
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				asked[partitionKey{t.Topic, p}] = true
			}
		}
	}
	byTopic := map[string]int{}
	for _, st := range s.cluster.node.Reassignments() {
		if asked != nil && !asked[partitionKey{st.Topic, st.Partition}] {
			continue
		}
		i, ok := byTopic[st.Topic]
		if !ok {
			rt := kmsg.NewListPartitionReassignmentsResponseTopic()
			rt.Topic = st.Topic
			resp.Topics = append(resp.Topics, rt)
			i = len(resp.Topics) - 1
			byTopic[st.Topic] = i
		}
		resp.Topics[i].Partitions = append(resp.Topics[i].Partitions, listedMove(st))
	}
	return kmsgReply{resp}, nil
}

func listedMove(st cluster.PartitionState) kmsg.ListPartitionReassignmentsResponseTopicPartition {
	rp := kmsg.NewListPartitionReassignmentsResponseTopicPartition()
	rp.Partition = st.Partition
	rp.Replicas = append([]int32{}, st.Replicas...)
	rp.AddingReplicas = append([]int32{}, st.Adding...)
	rp.RemovingReplicas = append([]int32{}, st.Removing...)
	return rp
}
