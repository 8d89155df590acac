package server

// CreatePartitions (key 37), versions 0-3: raises a topic's partition count.
// On a single node a replica assignment, if given, must place each new
// partition on this node alone. In cluster mode the new partitions are
// assigned over the live brokers with partition 0's replication factor, or
// as the request's assignment says (each new partition the same number of
// distinct live brokers as partition 0 has; INVALID_REPLICA_ASSIGNMENT
// otherwise). The count of __consumer_offsets is fixed (groups map to its
// partitions by hash). Topics named twice in one request are refused.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleCreatePartitions(s *Server, rc *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.CreatePartitionsRequest)
	resp := req.ResponseKind().(*kmsg.CreatePartitionsResponse)
	seen := map[string]int{}
	for _, rt := range req.Topics {
		seen[rt.Topic]++
	}
	for _, rt := range req.Topics {
		st := kmsg.NewCreatePartitionsResponseTopic()
		st.Topic = rt.Topic
		var code int16
		var msg string
		switch {
		case seen[rt.Topic] > 1:
			code, msg = kerr.InvalidRequest.Code, "topic "+rt.Topic+" is listed more than once in the request"
		case s.cluster == nil && !singleNodeAssignment(rt.Assignment, s.cfg.NodeID):
			code, msg = kerr.InvalidReplicaAssignment.Code, "this single-node broker places every partition on its own node id only"
		default:
			var assigned [][]int32
			for _, a := range rt.Assignment {
				assigned = append(assigned, a.Replicas)
			}
			if s.cluster != nil && assigned != nil {
				msg = s.checkAssignment(assigned)
				if t, ok := s.topics.get(rt.Topic); ok && msg == "" && len(t.replicas) > 0 && len(t.replicas[0]) != len(assigned[0]) {
					msg = "the new partitions must have the replication factor of the topic's"
				}
				if msg != "" {
					code = kerr.InvalidReplicaAssignment.Code
					break
				}
			}
			code, msg = s.topics.addPartitions(rt.Topic, rt.Count, assigned, req.ValidateOnly)
			if code == 0 && !req.ValidateOnly {
				rc.logger.Info("added partitions", "topic", rt.Topic, "partitions", rt.Count)
			}
		}
		st.ErrorCode = code
		if code != 0 {
			st.ErrorMessage = &msg
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}

func singleNodeAssignment(as []kmsg.CreatePartitionsRequestTopicAssignment, node int32) bool {
	for _, a := range as {
		if len(a.Replicas) != 1 || a.Replicas[0] != node {
			return false
		}
	}
	return true
}
