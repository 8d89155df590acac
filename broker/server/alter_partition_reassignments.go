package server

// AlterPartitionReassignments (key 45), versions 0-1 (KIP-455): answered,
// served only where nothing moves. sluice does not move replicas through
// this API (`sluice topics reassign` and the Store rewrite an assignment;
// a reassignment in flight, Kafka's adding/removing replicas, does not
// exist), so per partition:
//   - the partition's current replicas, in the same order: NONE (nothing to
//     do, as Kafka answers a reassignment to the current replicas);
//   - null replicas (cancel): NO_REASSIGNMENT_IN_PROGRESS, none ever is;
//   - any other replica list: INVALID_REPLICA_ASSIGNMENT with a message
//     (deviation: Kafka would start moving the replicas);
//   - an unknown partition: UNKNOWN_TOPIC_OR_PARTITION.
//
// v1's AllowReplicationFactorChange is echoed and otherwise ignored (no
// replica list that changes it is accepted). A topic named twice gets
// INVALID_REQUEST for each of its partitions.

import (
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleAlterPartitionReassignments(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	parts := s.adminPartitions()
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	refused := 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewAlterPartitionAssignmentsResponseTopicPartition()
			rp.Partition = p.Partition
			ap, ok := parts[partitionKey{t.Topic, p.Partition}]
			var msg string
			switch {
			case seen[t.Topic] > 1:
				rp.ErrorCode, msg = kerr.InvalidRequest.Code, "topic "+t.Topic+" is listed more than once in the request"
			case !ok:
				rp.ErrorCode, msg = kerr.UnknownTopicOrPartition.Code, "no such partition"
			case p.Replicas == nil:
				rp.ErrorCode, msg = kerr.NoReassignmentInProgress.Code, "no reassignment is in progress (sluice runs none through this API)"
			case slices.Equal(p.Replicas, ap.replicas):
			default:
				rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				msg = fmt.Sprintf("sluice does not move replicas through AlterPartitionReassignments (current replicas %v, asked %v)",
					ap.replicas, p.Replicas)
			}
			if rp.ErrorCode != 0 {
				refused++
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if refused > 0 {
		rc.logger.Info("refused partition reassignments", "partitions", refused)
	}
	return kmsgReply{resp}, nil
}
