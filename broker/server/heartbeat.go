package server

// Heartbeat (key 12), versions 0-4: keeps a member's session alive;
// REBALANCE_IN_PROGRESS tells it to rejoin, ILLEGAL_GENERATION /
// UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID fence it (served by broker/group).
// A heartbeat during CompletingRebalance succeeds, as on Kafka 2.x+.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleHeartbeat(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.Heartbeat(kreq.(*kmsg.HeartbeatRequest))}, nil
}
