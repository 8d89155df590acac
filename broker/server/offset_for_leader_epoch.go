package server

// OffsetForLeaderEpoch (key 23), versions 0-4: the end offset of the
// largest leader epoch at or below the one asked for, from the partition's
// epoch cache (franz-go uses it to detect truncation after a leader change).
// A single node leads every partition in epoch 0; in cluster mode the leader
// answers from its epoch cache (replica.Manager.EndOffsetForEpoch), and a
// broker that does not lead the partition answers NOT_LEADER_OR_FOLLOWER.
// CurrentLeaderEpoch (v2+) above the partition's is
// UNKNOWN_LEADER_EPOCH, below it FENCED_LEADER_EPOCH. An epoch
// the log has not seen is answered with epoch and offset -1, as Kafka does.
// Requested partitions are answered once each.

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func handleOffsetForLeaderEpoch(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	req := kreq.(*kmsg.OffsetForLeaderEpochRequest)
	resp := req.ResponseKind().(*kmsg.OffsetForLeaderEpochResponse)
	seen := partitionsOnce{}
	for _, rt := range req.Topics {
		st := kmsg.NewOffsetForLeaderEpochResponseTopic()
		st.Topic = rt.Topic
		t, ok := s.topics.get(rt.Topic)
		for _, rp := range rt.Partitions {
			if !seen.first(rt.Topic, rp.Partition) {
				continue
			}
			sp := kmsg.NewOffsetForLeaderEpochResponseTopicPartition()
			sp.Partition, sp.LeaderEpoch, sp.EndOffset = rp.Partition, -1, -1
			switch {
			case !ok:
				sp.ErrorCode = kerr.UnknownTopicOrPartition.Code
			case s.replicas != nil:
				offsetForLeaderEpochReplicated(s, rt.Topic, &rp, &sp)
			case rp.CurrentLeaderEpoch < -1:
				sp.ErrorCode = kerr.FencedLeaderEpoch.Code
			default:
				part, code := s.leaderPartition(t, rp.Partition)
				if code == 0 {
					code = s.leaderEpochCode(t, rp.Partition, rp.CurrentLeaderEpoch)
				}
				if sp.ErrorCode = code; code == 0 {
					sp.EndOffset, sp.LeaderEpoch = part.log.EndOffsetForEpoch(rp.LeaderEpoch)
				}
			}
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return kmsgReply{resp}, nil
}
