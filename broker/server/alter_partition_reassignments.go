package server

// AlterPartitionReassignments (key 45), versions 0-1 (KIP-455): served.
// In cluster mode the partitions' targets are written into their topic's
// assignment znode, one write per topic (broker/cluster's ReassignMany: the
// adding and removing replicas of Kafka's ZooKeeper layout) and the
// controller moves the replicas (broker/cluster/doc.go, "Replica moves");
// the answer says the move was accepted, not that it finished
// (ListPartitionReassignments shows it until then), as in Kafka. Per
// partition:
//   - a list of distinct live brokers: NONE, the move starts (or replaces
//     the one in progress; the current replicas with none in progress: NONE,
//     nothing to do);
//   - null replicas (cancel): NONE and the move is undone, or
//     NO_REASSIGNMENT_IN_PROGRESS;
//   - a broker listed twice, not live, or an empty list:
//     INVALID_REPLICA_ASSIGNMENT;
//   - v1 with AllowReplicationFactorChange false and a target of another
//     size: INVALID_REPLICATION_FACTOR (v0 allows it, as in Kafka);
//   - an unknown partition: UNKNOWN_TOPIC_OR_PARTITION; ZooKeeper failing:
//     UNKNOWN_SERVER_ERROR with the reason.
//
// Deviation: the broker that receives the request writes the move itself
// (conditionally on the assignment's version) instead of forwarding it to
// the controller. On a single node nothing can move: the current replica
// list is NONE, a cancel NO_REASSIGNMENT_IN_PROGRESS, any other list
// INVALID_REPLICA_ASSIGNMENT. A topic named twice gets INVALID_REQUEST for
// each of its partitions.

import (
	"errors"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/sluicehq/sluice/broker/cluster"
)

func handleAlterPartitionReassignments(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.AlterPartitionAssignmentsRequest)
	resp := req.ResponseKind().(*kmsg.AlterPartitionAssignmentsResponse)
	resp.AllowReplicationFactorChange = req.AllowReplicationFactorChange
	allowRF := req.Version < 1 || req.AllowReplicationFactorChange
	parts := s.adminPartitions()
	seen := map[string]int{}
	for _, t := range req.Topics {
		seen[t.Topic]++
	}
	refused, moved := 0, 0
	for _, t := range req.Topics {
		rt := kmsg.NewAlterPartitionAssignmentsResponseTopic()
		rt.Topic = t.Topic
		// In cluster mode the topic's moves go into its assignment in one
		// write (not one write, and one controller round, per partition).
		var clusterRefused map[int32]error
		var clusterErr error
		if s.cluster != nil && seen[t.Topic] == 1 {
			targets := map[int32][]int32{}
			for _, p := range t.Partitions {
				if _, ok := parts[partitionKey{t.Topic, p.Partition}]; ok {
					targets[p.Partition] = p.Replicas
				}
			}
			if len(targets) > 0 {
				clusterRefused, clusterErr = s.cluster.node.ReassignMany(t.Topic, targets, allowRF)
			}
		}
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
			case s.cluster != nil:
				err := clusterErr
				if err == nil {
					err = clusterRefused[p.Partition]
				}
				rp.ErrorCode, msg = reassignCode(err)
				if rp.ErrorCode == 0 {
					moved++
				}
			case p.Replicas == nil:
				rp.ErrorCode, msg = kerr.NoReassignmentInProgress.Code, "no reassignment is in progress (a single broker moves no replicas)"
			case slices.Equal(p.Replicas, ap.replicas):
			default:
				rp.ErrorCode = kerr.InvalidReplicaAssignment.Code
				msg = fmt.Sprintf("a single broker moves no replicas (current replicas %v, asked %v)", ap.replicas, p.Replicas)
			}
			if rp.ErrorCode != 0 {
				refused++
				rp.ErrorMessage = &msg
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	if refused > 0 || moved > 0 {
		rc.logger.Info("partition reassignments", "accepted", moved, "refused", refused)
	}
	return kmsgReply{resp}, nil
}

// reassignCode maps an error of cluster.Node.ReassignMany to a Kafka error
// code and message.
func reassignCode(err error) (int16, string) {
	switch {
	case err == nil:
		return 0, ""
	case errors.Is(err, cluster.ErrUnknownPartition):
		return kerr.UnknownTopicOrPartition.Code, err.Error()
	case errors.Is(err, cluster.ErrNoReassignment):
		return kerr.NoReassignmentInProgress.Code, err.Error()
	case errors.Is(err, cluster.ErrReplicationFactor):
		return kerr.InvalidReplicationFactor.Code, err.Error()
	case errors.Is(err, cluster.ErrInvalid):
		return kerr.InvalidReplicaAssignment.Code, err.Error()
	}
	return kerr.UnknownServerError.Code, err.Error()
}
