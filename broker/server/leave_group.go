package server

// LeaveGroup (key 13), versions 0-5: v0-2 remove one member by id, v3+ a
// batch by member id or group.instance.id (KIP-345); the group rebalances
// (served by broker/group). No deviations from Kafka known.

import "github.com/twmb/franz-go/pkg/kmsg"

func handleLeaveGroup(s *Server, _ *requestContext, kreq kmsg.Request) (reply, error) {
	return kmsgReply{s.groups.Leave(kreq.(*kmsg.LeaveGroupRequest))}, nil
}
